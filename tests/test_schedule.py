"""`agentlake schedule`: the recipes a team follows to ingest on every machine."""

import plistlib
import shlex
import subprocess
import sys

import pytest

from warehouse import schedule


def run_cli(*args, home):
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "AGENTLAKE_HOME": str(home / "al")}
    return subprocess.run([sys.executable, "-m", "pipelines.cli", "schedule", *args], env=env,
                          capture_output=True, text=True)


def test_systemd_timer_runs_the_same_interpreter_and_lake(tmp_path):
    r = schedule.recipe("systemd", 30, schedule.ingest_argv(["--lake", "s3://team/lake"]), tmp_path, tmp_path / "log")
    service, timer = (r.files[tmp_path / ".config/systemd/user" / f"agentlake-ingest.{k}"] for k in ("service", "timer"))
    exec_start = next(line for line in service.splitlines() if line.startswith("ExecStart="))
    assert shlex.split(exec_start.split("=", 1)[1]) == [sys.executable, "-m", "pipelines.cli", "ingest", "--quiet",
                                                        "--lake", "s3://team/lake"]
    assert "OnUnitActiveSec=30min" in timer and "Persistent=true" in timer
    assert r.enable[-1] == "systemctl --user enable --now agentlake-ingest.timer"


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
    assert done.returncode == 2 and "between 5 minutes" in done.stderr


def test_cli_prints_by_default_and_install_writes_the_files(tmp_path):
    printed = run_cli("--kind", "cron", "--machine", "ana", home=tmp_path)
    assert printed.returncode == 0 and "--machine ana" in printed.stdout and "crontab -" in printed.stdout
    assert not (tmp_path / ".config").exists()  # printing installs nothing
    installed = run_cli("--kind", "launchd", "--install", home=tmp_path)  # no launchctl on this machine
    plist = tmp_path / "Library/LaunchAgents/dev.agentlake.ingest.plist"
    assert plist.exists() and f"wrote {plist}" in installed.stdout
    assert installed.returncode == 1 and "launchctl is not on this machine" in installed.stderr


@pytest.mark.parametrize("every", [45, 90, 300])
def test_cron_refuses_intervals_it_cannot_keep(tmp_path, every):
    with pytest.raises(ValueError, match="cron cannot run every"):
        schedule.recipe("cron", every, ["x"], tmp_path, tmp_path)
    assert schedule.recipe("systemd", every, ["x"], tmp_path, tmp_path)  # a timer can


def test_the_timer_carries_the_home_and_lake_it_was_made_for(tmp_path, monkeypatch, capsys):
    """Issue 12, item 20: made with only $AGENTLAKE_HOME (and $AGENTLAKE_LAKE) set, the timer's
    run, which has none of this shell's variables, ingests into that home and lake and logs there."""
    from pipelines.cli import main, parser
    from warehouse.config import load_layout

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
