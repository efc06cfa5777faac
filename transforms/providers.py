"""Every provider agentlake knows, by name. A new agent adds one line here."""

from transforms.claude.provider import ClaudeProvider
from transforms.codewhale.provider import CodeWhaleProvider
from transforms.codex.provider import CodexProvider
from transforms.crush.provider import CrushProvider
from transforms.opencode.provider import OpenCodeProvider
from transforms.provider import Provider

PROVIDERS: dict[str, Provider] = {
    "crush": CrushProvider(),
    "codewhale": CodeWhaleProvider(),
    "claude": ClaudeProvider(),
    "codex": CodexProvider(),
    "opencode": OpenCodeProvider(),
}
