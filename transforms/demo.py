"""A seeded demo of all five agents working in the same projects, with known totals.

Used by `agentlake demo` / `quickstart` on a machine with no agent data, by the five-agent test
fixture and by the benchmarks. Each agent's own generator writes real stores in its real
format; this only lays them out side by side.
"""

from dataclasses import dataclass
from pathlib import Path

from transforms.claude.synth import generate_home as claude_home
from transforms.codewhale.synth import generate_home as codewhale_home
from transforms.codex.synth import generate_home as codex_home
from transforms.crush.synth import generate_store
from transforms.opencode.synth import generate_home as opencode_home

# where each agent's data goes under the demo root (the agents' own home layouts)
HOMES = {"crush": "crush", "codewhale": "codewhale", "claude": "claude", "codex": "codex", "opencode": "opencode"}


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
        "claude": claude_home(root / HOMES["claude"], sessions=sessions, seed=seed, workspaces=workspaces),
        "codex": codex_home(root / HOMES["codex"], sessions=sessions, seed=seed, workspaces=workspaces),
        "opencode": opencode_home(root / HOMES["opencode"], sessions=sessions, seed=seed, workspaces=workspaces),
    }
    return Demo(root, truths)
