"""Every provider agentlake knows, by name. A new agent adds one line here
(docs/ARCHITECTURE.md, "Adding a provider", lists what else names it).

An agent that keeps a file per session is landed by project (`ByProject`, transforms.bundle).
Each provider's module is imported when the provider is first asked for: a command that needs
only the agents' names (the config's sections, `--help`, a usage error) loads none of the
eighteen normalisers.
"""

from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transforms.provider import Provider

# name -> (its folder under transforms/, its provider class, landed by project)
_KNOWN: dict[str, tuple[str, str, bool]] = {
    "crush": ("crush", "CrushProvider", False),
    "codewhale": ("codewhale", "CodeWhaleProvider", True),
    "claude": ("claude", "ClaudeProvider", True),
    "codex": ("codex", "CodexProvider", True),
    "opencode": ("opencode", "OpenCodeProvider", False),
    "copilot": ("copilot", "CopilotProvider", True),
    "amp": ("amp", "AmpProvider", True),
    "droid": ("droid", "DroidProvider", True),
    "goose": ("goose", "GooseProvider", False),
    "aider": ("aider", "AiderProvider", False),
    "cursor": ("cursor", "CursorProvider", False),
    "pi": ("pi", "PiProvider", True),
    "kilo": ("kilo", "KiloProvider", True),
    "codebuff": ("codebuff", "CodebuffProvider", True),
    "antigravity": ("antigravity", "AntigravityProvider", False),
    "gemini": ("gemini", "GeminiProvider", True),
    "qwen": ("qwen", "QwenProvider", True),
    "kimi": ("kimi", "KimiProvider", False),
}


class _Providers(MutableMapping):
    """The providers by name, in the order above, each made at its first use. Setting one
    replaces it (a test standing in an older release's provider)."""

    def __init__(self, known: dict[str, tuple[str, str, bool]]):
        self._known = dict(known)
        self._made: dict[str, Provider] = {}

    def __getitem__(self, name: str) -> "Provider":
        if name not in self._made:
            folder, cls, by_project = self._known[name]  # an unknown name: KeyError, as a dict's
            provider = getattr(import_module(f"transforms.{folder}.provider"), cls)()
            if by_project:
                from transforms.bundle import ByProject

                provider = ByProject(provider)
            self._made[name] = provider
        return self._made[name]

    def __setitem__(self, name: str, provider: "Provider") -> None:
        self._known.setdefault(name, ("", "", False))
        self._made[name] = provider

    def __delitem__(self, name: str) -> None:
        del self._known[name]
        self._made.pop(name, None)

    def __contains__(self, name: object) -> bool:  # a name known, without importing its provider
        return name in self._known

    def __iter__(self) -> Iterator[str]:
        return iter(self._known)

    def __len__(self) -> int:
        return len(self._known)


PROVIDERS: MutableMapping[str, "Provider"] = _Providers(_KNOWN)


def env_vars() -> tuple[str, ...]:
    """Every environment variable discovery reads: each agent's (`ENV_VARS` of its discover
    module) and those the user's home is found by. A scheduled job carries them
    (pipelines.schedule), and the tests set each apart (tests/conftest.py)."""
    from transforms.sources import HOME_VARS

    names = set(HOME_VARS)
    for folder, _, _ in _KNOWN.values():
        module = import_module(f"transforms.{folder}.discover")
        if not hasattr(module, "ENV_VARS"):  # a new agent's: said as the step it misses
            raise AttributeError(f"transforms/{folder}/discover.py has no ENV_VARS: every agent's discover module "
                                 "names the environment variables it reads, () for none (docs/ARCHITECTURE.md, "
                                 "\"Adding a provider\", step 2)")
        names |= set(module.ENV_VARS)
    return tuple(sorted(names))
