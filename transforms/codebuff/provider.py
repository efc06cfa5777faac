"""Codebuff behind the provider interface. A source is one chat folder (transforms.codebuff.normalise)."""

from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.codebuff import discover as cb_discover
from transforms.codebuff.discover import CHAT_FILES, PROVIDER
from transforms.codebuff.normalise import Context, normalise
from transforms.findings import Findings
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source, file_fingerprint
from transforms.timestamps import from_iso


class CodebuffProvider(AgentProvider):
    name = PROVIDER
    discovery = cb_discover

    def fingerprint(self, source: Source) -> str:
        # `ids:2`: message ids became `<chat id>:<own id>` (transforms.codebuff.normalise); a lake
        # holding the agent's bare ids, repeated across a project's chats, reads them all once more
        return f"ids:2|{file_fingerprint(*(str(Path(source.path) / f) for f in CHAT_FILES))}"

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        # Codebuff rewrites the file whole after each run: one read is a consistent snapshot
        folder = Path(source.path)
        path = next((folder / f for f in CHAT_FILES if (folder / f).is_file()), folder / CHAT_FILES[0])
        legacy = path.name != CHAT_FILES[0]
        text = read_file(path).decode("utf-8", "replace")
        findings = Findings()
        try:
            doc = jsontext.loads(text)
        except (ValueError, RecursionError) as exc:
            doc, why = None, f"not valid JSON: {exc}"
        else:
            why = None
        messages = (doc.get("messages") if legacy and isinstance(doc, dict) else doc) if doc is not None else None
        if not isinstance(messages, list):
            row = {"provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
                   "source_table": path.name, "source_rowid": 0, "key": str(path),
                   "error": (why or "not the JSON shape Codebuff writes")[:300], "raw": text, "created_at": run_at}
            return Extract(rows={"quarantine": [row]}, findings=findings)
        ctx = Context(source.source_id, folder.name, source.project_path, chat_started(folder.name))
        rows = normalise(messages, ctx, findings, legacy)
        if len(messages) >= 100 and not legacy:
            findings.notes.append(f"{folder.name}: {len(messages)} messages: Codebuff keeps the last 100 only, "
                                  "older ones (and their credits) may be gone from the file")
        rows["quarantine"] = []
        return Extract(rows=rows, findings=findings,
                       schema_version=1 if legacy else 2, expected={"sessions": 1, "messages": len(messages)})


def chat_started(chat_id: str):
    """A chat id is its start time with `:` written as `-` (`2025-12-14T10-00-00.000Z`)."""
    date, sep, time = chat_id.partition("T")
    return from_iso(f"{date}T{time.replace('-', ':', 2)}") if sep else None
