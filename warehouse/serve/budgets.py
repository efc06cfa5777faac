"""Budgets (`[[budgets]]` in config.toml): this month's spend against each, the share used, and
where the month ends at the current pace. Read by `agentlake report --budgets` and by the Dagster
check on `daily_costs`, so that both say the same."""

import calendar
from dataclasses import dataclass
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from warehouse.lake.config import Budget
from warehouse.lake.layout import AS_STORED
from warehouse.serve.report import SHARE_DECIMALS, Filters, cost_and_sessions, unknown_name

OVER, PROJECTED_OVER, OK = "over", "projected over", "ok"
# each scope's filter of the report (warehouse.serve.report.Filters) and column of `sessions`
_FILTER = {"project": "project", "user": "user", "agent": "provider"}
_COLUMN = {"project": "project", "user": '"user"', "agent": "provider"}
NANO = Decimal("0.000000001")  # costs carry nine decimals (DECIMAL(38,9))


def scope_name(budget: Budget) -> str | None:
    """The name a budget is for as an ingest stores it (`project = "Acme/WebShop"` is acme-webshop,
    `user = "DEV"` dev, `agent = "Claude"` claude): what filters and the dashboard compare with."""
    return AS_STORED[budget.scope](budget.value) if budget.scope != "team" else None


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    month: date  # its first day
    spent_usd: Decimal  # the known costs of the month's days so far
    unknown_cost_sessions: int  # root sessions started this month whose cost is unknown: not in spent_usd
    partial_cost_sessions: int  # and those priced in part: spent_usd is a floor while there are any
    projected_usd: Decimal  # spent_usd / days so far * days in the month

    @property
    def share_used(self) -> Decimal:
        return (self.spent_usd / self.budget.monthly_usd).quantize(Decimal(1).scaleb(-SHARE_DECIMALS), ROUND_HALF_UP)

    @property
    def status(self) -> str:
        if self.spent_usd > self.budget.monthly_usd:
            return OVER
        return PROJECTED_OVER if self.projected_usd > self.budget.monthly_usd else OK


# `month` and `zone`: whose month the row is (the table's title says it; JSON and CSV rows did not)
COLUMNS = ["budget", "monthly_usd", "spent_usd", "share_used", "projected_usd", "status", "unknown_cost_sessions",
           "partial_cost_sessions", "month", "zone"]


def budget_statuses(con, budgets: tuple[Budget, ...], today: date) -> list[BudgetStatus]:
    """Each budget's month to `today` (today included), from `daily_costs`: a cost is on the days
    of its requests, so a month's spend is what its days cost. UTC days, unless `con` reads
    another zone's (warehouse.serve.local_days) and `today` is today there."""
    month = today.replace(day=1)
    days_in_month = calendar.monthrange(today.year, today.month)[1]
    out = []
    for budget in budgets:
        # the report's totals, in this month and the budget's scope: the same figures as `report`
        scope = {_FILTER[budget.scope]: budget.value} if budget.scope != "team" else {}
        columns, values = cost_and_sessions(con, Filters(since=month, until=today, **scope))
        totals = dict(zip(columns, values))
        spent = Decimal(totals["cost_usd"] or 0)  # every cost unknown: nothing known spent
        projected = (spent * days_in_month / today.day).quantize(NANO, ROUND_HALF_UP)
        out.append(BudgetStatus(budget, month, spent, totals["root_sessions_with_unknown_cost"],
                                totals["root_sessions_with_partial_cost"], projected))
    return out


def rows(statuses: list[BudgetStatus], today: date, zone: str) -> list[tuple]:
    """The statuses as COLUMNS: the month is `today`'s (YYYY-MM), in `zone`."""
    return [(s.budget.name, s.budget.monthly_usd, s.spent_usd, s.share_used, s.projected_usd, s.status,
             s.unknown_cost_sessions, s.partial_cost_sessions, f"{today:%Y-%m}", zone) for s in statuses]


def unknown_scopes(con, budgets: tuple[Budget, ...]) -> list[str]:
    """A budget for a project, user or agent the warehouse has never seen (a typo spends nothing
    and never warns): said, with the close names it holds, as the report's filters say it."""
    said = ((b, unknown_name(con, b.scope, scope_name(b), _COLUMN[b.scope])) for b in budgets if b.scope != "team")
    return [f"budget {b.name}: {s}" for b, s in said if s]
