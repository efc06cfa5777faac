"""The marts: SQL files in sql/marts, materialised as tables of the lake's catalog.

Each file is `CREATE OR REPLACE VIEW <name> AS ...` over the curated tables (staging renames
and casts, marts join and aggregate). The merge runs them as temporary views and writes each
public one (a name not starting with `_`) as a table, inside its own transaction, so readers
and BI read small tables and never wait for an aggregate.
"""

from pathlib import Path

MARTS_DIR = Path(__file__).parent / "sql" / "marts"


def mart_sql() -> list[tuple[str, str]]:
    """(name, SQL) of every mart, in dependency order (the files are numbered).
    Names starting with `_` are internal building blocks."""
    out = []
    for path in sorted(MARTS_DIR.glob("*.sql")):
        sql = path.read_text()
        name = sql.split("CREATE OR REPLACE VIEW", 1)[1].split()[0]
        out.append((name, sql))
    return out


MARTS = tuple(name for name, _ in mart_sql() if not name.startswith("_"))


def create_mart_views(con) -> None:
    """Every mart as a temporary view of this connection (they shadow the tables of the same name)."""
    for _, sql in mart_sql():
        con.execute(sql.replace("CREATE OR REPLACE VIEW", "CREATE OR REPLACE TEMP VIEW", 1))


def rebuild_marts(con) -> dict[str, int]:
    """Write every public mart as a table of the attached lake; returns rows per mart."""
    create_mart_views(con)
    counts = {}
    for name in MARTS:
        con.execute(f'CREATE OR REPLACE TABLE lake.main."{name}" AS SELECT * FROM temp.main."{name}"')
        counts[name] = con.execute(f'SELECT COUNT(*) FROM lake.main."{name}"').fetchone()[0]
    for name, _ in reversed(mart_sql()):
        con.execute(f'DROP VIEW IF EXISTS temp.main."{name}"')
    return counts
