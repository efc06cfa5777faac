"""The docs describe what the code does."""

import re
from pathlib import Path

from pipelines.cli import parser
from transforms.contract import ALL_TABLES
from warehouse.catalog.tables_doc import render

ROOT = Path(__file__).resolve().parents[1]


def test_tables_doc_is_current():
    assert (ROOT / "docs" / "TABLES.md").read_text() == render(), \
        "regenerate: python -m warehouse.catalog.tables_doc > docs/TABLES.md"


def test_readme_names_every_command_and_view():
    readme = (ROOT / "README.md").read_text()
    commands = parser()._subparsers._group_actions[0].choices
    for name in commands:
        assert f"agentlake {name}" in readme, f"README does not mention `agentlake {name}`"
    for table in ALL_TABLES:
        assert f"`{table.name}`" in readme


def test_readme_test_command_is_what_ci_runs():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in readme
    assert re.search(r"agentlake quickstart", readme)
