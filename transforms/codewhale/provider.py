"""CodeWhale behind the provider interface. A source is one session file."""

from datetime import datetime
from pathlib import Path

from transforms.codewhale import discover as cw_discover
from transforms.codewhale.normalise import (
    PROVIDER, Context, SessionFileError, expected_counts, normalise, parse_session,
)
from transforms.findings import Findings
from transforms.provider import DiscoverOptions, Extract, SourceError
from transforms.sources import Discovery, Source, file_fingerprint


class CodeWhaleProvider:
    name = PROVIDER

    def discover(self, options: DiscoverOptions) -> Discovery:
        return cw_discover.discover(env=options.env, extra_roots=options.roots(PROVIDER),
                                    extra_stores=options.stores(PROVIDER), use_default=options.use_default)

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path)

    def extract(self, source: Source, workdir: Path, run_at: datetime) -> Extract:
        # CodeWhale rewrites the file whole (temp + rename): one read is a consistent snapshot
        try:
            text = Path(source.path).read_bytes().decode("utf-8", "replace")
        except OSError as exc:
            raise SourceError(f"cannot read {source.path}: {exc}") from None
        ctx = Context(source.source_id, source.path, run_at)
        try:
            doc = parse_session(text)
        except SessionFileError as exc:
            return _quarantined(source, ctx, str(exc), text)
        rows, findings = normalise(doc, ctx, _parent(source, doc))
        if doc["metadata"]["id"] != Path(source.path).stem:
            findings.notes.append(f"file name {Path(source.path).name} does not match metadata.id {doc['metadata']['id']}")
        return Extract(rows=rows, findings=findings, schema_version=_version(doc), expected=expected_counts(doc))


def _parent(source: Source, doc: dict) -> dict | None:
    """The snapshot of the session this one was forked from, when it sits beside it."""
    parent_id = doc["metadata"].get("parent_session_id")
    if not isinstance(parent_id, str) or not parent_id or "/" in parent_id:
        return None
    try:
        return parse_session((Path(source.path).parent / f"{parent_id}.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, SessionFileError):
        return None


def _version(doc: dict) -> int | None:
    v = doc.get("schema_version")
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _quarantined(source: Source, ctx: Context, error: str, text: str) -> Extract:
    row = {"provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
           "source_table": "file", "source_rowid": 0, "key": source.path,
           "error": f"malformed session file: {error}", "raw": text, "created_at": ctx.run_at}
    return Extract(rows={"quarantine": [row]}, findings=Findings())
