"""Scheduled ingestion on each engineer's machine: a systemd user timer, a cron line or a launchd
agent that runs `agentlake ingest --quiet` every so often.

Rendering is pure (the files' text by path); `install` writes them where the scheduler reads
them and returns the commands that turn them on. The scheduler runs the same interpreter
and home as the command that installed it, so a venv that is not on PATH still works.

A scheduler starts its jobs with a bare environment (cron: HOME, PATH=/usr/bin:/bin, SHELL,
LOGNAME): an agent whose data lives where a variable says ($CLAUDE_CONFIG_DIR, $CODEX_HOME,
$XDG_DATA_HOME, ...) would not be found, and the run would find nothing and succeed. So the job
carries the variables `agentlake ingest` reads to find things (`job_env`: the agents' data,
agentlake's home and lake, an s3:// lake's endpoint, region and AWS profile), as set when the
recipe is made, and nothing else from the environment: no token or credential is ever written
into a unit file, a crontab or a plist. Every value is written in the scheduler's own syntax:
cron's `%` is a line break unless written `\\%`, systemd's is a specifier unless written `%%`.
"""

import math
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from transforms.providers import env_vars
from warehouse.lake.storage import masked_url

KINDS = ("systemd", "cron", "launchd")
NAME = "agentlake-ingest"

# Where each agent keeps its data, as its discovery reads it (each transforms/*/discover.py's
# ENV_VARS, and transforms.sources.user_home's); tests/test_schedule.py checks that the code reads
# no other.
AGENT_VARS = tuple(v for v in env_vars() if v != "HOME")  # $HOME: see job_env
# agentlake's own that an ingest reads (warehouse.lake.layout, warehouse.lake.config: the flags the job is
# given win over them; the merge's DuckDB threads, warehouse.lake.duckdb_settings; how long a second
# writer waits, warehouse.lake.pg_catalog). Not those of NOT_CARRIED, nor $DAGSTER_HOME (an ingest does
# not run Dagster: pipelines.runner).
OWN_VARS = ("AGENTLAKE_HOME", "AGENTLAKE_LAKE", "AGENTLAKE_WAREHOUSE", "AGENTLAKE_MACHINE", "AGENTLAKE_USER",
            "AGENTLAKE_THREADS", "AGENTLAKE_WRITER_WAIT")
# secrets, and no business of an ingest (the dashboard's and the MCP server's tokens); a reader's
# days (report, dashboard); the center's check of its machines (pipelines.central)
NOT_CARRIED = ("AGENTLAKE_DASHBOARD_TOKEN", "AGENTLAKE_MCP_TOKEN", "AGENTLAKE_TZ", "AGENTLAKE_STALE_AFTER_HOURS")
# Where an s3:// lake is (warehouse.lake.storage, warehouse.lake.duckdb_settings) and where the AWS chain finds the
# credentials (pyarrow's AWS SDK): without them the job would write to another endpoint, region
# or profile. Never the credentials themselves (AWS_SECRETS).
ENDPOINT_VARS = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")  # URLs: one may hold `user:password@`
AWS_VARS = (*ENDPOINT_VARS, "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
            "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE")
AWS_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# The time zone a shell sets: Aider's chat history headers are local times (transforms/aider),
# read in the zone of the run; a scheduler runs the job in the system's.
TIME_VARS = ("TZ",)
CARRIED = AGENT_VARS + OWN_VARS + AWS_VARS + TIME_VARS  # and $HOME, when it is not the account's own (job_env)

_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # a tab is fine


@dataclass(frozen=True)
class Recipe:
    kind: str
    files: dict[Path, str]  # where the scheduler reads them -> their text
    enable: list[str]  # shell commands that turn the schedule on
    note: str
    log: Path | None = None  # where the job appends its output: its folder must exist


def default_kind(platform: str = sys.platform) -> str:
    return "launchd" if platform == "darwin" else "systemd" if platform.startswith("linux") else "cron"


def ingest_argv(extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "pipelines.cli", "ingest", "--quiet", *extra]


def account_home() -> str | None:
    """The home the scheduler gives the job: the account's, from the password database."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, AttributeError):
        return None


def job_env(environ: Mapping[str, str], home: str | None = None) -> dict[str, str]:
    """The variables the scheduled job needs to find what an ingest run here finds: those of
    CARRIED that are set (an empty one is unset to every agent), and $HOME when it is not
    `home` (default: the account's, which every scheduler sets). Sorted by name."""
    env = {name: environ[name] for name in CARRIED if environ.get(name)}
    own_home = home if home is not None else account_home()
    if environ.get("HOME") and environ["HOME"] != own_home:
        env["HOME"] = environ["HOME"]
    return dict(sorted(env.items()))


def recipe(kind: str, every_minutes: int, argv: list[str], user_home: Path, log: Path,
           env: Mapping[str, str] | None = None) -> Recipe:
    """`env`: the variables the job runs with (`job_env`); none by default."""
    if kind not in KINDS:
        raise ValueError(f"unknown scheduler {kind!r}; known: {', '.join(KINDS)}")
    if not 5 <= every_minutes <= 24 * 60:
        raise ValueError(f"--every {every_minutes}: must be between 5 minutes and 24 hours (1440)")
    env = dict(env or {})
    for name, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"{name!r} is not a variable name a scheduler can set")
        if name in ENDPOINT_VARS and "@" in value.split("?", 1)[0]:  # before anything prints the value
            raise ValueError(f"${name} {masked_url(value)!r} holds credentials, which the schedule would write "
                             "into its file: put them in the AWS credentials file (~/.aws/credentials) or a "
                             "profile ($AWS_PROFILE), and give the endpoint without them")
        _writable(f"${name}", value)
    for arg in argv:
        _writable("an argument", arg)
    _writable("the log path", str(log))
    made = {"systemd": _systemd, "cron": _cron, "launchd": _launchd}[kind](every_minutes, argv, env, user_home, log)
    said = []
    if env:
        said.append(f"the job runs with this shell's {', '.join(f'${n}' for n in env)} (the scheduler's own "
                    "environment has none of them; run `agentlake schedule` again after changing them)")
    if not set(env) & set(AGENT_VARS):
        said.append("no agent location variable ($CLAUDE_CONFIG_DIR, $CODEX_HOME, $XDG_DATA_HOME, ...) is set "
                    "here: the job looks where each agent keeps its data by default")
    if set(env) & set(AWS_VARS):
        said.append(f"never {', '.join(f'${n}' for n in AWS_SECRETS)}: the job finds credentials through "
                    "$AWS_PROFILE, ~/.aws/credentials or an instance role, not in this shell")
    return Recipe(made.kind, made.files, made.enable, "; ".join([*said, made.note]), log)


def _writable(what: str, value: str) -> None:
    # a line break ends a crontab line and a unit file's setting; no scheduler takes one
    if _CONTROL.search(value):
        raise ValueError(f"{what} holds a control character (a line break?), which no scheduler's file "
                         f"can carry: {value!r}")


# -- systemd: the unit file's own quoting (systemd.syntax(7), systemd.service(5)) -------------

def _systemd_text(text: str) -> str:
    """A value where specifiers are expanded: `%` is written `%%`."""
    return text.replace("%", "%%")


def _systemd_word(word: str) -> str:
    """One ExecStart= word: double-quoted with C escapes unless plain; `$` (the job's own
    variables are substituted at exec time) written `$$`; then `%` written `%%`."""
    if word and not re.search(r"[^\w@%+=:,./-]", word, re.ASCII):
        return _systemd_text(word)
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
    return _systemd_text(f'"{escaped}"')


def _systemd_env(name: str, value: str) -> str:
    """One Environment= line: quoted with C escapes; `$` means nothing there, `%` is a specifier."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return _systemd_text(f'Environment="{name}={escaped}"')


def _systemd(every, argv, env, home, log) -> Recipe:
    units = home / ".config" / "systemd" / "user"
    environment = "".join(_systemd_env(name, value) + "\n" for name, value in env.items())
    command = " ".join(map(_systemd_word, argv))
    service = (f"[Unit]\nDescription=agentlake: ingest coding-agent sessions into the lake\n\n"
               f"[Service]\nType=oneshot\nNice=10\n{environment}ExecStart={command}\n"
               f"StandardOutput=append:{_systemd_text(str(log))}\nStandardError=append:{_systemd_text(str(log))}\n")
    timer = (f"[Unit]\nDescription=agentlake ingest every {every} minutes\n\n"
             f"[Timer]\n{_timer_settings(every)}\n"
             f"[Install]\nWantedBy=timers.target\n")
    return Recipe("systemd", {units / f"{NAME}.service": service, units / f"{NAME}.timer": timer},
                  ["systemctl --user daemon-reload", f"systemctl --user enable --now {NAME}.timer"],
                  f"check with: systemctl --user list-timers {NAME}.timer; logs in {log}")


DAY_MINUTES = 24 * 60


def on_calendar(every: int) -> list[str]:
    """OnCalendar= expressions (systemd.time(7)) that together elapse every `every` minutes from
    midnight, local time; none when `every` does not divide a day (no calendar keeps it: the
    last run of a day would come sooner or later than the others)."""
    if DAY_MINUTES % every:
        return []
    if 60 % every == 0:  # every hour, or a divisor of one
        minutes = "00" if every == 60 else f"00/{every}"
        return [f"*-*-* *:{minutes}:00"]
    # the times come back to the same minute of the hour every `cycle` minutes, a whole number of
    # hours: each of the cycle's times repeats every that many hours (once a day takes no repeat)
    cycle = math.lcm(every, 60)
    repeat = f"/{cycle // 60}" if cycle < DAY_MINUTES else ""
    return [f"*-*-* {t // 60:02d}{repeat}:{t % 60:02d}:00" for t in range(0, cycle, every)]


def _timer_settings(every: int) -> str:
    """On the calendar, Persistent= runs at once a run the machine missed (off or asleep); it
    applies to OnCalendar= only (systemd.timer(5)). An interval no calendar keeps is counted from
    the last run instead: a run missed while off comes 5 minutes after boot."""
    calendar = on_calendar(every)
    if calendar:
        return "".join(f"OnCalendar={c}\n" for c in calendar) + "Persistent=true\n"
    return (f"# {every} minutes do not divide a day, so no calendar keeps them: counted from the last run,\n"
            "# the first 5 minutes after boot. No Persistent=: Persistent= applies to OnCalendar= only\n"
            f"OnBootSec=5min\nOnUnitActiveSec={every}min\n")


# -- cron: one line, run by `sh -c` after cron's own `%` rule (crontab(5)) ---------------------

def _cron_word(word: str) -> str:
    """A shell word for a crontab line. Cron reads `\\%` as `%` and any other `%` as the end of
    the command, before the shell sees it: every `%` of the line is written `\\%` (`_cron`), and
    a backslash of the word's own never stands right before a `%` or a backslash (the single
    quotes are closed and opened again between them: the shell reads `'a\\''%b'` as `a\\%b`)."""
    return re.sub(r"\\(?=[\\%])", r"\\''", shlex.quote(word))


def _cron(every, argv, env, home, log) -> Recipe:
    # cron steps restart every hour (minutes) or every day (hours): other intervals drift
    if (every < 60 and 60 % every) or (every >= 60 and (every % 60 or 24 % (every // 60))):
        raise ValueError(f"cron cannot run every {every} minutes evenly: use a divisor of 60 minutes "
                         "(5, 10, 15, 20, 30) or of 24 hours (60, 120, 180, 240, 360, ...), or systemd or launchd")
    spec = f"*/{every} * * * *" if every < 60 else f"0 */{every // 60} * * *"
    # the variables as `VAR=value` before the command: for this line only, not the whole crontab
    words = [f"{name}={_cron_word(value)}" for name, value in env.items()] + [_cron_word(a) for a in argv]
    command = f"{' '.join(words)} >> {_cron_word(str(log))} 2>&1".replace("%", "\\%")
    line = f"{spec} {command}  # {NAME}\n"
    target = home / ".config" / "agentlake" / "crontab.txt"
    return Recipe("cron", {target: line},
                  # `test -s` first: without the file, the pipe installed the crontab less its agentlake line
                  [f"test -s {shlex.quote(str(target))} && (crontab -l 2>/dev/null | grep -v '# {NAME}'; "
                   f"cat {shlex.quote(str(target))}) | crontab -"],
                  f"the line replaces any earlier `# {NAME}` line in your crontab; logs in {log}")


# -- launchd: a property list, no shell ---------------------------------------------------------

def _launchd(every, argv, env, home, log) -> Recipe:
    label = f"dev.agentlake.{NAME.split('-', 1)[1]}"
    args = "".join(f"    <string>{_xml(a)}</string>\n" for a in argv)
    variables = "".join(f"    <key>{_xml(name)}</key><string>{_xml(value)}</string>\n" for name, value in env.items())
    environment = f"  <key>EnvironmentVariables</key>\n  <dict>\n{variables}  </dict>\n" if env else ""
    plist = ('<?xml version="1.0" encoding="UTF-8"?>\n'
             '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">\n'
             '<plist version="1.0">\n<dict>\n'
             f"  <key>Label</key><string>{label}</string>\n"
             f"  <key>ProgramArguments</key>\n  <array>\n{args}  </array>\n"
             f"{environment}"
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
    """Write the recipe's files (never the crontab or the scheduler's state: `enable` does that),
    and make the log's folder (a home not yet ingested into): no scheduler makes it."""
    if r.log is not None:
        r.log.parent.mkdir(parents=True, exist_ok=True)
    for path, text in r.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(r.files)


def render(r: Recipe) -> str:
    out = [f"# {r.kind}: {r.note}"]
    for path, text in r.files.items():
        out += [f"\n# --- {path}", text.rstrip("\n")]
    # the log's folder, which no scheduler makes: a home not ingested into yet failed every run
    # on the log's redirect, and logged nothing (a trial; `install` makes it)
    folder = [f"mkdir -p {shlex.quote(str(r.log.parent))}"] if r.log is not None and not r.log.parent.is_dir() else []
    out += ["\n# then turn it on: once each file above is written as shown (`--install` writes them and does "
            "this):", *folder, *r.enable]
    return "\n".join(out) + "\n"
