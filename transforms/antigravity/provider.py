"""Antigravity behind the provider interface. A source is one Antigravity CLI conversation
database, read through a snapshot (transforms.snapshot); its rows: transforms.antigravity.normalise."""

import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path

from transforms.antigravity import discover as ag_discover
from transforms.antigravity.discover import PROVIDER
from transforms.antigravity.normalise import Context, generation, normalise, session_meta
from transforms.findings import Findings
from transforms.projects import project_name
from transforms.provider import AgentProvider, Extract
from transforms.snapshot import SnapshotError, open_snapshot, take_snapshot
from transforms.sources import Source, file_fingerprint

TABLES = ("sessions", "usage", "quarantine")


class AntigravityProvider(AgentProvider):
    name = PROVIDER
    discovery = ag_discover

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path, f"{source.path}-wal")

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        snap = Path(workdir) / "antigravity.snapshot"
        take_snapshot(source.path, snap)
        try:
            conn, names = open_snapshot(snap, ("gen_metadata",), "an Antigravity CLI conversation")
            with closing(conn):
                rows = conn.execute("SELECT idx, data FROM gen_metadata ORDER BY idx").fetchall()
                meta = conn.execute("SELECT data FROM trajectory_metadata_blob LIMIT 1").fetchone() \
                    if "trajectory_metadata_blob" in names else None
        except sqlite3.DatabaseError as exc:
            raise SnapshotError(f"{source.path}: {exc}") from None
        finally:
            snap.unlink(missing_ok=True)
        findings = Findings()
        created, workspace = session_meta(meta[0] if meta and isinstance(meta[0], bytes) else None)
        ctx = Context(source.source_id, Path(source.path).stem, workspace or source.project_path)
        gens, quarantine = [], []
        for idx, blob in rows:
            try:
                g = generation(idx, blob if isinstance(blob, bytes) else b"")
            except ValueError as exc:  # not protobuf: kept whole, hex-encoded
                raw = blob.hex() if isinstance(blob, bytes) else str(blob)
                quarantine.append({"provider": PROVIDER, "source_id": source.source_id,
                                   "project_path": ctx.project_path, "source_table": "gen_metadata",
                                   "source_rowid": idx, "key": f"{source.path}:gen_metadata:{idx}",
                                   "error": f"not a GeneratorMetadata protobuf: {exc}", "raw": raw,
                                   "created_at": run_at})
                continue
            if g:
                gens.append(g)
        out = normalise(gens, created, ctx)
        undated = sum(1 for g in gens if g.at is None)
        if undated:
            findings.notes.append(f"{undated} generations without a readable time: dated at the conversation's start")
        out["quarantine"] = quarantine
        if workspace:  # the database names its workspace: its rows belong to that project
            project = project_name(workspace, dict(source.project_names))
            for table_rows in out.values():
                for row in table_rows:
                    row["project"] = project
        return Extract(rows={t: out.get(t, []) for t in TABLES}, findings=findings, expected={"sessions": 1})
