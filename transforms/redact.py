"""Team-mode redaction: secrets are scrubbed from rows before the rows leave the machine.

A local lake is as private as the laptop; a team lake (on S3, ...) is read by everyone who can
reach it. So in team mode rows pass through `redact_rows` before the writer sees them: the shared
lake never holds a key, there is nothing to purge afterwards, and no reader is trusted to filter.

A `Policy` gives each column, named `<table>.<column>`, one action:
  keep    the value as is (local mode: `Policy.off()`)
  redact  known secret shapes replaced by `[REDACTED:<kind>]`, the rest of the text kept
  hash    `sha256:<hex>` of the value: still joinable and countable, no longer readable
  drop    null
`Policy.team_default()` redacts every string column (free text holds most secrets, but a path or
an id can hold one too, and a clean column costs one scan per 256 rows) and drops
`file_versions.content`: whole files are too much to vet; their path, size and hash were computed
before redaction. Replacements hold no quote or backslash and never cut an escape sequence, so
JSON text (`raw`, `tool_input`, ...) stays valid JSON.
"""

import hashlib
import re
import string
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate

import pyarrow as pa

from transforms.contract import ALL_TABLES, BY_NAME

ACTIONS = ("keep", "redact", "hash", "drop")

# --- secret shapes ----------------------------------------------------------------------
# A named group marks the kind and the span to replace (a URL's password, the value of
# `token=`); an empty group at the end means the whole match; `<kind>_<n>` is the same kind.

_NOT_REF = r"(?![$<*{\[])"  # $VAR / ${VAR}, <placeholder>, ***, {{template}}, [REDACTED:...]
_V = r"[^\s\"'\\`,;&()\[\]{}<>]"  # a character of an unquoted value: stops at quotes, escapes
_KEYS = ("passw(?:or)?d", "secret(?:[_-]?key)?", "token", "(?:api|private|access)[_-]?key")
_SEP = r"(?![a-z0-9_-])(?:\\*[\"'])?[ \t]*(?::=|[:=])[ \t]*"  # key ends (not `tokens`), then = : :=
# code, not a secret: `self.password`, `settings.API_KEY`, `DB_PASSWORD`, `get_token()`; and a
# number, which in JSON (`"token": 12345678`) is a literal that a replacement would break
_NUMBER = r"-?[0-9][0-9.eE+-]*"
_CODE = rf"(?:(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*|\w*(?:{'|'.join(_KEYS)})|{_NUMBER})(?!{_V})"
# An escaped backslash is taken whole, never as the start of a nested escape (`\\\"`). A
# value starting with `:` `,` `}` `]` or a space follows a quote that CLOSES a JSON string.
_VALUE = (rf"(?:\\*\"(?P<KIND>{_NOT_REF}(?![\s:,}}\]])(?:[^\"\\\r\n]|\\\\(?![\\\"])){{8,}}+)"
          rf"|\\*'(?P<KIND_2>{_NOT_REF}(?:[^'\"\\\r\n]|\\\\(?![\\\"'])){{8,}}+)"
          rf"|(?P<KIND_3>{_NOT_REF}(?!{_CODE}){_V}{{8,}}+(?![(\[])))")  # KIND: the group's name
_B64 = r"[A-Za-z0-9._~+/=-]"
_PEM = (r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[^\"]{0,16000}?-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\s|\\+[nr])+[A-Za-z0-9+/=]{16,}+)*+)")  # a truncated block: its base64 lines
_SK = (r"sk(?:-ant-[A-Za-z0-9_-]{20,}(?P<anthropic_key>)"
       r"|-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}"
       r"|(?=[a-z0-9]*[A-Z])(?=[A-Za-z]*[0-9])[A-Za-z0-9]{20,})(?P<openai_key>)"  # a legacy key mixes
       r"|_(?:live|test)_[A-Za-z0-9]{16,}(?P<stripe_key>))")  # case and digits: not sk-learn-...
_AUTHORIZATION = (rf"authorization(?:\\*[\"'])?[ \t]*[:=][ \t]*(?:\\*[\"'])?(?:(?:bearer|basic|token|bot)[ \t]+)?"
                  rf"(?P<auth_header>{_NOT_REF}(?!{_NUMBER}(?!{_B64})){_B64}{{8,}}+)")


def _assignment(key: str, kind: str = "secret_assignment") -> str:
    return key + _SEP + _VALUE.replace("KIND", kind)


# (gate, on the lowercased text?, patterns). Scanning text once per shape costs more than the
# matching, so one gate regex runs first, on the lowercased text, and a shape's patterns run
# only where its gate fired. Each gate starts with its trigger's rarest letter, which the
# engine skips to; "" = always run.
_SHAPES = (
    (r"v(?<=priv)(?=ate)", False, (_PEM + "(?P<private_key>)",)),
    ("", False, (r"A[KS]IA[A-Z0-9]{16}(?P<aws_access_key>)",)),  # ASIA has no rare letter
    (r"_(?<=gh[pousr]_)|_(?<=github_)(?=pat_)", False,
     (r"gh[pousr]_[A-Za-z0-9]{30,}(?P<github_token>)", r"github_pat_[A-Za-z0-9_]{20,}(?P<github_token>)")),
    (r"k(?<=sk)(?=[-_])", False, (_SK,)),
    (r"k(?<=rk)(?=_)", False, (r"rk_(?:live|test)_[A-Za-z0-9]{16,}(?P<stripe_key>)",)),
    (r"x(?=ox[abposr]-)", False, (r"xox[abposr]-[A-Za-z0-9-]{10,}(?P<slack_token>)",)),
    (r"k(?<=slack)(?=\.com/)", False,
     (r"hooks\.slack\.com/(?P<slack_webhook>(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,})",)),
    (r"z(?<=aiz)(?=a)", False, (r"AIza[A-Za-z0-9_-]{35}(?P<google_api_key>)",)),
    (r"-(?<=glpat-)", False, (r"glpat-[A-Za-z0-9_-]{20,}(?P<gitlab_token>)",)),
    (r"_(?<=npm_)", False, (r"npm_[A-Za-z0-9]{30,}(?P<npm_token>)",)),
    (r"_(?<=hf_)", False, (r"hf_[A-Za-z0-9]{30,}(?P<huggingface_token>)",)),
    (r"j(?<=eyj)", False, (r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*(?P<jwt>)",)),
    (r":(?=//)", False, (rf"://[^\s:/@\"'\\\[]*:(?P<url_password>{_NOT_REF}[^\s/@\"'\\]+)@",)),
    (r"z(?<=authoriz)", True, (_AUTHORIZATION,)),
    (r"b(?=earer)", True, (rf"bearer[ \t]+(?=[a-z0-9._~+/=-]*[0-9])(?P<auth_header>{_NOT_REF}{_B64}{{8,}}+)",)),
    (r"w(?<=passw)", True, (_assignment(_KEYS[0]),)),
    (r"c(?<=sec)(?=ret)", True, (_assignment(_KEYS[1]), _assignment("aws_secret_access_key", "aws_secret_key"))),
    (r"k(?<=tok)(?=en)", True, (_assignment(_KEYS[2]),)),
    (r"k(?<=[ies_-]k)(?=ey)", True, (_assignment(_KEYS[3]),)),  # api_key, privatekey, access-key
)
_GATE = re.compile("|".join(f"{alternative}(?P<g{i}_{j}>)" for i, (gate, _, _) in enumerate(_SHAPES)
                            for j, alternative in enumerate(gate.split("|")) if gate))
_ALWAYS = frozenset(i for i, (gate, _, _) in enumerate(_SHAPES) if not gate)
_REGEXES = tuple((lowered, tuple(map(re.compile, patterns))) for _, lowered, patterns in _SHAPES)
KINDS = frozenset(re.sub(r"_\d+$", "", n) for _, rs in _REGEXES for r in rs for n in r.groupindex)
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _lower(text: str) -> str:
    low = text.lower()  # positions must match the text's: a rare character lowers to two
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


def _past_escape(text: str, start: int) -> int:
    """`start`, moved past an escape it falls inside (`\\n` + `npm_...`, `\\u00eA` + `KIA...`)."""
    cut = text.rfind("\\", max(0, start - 5), start)
    if cut < 0:
        return start
    run = cut
    while run and text[run - 1] == "\\":
        run -= 1
    if (cut - run) % 2:  # the backslash at `cut` closes an escaped backslash
        return start
    return max(start, cut + (6 if text[cut + 1:cut + 2] == "u" else 2))


def _gate(low: str) -> list[tuple[int, int]]:  # (position, shape) wherever a gate fires
    return [(m.start(), int(m.lastgroup[1:].partition("_")[0])) for m in _GATE.finditer(low)]


def _matches(text: str) -> list[tuple[int, int, int, str]]:
    """(start, match start, end, kind) of every shape's matches, overlaps included."""
    low, found = _lower(text), []
    for lowered, regexes in (_REGEXES[i] for i in _ALWAYS.union(i for _, i in _gate(low))):
        subject = low if lowered else text
        for regex in regexes:
            match = regex.search(subject)
            while match:
                name = match.lastgroup
                start, end = match.span(name)
                if start == end:  # the empty marker: the whole match is the secret
                    start, end = match.span()
                found.append((_past_escape(text, start), match.start(), end, re.sub(r"_\d+$", "", name)))
                match = regex.search(subject, match.end())
    return found


def _suspects(text: str) -> list[int]:
    """Where a secret may be: a gate fired, or an ungated shape matched (no false negatives)."""
    low = _lower(text)
    spots = [position for position, _ in _gate(low)]
    for lowered, regexes in (_REGEXES[i] for i in _ALWAYS):
        spots += (m.start() for regex in regexes for m in regex.finditer(low if lowered else text))
    return spots


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each secret in `text`, in order; overlapping finds are merged."""
    found: list[tuple[str, int, int]] = []
    for start, _, end, kind in sorted(_matches(text)) if text else ():
        if found and start < found[-1][2]:  # inside the previous one (`token=ghp_...`)
            found[-1] = (found[-1][0], found[-1][1], max(end, found[-1][2]))
        elif start < end:
            found.append((kind, start, end))
    return found


def redact_text(text: str) -> tuple[str, Counter]:
    """`text` with each secret replaced by `[REDACTED:<kind>]`, and the kinds replaced."""
    secrets = find_secrets(text)
    if not secrets:
        return text, Counter()
    pieces, last = [], 0
    for kind, start, end in secrets:
        pieces += (text[last:start], f"[REDACTED:{kind}]")
        last = end
    return "".join(pieces) + text[last:], Counter(kind for kind, _, _ in secrets)


# --- policy -----------------------------------------------------------------------------


def _check(key: str, action: str) -> None:
    table_name, dot, column_name = key.partition(".") if isinstance(key, str) else ("", "", "")
    if not dot:
        raise ValueError(f"redaction policy key {key!r}: expected '<table>.<column>', e.g. 'parts.text'")
    if table_name not in BY_NAME:
        raise ValueError(f"redaction policy key {key!r}: no table {table_name!r}; tables: {', '.join(BY_NAME)}")
    types = {c.name: c.type for c in BY_NAME[table_name].columns}
    if column_name not in types:
        raise ValueError(f"redaction policy key {key!r}: table {table_name} has no column {column_name!r}; "
                         f"columns: {', '.join(types)}")
    type_ = types[column_name]
    if action not in ACTIONS:
        raise ValueError(f"redaction policy {key}: unknown action {action!r}; use one of {', '.join(ACTIONS)}")
    if action in ("redact", "hash") and not pa.types.is_string(type_):
        raise ValueError(f"redaction policy {key}: {action} applies to text columns, {key} is {type_} "
                         "(use keep or drop)")


def _team_default() -> dict[str, str]:
    actions = {f"{t.name}.{c.name}": "redact" for t in ALL_TABLES for c in t.columns if pa.types.is_string(c.type)}
    actions["file_versions.content"] = "drop"  # path, size_bytes and content_sha256 stay
    return actions


@dataclass(frozen=True)
class Policy:
    """Action by `<table>.<column>`; a column not named is kept."""

    actions: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def off(cls) -> "Policy":
        return cls({})

    @classmethod
    def team_default(cls) -> "Policy":
        return cls(_team_default())

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str]) -> "Policy":
        """team_default with `mapping`'s actions on top; ValueError names a bad key or action."""
        for key, action in mapping.items():
            _check(key, action)
        return cls({**_team_default(), **mapping})

    def for_table(self, table: str) -> list[tuple[str, str]]:
        """(column, action) of the table's columns that are not kept."""
        prefix = f"{table}."
        return [(key[len(prefix):], action) for key, action in self.actions.items()
                if key.startswith(prefix) and action != "keep"]


# --- rows -------------------------------------------------------------------------------

_CHUNK = 256  # values of one column gated as one text: one scan, not one per value
_JOIN = '"\x00'  # no gate nor shape matches across a quote, so a suspect lies in one value


def redact_rows(rows: dict[str, list[dict]], policy: Policy) -> Counter:
    """Apply `policy` to the rows in place; counts secrets by kind, and `hash:`/`drop:` cells."""
    counts: Counter = Counter()
    for table, table_rows in rows.items():
        for column, action in policy.for_table(table):
            if action == "redact":
                _redact_column(table_rows, column, counts)
            else:
                counts += Counter({f"{action}:{table}.{column}": _hash_or_drop(table_rows, column, action)})
    return counts


def _redact_column(rows: list[dict], column: str, counts: Counter) -> None:
    for first in range(0, len(rows), _CHUNK):
        chunk = [row for row in rows[first:first + _CHUNK] if isinstance(row.get(column), str) and row[column]]
        offsets = list(accumulate((len(row[column]) + len(_JOIN) for row in chunk), initial=0))
        suspects = {bisect_right(offsets, spot) - 1 for spot in _suspects(_JOIN.join(r[column] for r in chunk))}
        for row in (chunk[i] for i in sorted(suspects)):
            row[column], kinds = redact_text(row[column])
            counts.update(kinds)


def _hash_or_drop(rows: list[dict], column: str, action: str) -> int:
    """Hash or drop the column's non-null values; how many."""
    done = [row for row in rows if row.get(column) is not None]
    for row in done:
        row[column] = None if action == "drop" else "sha256:" + hashlib.sha256(str(row[column]).encode()).hexdigest()
    return len(done)
