"""Per-source state: the fingerprint last ingested, the project names its rows were filed
under, and the files written for it.

It lets a rerun skip an unchanged source without opening it (a source renamed in config.toml's
[projects] is not unchanged), and lets a changed source remove the files it no longer needs. The state is written last, so a crash before it only
means the next run redoes the source.
"""

import json
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from transforms.atomic import replace_file
from warehouse.lake.locks import held


@dataclass
class SourceState:
    fingerprint: str | None = None
    files: dict[str, str] = field(default_factory=dict)
    partition_key: str | None = None
    path: str | None = None
    schema: str | None = None  # contract.SCHEMA_VERSION the files were written with
    # the source as it was when it could not be read, and why: the same bytes fail the same way,
    # so a rerun reports it without reading it again (a forced run retries)
    failed_fingerprint: str | None = None
    failed: str | None = None
    # a source read in parts (transforms.bundle): each part's session ids as last landed
    parts: dict[str, list[str]] | None = None
    # a digest of the configured project names a store that names its sessions' projects itself
    # was landed with (warehouse.land.ingest.names_digest); the project of a source of one project is
    # in its partition_key
    names: str | None = None


_FIELDS = {f.name for f in fields(SourceState)}


def _path(state_dir: Path, provider: str, source_id: str) -> Path:
    return state_dir / f"{provider}-{source_id}.json"


def load(state_dir: Path, provider: str, source_id: str) -> SourceState:
    try:
        data = json.loads(_path(state_dir, provider, source_id).read_text())
        # a key a newer release added is ignored, not a reason to read the source again
        return SourceState(**{k: v for k, v in data.items() if k in _FIELDS})
    except (OSError, ValueError, TypeError):
        return SourceState()  # no usable state: the source is simply ingested again


def save(state_dir: Path, provider: str, source_id: str, state: SourceState) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    path = _path(state_dir, provider, source_id)
    replace_file(path, json.dumps(asdict(state), indent=1, sort_keys=True))


def source_ids(state_dir: Path, provider: str) -> set[str]:
    """Every source of the agent with a state here, found or not this run."""
    try:
        names = os.listdir(state_dir)
    except OSError:
        return set()
    prefix = f"{provider}-"
    return {name[len(prefix):-5] for name in names
            if name.startswith(prefix) and name.endswith(".json") and "." not in name[len(prefix):-5]}


def forget(state_dir: Path, provider: str, source_id: str) -> None:
    """A source that is no more (a session now landed with its project: transforms.bundle)."""
    _path(state_dir, provider, source_id).unlink(missing_ok=True)


def source_lock(state_dir: Path, provider: str, source_id: str):
    """One writer per source at a time (the sensor's run and a manual ingest, say)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return held(state_dir / f"{provider}-{source_id}.lock")
