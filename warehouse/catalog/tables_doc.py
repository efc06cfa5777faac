"""docs/TABLES.md, generated from transforms.contract so the docs cannot drift from the code.

    python -m warehouse.catalog.tables_doc > docs/TABLES.md
"""

from transforms.contract import ALL_TABLES
from warehouse.catalog.merge import duck_type

HEADER = """# Tables and columns

Generated from `transforms/contract.py` by `python -m warehouse.catalog.tables_doc > docs/TABLES.md`;
a test fails when this file is out of date.

Each table is a DuckLake table of the same name in the warehouse's catalog
(`warehouse.ducklake`), stored under `<lake>/main/<table>/year=YYYY/project=<slug>/` (`sources`, the run log: `year=YYYY/month=M/`; the marts and `model_names`, small, unpartitioned under `<lake>/main/<name>/`; a home's own lake; any other lake's beside the catalog, under `<home>/warehouse-tables/main/`)
and filled from each source's landing file `<lake>/_landing/<machine>/<user>/<provider>/<source_id>/<table>.parquet`.
Every table starts with the two partition columns:

| column | type | meaning |
| --- | --- | --- |
| `date` | DATE | The row's own UTC date (from the column named under each table). A row without a usable timestamp takes its session's date (the session's start, else its first dated message's), and only a row of no dated session is dated 1970-01-01; both are counted in the run's warnings. |
| `project` | VARCHAR | The project: a slug of its git remote's `owner/repo`, else of its directory's name, unless `config.toml` names it (README, "Project names"). |

Timestamps are `TIMESTAMP` values in UTC (no time zone attached, so no extension is needed). Every
connection agentlake opens (`agentlake sql`, the report, the dashboard, `warehouse.lake.ducklake.connect`)
sets DuckDB's `TimeZone` to UTC, so `current_date` and `now() - INTERVAL ...` compare with them as
they are; a tool that attaches the catalog itself should `SET TimeZone = 'UTC'` (docs/BI.md). For
a local day, convert: `(created_at AT TIME ZONE 'UTC') AT TIME ZONE 'Australia/Sydney'`. In
`--format json` (`agentlake sql`, `agentlake report`) a timestamp ends in `Z`, as UTC.
Where the agent did not record a value the column is null, never 0 or '' (a column kept as stored, such as
`tool_result_metadata`, holds what the agent wrote, an empty string included).

Money: a cost in these tables (`cost_usd`, `inherited_cost_usd`) is the DOUBLE its agent recorded,
so a plain `SUM(cost_usd)` may print float noise (`0.41913900000000004`). Sum it as
`SUM(cost_usd::DECIMAL(38, 9))` (exact to the nano-dollar), or read the marts
([MARTS.md](MARTS.md)), whose every money column is a DECIMAL(38,9): `session_summary.cost_usd`
is each root session's cost. The tables keep the DOUBLE so that a lake merged by an earlier release
merges as it is (a DECIMAL column would rebuild every table from its landing files).

`SHOW TABLES` lists these, the marts and `model_names` ([MARTS.md](MARTS.md)), and the merge's own
bookkeeping, each named `_agentlake_...`: the lake the catalog merges and its tables' layout
(`_agentlake_lake`), the landing files merged and their versions (`_agentlake_merged`), the marts'
SQL (`_agentlake_marts`), the projects whose marts a cut-off merge owes (`_agentlake_marts_pending`)
and the configured prices' fingerprint (`_agentlake_prices`). They are not for queries, and may
change from one release to the next.
"""


def render() -> str:
    out = [HEADER]
    for table in ALL_TABLES:
        out.append(f"\n## `{table.name}`\n\n{table.doc} `date` comes from `{table.date_from}`.\n")
        out.append("| column | type | meaning |\n| --- | --- | --- |")
        for c in table.columns:
            doc = c.doc.replace("|", r"\|")
            out.append(f"| `{c.name}` | {duck_type(c.type)} | {doc} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render(), end="")
