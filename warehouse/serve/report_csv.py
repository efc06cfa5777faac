"""`agentlake report` as CSV that a spreadsheet opens: one table per file, no comment lines.

The report has several sections (the totals, the breakdown, the rankings; or one per insight),
each with columns of its own, so no CSV reader loads them as one table. A CSV is one section
(`--section`, or the breakdown `--by` asked for), or a folder holds one file per section
(`--output DIR`). What a table or JSON says beside the rows, a ranking cut by `--top` and an
insight's SQL, goes to notes and `.sql` files instead.
"""

from pathlib import Path

from warehouse.serve.formatting import render
from warehouse.serve.report import INSIGHTS, Section, _not_shown

INSIGHT_SECTIONS = tuple(i.mart for i in INSIGHTS)  # build_insights' sections, one per insight mart


class UnknownSection(ValueError):
    """A --section the report does not have (the message names those it has)."""


def pick(sections: list[Section], name: str, asked: str) -> list[Section]:
    """The section called `name`; `asked` says which report, for the error (`report --by day`)."""
    chosen = [s for s in sections if s.name == name]
    if not chosen:
        raise UnknownSection(f"`{asked}` has no section {name!r}; its sections: "
                             f"{', '.join(s.name for s in sections)}")
    return chosen


def csv_text(section: Section) -> str:
    """The section's rows under its header: costs exact, as the report's JSON has them."""
    return render(section.columns, section.rows, "csv") + "\n"


def cut_notes(sections: list[Section]) -> list[str]:
    """A line per ranking cut by --top: the rows it left out (in a table, the line under it)."""
    return [f"{s.name}: {_not_shown(s)}" for s in sections if s.more]


def write_sections(sections: list[Section], folder: Path) -> list[tuple[Path, int]]:
    """`<folder>/<section>.csv` for each section (an insight's SQL beside it, `<section>.sql`);
    the files written, with their rows. A file of the same name is replaced."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for s in sections:
        path = folder / f"{s.name}.csv"
        path.write_text(csv_text(s))
        written.append((path, len(s.rows)))
        if s.sql:
            sql = folder / f"{s.name}.sql"
            sql.write_text(s.sql + "\n")
            written.append((sql, None))
    return written
