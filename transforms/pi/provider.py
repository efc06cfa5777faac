"""pi behind the provider interface. A source is one session file (one session); a fork's
parent file is read only to tell which of its entries are copies (transforms.pi.normalise)."""

from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.findings import Findings
from transforms.pi import discover as pi_discover
from transforms.pi.discover import PROVIDER
from transforms.pi.normalise import NOT_MESSAGES, Context, Entry, normalise
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source
from transforms.timestamps import from_iso


class PiProvider(AgentProvider):
    name = PROVIDER
    discovery = pi_discover

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        # pi appends lines, and rewrites the file whole only to migrate it: one read is consistent
        data = read_file(source.path)
        findings = Findings()
        quarantine: list[dict] = []
        header, entries = parse(data, lambda no, reason, text: quarantine.append(
            _quarantine(source, no, reason, text, run_at)), findings)
        if header is None:
            quarantine[:] = [_quarantine(source, 0, "malformed session: no `session` header on the first line",
                                         data.decode("utf-8", "replace"), run_at)]
            return Extract(rows={"quarantine": quarantine}, findings=findings)
        sid = header["id"]
        cwd = header.get("cwd") if isinstance(header.get("cwd"), str) else source.project_path
        parent_path, parent = find_parent(header, Path(source.path))
        copied = copied_entries(header, entries, parent)
        if copied:
            how = "ids found in the parent's file" if parent else "dated before the fork"
            findings.notes.append(f"{sid}: {len(copied)} entries copied from the parent skipped ({how})")
        ctx = Context(source.source_id, sid, cwd, copied)
        try:
            rows = normalise(header, entries, ctx, findings, forked_from=forked_from(header, parent))
        except Exception as exc:  # a value of a shape no pi writes: the file is kept whole
            row = _quarantine(source, 0, f"{type(exc).__name__}: {exc}"[:300], data.decode("utf-8", "replace"), run_at)
            findings.diverted.update(sessions=1)
            return Extract(rows={"quarantine": [row]}, findings=findings, expected={"sessions": 1})
        rows["quarantine"] = quarantine
        version = header.get("version") if isinstance(header.get("version"), int) else 1
        return Extract(rows=rows, findings=findings, schema_version=version,
                       expected={"sessions": 1, "messages": expected_messages(entries, copied)})


def parse(data: bytes, bad, findings: Findings) -> tuple[dict | None, list[Entry]]:
    """The header and the entries, in file order; a repeated header of the same session and an
    entry id seen before are skipped (pi <= 0.55.1 could write a file twice over, #1672)."""
    header, entries, seen, repeats = None, [], set(), 0
    for no, text, obj, why in jsontext.json_lines(data):  # a last line without its newline: UNFINISHED
        if why:
            bad(no, why, text)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            bad(no, "not a session entry (an object with a `type`)", text)
            continue
        if header is None:
            if obj["type"] != "session" or not isinstance(obj.get("id"), str) or not obj["id"]:
                return None, []
            header = obj
            continue
        entry_id = obj.get("id") if isinstance(obj.get("id"), str) else None
        if (obj["type"] == "session" and obj.get("id") == header["id"]) or (entry_id and entry_id in seen):
            repeats += 1
            continue
        if entry_id:
            seen.add(entry_id)
        entries.append(Entry(no, obj))
    if repeats:
        findings.notes.append(f"{repeats} lines written twice by pi (a repeated header or entry id) skipped")
    return header, entries


def find_parent(header: dict, path: Path) -> tuple[Path | None, tuple[dict, set[str]] | None]:
    """The file a fork came from (`parentSession`): where the header says, else beside this file,
    else in a sibling project folder (the session dir moved). Its header and entry ids."""
    named = header.get("parentSession")
    if not isinstance(named, str) or not named:
        return None, None
    name = Path(named.replace("\\", "/")).name
    for candidate in (Path(named), path.parent / name, *path.parent.parent.glob(f"*/{name}")):
        try:
            if candidate.resolve() == path.resolve() or not candidate.is_file():
                continue
            parent_header, entries = parse(candidate.read_bytes(), lambda *_: None, Findings())
        except OSError:
            continue
        if parent_header is not None:
            return candidate, (parent_header, {e.obj["id"] for e in entries if isinstance(e.obj.get("id"), str)})
    return None, None


def copied_entries(header: dict, entries: list[Entry], parent) -> set[int]:
    """Line numbers of a fork's copies of its parent's entries."""
    if not header.get("parentSession"):
        return set()
    if parent is not None:
        ids = parent[1]
        return {e.no for e in entries if e.obj.get("id") in ids}
    forked_at = from_iso(header.get("timestamp"))
    if forked_at is None:
        return set()
    return {e.no for e in entries if (at := from_iso(e.obj.get("timestamp"))) is not None and at < forked_at}


def forked_from(header: dict, parent) -> str | None:
    """The parent session's id: its header's, else the uuid in its file name (`<time>_<uuid>.jsonl`)."""
    if parent is not None:
        return parent[0]["id"]
    named = header.get("parentSession")
    if not isinstance(named, str) or not named:
        return None
    stem = Path(named.replace("\\", "/")).stem
    return stem.split("_", 1)[1] if "_" in stem else stem


def expected_messages(entries: list[Entry], copied: set[int]) -> int:
    """Message rows the file's own entries make: every entry but the bookkeeping ones."""
    return sum(1 for e in entries if e.no not in copied and e.type not in NOT_MESSAGES)


def _quarantine(source: Source, no: int, error: str, raw: str, run_at: datetime) -> dict:
    return {"provider": PROVIDER, "source_id": source.source_id, "project_path": source.project_path,
            "source_table": "entry", "source_rowid": no, "key": f"{source.path}:{no + 1}", "error": error,
            "raw": raw, "created_at": run_at}
