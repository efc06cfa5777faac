"""Team mode end to end: secrets an agent saw never reach the lake, file contents are dropped
with their path, size and hash kept, and config.toml's per-column policy applies."""

import hashlib
from dataclasses import replace

import pytest

from tests.conftest import ingest_tables, query, run_cli, scalar
from tests.test_redaction import CASES
from transforms.contract import DATA_TABLES
from transforms.synth.crush import add_file, add_message, add_session
from transforms.synth.crush_parts import bash_output, text_part, tool_call_part, tool_result_part
from warehouse.lake.config import ConfigError, load_layout

T0 = 1767225600


def leaky_project(project):
    """Every known secret shape, where agents meet them: prompts, commands, tool output, files."""
    p = project("leaky")
    add_session(p.conn, "s", title="deploy with " + CASES[0].text, created_at=T0, cost=0.5)
    for i, case in enumerate(CASES):
        t = T0 + 10 * i
        add_message(p.conn, f"u{i}", "s", "user", [text_part(f"please use {case.text} now")], created_at=t)
        add_message(p.conn, f"a{i}", "s", "assistant", [tool_call_part(f"c{i}", "bash", {"command": f"echo '{case.text}'"})],
                    created_at=t + 1, model="claude-sonnet-4-5", provider="anthropic")
        add_message(p.conn, f"r{i}", "s", "tool", [tool_result_part(f"c{i}", "bash", bash_output(case.text))],
                    created_at=t + 2)
    env_file = "\n".join(c.text for c in CASES)
    add_file(p.conn, "f1", "s", str(p.path / ".env"), env_file, 1, created_at=T0 + 5)
    p.close()
    return p, env_file


def all_strings(layout) -> list[str]:
    out = []
    for table in DATA_TABLES:
        for row in query(layout, f'SELECT * FROM "{table.name}"'):
            out += [v for v in row if isinstance(v, str)]
    return out


def test_no_known_secret_reaches_a_team_lake(layout, project):
    p, env_file = leaky_project(project)
    summary = ingest_tables(replace(layout, team=True), p.db)
    assert summary.results[0].status == "ok"
    assert any("secrets redacted" in w for w in summary.results[0].warnings)
    strings = all_strings(layout)
    leaked = [(case.kind, secret) for case in CASES for secret in case.secrets if any(secret in s for s in strings)]
    assert leaked == []
    # what surrounds a secret is kept
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE text LIKE 'please use %[REDACTED:%'") == len(CASES)
    assert scalar(layout, "SELECT COUNT(*) FROM tool_calls WHERE command LIKE 'echo %REDACTED%'") == len(CASES)
    # file contents are dropped; path, size and hash stay, computed from the real content
    row = query(layout, "SELECT content, size_bytes, content_sha256, path FROM file_versions")[0]
    assert row == (None, len(env_file.encode()), hashlib.sha256(env_file.encode()).hexdigest(), str(p.path / ".env"))


def test_a_local_lake_keeps_everything(layout, project):
    p, env_file = leaky_project(project)
    ingest_tables(layout, p.db)  # local mode: the laptop's own lake
    assert not layout.team
    assert scalar(layout, "SELECT content FROM file_versions") == env_file
    assert scalar(layout, "SELECT COUNT(*) FROM parts WHERE text LIKE '%REDACTED%'") == 0


def test_config_sets_the_policy_per_column(tmp_path, project):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('team = true\n[privacy]\n"parts.text" = "hash"\n"tool_calls.command" = "drop"\n')
    layout = load_layout(home)
    assert layout.team and dict(layout.privacy) == {"parts.text": "hash", "tool_calls.command": "drop"}
    p, _ = leaky_project(project)
    ingest_tables(layout, p.db)
    texts = [r[0] for r in query(layout, "SELECT text FROM parts WHERE role = 'user'")]
    expected = {"sha256:" + hashlib.sha256(f"please use {c.text} now".encode()).hexdigest() for c in CASES}
    assert set(texts) == expected
    assert scalar(layout, "SELECT COUNT(command) FROM tool_calls") == 0


@pytest.mark.parametrize("privacy, message", [('"parts.nope" = "hash"', "nope"), ('"parts.text" = "burn"', "burn")])
def test_a_bad_privacy_setting_is_a_clear_error(tmp_path, privacy, message):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(f"[privacy]\n{privacy}\n")
    with pytest.raises(ConfigError, match=message):
        load_layout(home)


TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def _key_in_a_part_types_name(project):
    """A Crush store whose one message has a part of an unknown type, a key in its name."""
    p = project("odd")
    add_session(p.conn, "s", title="t", created_at=T0, cost=0.1)
    add_message(p.conn, "m", "s", "assistant", [{"type": f"custom-{TOKEN}", "data": {}}], created_at=T0,
                model="claude-sonnet-4-5", provider="anthropic")
    p.close()
    return p


def test_the_sources_run_log_is_redacted_too(layout, project):
    """Issue 12 item 16: a key inside an unknown part type's name reached `sources.warnings`."""
    token, p = TOKEN, _key_in_a_part_types_name(project)
    plain = ingest_tables(layout, p.db)
    assert any(token in w for w in plain.results[0].warnings)  # the unknown type is reported by name
    team = replace(layout, team=True, home=layout.home / "team", lake=layout.lake.parent / "team-lake",
                   warehouse=layout.home / "team" / "warehouse.ducklake")
    ingest_tables(team, p.db)
    logged = [v for row in query(team, "SELECT * FROM sources") for v in row if isinstance(v, str)]
    assert any("unknown part types" in v for v in logged)
    assert not any(token in v for v in logged)


def test_the_runs_kept_for_dagster_in_a_shared_folder_hold_no_secret(tmp_path, project):
    """A team's folder lake keeps each machine's state, the CLI's runs for Dagster among it: their
    warnings (an unknown part type's name holding a key) were written as the agent had them,
    beside a `sources` log that had them redacted. Nothing under the lake holds the key."""
    import json

    token, p = TOKEN, _key_in_a_part_types_name(project)
    lake = tmp_path / "shared-lake"
    ran = run_cli("ingest", "--home", tmp_path / "home", "--lake", lake, "--team", "--no-default", "--db", p.db)
    assert ran.returncode == 0, ran.stderr
    (kept,) = lake.glob("_state/*/cli-runs/*.json")
    record = json.loads(kept.read_text())
    assert "unknown part types kept raw" in json.dumps(record)  # said, without its secret
    leaked = [f for f in lake.rglob("*") if f.is_file() and token.encode() in f.read_bytes()]
    assert not leaked, leaked
