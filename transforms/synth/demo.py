"""A seeded demo of every agent working in the same projects, with known totals.

Used by `agentlake demo` / `quickstart` on a machine with no agent data, by the all-agents test
fixtures and by the benchmarks. Each agent's own generator writes real stores in its real
format; this only lays them out side by side.
"""

import argparse
from dataclasses import dataclass
from importlib import import_module
from pathlib import Path

from transforms.providers import PROVIDERS

# where each agent's data goes under the demo root (the agents' own home layouts); Aider keeps
# its chat history inside the project directories themselves, which are Crush's workspaces
# (every agent of transforms.providers: a new agent's generator is transforms/synth/<name>.py)
HOMES = {name: name for name in PROVIDERS} | {"aider": "crush/projects"}

# the sizes a demo can have, inclusive: every generator needs a project to work in and a session
# to write (0 divides by zero, a negative count writes half a store), and the top keeps a typo
# (`--sessions 6000`) from writing gigabytes; benchmarks/run.py is for big corpora
LIMITS = {"projects": (1, 100), "sessions": (1, 100)}


def check_size(option: str, value: int) -> int:
    low, high = LIMITS[option]
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"--{option} must be a whole number from {low} to {high}, not {value!r}")
    return value


def size_option(option: str):
    """An argparse `type` for `--projects` / `--sessions`: a bad value is a usage error naming
    the range (exit 2), never a traceback from a generator."""
    low, high = LIMITS[option]

    def parse(text: str) -> int:
        try:
            return check_size(option, int(text))
        except ValueError:
            raise argparse.ArgumentTypeError(f"wants a whole number from {low} to {high}: {text!r}") from None

    return parse


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
    """Raises ValueError for a size outside LIMITS, before anything is written."""
    # the generators load here, not with the module: the CLI's parser imports it for size_option
    from transforms.synth.codewhale import generate_home as codewhale_home
    from transforms.synth.crush import generate_store

    check_size("projects", projects)
    check_size("sessions", sessions)
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
            truths[agent] = _generator(agent)(root / where, sessions=sessions, seed=seed, workspaces=workspaces)
    return Demo(root, truths)


def _generator(agent: str):
    """The agent's `generate_home`, or an error saying what the demo needs of a new agent."""
    module = f"transforms.synth.{agent}"
    try:
        return import_module(module).generate_home
    except (ModuleNotFoundError, AttributeError) as exc:
        # the module or its function missing; an error inside a generator that is there is its own
        if not (exc.name == module if isinstance(exc, ModuleNotFoundError) else exc.name == "generate_home"):
            raise
        raise RuntimeError(
            f"the demo has no generator for {agent}: transforms/synth/{agent}.py needs "
            "generate_home(home, *, sessions, seed, workspaces), writing the agent's store in its real format "
            "under home for sessions in those workspaces and returning what it wrote (its .sessions and "
            ".cost_usd; docs/ARCHITECTURE.md, \"Adding a provider\")") from None
