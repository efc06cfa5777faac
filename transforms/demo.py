"""A seeded demo of every agent working in the same projects, with known totals.

Used by `agentlake demo` / `quickstart` on a machine with no agent data, by the all-agents test
fixtures and by the benchmarks. Each agent's own generator writes real stores in its real
format; this only lays them out side by side.
"""

from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from transforms.codewhale.synth import generate_home as codewhale_home
from transforms.crush.synth import generate_store

# where each agent's data goes under the demo root (the agents' own home layouts); Aider keeps
# its chat history inside the project directories themselves, which are Crush's workspaces
HOMES = {"crush": "crush", "codewhale": "codewhale", "claude": "claude", "codex": "codex", "opencode": "opencode",
         "gemini": "gemini", "qwen": "qwen", "kimi": "kimi", "copilot": "copilot", "amp": "amp", "droid": "droid",
         "goose": "goose", "aider": "crush/projects", "cursor": "cursor", "pi": "pi", "kilo": "kilo",
         "codebuff": "codebuff", "antigravity": "antigravity"}


@dataclass
class Demo:
    root: Path
    truths: dict  # provider -> that generator's truth object

    def roots(self) -> dict[str, tuple[str, ...]]:
        """DiscoverOptions.extra_roots for the demo's stores."""
        return {p: (str(self.root / d),) for p, d in HOMES.items()}

    @property
    def workspaces(self) -> list[str]:
        return [str(d.project_path) for d in self.truths["crush"].dbs]


def generate_demo(root, *, projects=4, sessions=6, seed=7, without_cost=2) -> Demo:
    root = Path(root)
    crush = generate_store(root / HOMES["crush"], projects=projects, sessions_per_project=sessions, seed=seed)
    workspaces = tuple(str(d.project_path) for d in crush.dbs)
    truths = {
        "crush": crush,
        "codewhale": codewhale_home(root / HOMES["codewhale"], sessions=sessions, seed=seed,
                                    without_cost=without_cost, workspaces=workspaces),
    }
    for agent, where in HOMES.items():  # every other agent's generator has the same signature
        if agent not in truths:
            generate_home = import_module(f"transforms.{agent}.synth").generate_home
            truths[agent] = generate_home(root / where, sessions=sessions, seed=seed, workspaces=workspaces)
    return Demo(root, truths)
