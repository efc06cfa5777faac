"""A lake whose one root session's requests straddle midnight UTC of 2026-01-01 (and midnight in
Kolkata): the days a cost and a message land on in a zone, as `report --tz` and
`dashboard --tz` count them, worked out from the timestamps written here."""

from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from zoneinfo import ZoneInfo

import pytest

from tests.conftest import T0, Project, assistant, copy_home, ingest
from transforms.synth.crush import add_message, add_session
from transforms.synth.crush_parts import text_part
from warehouse.lake.layout import Layout

HOUR = 3600
COST = Decimal("1.0")
# R's assistant messages around midnight UTC of 2026-01-01: half an hour each side of it, a
# minute each side of midnight in Kolkata (UTC+5:30), and ten hours after
STRADDLING = (T0 - 1800, T0 + 1800, T0 - 19800 - 60, T0 - 19800 + 60, T0 + 10 * HOUR)
CREATED = T0 - 6 * HOUR  # 2025-12-31 18:00 UTC: 2026-01-01 in Tokyo, 23:30 on the 31st in Kolkata


def day_of(seconds: int, zone: str):
    return datetime.fromtimestamp(seconds, ZoneInfo(zone)).date()


def split_cost(cost: Decimal, weights: dict) -> dict:
    """daily_costs' rule: a cost over keys in proportion to their weights, in whole nano-dollars,
    each share but the last (in key order) rounded half up, the last the remainder."""
    nanos, total, out = int(cost * 10**9), sum(weights.values()), {}
    for i, key in enumerate(sorted(weights)):
        if i == len(weights) - 1:
            out[key] = nanos - sum(out.values())
        else:
            out[key] = int((Decimal(nanos) * weights[key] / total).quantize(Decimal(1), ROUND_HALF_UP))
    return {key: Decimal(n).scaleb(-9) for key, n in out.items()}


def _straddling(root):
    layout = Layout.resolve(home=root / "home", machine="laptop", user="dev")
    p = Project(root / "projects", "shop")
    add_session(p.conn, "R", title="around midnight", created_at=CREATED, cost=float(COST))
    for i, t in enumerate(STRADDLING):
        assistant(p.conn, f"a{i}", "R", t)
    add_message(p.conn, "u0", "R", "user", [text_part("go")], created_at=CREATED)
    p.close()
    ingest(layout, p.db)
    return layout


@pytest.fixture
def straddling(layout, built_once):
    copy_home(built_once("report-tz-straddling", _straddling).home, layout.home)
    return layout
