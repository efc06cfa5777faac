"""The agents the contract names (the `provider` columns of every table and of `sources`) are
exactly the agents agentlake reads, each described in docs/AGENTS.md."""

import re
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


def test_the_agent_tables_have_a_row_per_agent_in_the_contracts_order():
    """docs/AGENTS.md (the first five side by side, the others a row each under "More agents",
    counted in its opening) and docs/SOURCES.md's table of where each store is: a new agent left
    out of either was found by a contributor, not by a test."""
    agents_doc = (ROOT / "docs" / "AGENTS.md").read_text()
    (first,) = re.findall(r"^\| provider \|(.*)\|$", agents_doc, re.M)
    more = agents_doc.split("## More agents", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"`([a-z]+)`", first) + re.findall(r"^\| [^|]+ \| `([a-z]+)` \|", more, re.M)
    assert listed == list(AGENTS), f"docs/AGENTS.md's agents {listed} against transforms/contract.py AGENTS"
    others = len(AGENTS) - len(re.findall(r"`([a-z]+)`", first))
    assert f"the other {WORDS[others]} under \"More agents\"" in agents_doc, f"docs/AGENTS.md: the other {others}"
    sources_doc = (ROOT / "docs" / "SOURCES.md").read_text()
    rows = re.findall(r"^\| [^|]+ \| `([a-z]+)` \| [^|]", sources_doc, re.M)
    assert sorted(rows) == sorted(AGENTS), f"docs/SOURCES.md's table of stores: {sorted(set(rows) ^ set(AGENTS))}"
    # the README's first paragraph names each agent as that table does
    opening = " ".join((ROOT / "README.md").read_text().split("\n\n")[1].split())
    names = re.findall(r"^\| ([^|`]+?) \| `[a-z]+` \| [^|]", sources_doc, re.M)
    assert len(names) == len(AGENTS) and not [n for n in names if n not in opening], \
        f"README.md's opening does not name {[n for n in names if n not in opening]} (docs/SOURCES.md's names)"


WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen twenty").split()
