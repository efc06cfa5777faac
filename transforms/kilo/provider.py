"""Kilo Code behind the provider interface. A source is one task folder (the VS Code extension
and the first CLI: transforms.kilo.normalise) or one Kilo CLI database (OpenCode's schema, read
by transforms.opencode's reader: the CLI is an OpenCode fork that kept its tables)."""

from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.findings import Findings
from transforms.kilo import discover as kilo_discover
from transforms.kilo.discover import PROVIDER, TASK_FILES
from transforms.kilo.normalise import Context, normalise, workspace_of
from transforms.opencode import normalise as oc_normalise
from transforms.opencode.store import read_store
from transforms.provider import AgentProvider, Extract, SourceError
from transforms.sources import Source, file_fingerprint

METADATA = "task_metadata.json"


class KiloProvider(AgentProvider):
    name = PROVIDER
    discovery = kilo_discover

    def fingerprint(self, source: Source) -> str:
        path = Path(source.path)
        if path.suffix == ".db":
            return file_fingerprint(str(path), f"{path}-wal")
        return file_fingerprint(*(str(path / f) for f in (*TASK_FILES, METADATA)))

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        if Path(source.path).suffix == ".db":
            return _cli_database(source, Path(workdir), run_at)
        return _task_folder(source, run_at)


def _cli_database(source: Source, workdir: Path, run_at: datetime) -> Extract:
    store = read_store(Path(source.path), workdir)
    rows, findings = oc_normalise.normalise(store, oc_normalise.Context(
        source.source_id, source.project_path, run_at, dict(source.project_names)))
    for table_rows in rows.values():  # OpenCode's reader names its own agent: these rows are Kilo's
        for row in table_rows:
            row["provider"] = PROVIDER
    return Extract(rows=rows, findings=findings, expected=oc_normalise.expected_counts(store))


def _task_folder(source: Source, run_at: datetime) -> Extract:
    """Kilo rewrites each file whole (safeWriteJson: a temp file renamed): one read each."""
    folder = Path(source.path)
    findings = Findings()
    quarantine: list[dict] = []
    docs = {}
    for name in (*TASK_FILES, METADATA):
        path = folder / name
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except FileNotFoundError:
            docs[name] = [] if name != METADATA else None
            continue
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc}") from None
        try:
            value = jsontext.loads(text)
        except (ValueError, RecursionError) as exc:
            value = None
            why = f"not valid JSON: {exc}"
        else:
            why = None if isinstance(value, list if name != METADATA else dict) else "not the JSON shape Kilo writes"
        if why:
            quarantine.append({"provider": PROVIDER, "source_id": source.source_id,
                               "project_path": source.project_path, "source_table": name, "source_rowid": 0,
                               "key": str(path), "error": why[:300], "raw": text, "created_at": run_at})
            value = [] if name != METADATA else None
        docs[name] = value
    api, ui = docs[TASK_FILES[0]], docs[TASK_FILES[1]]
    ctx = Context(source.source_id, folder.name, source.project_path or workspace_of(api) or "")
    rows = normalise(api, ui, ctx, findings, docs[METADATA])
    rows["quarantine"] = quarantine
    return Extract(rows=rows, findings=findings,
                   expected={"sessions": 1, "messages": len(api)})
