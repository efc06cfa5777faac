"""Claude Code behind the provider interface. A source is one family of transcripts of a
project directory (`<root>/projects/<slug>/`: families.py), sub-agents included; the registry
lands a project's families together (transforms.bundle).

Transcripts are append-only, so each is read from where the last run stopped (reader.py).
Claude Code deletes transcripts after `cleanupPeriodDays` (30 by default): a transcript that
is gone from the disk keeps its rows from the cache, so the lake does not lose its history.
"""

import os
from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.claude import discover as cc_discover
from transforms.claude.families import larger_copies
from transforms.claude.normalise import PROVIDER, SYNTHETIC, Context, normalise, response_key
from transforms.claude.reader import FileRead, cached_files, read_jsonl
from transforms.claude.tools import CALL_TYPES, RESULT_TYPES, blocks_of
from transforms.provider import AgentProvider, DiscoverOptions, Extract, SourceError
from transforms.sources import Discovery, Source, file_fingerprint, listing_problem

META_SUFFIX = ".meta.json"


class ClaudeProvider(AgentProvider):
    name = PROVIDER
    discovery = cc_discover

    def discover(self, options: DiscoverOptions) -> Discovery:
        """Each project directory's families of transcripts (transforms.bundle lands them by
        project); the links that make them are kept in the project's cache under `cache_root`."""
        found = super().discover(options)
        sources = []
        for project in found.sources:
            cache = Path(options.cache_root) / f"{PROVIDER}-{project.source_id}" if options.cache_root else None
            sources += [project] if project.skip_reason else cc_discover.family_sources(project, cache)
        found.sources = sources
        return found

    def fingerprint(self, source: Source) -> str:
        """A family's is its files' stats as discovery took them: the extract reads what those
        sizes hold (see extract), so what is settled is what was read."""
        rels = getattr(source, "rels", None)
        if getattr(source, "discovered_print", None) is not None:
            return source.discovered_print
        if rels is not None:
            return file_fingerprint(*(os.path.join(d, rel) for d in _dirs(source) for rel in rels))
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
        rels = getattr(source, "rels", None)  # a family's files (families.py), else the directory's
        if rels is not None:
            cache_dir = Path(source.reader_cache) if source.reader_cache else None
        cached = {f.rel: f for f in cached_files(cache_dir, rels)}
        # a family reads each transcript up to the size discovery linked: a line appended since may
        # join it to another family (a replay's ids), and is read once the next discovery knows
        limits = dict(zip(rels, getattr(source, "sizes", ()))) if rels is not None else {}
        for rel, (sig, path) in larger_copies(_dirs(source), unlisted, rels).items():
            size, inode = (sig[0], sig[2:]) if sig else (-1, None)  # no stat: read_jsonl says why
            before = cached.get(rel)
            if before and inode != before.inode and size < before.offset:  # another copy, older than the one
                kept_older.add(rel)  # read before (its home deleted that one, a backup holds less): kept from
                continue  # the cache, a full refresh's too
            try:  # its cache as loaded above: loaded once
                files.append(read_jsonl(path, rel, cache_dir, fresh=full_refresh,
                                        loaded=before.cached if before else None, limit=limits.get(rel)))
            except OSError as exc:  # one unreadable transcript must not fail the others
                unreadable.append((rel, f"cannot read the transcript: {exc}"))
        on_disk = {f.rel for f in files}
        gone = [f for rel, f in cached.items() if rel not in on_disk]
        metas = {k: v for d in reversed(_dirs(source)) if Path(d).is_dir()
                 for k, v in agent_metas(Path(d), rels).items()}
        seen = dict(zip(rels, getattr(source, "seen", ()))) if rels is not None else None
        rows, findings, kept = normalise(files + gone, metas, ctx, cached_notes, seen)
        said = list(dict.fromkeys([*(listing_problem(e, "transcripts") for e in unlisted),
                                   *getattr(source, "unlisted", ())]))
        findings.notes += said
        findings.unread = len(unreadable) + len(said)  # not settled: read again next run
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


def agent_metas(root: Path, rels=None) -> dict[str, dict]:
    """`agent-<id>.meta.json` beside sub-agent transcripts, by sub-agent session id (`rels`: of
    those transcripts only)."""
    out = {}
    paths = (cc_discover.transcripts(root, META_SUFFIX) if rels is None
             else [root / f"{rel[: -len('.jsonl')]}{META_SUFFIX}" for rel in rels if rel.endswith(".jsonl")])
    for path in paths:
        if rels is not None and not path.is_file():  # none, or no file to open (a named pipe would wait)
            continue
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
