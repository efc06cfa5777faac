"""Every provider agentlake knows, by name. A new agent adds one line here.

An agent that keeps a file per session is landed by project (`ByProject`, transforms.bundle).
"""

from transforms.aider.provider import AiderProvider
from transforms.amp.provider import AmpProvider
from transforms.antigravity.provider import AntigravityProvider
from transforms.bundle import ByProject
from transforms.claude.provider import ClaudeProvider
from transforms.codebuff.provider import CodebuffProvider
from transforms.codewhale.provider import CodeWhaleProvider
from transforms.codex.provider import CodexProvider
from transforms.copilot.provider import CopilotProvider
from transforms.crush.provider import CrushProvider
from transforms.cursor.provider import CursorProvider
from transforms.droid.provider import DroidProvider
from transforms.gemini.provider import GeminiProvider
from transforms.kimi.provider import KimiProvider
from transforms.goose.provider import GooseProvider
from transforms.kilo.provider import KiloProvider
from transforms.opencode.provider import OpenCodeProvider
from transforms.pi.provider import PiProvider
from transforms.provider import Provider
from transforms.qwen.provider import QwenProvider

PROVIDERS: dict[str, Provider] = {
    "crush": CrushProvider(),
    "codewhale": ByProject(CodeWhaleProvider()),
    "claude": ClaudeProvider(),
    "codex": ByProject(CodexProvider()),
    "opencode": OpenCodeProvider(),
    "copilot": ByProject(CopilotProvider()),
    "amp": ByProject(AmpProvider()),
    "droid": ByProject(DroidProvider()),
    "goose": GooseProvider(),
    "aider": AiderProvider(),
    "cursor": CursorProvider(),
    "pi": ByProject(PiProvider()),
    "kilo": ByProject(KiloProvider()),
    "codebuff": ByProject(CodebuffProvider()),
    "antigravity": AntigravityProvider(),
    "gemini": ByProject(GeminiProvider()),
    "qwen": ByProject(QwenProvider()),
    "kimi": KimiProvider(),
}
