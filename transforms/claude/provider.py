"""Claude Code behind the provider interface. A source is one project directory
(`<root>/projects/<slug>/`): every transcript in it, sub-agents included.

Transcripts are append-only, so each is read from where the last run stopped (reader.py).
Claude Code deletes transcripts after `cleanupPeriodDays` (30 by default): a transcript that
is gone from the disk keeps its rows from the cache, so the lake does not lose its history.
"""

from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.claude import discover as cc_discover
from transforms.claude.normalise import PROVIDER, SYNTHETIC, Context, normalise, response_key
from transforms.claude.reader import FileRead, cached_files, read_jsonl
from transforms.claude.tools import CALL_TYPES, RESULT_TYPES, blocks_of
from transforms.provider import AgentProvider, Extract, SourceError
from transforms.sources import Source, file_fingerprint, listing_problem

META_SUFFIX = ".meta.json"


class ClaudeProvider(AgentProvider):
    name = PROVIDER
    discovery = cc_discover

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(*(str(p) for d in _dirs(source) for p in cc_discover.transcripts(Path(d))))

    # a first landing into a lake passes `cached_notes` (warehouse.land.ingest): what the cache
    # holds was said to the lake it was read for
    takes_cached_notes = True
    # `--full-refresh` passes `full_refresh`: every transcript on the disk is read again from its first
    # byte (the cache of what was read keeps those gone from the disk, which it alone still holds)
    takes_full_refresh = True

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None,
                cached_notes: bool = False, full_refresh: bool = False) -> Extract:
        root = Path(source.path)
        if not root.is_dir():
            raise SourceError(f"the Claude Code project directory {root} is gone")
        ctx = Context(source.source_id, source.project_path, run_at)
        files, unreadable, unlisted, kept_older = [], [], [], set()
        cached = {f.rel: f for f in cached_files(cache_dir)}
        for rel, (size, inode, path) in _larger_copies(source, unlisted).items():
            before = cached.get(rel)
            if before and inode != before.inode and size < before.offset:  # another copy, older than the one
                kept_older.add(rel)  # read before (its home deleted that one, a backup holds less): kept from
                continue  # the cache, a full refresh's too
            try:
                files.append(read_jsonl(path, rel, cache_dir, fresh=full_refresh))
            except OSError as exc:  # one unreadable transcript must not fail the others
                unreadable.append((rel, f"cannot read the transcript: {exc}"))
        on_disk = {f.rel for f in files}
        gone = [f for rel, f in cached.items() if rel not in on_disk]
        metas = {k: v for d in reversed(_dirs(source)) if Path(d).is_dir() for k, v in agent_metas(Path(d)).items()}
        rows, findings, kept = normalise(files + gone, metas, ctx, cached_notes)
        findings.notes += list(dict.fromkeys(listing_problem(e, "transcripts") for e in unlisted))
        findings.unread = len(unreadable) + len(unlisted)  # not settled: read again next run
        skipped = kept_older | {rel for rel, _ in unreadable}  # not gone: an older copy, or a read that failed
        findings.gone_from_disk = [f.rel for f in gone if f.rel not in skipped]
        findings.gone_why = "Claude Code deletes old ones"
        if kept_older:
            findings.notes.append(f"{len(kept_older)} transcripts on disk only in older copies than the ones read "
                                  "before (a backup's): kept from the cache")
        # a run's warnings are those of the lines it read: an earlier run's were said then
        not_utf8 = sum(f.not_utf8 - (0 if cached_notes else f.not_utf8_before) for f in files + gone)
        findings.reported += 0 if cached_notes else sum(f.bad_before for f in files + gone)
        if not_utf8:
            findings.notes.append(f"{not_utf8} lines held bytes that are not UTF-8: read with U+FFFD in their place")
        findings.notes += [f"{rel}: {why} (in quarantine; read again next run)" for rel, why in unreadable]
        findings.explained += len(unreadable)  # its unfinished last lines: Findings.unfinished_lines
        rows["quarantine"] = quarantine_rows(files + gone, unreadable, ctx)
        return Extract(rows=rows, findings=findings, expected=expected_counts(kept))


def _dirs(source: Source) -> tuple[str, ...]:
    return getattr(source, "dirs", (source.path,))


def _larger_copies(source: Source, unlisted: list) -> dict[str, tuple[int, tuple | None, Path]]:
    """Each transcript by its path in the project directory, with its size and (device, inode):
    of its copies in several homes, the larger (a transcript only grows: the smaller is an older
    copy of it)."""
    chosen: dict[str, tuple[int, tuple | None, Path]] = {}
    for d in _dirs(source):
        root = Path(d)
        if d != source.path and not root.is_dir():  # a backup unmounted since discovery
            continue
        for path in cc_discover.transcripts(root, errors=unlisted):
            rel = path.relative_to(root).as_posix()
            try:
                st = path.stat()
                size, inode = st.st_size, (st.st_dev, st.st_ino)
            except OSError:
                size, inode = -1, None  # read_jsonl says why
            if rel not in chosen or size > chosen[rel][0]:
                chosen[rel] = (size, inode, path)
    return dict(sorted(chosen.items()))


def agent_metas(root: Path) -> dict[str, dict]:
    """`agent-<id>.meta.json` beside sub-agent transcripts, by sub-agent session id."""
    out = {}
    for path in cc_discover.transcripts(root, META_SUFFIX):
        try:
            meta = jsontext.loads(path.read_bytes().decode("utf-8", "replace"))
        except (OSError, ValueError, RecursionError):
            continue  # a title and an agent type at most: not worth failing for
        if isinstance(meta, dict) and path.name.startswith("agent-"):
            out[path.name[: -len(META_SUFFIX)]] = meta
    return out


def quarantine_rows(files: list[FileRead], unreadable: list[tuple[str, str]], ctx: Context) -> list[dict]:
    def row(rel, lineno, raw, error):
        return {"provider": PROVIDER, "source_id": ctx.source_id, "project_path": ctx.project_path,
                "source_table": rel, "source_rowid": lineno, "key": f"{rel}:{lineno}", "error": error,
                "raw": raw, "created_at": ctx.run_at}

    out = [row(f.rel, lineno, raw, error) for f in files for lineno, raw, error in f.bad]
    return out + [row(rel, 0, None, error) for rel, error in unreadable]


def expected_counts(kept: list) -> dict[str, int]:
    """What the kept message lines hold, counted on the lines themselves."""
    responses, calls, billed = set(), set(), 0
    for ln in kept:
        msg = ln.rec["message"]
        key = response_key(ln) or (ln.rel, ln.lineno)
        u = msg.get("usage")
        if isinstance(u, dict) and key not in responses:
            responses.add(key)
            if msg.get("model") != SYNTHETIC and ln.rec.get("isApiErrorMessage") is not True:
                its = u.get("iterations") if isinstance(u.get("iterations"), list) else []
                billed += 1 + sum(isinstance(i, dict) and i.get("type") == "advisor_message" for i in its)
        for b in blocks_of(msg.get("content")):
            if isinstance(b, dict) and b.get("type") in CALL_TYPES + RESULT_TYPES:
                call_id = b.get("id") if b.get("type") in CALL_TYPES else b.get("tool_use_id")
                calls.add((ln.session, call_id if isinstance(call_id, str) else None))
    return {
        "messages": len({(ln.session, response_key(ln) or (ln.rel, ln.lineno)) for ln in kept}),
        "parts": sum(len(blocks_of(ln.rec["message"].get("content"))) for ln in kept),
        "tool_calls": len(calls), "usage": billed,
    }
