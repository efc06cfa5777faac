"""The budgets' Dagster check, one result for both code locations: on `daily_costs` after each
merge (pipelines/defs/warehouse) and on the team warehouse after the center's rebuild
(pipelines.central). The figures are warehouse/serve/budgets.py's, as `report --budgets` has them."""

from pathlib import Path

import dagster as dg

from warehouse.lake.config import load_config
from warehouse.serve.budgets import OK, budget_statuses, unknown_scopes
from warehouse.serve.formatting import dollars
from warehouse.lake.zones import UTC, today_in

DESCRIPTION = ("This month's spend (UTC) is within each budget of config.toml, and so is the month's end at the "
               "current pace (a warning when not).")


def spend_of(con, config_file: Path):
    """The home's budgets, this month's figures for each, and what they name that the warehouse
    does not hold, on an open warehouse."""
    budgets = load_config(config_file).budgets
    return budgets, budget_statuses(con, budgets, today_in(UTC)), unknown_scopes(con, budgets)


def budget_check_result(budgets, spend, unknown: list[str], config_file: Path, **key) -> dg.AssetCheckResult:
    """Failed (a warning, never a failed run) when a budget is exceeded or projected to be, or
    names a project, user or agent the warehouse does not hold (a typo would pass forever at $0);
    `key`: the check's asset_key and check_name where Dagster cannot infer them."""
    off = [s for s in spend if s.status != OK]
    said = "; ".join([f"{s.budget.name}: {s.status} (spent {dollars(s.spent_usd, 2)} of "
                      f"{dollars(s.budget.monthly_usd, 2)}, projected {dollars(s.projected_usd, 2)})"
                      for s in off] + unknown)
    return dg.AssetCheckResult(
        passed=not off and not unknown, severity=dg.AssetCheckSeverity.WARN,
        description=said or (None if budgets else f"No budget is set in {config_file}: nothing to check."),
        metadata={s.budget.name: {"status": s.status, "spent_usd": float(s.spent_usd),
                                  "monthly_usd": float(s.budget.monthly_usd), "projected_usd": float(s.projected_usd)}
                  for s in spend},
        **key)
