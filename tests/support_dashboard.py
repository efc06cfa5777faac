"""What the dashboard's tool chart should say, computed from the curated `tool_calls` table."""

from tests.conftest import query

FAILED = "is_error OR exit_code <> 0"  # a call that errored and exited non-zero fails once


def tool_bar_labels(layout, where: str = "TRUE", *params) -> dict[str, str]:
    """Each tool category's bar label as the chart writes it (`label: shell: Bash, bash; value:
    12 (3 failed)`), from `tool_calls` under `where`: one bar per category, the agents' names of
    it (the first few, and how many more), its calls and failed calls."""
    from warehouse.serve.dashboard.pages import TOOL_NAMES_SHOWN

    labels = {}
    for category, names, calls, failed in query(
            layout, "SELECT tool_category, list_sort(list_distinct(list(tool_name))), COUNT(*), "
                    f"COUNT(*) FILTER (WHERE {FAILED}) FROM tool_calls WHERE has_call AND ({where}) GROUP BY 1",
            *params):
        shown = ", ".join(names[:TOOL_NAMES_SHOWN])
        more = f" +{len(names) - TOOL_NAMES_SHOWN} more" if len(names) > TOOL_NAMES_SHOWN else ""
        labels[category] = (f"label: {category}: {shown}{more}; value: {calls:,}"
                            + (f" ({failed:,} failed)" if failed else ""))
    return labels
