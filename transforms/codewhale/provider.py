"""CodeWhale behind the provider interface. A source is one session file."""

from datetime import datetime
from pathlib import Path

from transforms.codewhale import discover as cw_discover
from transforms.codewhale.normalise import (
    PROVIDER, Context, SessionFileError, expected_counts, normalise, parse_session,
)
from transforms.findings import Findings
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source


class CodeWhaleProvider(AgentProvider):
    name = PROVIDER
    discovery = cw_discover

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        # CodeWhale rewrites the file whole (temp + rename): one read is a consistent snapshot
        text = read_file(source.path).decode("utf-8", "replace")
        ctx = Context(source.source_id, source.path, run_at)
        try:
            doc = parse_session(text)
        except SessionFileError as exc:
            return _quarantined(source, ctx, str(exc), text)
        session_id = doc["metadata"]["id"]
        if session_id != Path(source.path).stem:  # a copy (`<id>.bak.json`...): the real file counts
            findings = Findings(notes=[f"skipped: {Path(source.path).name} is a copy of session {session_id}"])
            return Extract(rows={}, findings=findings, schema_version=_version(doc))
        try:
            rows, findings = normalise(doc, ctx, _parent(source, doc))
        except Exception as exc:  # a value of a shape no CodeWhale writes: the file is kept whole
            return _quarantined(source, ctx, f"{type(exc).__name__}: {exc}", text)
        return Extract(rows=rows, findings=findings, schema_version=_version(doc), expected=expected_counts(doc))


def _parent(source: Source, doc: dict) -> dict | None:
    """The snapshot of the session this one was forked from: beside it, or in the other home
    (the current `~/.codewhale/sessions` or the legacy `~/.deepseek/sessions`)."""
    parent_id = doc["metadata"].get("parent_session_id")
    if not isinstance(parent_id, str) or not parent_id or "/" in parent_id:
        return None
    here = Path(source.path).parent
    homes = {".codewhale": ".deepseek", ".deepseek": ".codewhale"}
    places = [here]
    if here.name == "sessions" and here.parent.name in homes:
        places.append(here.parent.parent / homes[here.parent.name] / "sessions")
    for place in places:
        try:
            return parse_session((place / f"{parent_id}.json").read_bytes().decode("utf-8", "replace"))
        except (OSError, SessionFileError):
            continue
    return None


def _version(doc: dict) -> int | None:
    v = doc.get("schema_version")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _quarantined(source: Source, ctx: Context, error: str, text: str) -> Extract:
    row = {"provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
           "source_table": "file", "source_rowid": 0, "key": source.path,
           "error": f"malformed session file: {error}", "raw": text, "created_at": ctx.run_at}
    return Extract(rows={"quarantine": [row]}, findings=Findings())
