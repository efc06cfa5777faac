"""Team-mode redaction: known secret shapes never reach the lake, and JSON stays JSON.

Every fake secret is built at run time from a seeded generator and split prefixes, so the
repository holds nothing a secret scanner would take for a real key."""

import base64
import copy
import hashlib
import json
import random
import string
from collections import Counter
from dataclasses import dataclass

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transforms import jsontext
from transforms.contract import ALL_TABLES
from transforms.redact import (
    KINDS,
    Policy,
    find_secrets,
    redact_rows,
    redact_text,
)

RNG = random.Random(20240601)
_CHUNK = 256  # values once scanned together by redact_rows: a column's edges stay tested
ALNUM = string.ascii_letters + string.digits


def _rand(n: int, alphabet: str = ALNUM) -> str:
    return "".join(RNG.choice(alphabet) for _ in range(n))


def _b64url(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Case:
    kind: str
    text: str  # what the agent saw
    secrets: tuple[str, ...]  # what must not reach the lake


def _token(kind: str, value: str) -> Case:
    return Case(kind, value, (value,))


def _pem(label: str, newline: str) -> Case:
    lines = [_rand(64, ALNUM + "+/") for _ in range(3)] + [_rand(20, ALNUM) + "=="]
    begin, end = "-----BEGIN " + label + " PRIVATE", "-----END " + label + " PRIVATE"
    text = newline.join([begin + " KEY-----", *lines, end + " KEY-----"])
    return Case("private_key", text, tuple(lines))


def _assignment(template: str, kind: str = "secret_assignment", value: str | None = None) -> Case:
    value = value or _rand(20)
    return Case(kind, template.format(value), (value,))


_PW, _BEARER, _BASIC_PW, _HOOK = _rand(14), _rand(40) + "7", _rand(12), _rand(24)
_AZURE = base64.b64encode(RNG.randbytes(64)).decode()  # 88 characters
_CLOUDANT = _rand(64, "0123456789abcdef")
_BASIC = base64.b64encode(("deploy:" + _BASIC_PW).encode()).decode()
_HOOK_PATH = "services/T" + _rand(8, string.ascii_uppercase) + "/B" + _rand(8, string.ascii_uppercase) + "/" + _HOOK
_SECRET_40 = "7" + _rand(39, ALNUM + "/+")  # an AWS secret access key: 40 characters of base64
_SESSION = "FwoGZXIvYXdz" + "EBYaD" + _rand(250, ALNUM + "/+")
_JWT = ".".join([_b64url({"alg": "HS256", "typ": "JWT"}), _b64url({"sub": _rand(12)}), _rand(43, ALNUM + "-_")])

CASES = (
    _token("aws_access_key", "AK" + "IA" + _rand(16, string.ascii_uppercase + string.digits)),
    _token("aws_access_key", "AS" + "IA" + _rand(16, string.ascii_uppercase + string.digits)),
    _assignment("aws_secret_access_key = {}", "aws_secret_key", _rand(40, ALNUM + "/+")),
    *(_token("github_token", "gh" + p + "_" + _rand(36)) for p in "pousr"),
    _token("github_token", "github" + "_pat_" + _rand(22) + "_" + _rand(59)),
    _token("openai_key", "sk" + "-" + _rand(20) + "4" + _rand(27)),
    _token("openai_key", "sk" + "-proj-" + _rand(40, ALNUM + "-_") + "9" + _rand(40)),
    _token("anthropic_key", "sk" + "-ant-api03-" + _rand(90, ALNUM + "-_") + "AA"),
    _token("slack_token", "xo" + "xb-" + _rand(12, string.digits) + "-" + _rand(13, string.digits) + "-" + _rand(24)),
    _token("slack_token", "xo" + "xp-" + _rand(12, string.digits) + "-" + _rand(32)),
    Case("slack_webhook", "https://hooks.slack" + ".com/" + _HOOK_PATH, (_HOOK,)),
    _token("google_api_key", "AI" + "za" + _rand(35, ALNUM + "-_")),
    *(_token("stripe_key", p + _rand(24)) for p in ("sk" + "_live_", "rk" + "_live_", "sk" + "_test_")),
    _token("gitlab_token", "gl" + "pat-" + _rand(20)),
    _token("npm_token", "np" + "m_" + _rand(36)),
    _token("huggingface_token", "h" + "f_" + _rand(34, string.ascii_letters)),
    _token("jwt", _JWT),
    _pem("RSA", "\n"),
    _pem("OPENSSH", "\\n"),  # as a JSON string shows it, literal backslash-n
    _pem("EC", "\r\n"),
    Case("url_password", "postgres://admin:" + _PW + "@db.internal:5432/app", (_PW,)),
    Case("auth_header", "curl -H 'Authorization: Bearer " + _BEARER + "' https://api.example.com", (_BEARER,)),
    Case("auth_header", "Authorization: Basic " + _BASIC, (_BASIC,)),
    Case("auth_header", "sent Bearer " + _BEARER[::-1] + " upstream", (_BEARER[::-1],)),
    _assignment("export DB_PASSWORD={}"),
    _assignment("API_KEY={}"),  # a .env line
    Case("secret_assignment", json.dumps({"password": _PW[::-1] + "xy"}), (_PW[::-1] + "xy",)),
    _assignment("client_secret: {}"),  # YAML
    _assignment("passwd: {}"),
    _assignment("secret={}"),
    _assignment("apikey: {}"),
    _assignment("token={}"),
    _assignment("access_token = '{}'"),
    _assignment('password = "correct horse {}"'),
    # issue 12 item 15: .env lines, flags, more keys and tokens, a URL password holding `@`
    _assignment("DB_PASS={}"),
    _assignment("MYSQL_PWD={}"),
    _assignment("DB_PASSWORD={}", value="Xq7" + _rand(4)),  # 7 characters
    _assignment("DB_PASSWORD={}", value=_rand(5) + "." + _rand(6)),
    _assignment("SECRET_KEY={}", value=_rand(6) + "&" + _rand(9)),
    _assignment("GITHUB_TOKEN={}", value=_rand(6) + "_" + _rand(9)),
    _assignment("export PGPASSWORD='{}'"),
    _assignment("ssh_passphrase: {}"),
    _assignment("ENCRYPTION_KEY={}", value=_rand(32, "0123456789abcdef")),  # only `key`: the entropy test
    _assignment('{{"signing_key": "{}"}}', value=_rand(20) + "9"),
    Case("cli_password", "curl -u deploy:" + _PW + " https://api.example.com/v1", (_PW,)),
    Case("cli_password", "mysql -h db -u root -p" + _PW[::-1] + " app", (_PW[::-1],)),
    Case("cli_password", "docker login -u bob -p " + _PW + "x registry.example.com", (_PW + "x",)),
    Case("cli_password", "aws configure set aws_secret_access_key " + _BASIC_PW + "Zk9", (_BASIC_PW + "Zk9",)),
    Case("cli_password", "sshpass -p " + _PW + "Q ssh deploy@host", (_PW + "Q",)),
    Case("cli_password", "psql-migrate --password " + _PW + "7 --host db", (_PW + "7",)),
    Case("cli_password", "npm config set //registry.npmjs.org/:_auth" + "Token " + _HOOK, (_HOOK,)),
    Case("url_password", "postgres://admin:p@ss" + _PW + "@db.internal:5432/app", ("p@ss" + _PW, "ss" + _PW)),
    Case("url_password", "git clone https://oauth2:" + _HOOK[::-1] + "@gitlab.example.com/g/r.git", (_HOOK[::-1],)),
    Case("azure_storage_key", "DefaultEndpointsProtocol=https;AccountName=acct;Account" + "Key="
         + _AZURE + ";EndpointSuffix=core.windows.net", (_AZURE,)),
    Case("azure_sas", "https://acct.blob.core" + ".windows.net/c/f?sv=2022-11-02&sp=r&si" + "g=" + _AZURE[:43] + "=", (_AZURE[:43],)),
    _token("slack_token", "xa" + "pp-1-A" + _rand(10, string.ascii_uppercase) + "-" + _rand(13, string.digits)
           + "-" + _rand(64, "0123456789abcdef")),
    _token("sendgrid", "S" + "G." + _rand(22, ALNUM + "_-") + "." + _rand(43, ALNUM + "_-")),
    _token("stripe_key", "wh" + "sec_" + _rand(32)),
    # detect-secrets' rules
    _token("artifactory", "AK" + "C" + _rand(20)),
    _token("discord", "M" + _rand(23) + "." + _rand(6) + "." + _rand(27)),
    _token("mailchimp", _rand(32, "0123456789abcdef") + "-u" + "s6"),
    _token("pypi_token", "py" + "pi-AgEIcHlwaS5vcmc" + _rand(70)),
    _token("square_oauth", "sq" + "0csp-" + _rand(43)),
    _token("telegram_token", "1234" + "56789:" + _rand(35)),
    _token("twilio", "A" + "C" + _rand(32, "0123456789abcdef")),
    _token("twilio", "S" + "K" + _rand(32, "0123456789abcdef")),
    _token("gitlab_token", "gl" + "rt-" + _rand(24)),
    _token("openai_key", "sk" + "-" + _rand(20) + "T3Blbk" + "FJ" + _rand(20)),
    Case("cloudant", "https://acct:" + _CLOUDANT + "@acct.cloud" + "ant.com", (_CLOUDANT,)),
    Case("softlayer", "https://api.soft" + "layer.com/soap/v3/" + _CLOUDANT, (_CLOUDANT,)),
    # AWS's secret access key and session token where no key names them (a team trial found them
    # in the shared lake): the console's CSV, `aws sts ... --output text` and `table`, the bare
    # output of `aws configure get aws_secret_access_key`; AWS's documented example key too
    Case("aws_secret_key", "Access key ID,Secret access key\n[id],wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",
         ("wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY",)),
    Case("aws_secret_key", "CREDENTIALS\t2026-12-02T14:00:00+00:00\t" + _SECRET_40 + "\t[token]", (_SECRET_40,)),
    Case("aws_secret_key", "|  SecretAccessKey                          |  " + _SECRET_40[::-1] + "  |",
         (_SECRET_40[::-1],)),
    _token("aws_secret_key", _SECRET_40.swapcase()),
    _token("aws_session_token", "IQoJb3JpZ2lu" + "X2VjE" + _rand(300, ALNUM + "/+") + "=="),
    _token("aws_session_token", _SESSION),
    Case("cli_password", "machine api.example.com login deploy password " + _PW + "n", (_PW + "n",)),
    Case("cli_password", "machine api.example.com\n  login deploy\n  password " + _PW[::-1] + "\n", (_PW[::-1],)),
)

FALSE_POSITIVES = (
    "Enter your password to continue",
    "password:",
    "passwords must be 8+ characters; the secret sauce is tokens",
    "token=${TOKEN}",
    "export TOKEN=$TOKEN",
    "password=<your-password>",
    "password: ********",
    "api_key: <API_KEY>",
    "self.password = password",
    "api_key = os.environ['OPENAI_API_KEY']",
    "token = get_token()",
    "password = settings.DB_PASSWORD",
    "max_tokens=4096000000",
    '{"input_tokens":123456789,"output_tokens":98765432}',
    "pip install sk-learn-compatible-estimators",
    "task-abcdefghij1234567890abc",
    "http://localhost:8080/path?x=1 and git@github.com:org/repo.git",
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer <token>",
    "a bearer token is sent in the header",
    "password: str",
    "token: Optional[str] = None",
    "-----BEGIN PUBLIC" + " KEY-----",
    "postgres://user:${DB_PASS}@db/app",
    # near the new rules: environment dumps, code, flags that are no secret
    "PWD=/home/user/project OLDPWD=/tmp",
    "bypass=true compass=north",
    "MAX_TOKENS=4096 TOKENIZERS_PARALLELISM=false",
    'sort_key = "created_at"; primary_key=True; cache_key = "user:123"',
    "idempotency_key=9b2f0c1e-4a3d-4f7e-9c1a-2b3c4d5e6f70",
    "KEY_FILE=/etc/ssl/private/server.key",
    "credentials: ./service-account.json",
    "password=None token: bool auth: required",
    "docker run -u 1000:1000 img && docker exec -u root:root c sh",
    "git push -u origin main",
    "mysql -h db -P 3306 -u root -p app",
    "echo $PW | docker login --password-stdin -u bob",
    "aws configure set region us-east-1",
    "sort(key=lambda row: row.created_at)",
    "DB_PASSWORD=os.environ.get",
    # near the standalone AWS secret: hashes, paths, base64 that is no key, netrc words
    "commit 3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 Merge: 9e8d7c6",
    "ETag: \"D41D8CD98F00B204E9800998ECF8427EABCDEF12\"",
    "h1:Qp7Tq0Yw3t5mNfJkR2vXcZ8bLsE4uGhA1oIyWdK9=",
    "cd frontend/src/components/UserProfile && npm test",
    "image: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "password required",
    "machine github.com login octocat",
)


# --- shapes -----------------------------------------------------------------------------


def test_every_kind_has_a_case():
    assert {case.kind for case in CASES} == KINDS


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
def test_each_shape_is_caught_and_its_context_kept(case):
    text = "before: " + case.text + " :after"
    redacted, kinds = redact_text(text)
    assert kinds == Counter({case.kind: 1})
    assert f"[REDACTED:{case.kind}]" in redacted
    assert redacted.startswith("before: ") and redacted.endswith(" :after")
    assert not any(secret in redacted for secret in case.secrets)


@pytest.mark.parametrize("case", [c for c in CASES if c.secrets == (c.text,)], ids=lambda c: c.kind)
def test_a_token_span_is_the_token_itself(case):
    text = "key: " + case.text
    assert find_secrets(text) == [(case.kind, len("key: "), len(text))]


def test_only_the_password_of_a_url_goes():
    redacted, _ = redact_text("postgres://admin:" + _PW + "@db.internal:5432/app")
    assert redacted == "postgres://admin:[REDACTED:url_password]@db.internal:5432/app"


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_a_key_spelt_with_escaped_letters_is_found_at_any_depth_of_json(depth):
    """No encoder writes `s` as `\\u0073`, but a reader decoding the text reads the key it spells:
    the text comes back with the escapes written plainly, the key replaced, and still JSON."""
    key = "sk-ant-api03-" + "".join(RNG.choice(string.ascii_letters + string.digits) for _ in range(80))
    text = json.dumps({"text": key}).replace("sk-", "\\u0073k-").replace("-api03", "\\u002dapi03")
    for _ in range(depth - 1):
        text = json.dumps({"raw": text})
    redacted, kinds = redact_text(text)
    assert kinds == Counter({"anthropic_key": 1}) and key[13:] not in redacted
    decoded = json.loads(redacted)
    for _ in range(depth - 1):
        decoded = json.loads(decoded["raw"])
    assert decoded == {"text": "[REDACTED:anthropic_key]"}
    rows = [{"raw": text} for _ in range(100)] + [{"raw": "an escaped letter alone: \\u0041"} for _ in range(100)]
    assert redact_rows({"parts": rows}, Policy({"parts.raw": "redact"})) == Counter({"anthropic_key": 100})
    assert [row["raw"] for row in rows] == [redacted] * 100 + ["an escaped letter alone: \\u0041"] * 100


@pytest.mark.parametrize("text", FALSE_POSITIVES)
def test_look_alikes_are_left_alone(text):
    assert redact_text(text) == (text, Counter())
    assert redact_text(json.dumps({"t": text})) == (json.dumps({"t": text}), Counter())


# --- JSON stays JSON --------------------------------------------------------------------

ESCAPES = ("\n", "\t", '"', "\\", "é", "日本", "\\n")


@pytest.mark.parametrize("prefix", ESCAPES, ids=repr)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
def test_a_secret_after_an_escape_goes_and_the_json_still_parses(case, prefix):
    value = {"text": prefix + case.text + prefix, "n": 1}
    for encoded in (json.dumps(value), jsontext.dumps(value), json.dumps({"raw": json.dumps(value)})):
        redacted, kinds = redact_text(encoded)
        assert kinds == Counter({case.kind: 1})
        decoded = json.loads(redacted)
        decoded = json.loads(decoded["raw"]) if "raw" in decoded else decoded
        assert decoded["n"] == 1
        assert not any(secret in redacted or secret in decoded["text"] for secret in case.secrets)


_FRAGMENTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from([c.text for c in CASES]),
    st.sampled_from(['"', "'", "\\", "\\\\", "\n", "\\n", "\\u00e9", "é", " ", "=", ": ", "@", "://u:",
                     "password=", '"token": "', "Bearer ", "-----END RSA PRIVATE" + " KEY-----"]),
)
_STRINGS = st.lists(_FRAGMENTS, max_size=6).map("".join)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_STRINGS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400, deadline=None)
@given(_JSON)
def test_redacted_json_is_still_json(value):
    inner = json.dumps(value)
    nested = (json.dumps({"raw": inner}), lambda outer: outer["raw"]), (jsontext.dumps([inner]), lambda outer: outer[0])
    for encoded, unwrap in ((inner, None), (jsontext.dumps(value), None), *nested):
        redacted, _ = redact_text(encoded)
        decoded = json.loads(redacted)
        if unwrap:
            json.loads(unwrap(decoded))  # the JSON inside the JSON too
        assert redact_text(redacted)[0] == redacted  # nothing left to find


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), _STRINGS, st.sampled_from(['"\x00', "\x00", '"', "\n", '\n"\x00"\n'])), max_size=_CHUNK + 40))
def test_a_column_is_redacted_as_its_values_one_by_one(values):
    # redact_rows gates a whole chunk of a column at once: it must find what each value alone gives
    rows = {"parts": [{"text": v} for v in values]}
    counts = redact_rows(rows, Policy.team_default())
    alone = [redact_text(v) if v else (v, Counter()) for v in values]
    assert [r["text"] for r in rows["parts"]] == [text for text, _ in alone]
    assert counts == sum((kinds for _, kinds in alone), Counter())


# --- policy -----------------------------------------------------------------------------

BRIEF_FREE_TEXT = (
    "sessions.title", "sessions.todos", "sessions.extra_columns", "messages.extra_columns",
    *(f"parts.{c}" for c in ("text", "reasoning", "tool_input", "tool_result", "tool_result_metadata",
                             "shell_command", "shell_output", "url", "raw", "finish_message", "finish_details")),
    *(f"tool_calls.{c}" for c in ("input", "input_raw", "command", "result_text")),
    "quarantine.raw", "quarantine.error",
)


def _string_columns():
    return [(t, c.name) for t in ALL_TABLES for c in t.columns if pa.types.is_string(c.type)]


def test_team_default_redacts_text_and_drops_file_contents():
    actions = Policy.team_default().actions
    assert all(actions[key] == "redact" for key in BRIEF_FREE_TEXT)
    assert actions["file_versions.content"] == "drop"
    assert set(actions) == {f"{t.name}.{c}" for t, c in _string_columns()}  # text columns only
    assert Policy.off().actions == {}


@pytest.mark.parametrize(("mapping", "message"), [
    ({"nope.text": "keep"}, "no table 'nope'"),
    ({"parts.nope": "keep"}, "table parts has no column 'nope'"),
    ({"parts": "keep"}, "expected '<table>.<column>'"),
    ({"parts.text": "scramble"}, "unknown action 'scramble'"),
    ({"parts.binary_size": "hash"}, "hash applies to text columns, parts.binary_size is int64"),
    ({"file_versions.size_bytes": "redact"}, "redact applies to text columns"),
])
def test_a_bad_policy_says_what_is_wrong(mapping, message):
    with pytest.raises(ValueError, match=message):
        Policy.from_mapping(mapping)


def _parts(texts):
    return [{"part_index": i, "text": text, "raw": jsontext.dumps({"text": text})} for i, text in enumerate(texts)]


def test_hash_keep_and_drop_override_the_team_default():
    texts = [CASES[0].text, None, "hello"]
    rows = {"parts": _parts(texts)}
    policy = Policy.from_mapping({"parts.text": "hash", "parts.raw": "keep", "parts.part_index": "drop"})
    counts = redact_rows(rows, policy)
    got = rows["parts"]
    assert [r["text"] for r in got] == [None if t is None else "sha256:" + hashlib.sha256(t.encode()).hexdigest()
                                        for t in texts]
    assert [r["raw"] for r in got] == [jsontext.dumps({"text": t}) for t in texts]  # kept, secret and all
    assert [r["part_index"] for r in got] == [None] * len(texts)
    # the None text is neither hashed nor counted: 2 of 3 values hashed, all 3 indexes dropped
    assert counts == Counter({"hash:parts.text": 2, "drop:parts.part_index": 3})


def test_off_keeps_everything():
    rows = {"parts": _parts([c.text for c in CASES])}
    before = copy.deepcopy(rows)
    assert redact_rows(rows, Policy.off()) == Counter()
    assert rows == before


def test_file_contents_are_dropped_and_their_path_size_and_hash_kept():
    contents = ["DB_PASSWORD=" + _PW + "\n", "print('hi')\n"]
    rows = {"file_versions": [
        {"path": f"/p/f{i}.env", "content": c, "size_bytes": len(c.encode()),
         "content_sha256": hashlib.sha256(c.encode()).hexdigest()} for i, c in enumerate(contents)]}
    counts = redact_rows(rows, Policy.team_default())
    assert [r["content"] for r in rows["file_versions"]] == [None, None]
    assert [(r["path"], r["size_bytes"], r["content_sha256"]) for r in rows["file_versions"]] == [
        (f"/p/f{i}.env", len(c.encode()), hashlib.sha256(c.encode()).hexdigest()) for i, c in enumerate(contents)]
    assert counts == Counter({"drop:file_versions.content": len(contents)})
    rows["file_versions"][0]["content"] = contents[0]
    redact_rows(rows, Policy.from_mapping({"file_versions.content": "redact"}))
    assert rows["file_versions"][0]["content"] == "DB_PASSWORD=[REDACTED:secret_assignment]\n"


def test_rows_are_edited_in_place_across_chunk_edges():
    planted = {0, _CHUNK - 1, _CHUNK, 2 * _CHUNK + 5}
    texts = [CASES[3].text if i in planted else ("" if i % 7 else None) for i in range(3 * _CHUNK)]
    rows = {"parts": [{"text": t} for t in texts] + [{}]}  # a row without the column stays without it
    originals = list(rows["parts"])
    counts = redact_rows(rows, Policy.team_default())
    assert counts == Counter({"github_token": len(planted)})
    assert all(a is b for a, b in zip(rows["parts"], originals))
    assert [r.get("text") for r in rows["parts"][:-1]] == [
        "[REDACTED:github_token]" if i in planted else t for i, t in enumerate(texts)]
    assert rows["parts"][-1] == {}


# --- nothing reaches the lake -----------------------------------------------------------

PLANTED = " \n ".join(case.text for case in CASES)
JSON_COLUMNS = {"todos", "extra_columns", "tool_input", "tool_result_metadata", "raw", "input", "input_raw"}
ROWS_PER_TABLE = 2


def _planted_rows():
    rows = {}
    for table in ALL_TABLES:
        rows[table.name] = []
        for _ in range(ROWS_PER_TABLE):
            row = {c.name: None for c in table.columns}
            for column in table.columns:
                if pa.types.is_string(column.type):
                    row[column.name] = json.dumps({"v": PLANTED}) if column.name in JSON_COLUMNS else PLANTED
                elif pa.types.is_integer(column.type):
                    row[column.name] = 7
            rows[table.name].append(row)
    return rows


def test_no_known_secret_survives_team_default_in_any_string_column():
    rows = _planted_rows()
    counts = redact_rows(rows, Policy.team_default())
    leaks = [(table, column, secret) for table, table_rows in rows.items() for row in table_rows
             for column, value in row.items() if isinstance(value, str)
             for case in CASES for secret in case.secrets if secret in value]
    assert leaks == []
    for table, column in _string_columns():
        for row in rows[table.name]:
            if column in JSON_COLUMNS and row[column] is not None:
                json.loads(row[column])
    assert all(row["content"] is None for row in rows["file_versions"])
    assert all(v == 7 for rows_ in rows.values() for row in rows_ for v in row.values() if isinstance(v, int))
    # every redacted cell held every case once; file_versions.content is dropped instead
    cells = sum(1 for t, c in _string_columns() if (t.name, c) != ("file_versions", "content")) * ROWS_PER_TABLE
    want = Counter({kind: n * cells for kind, n in Counter(case.kind for case in CASES).items()})
    want["drop:file_versions.content"] = ROWS_PER_TABLE
    assert counts == want
