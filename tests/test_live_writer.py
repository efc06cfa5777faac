"""Ingestion while a process writes to the crush.db as Crush does (WAL, busy_timeout, short
transactions adding messages and raising the session's cost)."""

import json
import subprocess
import sys
import time

import pytest

from tests.conftest import T0, query
from transforms.synth.crush import add_session
from transforms.provider import DiscoverOptions
from warehouse.land.ingest import Run, discover_sources, ingest_source
from warehouse.catalog.build import refresh

WRITER = r"""
import json, os, sqlite3, sys, time
db, stop = sys.argv[1], sys.argv[2]
con = sqlite3.connect(db, timeout=5.0, isolation_level=None)
for pragma in ("journal_mode=WAL", "busy_timeout=5000", "foreign_keys=ON", "synchronous=NORMAL"):
    con.execute(f"PRAGMA {pragma}")
parts = '[{"type":"text","data":{"text":"step"}},{"type":"finish","data":{"reason":"end_turn","time":1}}]'
n, worst, waited = 0, 0.0, 0.0
while not os.path.exists(stop):  # until the test has seen enough ingests
    started = time.perf_counter()
    sid = f"s{n % 5}"
    # Crush's _txlock=immediate; a lock another connection holds is seen at once (then waited for
    # as Crush does), so that the time spent waiting on one is told apart from a slow machine's
    con.execute("PRAGMA busy_timeout=0")
    try:
        con.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError:
        con.execute("PRAGMA busy_timeout=5000")
        con.execute("BEGIN IMMEDIATE")
        waited = max(waited, time.perf_counter() - started)
    con.execute("PRAGMA busy_timeout=5000")
    con.execute("INSERT INTO messages (id, session_id, role, parts, model, created_at, updated_at) "
                "VALUES (?, ?, 'assistant', ?, 'm', strftime('%s','now'), strftime('%s','now'))", (f"m{n}", sid, parts))
    con.execute("UPDATE sessions SET cost = cost + 0.001 WHERE id = ?", (sid,))
    con.execute("COMMIT")
    worst = max(worst, time.perf_counter() - started)
    n += 1
    time.sleep(0.002)
print(json.dumps({"transactions": n, "worst_s": worst, "waited_s": waited}))
"""


def _consistent(layout):
    """Every ingested snapshot: no message without its session; cost and count match the messages."""
    refresh(layout.lake, layout.warehouse, marts=False)  # the tables are what is checked
    assert query(layout, "SELECT COUNT(*) FROM messages m ANTI JOIN sessions s USING (session_id)") == [(0,)]
    rows = query(layout, """
        SELECT s.session_id, s.cost_usd, s.message_count, COUNT(m.message_id)
        FROM sessions s LEFT JOIN messages m USING (session_id) GROUP BY ALL""")
    for sid, cost, count, messages in rows:
        assert count == messages, sid
        assert round(cost, 6) == round(0.001 * messages, 6), sid
    return sum(r[3] for r in rows)


def _run(layout, project, tmp_path, seconds, at_least=2):
    """Ingests while the writer writes, for `seconds` and at least `at_least` ingests (however
    slow the machine), then the writer is told to stop."""
    p = project("live")
    for i in range(5):
        add_session(p.conn, f"s{i}", title="t", created_at=T0)
    p.close()
    (source,), _ = discover_sources(DiscoverOptions(env={}, extra_stores={"crush": (str(p.db),)}, use_default=False))
    stop = tmp_path / "stop-writing"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(p.db), str(stop)], stdout=subprocess.PIPE, text=True)
    seen, ingests, until = [], 0, time.monotonic() + seconds
    while writer.poll() is None:
        result = ingest_source(source, Run(layout, f"run-{ingests}", full_refresh=True))
        assert result.status == "ok" and result.reconciled, result.error or result.reconcile
        seen.append(_consistent(layout))
        ingests += 1
        if ingests >= at_least and time.monotonic() >= until:
            stop.touch()
    out, _ = writer.communicate()
    stats = json.loads(out)
    assert writer.returncode == 0
    assert stats["waited_s"] < 1.0, stats  # far below the 5 s busy_timeout: we never held it up
    final = ingest_source(source, Run(layout, "final", full_refresh=True))
    assert final.status == "ok"
    assert _consistent(layout) == stats["transactions"]  # the last ingest equals the final db
    assert ingests >= 2 and seen == sorted(seen)  # snapshots only move forward
    return ingests


def test_ingest_again_and_again_while_crush_writes(layout, project, tmp_path):
    _run(layout, project, tmp_path, seconds=1, at_least=3)


@pytest.mark.slow
def test_ingest_while_crush_writes_long(layout, project, tmp_path):
    assert _run(layout, project, tmp_path, seconds=60) > 20
