"""`agentlake schedule`: the recipes a team follows to ingest on every machine."""

import json
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from pipelines import schedule
from tests.conftest import run_cli as run_in_process


def run_cli(*args, home):
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "AGENTLAKE_HOME": str(home / "al")}
    return run_schedule(*args, env=env)


def test_systemd_timer_runs_the_same_interpreter_and_lake(tmp_path):
    r = schedule.recipe("systemd", 30, schedule.ingest_argv(["--lake", "s3://team/lake"]), tmp_path, tmp_path / "log")
    service, timer = (r.files[tmp_path / ".config/systemd/user" / f"agentlake-ingest.{k}"] for k in ("service", "timer"))
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert shlex.split(exec_start.split("=", 1)[1]) == [sys.executable, "-m", "pipelines.cli", "ingest", "--quiet",
                                                        "--lake", "s3://team/lake"]
    assert _settings(timer) == {"OnCalendar": ["*-*-* *:00/30:00"], "Persistent": ["true"]}
    assert r.enable[-1] == "systemctl --user enable --now agentlake-ingest.timer"


DAY_MINUTES = 24 * 60


def _settings(timer: str) -> dict[str, list[str]]:
    """The [Timer] section's settings, each with its values in order."""
    section = timer.split("[Timer]\n", 1)[1].split("\n[", 1)[0]
    out: dict[str, list[str]] = {}
    for line in section.splitlines():
        if line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def _timer(every: int, home: Path) -> str:
    return schedule.recipe("systemd", every, ["x"], home, home / "log").files[
        home / ".config/systemd/user/agentlake-ingest.timer"]


def test_a_timer_persists_only_on_a_calendar_which_keeps_every_interval_that_divides_a_day(tmp_path):
    """systemd.timer(5): Persistent= (a run missed while the machine was off or asleep is run when
    it is back) applies to OnCalendar= only. A timer on the calendar where one keeps the interval
    (it divides a day); else counted from the last run, without Persistent= and saying why."""
    for every in range(5, DAY_MINUTES + 1):
        timer = _timer(every, tmp_path)
        settings = _settings(timer)
        if DAY_MINUTES % every == 0:
            assert set(settings) == {"OnCalendar", "Persistent"} and settings["Persistent"] == ["true"], every
        else:
            assert settings == {"OnBootSec": ["5min"], "OnUnitActiveSec": [f"{every}min"]}, every
            assert "Persistent= applies to OnCalendar= only" in timer


def _elapses_in_a_day(expressions: list[str]) -> list[datetime]:
    """When systemd's own calendar parser says the expressions elapse on 2026-01-01 (UTC)."""
    start = datetime(2026, 1, 1)
    done = subprocess.run(["systemd-analyze", "calendar", "--base-time=2025-12-31 23:59:59 UTC",
                           f"--iterations={DAY_MINUTES // 5 + 1}", *expressions],
                          capture_output=True, text=True, env={"TZ": "UTC", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    times = {datetime.strptime(t, "%Y-%m-%d %H:%M:%S")
             for t in re.findall(r"(?:Next elapse|Iter\. #\d+): \w+ (\S+ \S+) UTC", done.stdout)}
    return sorted(t for t in times if start <= t < start + timedelta(days=1))


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd's calendar parser is not on this machine")
def test_systemd_reads_each_calendar_as_runs_the_interval_apart(tmp_path):
    for every in (e for e in range(5, DAY_MINUTES + 1) if DAY_MINUTES % e == 0):
        expected = [datetime(2026, 1, 1) + timedelta(minutes=m) for m in range(0, DAY_MINUTES, every)]
        assert _elapses_in_a_day(_settings(_timer(every, tmp_path))["OnCalendar"]) == expected, every


def test_cron_line_every_hour_and_every_minutes(tmp_path):
    hourly = schedule.recipe("cron", 120, ["agentlake", "ingest"], tmp_path, tmp_path / "log")
    assert next(iter(hourly.files.values())).startswith("0 */2 * * * agentlake ingest >> ")
    often = schedule.recipe("cron", 15, ["agentlake", "ingest"], tmp_path, tmp_path / "log")
    assert next(iter(often.files.values())).startswith("*/15 * * * * agentlake ingest")
    assert "# agentlake-ingest" in next(iter(often.files.values()))  # the enable command replaces it by this tag


def test_launchd_plist_is_valid_and_keeps_arguments_whole(tmp_path):
    argv = [sys.executable, "-m", "pipelines.cli", "ingest", "--home", str(tmp_path / "a & b")]
    r = schedule.recipe("launchd", 60, argv, tmp_path, tmp_path / "log")
    (path, text), = r.files.items()
    assert path.parent == tmp_path / "Library/LaunchAgents"
    plist = plistlib.loads(text.encode())
    assert plist["ProgramArguments"] == argv and plist["StartInterval"] == 3600


def test_bad_interval_and_kind_are_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="between 5 minutes"):
        schedule.recipe("cron", 1, ["x"], tmp_path, tmp_path)
    with pytest.raises(ValueError, match="unknown scheduler"):
        schedule.recipe("at", 60, ["x"], tmp_path, tmp_path)
    done = run_cli("--every", "2", home=tmp_path)
    assert done.returncode == 2 and "error: --every 2: must be between 5 minutes and 24 hours (1440)" in done.stderr


def test_cli_prints_by_default_and_install_writes_the_files(tmp_path):
    printed = run_cli("--kind", "cron", "--machine", "ana", home=tmp_path)
    assert printed.returncode == 0 and "--machine ana" in printed.stdout and "crontab -" in printed.stdout
    assert not (tmp_path / ".config").exists()  # printing installs nothing
    # the printed command to turn it on, run before the file it reads was written, changes nothing
    # (a team trial: it installed the crontab less any agentlake line); it says to write the file first
    assert "# then turn it on: once each file above is written as shown (`--install` writes them" in printed.stdout
    crontab = tmp_path / "bin"
    crontab.mkdir()
    (crontab / "crontab").write_text('#!/bin/sh\nif [ "$1" = -l ]; then echo "* * * * * x  # agentlake-ingest"; '
                                     'else cat > "$0.installed"; fi\n')
    (crontab / "crontab").chmod(0o755)
    enable = printed.stdout.rstrip("\n").splitlines()[-1]
    env = {**os.environ, "PATH": f"{crontab}:{os.environ['PATH']}"}
    assert subprocess.run(["sh", "-c", enable], env=env).returncode != 0
    assert not (crontab / "crontab.installed").exists()
    installed = run_cli("--kind", "launchd", "--install", home=tmp_path)  # no launchctl on this machine
    plist = tmp_path / "Library/LaunchAgents/dev.agentlake.ingest.plist"
    assert plist.exists() and f"wrote {plist}" in installed.stdout
    assert installed.returncode == 1 and "launchctl is not on this machine" in installed.stderr


@pytest.mark.parametrize("kind", ["cron", "systemd", "launchd"])
def test_the_printed_steps_make_a_new_homes_log_folder_first(tmp_path, kind):
    """A home not ingested into yet has no folder for the log: cron's `>> <home>/ingest.log` failed
    before agentlake started, every run, and logged nothing (a trial). The printed steps make it
    first (`--install` does), and say nothing of it once it is there."""
    home = tmp_path / "new home"
    printed = run_cli("--kind", kind, "--home", str(home), home=tmp_path)
    assert printed.returncode == 0 and not home.exists(), printed.stderr  # printing makes nothing
    steps = printed.stdout.split("# then turn it on:", 1)[1].splitlines()[1:]
    assert steps[0] == f"mkdir -p {shlex.quote(str(home))}" and len(steps) > 1
    if kind == "cron":  # the line itself runs as cron runs it, once its folder is made
        line = next(t for t in printed.stdout.splitlines() if t.endswith("# agentlake-ingest"))
        command = line.split(" ", 5)[5].replace("\\%", "%")
        subprocess.run(["sh", "-c", steps[0]], check=True)
        ran = subprocess.run(["sh", "-c", command], env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
        assert "sources: 0 ok" in (home / "ingest.log").read_text(), ran  # the run, logged
    home.mkdir(exist_ok=True)
    again = run_cli("--kind", kind, "--home", str(home), home=tmp_path)
    assert "mkdir -p" not in again.stdout


@pytest.mark.parametrize("every", [45, 90, 300])
def test_cron_refuses_intervals_it_cannot_keep(tmp_path, every):
    with pytest.raises(ValueError, match="cron cannot run every"):
        schedule.recipe("cron", every, ["x"], tmp_path, tmp_path)
    assert schedule.recipe("systemd", every, ["x"], tmp_path, tmp_path)  # a timer can


def test_the_timer_carries_the_home_and_lake_it_was_made_for(tmp_path, monkeypatch, capsys):
    """Issue 12, item 20: made with only $AGENTLAKE_HOME (and $AGENTLAKE_LAKE) set, the timer's
    run, which has none of this shell's variables, ingests into that home and lake and logs there."""
    from pipelines.cli import main, parser
    from warehouse.lake.config import load_layout

    home, lake = tmp_path / "al", tmp_path / "shared-lake"
    monkeypatch.setenv("AGENTLAKE_HOME", str(home))
    monkeypatch.setenv("AGENTLAKE_LAKE", str(lake))
    monkeypatch.setenv("AGENTLAKE_MACHINE", "ana-laptop")
    monkeypatch.delenv("AGENTLAKE_WAREHOUSE", raising=False)
    assert main(["schedule", "--kind", "systemd"]) == 0
    out = capsys.readouterr().out
    exec_start = next(line for line in out.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_start.split("=", 1)[1])
    assert argv[:3] == [sys.executable, "-m", "pipelines.cli"]
    args = parser().parse_args(argv[3:])
    scheduled = load_layout(args.home, args.lake, args.warehouse, machine=args.machine, user=args.user, env={})
    assert (scheduled.home, scheduled.lake, scheduled.machine) == (home, lake, "ana-laptop")
    assert f"StandardOutput=append:{home / 'ingest.log'}" in out

    # a lake named in the home's config.toml is not pinned: the scheduled run reads the same file
    monkeypatch.delenv("AGENTLAKE_LAKE")
    home.mkdir()
    (home / "config.toml").write_text(f'lake = "{lake}"\n')
    assert main(["schedule", "--kind", "cron", "--every", "30"]) == 0
    line = capsys.readouterr().out
    assert f"--home {home}" in line and "--lake" not in line


def test_the_timer_looks_where_the_schedule_was_told_to(tmp_path, monkeypatch, capsys):
    """The discovery flags given to `schedule` reach the scheduled ingest, as absolute paths (it
    runs from another folder): a machine set up with flags, not config.toml, is still read."""
    from pipelines.cli import main, parser

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTLAKE_HOME", str(tmp_path / "al"))
    monkeypatch.delenv("AGENTLAKE_LAKE", raising=False)
    assert main(["schedule", "--kind", "systemd", "--no-default", "--crush-root", "crush", "--db", "w/crush.db",
                 "--agent-home", "codex=codex-home", "--codewhale-home", "cw"]) == 0
    exec_start = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("ExecStart="))
    args = parser().parse_args(shlex.split(exec_start.split("=", 1)[1])[3:])
    assert (args.no_default, args.crush_root, args.db, args.agent_home, args.codewhale_home) == (
        True, [str(tmp_path / "crush")], [str(tmp_path / "w" / "crush.db")], [f"codex={tmp_path / 'codex-home'}"],
        [str(tmp_path / "cw")])
    assert main(["schedule", "--kind", "cron", "--agent-home", "claud=x"]) == 2  # named now, not at 3 a.m.
    assert "--agent-home wants AGENT=DIR" in capsys.readouterr().err


# -- the job's environment and each scheduler's quoting (a user's report: after an ingest with
# $CLAUDE_CONFIG_DIR, $CODEX_HOME, ... set, the scheduled job ran with cron's bare environment,
# found nothing and exited 0; and a `%` in a path broke the cron line and the systemd unit) -----

ROOT = Path(__file__).resolve().parent.parent
SECRETS = {"OPENAI_API_KEY": "sk-test-secret", "AWS_SECRET_ACCESS_KEY": "aws-secret",
           "AGENTLAKE_DASHBOARD_TOKEN": "dash-token", "GITHUB_TOKEN": "ghp_secret"}
NASTY = "a b%c'd\"e$f\\g\\%h\\\\i%%j ~k"  # a space, %, quotes, $, backslashes (before % too), ~


def cron_command(line: str) -> str:
    """What cron hands to `sh -c` for a crontab line (cronie's do_command.c): the five time
    fields dropped; `\\%` becomes `%`; the first other `%` ends the command (the rest is stdin)."""
    command = line.rstrip("\n").split(None, 5)[5]
    out, escaped = [], False
    for ch in command:
        if escaped:
            escaped = False
            if ch == "%":
                out[-1] = "%"
                continue
        elif ch == "\\":
            escaped = True
        elif ch == "%":
            break
        out.append(ch)
    return "".join(out)


def run_as_cron(line: str, home: Path) -> subprocess.CompletedProcess:
    """The line run as cron runs it: `/bin/sh -c` in $HOME with cron's bare environment."""
    env = {"HOME": str(home), "LOGNAME": "dev", "SHELL": "/bin/sh", "PATH": "/usr/bin:/bin"}
    return subprocess.run(["/bin/sh", "-c", cron_command(line)], env=env, cwd=home, capture_output=True, text=True)


def systemd_words(value: str, exec_line: bool) -> list[str]:
    """A unit file value as systemd reads it (systemd.syntax(7), systemd.service(5)): `%%` is a
    `%` (any other `%` is a specifier: a failure here), words split on blanks, double quotes with
    C escapes; on an ExecStart= line `$$` is a `$`."""
    assert not re.search(r"%[^%]|%$", value.replace("%%", "")), f"a bare specifier in {value!r}"
    value = value.replace("%%", "\0")
    words, word, quoted, i = [], None, False, 0
    while i < len(value):
        ch = value[i]
        if ch == "\\":
            word = (word or "") + {"n": "\n", "t": "\t"}.get(value[i + 1], value[i + 1])
            i += 2
            continue
        if ch == '"':
            quoted = not quoted
            word = word or ""
        elif ch in " \t" and not quoted:
            if word is not None:
                words.append(word)
            word = None
        else:
            word = (word or "") + ch
        i += 1
    assert not quoted, f"an unterminated quote in {value!r}"
    if word is not None:
        words.append(word)
    words = [w.replace("\0", "%") for w in words]
    return [re.sub(r"\$\$", "$", w) for w in words] if exec_line else words


def service_of(text: str) -> tuple[dict[str, str], list[str], str]:
    """(Environment=, ExecStart= argv, StandardOutput= path) of a printed or written unit."""
    env, argv, out = {}, None, None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key == "Environment":
            for assignment in systemd_words(value, exec_line=False):
                name, _, val = assignment.partition("=")
                env[name] = val
        elif key == "ExecStart":
            argv = systemd_words(value, exec_line=True)
        elif key == "StandardOutput":
            assert value.startswith("append:")  # a path as it stands, specifiers expanded
            out = value[len("append:"):]
            assert not re.search(r"%[^%]|%$", out.replace("%%", "")), f"a bare specifier in {out!r}"
            out = out.replace("%%", "%")
    return env, argv, out


def schedule_env(home: Path, **extra) -> dict:
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", **SECRETS, **extra}
    return {k: str(v) for k, v in env.items()}


def run_schedule(*args, env):
    """`agentlake schedule ARGS` in this process with `env` as its whole environment (what a
    shell started with only those variables gives it): the recipe is made from the environment
    it is given; the job's own process is started where the scheduler's environment is the
    point (`run_as_cron`)."""
    return run_in_process("schedule", *args, env=env, replace_env=True)


def test_every_variable_discovery_reads_is_carried_and_no_other():
    """The list the job carries is the list the code reads: each agent's discovery, the home
    they share, agentlake's own layout; never a token or a credential."""
    import importlib

    from transforms.sources import HOME_VARS

    def read_by(text: str) -> set[str]:
        names = set(re.findall(r'env(?:\.get\(|\[)\s*"([A-Z][A-Z0-9_]*)"', text))
        names |= set(re.findall(r'^ENV = "([A-Z][A-Z0-9_]*)"', text, re.M))
        for listed in re.findall(r"for var in \(([^)]*)\)", text):
            names |= set(re.findall(r'"([A-Z][A-Z0-9_]*)"', listed))
        return names

    read = set()
    for path in ROOT.glob("transforms/*/discover.py"):  # each agent's own list is what it reads
        declared = set(importlib.import_module(f"transforms.{path.parent.name}.discover").ENV_VARS)
        assert read_by(path.read_text()) - {"HOME"} == declared, (path, read_by(path.read_text()) ^ declared)
        read |= declared
    assert read_by((ROOT / "transforms/sources.py").read_text()) == set(HOME_VARS)
    read |= set(HOME_VARS)
    for path in (ROOT / "warehouse/lake/layout.py", ROOT / "warehouse/lake/config.py"):
        read |= read_by(path.read_text())
    assert {"CLAUDE_CONFIG_DIR", "CODEX_HOME", "CRUSH_GLOBAL_DATA", "CODEWHALE_HOME", "XDG_DATA_HOME",
            "QWEN_RUNTIME_DIR", "PI_CODING_AGENT_DIR", "AGENTLAKE_WAREHOUSE"} <= read  # the scan works
    assert read - {"HOME"} <= set(schedule.CARRIED), read - {"HOME"} - set(schedule.CARRIED)
    # read by pipelines.runner, by the AWS SDK inside pyarrow (where the lake's store is), and by the
    # merge (its DuckDB threads, how long a second writer waits: below)
    assert set(schedule.CARRIED) - read <= {"DAGSTER_HOME", *schedule.AWS_VARS, *schedule.TIME_VARS,
                                            "AGENTLAKE_THREADS", "AGENTLAKE_WRITER_WAIT"}
    # where an s3:// lake is, as warehouse.lake.storage and warehouse.lake.duckdb_settings read it, goes with the job
    lake = {*re.findall(r'env(?:iron)?\.get\("(AWS_[A-Z0-9_]*)"', (ROOT / "warehouse/lake/storage.py").read_text()),
            *re.findall(r'env\.get\("(AWS_[A-Z0-9_]*)"', (ROOT / "warehouse/lake/duckdb_settings.py").read_text())}
    assert {"AWS_ENDPOINT_URL", "AWS_REGION"} <= lake <= set(schedule.AWS_VARS), lake
    assert not set(schedule.CARRIED) & {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
    # each of agentlake's own variables the code reads is carried, or named as not (the job ran with
    # one DuckDB thread per core whatever $AGENTLAKE_THREADS said: a new user's trial)
    own = {name for folder in ("warehouse", "pipelines", "transforms") for path in (ROOT / folder).rglob("*.py")
           for name in re.findall(r'"(AGENTLAKE_[A-Z_]+)"', path.read_text())}
    assert {"AGENTLAKE_THREADS", "AGENTLAKE_WRITER_WAIT", "AGENTLAKE_TZ"} <= own
    named = set(schedule.OWN_VARS) | set(schedule.NOT_CARRIED)
    assert own == named, own ^ named
    assert not set(schedule.OWN_VARS) & set(schedule.NOT_CARRIED)

    environ = {**SECRETS, "PATH": "/usr/bin", "CODEX_HOME": "/c", "KILO_DB": "", "HOME": "/home/dev",
               "AGENTLAKE_MACHINE": "ana", "AWS_ACCESS_KEY_ID": "AKIA", "SHELL": "/bin/zsh"}
    assert schedule.job_env(environ, home="/home/dev") == {"AGENTLAKE_MACHINE": "ana", "CODEX_HOME": "/c"}
    # a $HOME that is not the account's (which every scheduler sets) is carried too
    assert schedule.job_env(environ, home="/home/other")["HOME"] == "/home/dev"


def test_cron_job_runs_with_the_agents_variables_and_finds_their_sessions(tmp_path, shared_duckdb_dir):
    """End to end: sessions only $CLAUDE_CONFIG_DIR and $CODEX_HOME point at (both paths with a
    space and a `%`), an agentlake home with a `%`; the printed cron line, run as cron runs it
    (its `%` rule, `sh -c`, cron's bare environment), ingests both agents into that home."""
    from transforms.synth.claude import generate_home as claude_home
    from transforms.synth.codex import generate_home as codex_home

    user = tmp_path / "user"
    user.mkdir()
    (user / ".duckdb").symlink_to(shared_duckdb_dir, target_is_directory=True)
    claude, codex = tmp_path / "claude 100%d", tmp_path / "co'dex %s home"
    claude_home(claude, sessions=2, seed=3)
    codex_home(codex, sessions=2, seed=4)
    home = tmp_path / "al h%ome"
    home.mkdir()  # the user's first ingest by hand made it
    env = schedule_env(user, AGENTLAKE_HOME=home, AGENTLAKE_MACHINE="ana laptop", CLAUDE_CONFIG_DIR=claude,
                       CODEX_HOME=codex)
    printed = run_schedule("--kind", "cron", "--every", "30", env=env)
    assert printed.returncode == 0, printed.stderr
    line = next(x for x in printed.stdout.splitlines() if x.endswith("# agentlake-ingest"))

    ran = run_as_cron(line, user)
    assert ran.returncode == 0, ran.stderr
    log = (home / "ingest.log").read_text()
    assert "no sources found" not in log
    found = run_in_process("sql", "--home", home, "--format", "json",
                           "SELECT provider, machine, COUNT(*) > 0 AS any FROM sessions GROUP BY ALL ORDER BY 1",
                           env={**env, "CLAUDE_CONFIG_DIR": "/nowhere", "CODEX_HOME": "/nowhere"}, replace_env=True)
    assert json.loads(found.stdout) == [{"provider": "claude", "machine": "ana-laptop", "any": True},
                                        {"provider": "codex", "machine": "ana-laptop", "any": True}], found.stderr
    assert "$CLAUDE_CONFIG_DIR" in printed.stdout and "$CODEX_HOME" in printed.stdout  # and it says so
    assert not any(secret in printed.stdout for secret in SECRETS.values())


def test_cron_line_gives_the_shell_every_value_exactly(tmp_path):
    """Values with spaces, quotes, `$`, `~` and backslashes before a `%` reach the command
    whole, and the log lands where it was named."""
    dump = "import json, os, sys; print(json.dumps([sys.argv[1:], {k: os.environ.get(k) for k in sys.argv[1:4]}]))"
    names = ["CODEX_HOME", "CLAUDE_CONFIG_DIR", "XDG_DATA_HOME"]
    env = {"CODEX_HOME": NASTY, "CLAUDE_CONFIG_DIR": "/tmp/my claude", "XDG_DATA_HOME": "%"}
    log = tmp_path / "lo%g d'ir" / "ingest.log"
    log.parent.mkdir()
    r = schedule.recipe("cron", 15, [sys.executable, "-c", dump, *names, NASTY], tmp_path, log, env=env)
    line = next(iter(r.files.values()))
    ran = run_as_cron(line, tmp_path)
    assert ran.returncode == 0, ran.stderr
    argv, seen = json.loads(log.read_text())
    assert argv == [*names, NASTY] and seen == env


def test_systemd_unit_carries_the_variables_in_its_own_syntax(tmp_path):
    home = tmp_path / "al h%ome"
    env = schedule_env(tmp_path, AGENTLAKE_HOME=home, CODEX_HOME=NASTY, CLAUDE_CONFIG_DIR="/tmp/my claude")
    printed = run_schedule("--kind", "systemd", env=env)
    assert printed.returncode == 0, printed.stderr
    assert "$CODEX_HOME" in printed.stdout and not any(s in printed.stdout for s in SECRETS.values())
    variables, argv, out = service_of(printed.stdout)
    assert variables == {"AGENTLAKE_HOME": str(home), "CLAUDE_CONFIG_DIR": "/tmp/my claude", "CODEX_HOME": NASTY,
                         "HOME": str(tmp_path)}
    assert argv[argv.index("--home") + 1] == str(home) and out == str(home / "ingest.log")

    # the same through systemd's own parser, where it is installed: no warning, no error
    installed = run_schedule("--kind", "systemd", "--install", env=env)
    service = tmp_path / ".config/systemd/user/agentlake-ingest.service"
    assert service.exists() and home.is_dir(), installed.stderr  # systemd makes no folder for the log
    if shutil.which("systemd-analyze"):
        verified = subprocess.run(["systemd-analyze", "verify", str(service)], capture_output=True, text=True)
        assert verified.returncode == 0 and "agentlake-ingest.service" not in verified.stderr, verified.stderr


def test_launchd_plist_carries_the_variables(tmp_path):
    home = tmp_path / "al h%ome & co"
    env = schedule_env(tmp_path, AGENTLAKE_HOME=home, CODEX_HOME=NASTY + " <&>", GOOSE_PATH_ROOT="/g")
    printed = run_schedule("--kind", "launchd", env=env)
    assert printed.returncode == 0, printed.stderr
    text = printed.stdout.split("\n<?xml", 1)[1].split("\n# then turn it on:")[0]
    plist = plistlib.loads(("<?xml" + text).encode())
    assert plist["EnvironmentVariables"] == {"AGENTLAKE_HOME": str(home), "CODEX_HOME": NASTY + " <&>",
                                             "GOOSE_PATH_ROOT": "/g", "HOME": str(tmp_path)}
    assert plist["ProgramArguments"][-2:] == ["--home", str(home)]
    assert plist["StandardOutPath"] == str(home / "ingest.log")


def test_no_variables_set_says_so_and_a_line_break_is_refused(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "AGENTLAKE_HOME": str(tmp_path / "al")}
    printed = run_schedule("--kind", "cron", env=env)
    line = next(x for x in printed.stdout.splitlines() if x.endswith("# agentlake-ingest"))
    assert "CODEX_HOME" not in line and "no agent location variable" in printed.stdout
    broken = run_schedule("--kind", "cron", env={**env, "CODEX_HOME": "/a\n* * * * * rm -rf ~"})
    assert broken.returncode == 2 and "$CODEX_HOME" in broken.stderr and "line break" in broken.stderr
    assert "rm -rf" not in broken.stdout


def test_the_job_goes_to_the_same_object_store_and_never_gets_the_keys(tmp_path):
    """A team lead's report: `agentlake schedule` dropped $AWS_ENDPOINT_URL (README's way to name
    a MinIO), $AWS_PROFILE and $AWS_REGION, so the scheduled run would write elsewhere. They are
    carried, in each scheduler's syntax, and named in the note; the keys never are."""
    where = {"AWS_ENDPOINT_URL": "http://minio.internal:9000", "AWS_PROFILE": "agentlake team",
             "AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-1",
             "AWS_CONFIG_FILE": str(tmp_path / "aws 100%" / "config"),
             "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "aws 100%" / "credentials")}
    keys = {"AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCY",
            "AWS_SESSION_TOKEN": "FwoGZXIvYXdzEXAMPLETOKEN"}
    env = schedule_env(tmp_path, AGENTLAKE_HOME=tmp_path / "al", **where, **keys)

    printed = run_schedule("--kind", "systemd", env=env)
    assert printed.returncode == 0, printed.stderr
    variables, _, _ = service_of(printed.stdout)
    assert {k: variables.get(k) for k in where} == where
    note = printed.stdout.splitlines()[0]
    assert all(f"${name}" in note.split("never")[0] for name in where), note
    assert "$AWS_SECRET_ACCESS_KEY" in note.split("never")[1]  # said to be left out, by name only
    assert not any(value in printed.stdout for value in [*keys.values(), *SECRETS.values()])

    cron = run_schedule("--kind", "cron", "--every", "30", env=env)
    line = next(x for x in cron.stdout.splitlines() if x.endswith("# agentlake-ingest"))
    dump = "import json, os; print(json.dumps({k: v for k, v in os.environ.items() if k.startswith('AWS_')}))"
    log = tmp_path / "al" / "ingest.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    probe = line.replace(" -m pipelines.cli ingest ", f" -c {shlex.quote(dump)} ", 1)  # the job's interpreter, dumping
    assert probe != line
    ran = run_as_cron(probe, tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(log.read_text().splitlines()[-1]) == where  # what the job's process sees

    plist = run_schedule("--kind", "launchd", env=env).stdout.split("\n<?xml", 1)[1].split("\n# then turn it on:")[0]
    assert {k: v for k, v in plistlib.loads(("<?xml" + plist).encode())["EnvironmentVariables"].items()
            if k.startswith("AWS_")} == where
