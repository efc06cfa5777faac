"""redact_table: whole Arrow columns are scanned by one polars regex, and only the cells it picks
go through redact_text. What comes out must be exactly what redact_text gives on each cell alone
(which is what redact_rows always gave: tests/test_redaction.py), with the same counts: on
generated Crush rows with secrets planted, on the recall corpus, and on hypothesis' strings."""

import copy
import hashlib
import json
import random
import re
from collections import Counter
from datetime import datetime, timezone

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import discover_only
from tests.test_redaction import _STRINGS, CASES, ESCAPES, FALSE_POSITIVES
from tests.test_secrets_recall import ORDINARY
from transforms import jsontext, redact_rules
from transforms.contract import BY_NAME
from transforms.crush.provider import CrushProvider
from transforms.synth.crush import generate_store
from transforms.redact import (
    _ESCAPE,
    _REGEXES,
    _SHAPES,
    COLUMN_PREFILTER,
    Policy,
    _gate,
    _lower,
    _prefilters,
    redact_rows,
    redact_table,
    redact_tables,
    redact_text,
)

TEAM = Policy.team_default()


def one_by_one(table: str, rows: list[dict], policy: Policy = TEAM) -> tuple[list[dict], Counter]:
    """The reference: redact_text on each text cell alone, drop and hash as the policy says."""
    rows, counts = copy.deepcopy(rows), Counter()
    for column, action in policy.for_table(table):
        for row in rows:
            value = row.get(column)
            if action == "redact" and isinstance(value, str) and value:
                row[column], kinds = redact_text(value)
                counts += kinds
            elif action in ("drop", "hash") and value is not None:
                row[column] = None if action == "drop" else "sha256:" + hashlib.sha256(value.encode()).hexdigest()
                counts[f"{action}:{table}.{column}"] += 1
    return rows, counts


def assert_same_as_one_by_one(table: str, rows: list[dict], policy: Policy = TEAM) -> Counter:
    """redact_table and redact_rows both give the reference's rows and counts."""
    rows = [{c.name: row.get(c.name) for c in BY_NAME[table].columns} for row in rows]  # every column
    want_rows, want_counts = one_by_one(table, rows, policy)
    got, counts = redact_table(table, pa.Table.from_pylist(rows, schema=BY_NAME[table].schema), policy)
    assert got.schema == BY_NAME[table].schema
    assert got.to_pylist() == want_rows
    assert counts == want_counts
    in_place = copy.deepcopy(rows)
    assert redact_rows({table: in_place}, policy) == want_counts
    assert in_place == want_rows
    return counts


# --- generated Crush rows, with secrets and look-alikes planted ----------------------------


def _plant(rows_by_table: dict[str, list[dict]], rng: random.Random) -> list[tuple]:
    """Put a planted case (as is, or JSON-escaped) or an ordinary line into about one text cell
    in eight, at a space or an end; (table, row, column, case) of the cases that went in."""
    planted = []
    for table, rows in rows_by_table.items():
        texts = [c.name for c in BY_NAME[table].columns if pa.types.is_string(c.type)]
        for n, row in enumerate(rows):
            for column in texts:
                if not isinstance(row.get(column), str) or rng.random() > 1 / 8:
                    continue
                value = row[column]
                if rng.random() < 0.7:
                    case = rng.choice(CASES)
                    piece = case.text if rng.random() < 0.5 else json.dumps(case.text)[1:-1]
                    planted.append((table, n, column, case))
                else:
                    piece = rng.choice(ORDINARY)
                cuts = [0, len(value)] + [i for i, ch in enumerate(value) if ch == " "]
                at = rng.choice(cuts)
                row[column] = f"{value[:at]} {piece} {value[at:]}"
    return planted


@pytest.fixture(scope="module")
def crush_rows(tmp_path_factory) -> list[dict[str, list[dict]]]:
    tmp = tmp_path_factory.mktemp("columnar")
    store = generate_store(tmp / "crush", projects=3, sessions_per_project=5, seed=5)
    sources, problems = discover_only(roots=[store.global_dir])
    assert len(sources) == 3 and not problems
    return [CrushProvider().extract(s, tmp, datetime.now(timezone.utc)).rows for s in sources]


def _dicts(rows_by_table: dict) -> dict[str, list[dict]]:
    """The rows as dicts of the contract's columns (a provider may give an Arrow table, with a
    `project` column the contract does not have)."""
    out = {}
    for table, rows in rows_by_table.items():
        names = [c.name for c in BY_NAME[table].columns]
        rows = rows.to_pylist() if isinstance(rows, pa.Table) else rows
        out[table] = [{name: row.get(name) for name in names} for row in rows]
    return out


def test_generated_rows_come_out_as_redacted_one_by_one(crush_rows):
    extracted = [_dicts(rows) for rows in crush_rows]
    planted = [_plant(rows, random.Random(i)) for i, rows in enumerate(extracted)]
    assert sum(map(len, planted)) > 100
    for rows_by_table, cases in zip(extracted, planted):
        redacted = {}
        for table, rows in rows_by_table.items():
            assert_same_as_one_by_one(table, rows)
            redacted[table] = redact_table(table, pa.Table.from_pylist(rows, schema=BY_NAME[table].schema), TEAM)[0]
        leaks = [(table, column, case.kind) for table, n, column, case in cases
                 for value in [redacted[table].column(column)[n].as_py()] if value is not None  # dropped: gone
                 for secret in case.secrets if secret in value or json.dumps(secret)[1:-1] in value]
        assert leaks == []


def test_clean_generated_rows_stay_as_they_are(crush_rows):
    for rows_by_table in crush_rows:
        for table, rows in _dicts(rows_by_table).items():
            counts = assert_same_as_one_by_one(table, rows)
            assert {kind for kind in counts if ":" not in kind} == set()


def test_the_providers_own_tables_are_redacted_as_they_come(crush_rows):
    # the Arrow tables the provider gives (extra columns and all), planted, all of a source's
    # tables in one call: each as one by one
    for i, rows_by_table in enumerate(crush_rows):
        planted, tables = _dicts(rows_by_table), {}
        _plant(planted, random.Random(100 + i))
        for table, data in rows_by_table.items():
            data = data if isinstance(data, pa.Table) else pa.Table.from_pylist(data, schema=BY_NAME[table].schema)
            for name in planted[table][0] if planted[table] else ():
                data = data.set_column(data.schema.get_field_index(name), name,
                                       pa.array([row[name] for row in planted[table]], data.schema.field(name).type))
            tables[table] = data
        got, counts = redact_tables(tables, TEAM)
        want = {table: one_by_one(table, data.to_pylist()) for table, data in tables.items()}
        assert {table: data.to_pylist() for table, data in got.items()} == {t: rows for t, (rows, _) in want.items()}
        assert counts == sum((found for _, found in want.values()), Counter())
        assert sum(n for kind, n in counts.items() if ":" not in kind) > 0  # secrets were planted and found
        assert {t: d.schema for t, d in got.items()} == {t: d.schema for t, d in tables.items()}


# --- the recall corpus ------------------------------------------------------------------


def _encodings(text: str) -> list[str]:
    """A case as tests/test_redaction.py shows it to redact_text: in prose, and in JSON, JSON in
    JSON and after each escape."""
    out = ["before: " + text + " :after"]
    for prefix in ESCAPES:
        value = {"text": prefix + text + prefix, "n": 1}
        out += [json.dumps(value), jsontext.dumps(value), json.dumps({"raw": json.dumps(value)})]
    return out


def test_the_recall_corpus_in_whole_columns():
    cases = [(case, encoded) for case in CASES for encoded in _encodings(case.text)]
    clean = list(FALSE_POSITIVES) + [json.dumps({"t": t}) for t in FALSE_POSITIVES] + ORDINARY
    values = [encoded for _, encoded in cases] + clean
    random.Random(3).shuffle(values)
    chunks = [values[i:i + 97] for i in range(0, len(values), 97)]  # several chunks, a column's edges
    for type_ in (pa.string(), pa.large_string(), pa.string_view()):
        column = pa.chunked_array([pa.array(chunk, type_) for chunk in chunks], type_)
        got, counts = redact_table("parts", pa.table({"text": column}), TEAM)
        assert got.column("text").type == type_
        redacted = dict(zip(values, got.column("text").to_pylist()))
        assert redacted == {v: redact_text(v)[0] for v in values}
        # 75/75 shapes caught in every encoding, each once; no ordinary line touched
        assert [case.kind for case, encoded in cases if any(s in redacted[encoded] for s in case.secrets)] == []
        assert counts == Counter(case.kind for case, _ in cases)
        assert [line for line in clean if redacted[line] != line] == []


# --- the prefilter is wider than every shape ----------------------------------------------


def _fired(text: str) -> list[int]:
    """The shapes that find a secret in `text` where `_matches` would run them (the gate fired,
    or the shape has none): a pattern matches and its check, if any, keeps the match."""
    low, blanked = _lower(text), _ESCAPE.sub(lambda m: " " * len(m.group()), text)
    gated = {i for _, i in _gate(low)} | {i for i, shape in enumerate(_SHAPES) if not shape[0]}

    def finds(regex, check, subject) -> bool:
        for match in regex.finditer(subject):
            start, end = match.span(match.lastgroup)
            if not check or check(text, match, *((start, end) if start < end else match.span())):
                return True
        return False

    return [i for i in sorted(gated) for lowered, regexes in [_REGEXES[i]]
            if any(finds(r, check, low if lowered else text if lowered is not None else blanked) for r, check in regexes)]


def _prefilter_hits(texts: list[str], pattern: str) -> list[bool]:
    return pl.Series(texts, dtype=pl.String).str.contains(pattern).to_list()


def _check_wider(texts: list[str]) -> int:
    """Every shape that fires on a text has its own prefilter match the text; how many fired."""
    fired = [(text, i) for text in texts for i in _fired(text)]
    for i in {i for _, i in fired}:
        pattern = "|".join(_prefilters(*_SHAPES[i]))
        shape_texts = [text for text, j in fired if j == i]
        assert all(_prefilter_hits(shape_texts, pattern)), (i, pattern)
    assert all(_prefilter_hits([t for t, _ in fired], COLUMN_PREFILTER))
    return len(fired)


PW = "Zq8x" + "Lm2Pw9Rt"
EDGES = (  # shapes at the edges of their prefilters: an empty user, no space, a tab, upper case
    f"redis://:{PW}@cache:6379", f"TOKEN={PW}", f"mysql -uroot\t-p{PW}", f'PASSWORD\\"=\\"{PW}',
    f"curl --user=bob:{PW} x", f"AUTHORIZATION:Bearer {PW}7", f"npm CONFIG set //r/:_authToken {PW}",
    "token: Missing", "token: abcdef1", "password: letmein1", "pw: abcd.", "secret:\tabcdefgh", "token=abcd", "api_key := abc_de",
    "passwd: こんにちは", "TOKEN: \u212aelvin", "token: missing",  # the last is prose: in the prefilter or not, the same
)


def test_every_shape_that_fires_on_the_corpus_is_in_the_prefilter():
    texts = [encoded for case in CASES for encoded in [case.text, *_encodings(case.text)]]
    texts += [t.upper() for t in texts] + list(FALSE_POSITIVES) + ORDINARY + list(EDGES)
    assert _check_wider(texts) >= len(texts) // 2
    fired = {i for text in texts for i in _fired(text)}
    assert fired == set(range(len(_SHAPES)))  # the corpus reaches every shape


def test_the_prefilter_spells_whitespace_out():
    # Python's \s also takes \x1c-\x1f, Rust's does not: a \s would make the prefilter narrower
    assert "\\s" not in COLUMN_PREFILTER


def test_each_rule_prefilter_names_a_loaded_plugin():
    # a renamed or dropped detect-secrets plugin must not leave its prefilter behind unused
    assert set(redact_rules.PREFILTERS) <= {plugin for _, plugin, _ in redact_rules.RULES}


_PIECES = ("\u212a", "K", "İ", "ß", "ﬀ", "://:", "@", "-u ", "--user=", " -p", "mysql ", "login -p ", "redis-cli -a ",
           "config set ", "--client-secret ", "Authorization: ", "bearer ", "AKIA", "eyJ", "sk-", "12345678:", "aws_",
           "_key=", "pass: ", "PW=", "token: ", "abcdef1", "abc", "xyZ", '\\"', "'", "`", "\t", "Zq8xLm2Pw9Rt", "0123456789abcdef" * 2)
_MIXED = st.lists(st.one_of(_STRINGS, _STRINGS.map(str.upper), st.sampled_from(_PIECES)), max_size=5).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.lists(_MIXED, min_size=1, max_size=8))
def test_prefilter_wider_and_table_as_one_by_one_on_any_text(texts):
    _check_wider(texts)
    rows = [{"text": t, "raw": t[::-1]} for t in texts] + [{"text": None, "raw": ""}]
    assert_same_as_one_by_one("parts", rows)


def test_only_the_kelvin_sign_lowers_to_ascii_and_the_prefilter_folds_it():
    # the gates see Python's lowercase; the prefilter matches case-insensitively in Rust instead
    to_ascii = [c for c in map(chr, range(0x110000)) if not c.isascii() and c.lower().isascii()]
    assert to_ascii == ["\u212a"]
    text = "TO\u212aEN=" + "Zq8xLm2Pw9Rt"
    assert redact_text(text)[1] == Counter({"secret_assignment": 1})  # Python lowers it to token=
    assert assert_same_as_one_by_one("parts", [{"text": text}]) == Counter({"secret_assignment": 1})


# --- the policy on a table --------------------------------------------------------------


def test_hash_drop_and_keep_on_a_table():
    key = CASES[0].text
    rows = [{"part_index": i, "text": text, "tool_name": text} for i, text in enumerate([key, None, "hello", ""])]
    policy = Policy.from_mapping({"parts.text": "hash", "parts.part_index": "drop", "parts.tool_name": "keep"})
    counts = assert_same_as_one_by_one("parts", rows, policy)
    # 3 non-null texts hashed ("" too), 4 indexes dropped; hand count from the rows above
    assert counts == Counter({"hash:parts.text": 3, "drop:parts.part_index": 4})


def test_off_and_absent_columns_leave_the_table_alone():
    table = pa.table({"text": [CASES[0].text], "other": [CASES[0].text]})
    assert redact_table("parts", table, Policy.off()) == (table, Counter())
    got, counts = redact_table("parts", table, TEAM)  # `other` is no column of parts: not touched
    assert got.column_names == ["text", "other"] and got.column("other") == table.column("other")
    assert got.column("text").to_pylist() == ["[REDACTED:aws_access_key]"] and counts == Counter({"aws_access_key": 1})
    empty = pa.Table.from_pylist([], schema=BY_NAME["parts"].schema)
    assert redact_table("parts", empty, TEAM) == (empty, Counter())


def test_a_lone_surrogate_in_a_row_is_redacted_too():
    # a Python string Arrow cannot hold: redact_rows takes it through redact_text directly
    text = "\ud800 token=" + "Zq8xLm2Pw9Rt"
    rows = {"parts": [{"text": text}, {"text": "clean"}]}
    assert redact_rows(rows, TEAM) == Counter({"secret_assignment": 1})
    assert rows["parts"] == [{"text": redact_text(text)[0]}, {"text": "clean"}]
    assert re.search("Zq8x", rows["parts"][0]["text"]) is None
