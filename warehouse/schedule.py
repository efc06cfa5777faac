"""Scheduled ingestion on each engineer's machine: a systemd user timer, a cron line or a launchd
agent that runs `agentlake ingest --quiet` every so often.

Rendering is pure (the files' text by path); `install` writes them where the scheduler reads
them and returns the commands that turn them on. The scheduler runs the same interpreter
and home as the command that installed it, so a venv that is not on PATH still works.
"""

import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

KINDS = ("systemd", "cron", "launchd")
NAME = "agentlake-ingest"


@dataclass(frozen=True)
class Recipe:
    kind: str
    files: dict[Path, str]  # where the scheduler reads them -> their text
    enable: list[str]  # shell commands that turn the schedule on
    note: str


def default_kind(platform: str = sys.platform) -> str:
    return "launchd" if platform == "darwin" else "systemd" if platform.startswith("linux") else "cron"


def ingest_argv(extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", "ingest", "--quiet", *extra]


def recipe(kind: str, every_minutes: int, argv: list[str], user_home: Path, log: Path) -> Recipe:
    if kind not in KINDS:
        raise ValueError(f"unknown scheduler {kind!r}; known: {', '.join(KINDS)}")
    if not 5 <= every_minutes <= 24 * 60:
        raise ValueError("--every must be between 5 minutes and 24 hours")
    command = shlex.join(argv)
    return {"systemd": _systemd, "cron": _cron, "launchd": _launchd}[kind](every_minutes, argv, command,
                                                                          user_home, log)


def _systemd(every, argv, command, home, log) -> Recipe:
    units = home / ".config" / "systemd" / "user"
    service = (f"[Unit]\nDescription=agentlake: ingest coding-agent sessions into the lake\n\n"
               f"[Service]\nType=oneshot\nNice=10\nExecStart={command}\n"
               f"StandardOutput=append:{log}\nStandardError=append:{log}\n")
    timer = (f"[Unit]\nDescription=agentlake ingest every {every} minutes\n\n"
             f"[Timer]\nOnBootSec=5min\nOnUnitActiveSec={every}min\nPersistent=true\n\n"
             f"[Install]\nWantedBy=timers.target\n")
    return Recipe("systemd", {units / f"{NAME}.service": service, units / f"{NAME}.timer": timer},
                  ["systemctl --user daemon-reload", f"systemctl --user enable --now {NAME}.timer"],
                  f"check with: systemctl --user list-timers {NAME}.timer; logs in {log}")


def _cron(every, argv, command, home, log) -> Recipe:
    # cron steps restart every hour (minutes) or every day (hours): other intervals drift
    if (every < 60 and 60 % every) or (every >= 60 and (every % 60 or 24 % (every // 60))):
        raise ValueError(f"cron cannot run every {every} minutes evenly: use a divisor of 60 minutes "
                         "(5, 10, 15, 20, 30) or of 24 hours (60, 120, 180, 240, 360, ...), or systemd or launchd")
    spec = f"*/{every} * * * *" if every < 60 else f"0 */{every // 60} * * *"
    line = f"{spec} {command} >> {shlex.quote(str(log))} 2>&1  # {NAME}\n"
    target = home / ".config" / "agentlake" / "crontab.txt"
    return Recipe("cron", {target: line},
                  [f"(crontab -l 2>/dev/null | grep -v '# {NAME}'; cat {shlex.quote(str(target))}) | crontab -"],
                  f"the line replaces any earlier `# {NAME}` line in your crontab; logs in {log}")


def _launchd(every, argv, command, home, log) -> Recipe:
    label = f"dev.agentlake.{NAME.split('-', 1)[1]}"
    args = "".join(f"    <string>{_xml(a)}</string>\n" for a in argv)
    plist = ('<?xml version="1.0" encoding="UTF-8"?>\n'
             '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
             '<plist version="1.0">\n<dict>\n'
             f"  <key>Label</key><string>{label}</string>\n"
             f"  <key>ProgramArguments</key>\n  <array>\n{args}  </array>\n"
             f"  <key>StartInterval</key><integer>{every * 60}</integer>\n"
             "  <key>RunAtLoad</key><true/>\n  <key>LowPriorityIO</key><true/>\n"
             f"  <key>StandardOutPath</key><string>{_xml(str(log))}</string>\n"
             f"  <key>StandardErrorPath</key><string>{_xml(str(log))}</string>\n"
             "</dict>\n</plist>\n")
    target = home / "Library" / "LaunchAgents" / f"{label}.plist"
    return Recipe("launchd", {target: plist}, [f"launchctl bootstrap gui/$(id -u) {shlex.quote(str(target))}"],
                  f"check with: launchctl print gui/$(id -u)/{label}; logs in {log}")


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def install(r: Recipe) -> list[Path]:
    """Write the recipe's files (never the crontab or the scheduler's state: `enable` does that)."""
    for path, text in r.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(r.files)


def render(r: Recipe) -> str:
    out = [f"# {r.kind}: {r.note}"]
    for path, text in r.files.items():
        out += [f"\n# --- {path}", text.rstrip("\n")]
    out += ["\n# then turn it on:", *r.enable]
    return "\n".join(out) + "\n"
