"""Crush behind the provider interface: discover, fingerprint, extract."""

import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path

from transforms.crush import discover as crush_discover
from transforms.crush.normalise import PROVIDER, SourceContext, normalise_tables
from transforms.crush.snapshot import MIGRATIONS, read_snapshot
from transforms.provider import DiscoverOptions, Extract
from transforms.snapshot import take_snapshot
from transforms.sources import Discovery, Source, file_fingerprint

# Independent counts from the snapshot, with SQLite's own JSON parser, to reconcile against.
# canonical table -> (source table it needs, query)
_EXPECTED_SQL = {
    "sessions": ("sessions", "SELECT COUNT(*) FROM sessions"),
    "messages": ("messages", "SELECT COUNT(*) FROM messages"),
    "parts": (
        "messages",
        "SELECT COALESCE(SUM(json_array_length(parts)), 0) FROM messages"
        " WHERE json_valid(parts) AND json_type(parts) = 'array'",
    ),
    "file_versions": ("files", "SELECT COUNT(*) FROM files"),
    "read_files": ("read_files", "SELECT COUNT(*) FROM read_files"),
}


class CrushProvider:
    name = PROVIDER

    def discover(self, options: DiscoverOptions) -> Discovery:
        return crush_discover.discover(
            env=options.env,
            extra_roots=options.roots(PROVIDER),
            extra_dbs=options.stores(PROVIDER),
            use_default=options.use_default,
            project_names=options.project_names,
        )

    def fingerprint(self, source: Source) -> str:
        return file_fingerprint(source.path, source.path + "-wal")

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        snap = Path(workdir) / f"{source.source_id}.db"
        try:
            take_snapshot(source.path, snap)
            tables, version = read_snapshot(snap)
            expected = _expected_counts(snap, tables)
        finally:
            snap.unlink(missing_ok=True)
        ctx = SourceContext(source.source_id, source.project_path, run_at)
        rows, findings = normalise_tables(tables, ctx)
        if version is not None and version > max(MIGRATIONS):  # a Crush newer than this release
            findings.notes.append(f"Crush schema newer than this release knows (goose version {version}, newest "
                                  f"known {max(MIGRATIONS)}): read by the columns it knows, the others kept in "
                                  "extra_columns; upgrade agentlake")
        return Extract(
            rows=rows,
            findings=findings,
            schema_version=version,
            migrations=MIGRATIONS.get(version) if version else None,
            expected=expected,
        )


def _expected_counts(snap: Path, tables) -> dict[str, int]:
    with closing(sqlite3.connect(snap)) as conn:
        return {
            table: conn.execute(sql).fetchone()[0]
            for table, (needs, sql) in _EXPECTED_SQL.items()
            if needs in tables
        }
