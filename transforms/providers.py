"""Every provider agentlake knows, by name. A new agent adds one line here."""

from transforms.crush.provider import CrushProvider
from transforms.provider import Provider

PROVIDERS: dict[str, Provider] = {
    "crush": CrushProvider(),
}
