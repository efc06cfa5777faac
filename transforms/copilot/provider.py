"""GitHub Copilot CLI behind the provider interface. A source is one session log, or one session
file of the first format (transforms.copilot.discover); the title comes from `workspace.yaml`
beside a log (`summary`)."""

from datetime import datetime
from pathlib import Path

import yaml

from transforms.copilot import discover as copilot_discover
from transforms.copilot.discover import PROVIDER
from transforms.copilot import legacy
from transforms.copilot.normalise import Context, expected_counts, normalise, normalise_legacy, parse_lines
from transforms.findings import Findings, bad_line
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source, file_fingerprint


class CopilotProvider(AgentProvider):
    name = PROVIDER
    discovery = copilot_discover

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path, str(_workspace_file(source)))

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        if legacy.LEGACY_NAME.match(Path(source.path).name):
            return _extract_legacy(source, run_at)
        # the CLI only appends to the log: one read is a consistent prefix
        data = read_file(source.path)
        events, bad = parse_lines(data)
        quarantine = [bad_line(PROVIDER, source, "events.jsonl", source.path, no, reason, text, run_at)
                      for no, text, reason in bad]
        workspace, note = _workspace(source)
        session_id = source.identity or Path(source.path).stem
        ctx = Context(source.source_id, session_id, source.project_path,
                      title=workspace.get("summary") if isinstance(workspace.get("summary"), str) else None,
                      workspace=workspace)
        rows, findings = normalise(events, ctx)
        if note:
            findings.notes.append(note)
        rows["quarantine"] = quarantine
        return Extract(rows=rows, findings=findings, schema_version=_version(events),
                       expected=expected_counts(events))


def _extract_legacy(source: Source, run_at: datetime) -> Extract:
    """A session file of the first format: read whole; one that is not is quarantined whole."""
    data = read_file(source.path)
    session_id = source.identity or Path(source.path).stem
    try:
        doc = legacy.parse(data)
    except legacy.LegacyFileError as exc:
        bad = bad_line(PROVIDER, source, "history-session-state", source.path, 0, str(exc),
                       data.decode("utf-8", "replace"), run_at)
        return Extract(rows={"quarantine": [bad]}, findings=Findings(), expected={"sessions": 0})
    rows, findings = normalise_legacy(doc, Context(source.source_id, session_id, source.project_path))
    rows["quarantine"] = []
    return Extract(rows=rows, findings=findings, schema_version=0,
                   expected={"sessions": 1, "messages": legacy.expected_messages(doc)})


def _workspace_file(source: Source) -> Path:
    return Path(source.path).parent / "workspace.yaml"


def _workspace(source: Source) -> tuple[dict, str | None]:
    """`workspace.yaml` (id, cwd, summary, created_at, ...), or {} with why it was not read."""
    path = _workspace_file(source)
    if Path(source.path).name != copilot_discover.EVENTS or not path.is_file():
        return {}, None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, yaml.YAMLError) as exc:
        return {}, f"{path}: not read ({type(exc).__name__}); no title"
    if not isinstance(doc, dict):
        return {}, None
    return {str(k): (v.isoformat() if isinstance(v, datetime) else v) for k, v in doc.items()}, None


def _version(events) -> int | None:
    for e in events[:1]:
        v = e.data.get("version") if e.type == "session.start" else None
        return v if isinstance(v, int) and not isinstance(v, bool) else None
    return None

