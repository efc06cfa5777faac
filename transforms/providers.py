"""Every provider agentlake knows, by name. A new agent adds one line here."""

from transforms.codewhale.provider import CodeWhaleProvider
from transforms.crush.provider import CrushProvider
from transforms.provider import Provider

PROVIDERS: dict[str, Provider] = {
    "crush": CrushProvider(),
    "codewhale": CodeWhaleProvider(),
}
