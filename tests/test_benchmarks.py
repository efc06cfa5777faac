"""The benchmark runs end to end: its figures go into docs/BENCHMARKS.md, so a change that breaks
it (the Dagster UI's pages stopped being measured when the CLI stopped running Dagster) must be
seen. A long variant (`-m slow`): a small corpus still builds, ingests and queries for a minute."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_benchmark_measures_every_page_readers_open(tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "run.py"), "--projects", "3", "--sessions", "4",
                           "--repeat", "1", "--workdir", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = dict(re.findall(r"^\| ([^|]+?) \| ([\d.]+) \|$", done.stdout, re.MULTILINE))
    for page in ("dashboard page", "Dagster UI: asset catalog", "Dagster UI: landing's partitions",
                 "Dagster UI: landing's events", "one session transcript"):
        assert float(rows[page]) > 0, page
