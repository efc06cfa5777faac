"""The agents the contract names (the `provider` columns of every table and of `sources`) are
exactly the agents agentlake reads, each described in docs/AGENTS.md."""

from pathlib import Path

from transforms.contract import AGENTS, BY_NAME
from transforms.providers import PROVIDERS

ROOT = Path(__file__).resolve().parents[1]


def test_the_contract_names_every_agent_and_only_those():
    assert sorted(AGENTS) == sorted(PROVIDERS) and len(set(AGENTS)) == len(AGENTS)
    for table in BY_NAME.values():
        doc = next(c.doc for c in table.columns if c.name == "provider")
        assert all(f"`{name}`" in doc for name in PROVIDERS), table.name
    agents_doc = (ROOT / "docs" / "AGENTS.md").read_text()
    assert all(f"`{name}`" in agents_doc for name in PROVIDERS)
