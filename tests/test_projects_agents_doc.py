"""The agents the contract names (the `provider` columns of every table and of `sources`) are
exactly the agents agentlake reads, each described in docs/AGENTS.md."""

from pathlib import Path

from transforms.contract import AGENTS, BY_NAME
from transforms.providers import PROVIDERS

ROOT = Path(__file__).resolve().parents[1]


def test_the_contract_names_every_agent_and_only_those():
    """A new agent is named in transforms/contract.py's AGENTS (the `provider` column's values and
    description) and in docs/AGENTS.md: each missing place is said with the agents it lacks."""
    assert sorted(AGENTS) == sorted(PROVIDERS), \
        f"transforms/contract.py AGENTS against transforms/providers.py: {sorted(set(AGENTS) ^ set(PROVIDERS))}"
    assert len(set(AGENTS)) == len(AGENTS), "an agent named twice in transforms/contract.py AGENTS"
    for table in BY_NAME.values():
        doc = next(c.doc for c in table.columns if c.name == "provider")
        missing = [name for name in PROVIDERS if f"`{name}`" not in doc]
        assert not missing, f"{table.name}.provider's description does not name {missing}"
    agents_doc = (ROOT / "docs" / "AGENTS.md").read_text()
    missing = [name for name in PROVIDERS if f"`{name}`" not in agents_doc]
    assert not missing, f"docs/AGENTS.md does not name {missing} (as `name`)"
