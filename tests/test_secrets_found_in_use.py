"""Issue 32 item 1: secret shapes, and places, found in use that still reached a team's lake.

The shapes join the recall corpus (tests/test_redaction.py's CASES, which
tests/test_secrets_recall.py measures): each is caught in prose, in JSON, in JSON in JSON and
after escapes, whole columns redact it as `redact_text` does, and the ordinary corpus (with the
look-alikes of these shapes added) keeps no false positive. The places are checked end to end:
a Codex rollout ingested in team mode into a shared-folder lake, its tables, marts, landing
files and the sources' state files.

As in tests/test_redaction.py, every fake secret is built at run time from a seeded generator
and split prefixes."""

import base64
import json
import random
import shlex
import string
from dataclasses import replace
from datetime import datetime, timezone
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import ingest, query
from tests.test_redaction import CASES, ESCAPES, Case
from tests.test_redaction import test_a_secret_after_an_escape_goes_and_the_json_still_parses as _after_an_escape
from tests.test_redaction import test_each_shape_is_caught_and_its_context_kept as _caught_in_context
from tests.test_secrets_recall import ORDINARY
from transforms import jsontext
from transforms.contract import DATA_TABLES
from transforms.redact import KINDS, Policy, find_secrets, redact_table, redact_text
from transforms.synth.codex import RolloutBuilder

RNG = random.Random(3220)
ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def _signature() -> str:
    """An HMAC-SHA256 as base64, as a SAS's `sig` holds it (44 characters, one `=`)."""
    return base64.b64encode(RNG.randbytes(32)).decode()


def _bash(script: str) -> str:
    """A Codex shell call's command as the tables hold it: its argv joined the POSIX way, so every
    `'` in the script comes out as `'"'"'` (transforms/codex/tools.py)."""
    return shlex.join(["bash", "-lc", script])


_SIG, _SIG_2, _SIG_3 = _signature(), _signature(), _signature()
_PW = [_rand(5) + "7" + _rand(6) for _ in range(8)]
_AMP, _AMP_2 = _rand(3) + "&" + _rand(8), _rand(8) + "&" + _rand(8)  # `.env` values with `&` in them
_BLOB = "https://acct.blob.core" + ".windows.net"

FOUND_IN_USE = (
    # an Azure SAS URL was kept whole: its signature goes, what it grants and until when stays
    Case("azure_sas", _BLOB + "/backups/db.sql.gz?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31T23:59:59Z"
         "&st=2026-01-01T00:00:00Z&spr=https&si" + "g=" + quote(_SIG, safe=""), (quote(_SIG, safe=""), _SIG[:40])),
    Case("azure_sas", "BlobEndpoint=" + _BLOB + "/;SharedAccessSignature=sv=2022-11-02&ss=b&srt=sco&sp=rl"
         "&se=2026-12-31T23:59:59Z&si" + "g=" + _SIG_2, (_SIG_2,)),
    Case("azure_sas", "se=2026-12-31T23%3A59Z&sp=r&sv=2022-11-02&sr=b&si" + "g=" + quote(_SIG_3, safe=""),
         (quote(_SIG_3, safe=""),)),
    # a password that holds a word such as `secret` was taken for a name (`github_token`)
    Case("secret_assignment", "DB_PASSWORD=Winter2024_" + "topsecret", ("Winter2024_" + "topsecret",)),
    Case("secret_assignment", "db_password: Autumn2023-" + "mysecret", ("Autumn2023-" + "mysecret",)),
    # a `.env` value with `&`, after a JSON-escaped newline (a file's text in `parts.raw`)
    # (an earlier rule took `API_TOKEN=`'s value up to its `&` only: what follows must go too)
    Case("secret_assignment", json.dumps({"output": "HOST=db\nDB_PASSWORD=" + _AMP + "\nPORT=5432\n"}),
         (_AMP, _AMP.split("&")[1])),
    Case("secret_assignment", json.dumps({"output": "HOST=db\r\nAPI_TOKEN=" + _AMP_2 + "\r\n"}),
         (_AMP_2, _AMP_2.split("&")[1])),
    # a Codex shell command: values quoted the POSIX way
    Case("secret_assignment", _bash(f"export DB_PASSWORD='{_PW[0]}' && ./migrate"), (_PW[0],)),
    Case("secret_assignment", _bash(f"PGPASSWORD='{_PW[1]}' psql -h db app"), (_PW[1],)),
    Case("secret_assignment", _bash(f"cat > config.yml <<EOF\ndb:\n  password: '{_PW[2]}'\nEOF"), (_PW[2],)),
    Case("secret_assignment", "sh -c 'export API_TOKEN='\\''" + _PW[3] + "'\\'''", (_PW[3],)),
    Case("cli_password", _bash(f"mysql -u root -p'{_PW[4]}' app < dump.sql"), (_PW[4],)),
    Case("cli_password", _bash(f"curl -u 'deploy:{_PW[5]}' https://api.example.com/v1"), (_PW[5],)),
    Case("cli_password", _bash(f"psql-migrate --password '{_PW[6]}' --host db"), (_PW[6],)),
)

# what these shapes look like in ordinary work, none a secret
LOOK_ALIKES = [
    "AZURE_STORAGE_SAS_TOKEN=$SAS_TOKEN",
    _BLOB + "/c/report.csv?sv=2022-11-02&sp=r&sig=<signature>",
    "https://example.com/feed?sig=abc123&v=2",
    "sig = inspect.signature(handler)",
    '{"sig": "ed25519", "alg": "EdDSA"}',
    "password = new_password",
    "token = refreshToken",
    "secret = settings.client_secret_v2",
    "DB_PASSWORD_FILE=/run/secrets/db_password",
    _bash("export DB_PASSWORD='$DB_PASSWORD' && ./migrate"),
    _bash("export PATH='/usr/local/bin:$PATH'"),
    _bash("grep -rn 'password' src/ | head"),
    json.dumps({"output": "HOST=db\nDB_PASSWORD=${DB_PASSWORD}\nPORT=5432\n"}),
    json.dumps({"output": "HOST=db\nDB_PASSWORD=\nPORT=5432\n"}),
]


def _encodings(text: str) -> list[str]:
    value = {"text": text, "n": 1}
    return [text, json.dumps(value), jsontext.dumps(value), json.dumps({"raw": json.dumps(value)})]


# --- the shapes ----------------------------------------------------------------------------


@pytest.mark.parametrize("case", FOUND_IN_USE, ids=lambda c: c.kind)
def test_each_shape_found_in_use_is_caught_and_its_context_kept(case):
    _caught_in_context(case)  # tests/test_redaction.py's checks, on these shapes


@pytest.mark.parametrize("prefix", ESCAPES, ids=repr)
@pytest.mark.parametrize("case", FOUND_IN_USE, ids=lambda c: c.kind)
def test_each_shape_found_in_use_goes_after_an_escape_and_the_json_still_parses(case, prefix):
    _after_an_escape(case, prefix)


def test_only_the_signature_of_a_sas_goes():
    redacted, _ = redact_text(FOUND_IN_USE[0].text)
    assert redacted == FOUND_IN_USE[0].text.rsplit("=", 1)[0] + "=[REDACTED:azure_sas]"


def test_recall_and_false_positives_with_the_shapes_found_in_use():
    """The figures docs/PRIVACY.md quotes (run with -s): the planted set with these shapes, each
    in every encoding, and the ordinary corpus with their look-alikes."""
    planted = CASES + FOUND_IN_USE
    missed = [(c.kind, encoded) for c in planted for encoded in _encodings(c.text)
              if any(secret in redact_text(encoded)[0] for secret in c.secrets)]
    ordinary = ORDINARY + LOOK_ALIKES
    hits = [(line, find_secrets(line)) for line in ordinary if find_secrets(line)]
    print(f"recall: {len(planted) - len({kind for kind, _ in missed})}/{len(planted)} shapes "
          f"({len(FOUND_IN_USE)} found in use), leaked: {len(missed)}; "
          f"false positives: {len(hits)}/{len(ordinary)} lines")
    assert missed == [] and hits == []
    assert {case.kind for case in planted} == KINDS  # every kind has a planted case


def test_whole_columns_redact_the_shapes_found_in_use_as_redact_text_does():
    """The column prefilter is wider than each new rule (transforms/redact.py, "whole columns")."""
    texts = [encoded for case in FOUND_IN_USE for encoded in _encodings(case.text)] * 3 + LOOK_ALIKES * 5
    done, _ = redact_table("parts", pa.table({"raw": texts}), Policy({"parts.raw": "redact"}))
    assert done.column("raw").to_pylist() == [redact_text(text)[0] for text in texts]


def test_aws_documented_example_key_is_redacted_on_purpose():
    """AWS's example key in ordinary docs is taken for a key: a false positive kept (docs/PRIVACY.md),
    since an access key id has no checksum to tell the example from a real one."""
    example = "AKIA" + "IOSFODNN7" + "EXAMPLE"
    assert redact_text(f"aws_access_key_id = {example}")[0] == "aws_access_key_id = [REDACTED:aws_access_key]"


# --- the places ----------------------------------------------------------------------------

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)


def _shared_folder_team(layout):
    """A shared-folder lake in team mode (`team = true` in config.toml): the state files are in it."""
    return replace(layout, team=True)


def test_codex_commands_env_files_and_paths_reach_no_table_mart_landing_or_state_file(layout, tmp_path):
    token = "gh" + "p_" + _rand(36)
    home = tmp_path / token / "codex"  # a token inside a path: it was found in `_state`
    env_text = "HOST=db\nDB_PASSWORD=" + _AMP + "\nPORT=5432\n"
    b = RolloutBuilder("0199a1b2-0000-7000-8000-00000000c0de", start=T0, cwd=str(tmp_path / token / "shop"))
    b.turn("gpt-5.3-codex")
    b.prompt("set up the database")
    b.call("shell", {"command": ["bash", "-lc", f"export DB_PASSWORD='{_PW[0]}' && ./migrate"]}, "c1")
    b.output("c1", json.dumps({"output": "migrated", "metadata": {"exit_code": 0, "duration_seconds": 0.3}}))
    b.call("shell", {"command": ["bash", "-lc", "cat .env"]}, "c2")
    b.output("c2", json.dumps({"output": env_text, "metadata": {"exit_code": 0, "duration_seconds": 0.1}}))
    b.call("shell", {"command": ["bash", "-lc", f"curl -u 'deploy:{_PW[5]}' {FOUND_IN_USE[0].text}"]}, "c3")
    b.output("c3", json.dumps({"output": "ok", "metadata": {"exit_code": 0, "duration_seconds": 0.2}}))
    b.tokens(1200, 0, 80)
    b.write(home)
    team = _shared_folder_team(layout)
    summary = ingest(team, homes={"codex": [home]})
    assert [r.status for r in summary.results] == ["ok"]
    secrets = [_PW[0], _PW[5], _AMP, _AMP.split("&")[1], quote(_SIG, safe=""), token]

    # the tables and the marts, every text value
    commands = [r[0] for r in query(team, "SELECT command FROM tool_calls WHERE command IS NOT NULL ORDER BY 1")]
    assert len(commands) == 3 and all("[REDACTED:" in c for c in commands if "cat .env" not in c)
    marts = [r[0] for r in query(team, "SELECT command FROM shell_commands WHERE command IS NOT NULL")]
    assert marts and all("[REDACTED:" in c for c in marts if "cat .env" not in c)
    names = [r[0] for r in query(team, "SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake' "
                                       "AND table_name NOT LIKE '\\_%' ESCAPE '\\'")]
    assert {t.name for t in DATA_TABLES} <= set(names) and "shell_commands" in names
    values = [v for name in names for row in query(team, f'SELECT * FROM "{name}"') for v in row if isinstance(v, str)]
    assert [s for s in secrets if any(s in v for v in values)] == []
    assert any("[REDACTED:secret_assignment]" in v for v in values)  # the `.env` text, in parts

    # the landing files as they lie in the shared folder (`parts.raw` held the `.env` value)
    landed = [v for f in sorted((team.lake / "_landing").rglob("*.parquet"))
              for column in pq.read_table(f).columns if pa.types.is_string(column.type)
              for v in column.to_pylist() if v]
    assert landed and [s for s in secrets if any(s in v for v in landed)] == []

    # the sources' state files, beside the landing files: their paths lose the token too
    states = sorted(team.state_dir.glob("*.json"))
    assert states and all(token not in f.read_text() for f in states)
    assert all("[REDACTED:github_token]" in json.loads(f.read_text())["path"] for f in states)


def test_a_failed_sources_error_in_a_state_file_loses_its_secrets(layout, tmp_path):
    token = "gh" + "p_" + _rand(36)
    store = tmp_path / token / "shop" / ".crush" / "crush.db"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"not a database at all, " * 200)
    team = _shared_folder_team(layout)
    summary = ingest(team, store, marts=False)
    assert [r.status for r in summary.results] == ["failed"]
    state = json.loads(next(team.state_dir.glob("crush-*.json")).read_text())
    assert state["failed"] and token not in json.dumps(state)
    # the same source failed again: reported from its state, still without the token
    again = ingest(team, store, marts=False)
    assert [r.status for r in again.results] == ["failed"] and token not in again.results[0].error


def test_a_local_lake_keeps_its_state_as_it_is(layout, tmp_path):
    """Outside team mode nothing leaves the laptop: the state keeps the error as it was."""
    token = "gh" + "p_" + _rand(36)
    store = tmp_path / token / "shop" / ".crush" / "crush.db"
    store.parent.mkdir(parents=True)
    store.write_bytes(b"not a database at all, " * 200)
    ingest(layout, store, marts=False)
    state = json.loads(next(layout.state_dir.glob("crush-*.json")).read_text())
    assert str(store) in state["failed"]


def test_team_mode_turned_on_lands_again_what_was_landed_without_it_and_no_project_is_named_after_a_secret(
        layout, tmp_path):
    """A team lead's trial: a laptop that ran without team mode, then with it, kept every secret it
    had landed in the shared folder ("35 unchanged"); and a token in a project folder's name was
    the project's slug, lower-cased (an AWS key given back whole by upper case), in the tables,
    the landing files, the state files and the lake's folder names."""
    from tests.conftest import T0 as CRUSH_T0, Project, add_message, add_session, assistant
    from transforms.synth.crush_parts import text_part

    token, key = "gh" + "p_" + _rand(36), "AKIA" + _rand(16, string.ascii_uppercase + string.digits)
    p = Project(tmp_path / "work", token)
    add_session(p.conn, "S", title="deploy", created_at=CRUSH_T0, cost=0.25)
    add_message(p.conn, "u", "S", "user", [text_part(f"use aws_access_key_id = {key} to deploy")], created_at=CRUSH_T0)
    assistant(p.conn, "a", "S", CRUSH_T0 + 1)
    p.close()
    plain = ingest(layout, p.db, marts=False)  # team mode off: the agent's own bytes
    assert [r.status for r in plain.results] == ["ok"]
    runs = layout.lake / "_landing" / layout.machine / layout.user / "_runs"
    (runs / "cut-short.parquet").write_bytes(b"PAR1 not a whole file")  # one the merge names: no stop for the others
    team = _shared_folder_team(layout)
    again = ingest(team, p.db)
    assert [r.status for r in again.results] == ["ok"]  # not "unchanged": landed again, redacted

    secrets = [token, token.lower(), key, key.lower()]
    landed = [v for f in sorted((team.lake / "_landing").rglob("*.parquet")) if f.name != "cut-short.parquet"
              for column in pq.read_table(f).columns if pa.types.is_string(column.type)
              for v in column.to_pylist() if v]
    assert landed and [s for s in secrets if any(s in v for v in landed)] == []
    assert query(team, "SELECT DISTINCT project FROM sessions") == [("redacted-github-token",)]
    values = [v for row in query(team, "SELECT * FROM sessions") + query(team, "SELECT * FROM daily_costs")
              for v in row if isinstance(v, str)]
    assert [v for v in values if any(s in v for s in secrets)] == []
    states = sorted(team.state_dir.glob("*.json"))
    assert states and [s for s in secrets if any(s in f.read_text() for f in states)] == []
    every_name = [str(f) for f in tmp_path.rglob("*") if "work" not in f.relative_to(tmp_path).parts[:1]]
    assert [name for name in every_name if any(s in name for s in secrets)] == []
    assert len(query(team, "SELECT DISTINCT run_id FROM sources")) == 2  # this run recorded, the damaged file aside
    # a rerun in team mode: unchanged now; the run log is read again only while a file is unread
    assert (team.state_dir / "runs-unredacted").exists()
    (runs / "cut-short.parquet").unlink()
    assert [r.status for r in ingest(team, p.db, marts=False).results] == ["unchanged"]
    assert not (team.state_dir / "runs-unredacted").exists()
    # a state an older release wrote says nothing of its redaction: taken as landed in its mode,
    # not every team's source landed again on upgrading
    for state in states:
        written = json.loads(state.read_text())
        written.pop("redacted")
        state.write_text(json.dumps(written))
    assert [r.status for r in ingest(team, p.db, marts=False).results] == ["unchanged"]
