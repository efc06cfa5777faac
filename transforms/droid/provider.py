"""Factory Droid behind the provider interface. A source is one session: its transcript
(`<uuid>.jsonl`) and its settings (`<uuid>.settings.json`) beside it."""

from datetime import datetime
from pathlib import Path

from transforms import jsontext
from transforms.droid import discover as droid_discover
from transforms.droid.discover import PROVIDER, SETTINGS
from transforms.droid.normalise import Context, normalise, parse_lines
from transforms.findings import bad_line
from transforms.provider import AgentProvider, Extract, read_file
from transforms.sources import Source, file_fingerprint


class DroidProvider(AgentProvider):
    name = PROVIDER
    discovery = droid_discover

    def fingerprint(self, source: Source) -> str:
        transcript, settings = _files(source)
        return file_fingerprint(str(transcript), str(settings))

    def extract(self, source: Source, workdir: Path, run_at: datetime, cache_dir: Path | None = None) -> Extract:
        transcript, settings_path = _files(source)
        quarantine: list[dict] = []
        events = []
        if transcript.is_file():  # the transcript is appended to: one read is a consistent prefix
            data = read_file(transcript)
            events, bad = parse_lines(data)
            quarantine += [_quarantine(source, str(transcript), no, reason, text, run_at) for no, text, reason in bad]
        settings: dict = {}
        if settings_path.is_file():  # rewritten whole by Droid
            text = settings_path.read_bytes().decode("utf-8", "replace")
            try:
                doc = jsontext.loads(text)
            except (ValueError, RecursionError) as exc:
                doc = None
                quarantine.append(_quarantine(source, str(settings_path), 0, f"not valid JSON: {exc}"[:300], text,
                                              run_at))
            settings = doc if isinstance(doc, dict) else {}
        ctx = Context(source.source_id, source.identity or transcript.stem, source.project_path, run_at)
        rows, findings = normalise(events, settings, ctx)
        rows["quarantine"] = quarantine
        messages = {e.raw.get("id") or f"#{e.no}" for e in events
                    if e.type == "message" and isinstance(e.raw.get("message"), dict)}
        return Extract(rows=rows, findings=findings, expected={"sessions": 1, "messages": len(messages)})


def _files(source: Source) -> tuple[Path, Path]:
    path = Path(source.path)
    stem = path.name[: -len(SETTINGS)] if path.name.endswith(SETTINGS) else path.stem
    return path.with_name(f"{stem}.jsonl"), path.with_name(f"{stem}{SETTINGS}")


def _quarantine(source: Source, path: str, no: int, error: str, raw: str, run_at: datetime) -> dict:
    return bad_line(PROVIDER, source, Path(path).name, path, no, error, raw, run_at)
