"""Team-mode redaction: secrets are scrubbed from rows before the rows leave the machine.

A local lake is as private as the laptop; a team lake (on S3, ...) is read by everyone who can
reach it. So in team mode a source's tables pass through `redact_tables` (Arrow; `redact_rows` for
lists of dicts) before the writer sees them: the shared lake never holds a key, there is nothing
to purge afterwards, and no reader is trusted to filter.

A `Policy` gives each column, named `<table>.<column>`, one action:
  keep    the value as is (local mode: `Policy.off()`)
  redact  known secret shapes replaced by `[REDACTED:<kind>]`, the rest of the text kept
  hash    `sha256:<hex>` of the value: still joinable and countable, no longer readable
  drop    null
`Policy.team_default()` redacts every string column (free text holds most secrets, but a path or
an id can hold one too, and a clean column costs one regex scan in Rust) and drops
`file_versions.content`: whole files are too much to vet; their path, size and hash were computed
before redaction. Replacements hold no quote or backslash and never cut an escape sequence, so
JSON text (`raw`, `tool_input`, ...) stays valid JSON.
"""

import base64
import hashlib
import math
import re
import string
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from transforms import redact_rules
from transforms.contract import ALL_TABLES, BY_NAME

ACTIONS = ("keep", "redact", "hash", "drop")

# --- secret shapes ----------------------------------------------------------------------
# A named group marks the kind and the span to replace (a URL's password, the value of
# `token=`); an empty group at the end means the whole match; `<kind>_<n>` is the same kind.

_NOT_REF = r"(?![$<*{\[])"  # $VAR / ${VAR}, <placeholder>, ***, {{template}}, [REDACTED:...]
_V = r"[^\s\"'\\`,;&()\[\]{}<>]"  # a character of an unquoted value: stops at quotes, escapes
_WS = r" \t\n\r\f\v"  # ASCII whitespace, in a prefilter's "not ..." class: fewer than `\s` excludes
_KEYS = ("passw(?:or)?d", "secret(?:[_-]?key)?", "token", "(?:api|private|access)[_-]?key")
_SEP = r"(?![a-z0-9_-])(?:\\*[\"'])?[ \t]*(?::=|[:=])[ \t]*"  # key ends (not `tokens`), then = : :=
# code, not a secret: `self.password`, `settings.API_KEY`, `DB_PASSWORD`, `get_token()`; and a
# number, which in JSON (`"token": 12345678`) is a literal that a replacement would break
_NUMBER = r"-?[0-9][0-9.eE+-]*"
_CODE = rf"(?:(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*|\w*(?:{'|'.join(_KEYS)})|{_NUMBER})(?!{_V})"
# An escaped backslash is taken whole, never as the start of a nested escape (`\\\"`). A
# value starting with `:` `,` `}` `]` or a space follows a quote that CLOSES a JSON string. A
# single-quoted value may open the POSIX way, inside a quoted script: `'"'"'` or `'\''` (a Codex
# shell command is its argv joined so: transforms/codex/tools.py).
_VALUE = (rf"(?:\\*\"(?P<KIND>{_NOT_REF}(?![\s:,}}\]])(?:[^\"\\\r\n]|\\\\(?![\\\"])){{8,}}+)"
          rf"|(?:\\*'(?:\\*\"\\*'\\*\"|\\+'))?\\*'(?P<KIND_2>{_NOT_REF}(?:[^'\"\\\r\n]|\\\\(?![\\\"'])){{8,}}+)"
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



# --- KEY=VALUE with an entropy test ---------------------------------------------------------
# Any key that names a secret, in code, YAML, JSON, `.env` and shell lines: `DB_PASS=`,
# `MYSQL_PWD=`, `account_key:`, `signing_key =`. A key of a password, secret or token (strong)
# takes any value of 4+ characters that is not code, a reference or a placeholder word; a key
# that only says `key`, `auth` or `credential` (weak: `sort_key`, `primary_key`) takes a value
# only when it looks random (the entropy test). The rules above stay as they were, so this
# adds finds and loses none.
_STRONG_KEY = re.compile(r"passw(?:or)?d|passphrase|(?:^|[_-])(?:pass|pwd|pw)$|secret|token"
                         r"|(?:api|private|access|account|secret|master|shared[_-]?access)[_-]?key$")
_WORDS = r"passw(?:or)?d|passphrase|secret|token|credentials?|auth|key"
_SHORT = r"(?:[a-z0-9]+[_-])*(?:pass|pwd|pw)"  # only as a key's last word: `db_pass`, not `bypass`
# a key starts a word, or follows a JSON-escaped newline (`HOST=db\nDB_PASSWORD=...`)
_KEY = rf"(?:(?<![a-z0-9])|(?<=\\[nrt]))(?P<key>(?:[a-z0-9_-]*?(?:{_WORDS})|{_SHORT})(?:[_-]base)?)"
# not secrets: literals, types and placeholder words that follow a secret's key in code and docs
_STOP = frozenset("""none null nil true false yes no on off str string int integer bool boolean bytes number
    float any object optional required undefined empty hidden masked redacted unset default example sample
    value secret password passwd token key auth credential credentials changeit your_password dummy test
    self this xxxx""".split())
_CODE_ROOTS = ("os.", "self.", "settings.", "config.", "cfg.", "conf.", "env.", "process.", "environ", "args.",
               "options.", "opts.", "params.", "request.", "req.", "ctx.", "context.", "app.")
_IDENT_CALL = re.compile(r"[A-Za-z_][\w.]*\(")
_DOTTED = re.compile(r"(?:[A-Za-z_]\w*\.)+[A-Za-z_]\w*")
_SECRET_WORD = re.compile(r"pass|pwd|secret|token|key|auth|cred", re.I)
_WORDS_OF = re.compile(r"[_-]|(?<=[a-z])(?=[A-Z])")  # an identifier's words: `snake_case`, `camelCase`


def _entropy(value: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def random_looking(value: str) -> bool:
    """The entropy test: 16+ characters, letters and digits, a long unbroken run, 3+ bits each
    (`9f8a7b6c...`, `Zk3mQ9...` yes; `createdAtTimestamp`, a UUID, `crush-myproject-1a2b` no)."""
    return (len(value) >= 16 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
            and max(map(len, re.findall(r"[A-Za-z0-9+/]+", value)), default=0) >= 16 and _entropy(value) >= 3.0)


def _a_name(value: str) -> bool:
    """`github_token`, `DB_PASSWORD`, `accessToken`: an identifier one of whose words (between `_`,
    `-` and camel humps) starts with a secret's word and is letters only. Not `Winter2024_topsecret`
    nor `Passw0rd2024`: a password that holds such a word was taken for a name and kept."""
    return bool(re.fullmatch(r"[A-Za-z_][\w-]*", value)) and any(
        word.isalpha() and _SECRET_WORD.match(word) for word in _WORDS_OF.split(value))


def _plausible(key: str, value: str, env: bool = False) -> bool:
    """Whether `value`, assigned to a key that names a secret, is one."""
    bare = value.strip("\"'")
    if (len(bare) < 4 or bare.lower() in _STOP or len(set(bare)) == 1 or re.fullmatch(_NUMBER, bare)
            or bare.lower().startswith(_CODE_ROOTS) or _IDENT_CALL.match(bare)
            or (_DOTTED.fullmatch(bare) and _SECRET_WORD.search(bare.rpartition(".")[2]))
            or _a_name(bare)):
        return False
    if _STRONG_KEY.search(key.lower()):  # under 8 characters, prose (`token: context`) is no secret
        return len(bare) >= 8 or env or not bare.isalpha() or not bare.islower()
    return random_looking(bare)


def _check_assignment(text: str, match: re.Match, start: int, end: int):
    return (start, end) if _plausible(match.group("key"), text[start:end]) else None


def _check_env(text: str, match: re.Match, start: int, end: int):  # a `.env` line: `DB_PASSWORD=letmein` too
    return (start, end) if _plausible(match.group("key"), text[start:end], env=True) else None


# the same, in shell and `.env` context (line start, after a space, quote, `;` `&` `|` `(`), where
# the value runs to the next space or quote: `.` `&` `_` `,` and all stay in it. Quotes before it
# may be a run: `'"'"'`, a value quoted the POSIX way inside a quoted script
_ENV = (rf"(?:(?<=[\s\"'`;&|(])|^|(?<=\\[nrt]))(?:export[ \t]+)?{_KEY}=(?:\\*[\"'])*+"
        rf"(?P<secret_assignment>{_NOT_REF}(?![:,}}\]])[^\s\"'\\`;|<>]{{4,}}+)")  # not after a closing quote
# `key: value`, `"key": "value"`, `key = 'value'`: the value as _VALUE takes it, from 4 characters
_NAMED = (_KEY + _SEP + _VALUE.replace("KIND", "secret_assignment").replace("{8,}", "{4,}")
          .replace(f"(?!{_CODE})", f"(?!{_NUMBER}(?!{_V}))"))

# What each assignment rule above holds, for the column prefilter: a key ending in a secret's word,
# then `=` and a quote or 4 characters (_ENV), or `:` / `=` with spaces and a quote, 8 characters,
# or a shorter value with a character that is no lowercase letter (_plausible: `token: missing`
# is prose). Case matters in the value: a capital is no lowercase letter.
_VALUE_CHAR = rf"""[^{_WS}"'\\`]"""
_ASSIGNED = (rf"""(?i:(?:{_WORDS}|pass|pwd|pw)(?:[_-]base)?)(?:=(?:\\*["']|{_VALUE_CHAR}{{4}})"""
             rf"""|(?:\\*["'])?[ \t]*[:=][ \t]*(?:\\*["']|{_VALUE_CHAR}{{8}}|{_VALUE_CHAR}{{0,6}}[^a-z{_WS}"'\\`]))""")

# --- command-line flags ---------------------------------------------------------------------
_START = r"(?:(?<![A-Za-z0-9_-])|(?<=\\[nrt])|(?<=\\u[0-9A-Fa-f]{4}))"  # a word starts, or follows an escape
_ARG = rf"(?:\\*[\"'])*+(?P<cli_password>{_NOT_REF}(?!-)[^\s\"'\\`;|]{{4,}}+)"
def _check_user_password(text: str, match: re.Match, start: int, end: int):
    password = text[start:end]
    return None if password.lower() == match.group("user").lower() or password.isdigit() else (start, end)


_CLI = (
    # curl -u user:pw, curl --user=user:pw (not `docker run -u 1000:1000`, `-u root:root`)
    (("u(?<=-u)", "r(?<=--user)"), True,
     ((rf"{_START}(?:-u|--user)(?:[ \t]+|=)(?:\\*[\"'])*+(?P<user>[^\s:\"'\\]+):{_ARG}", _check_user_password),),
     rf"""(?i:(?:-u|--user)(?:[ \t]+|=)(?:\\*["'])*[^{_WS}:"'\\]+:)"""),
    # mysql -pPW, mysqldump -u root -pPW db (the password glued to -p; -P is the port)
    (("q(?<=mysq)", "b(?<=mariadb)"), False,
     (rf"(?i:mysql\w*|mariadb\w*)(?:[ \t]+[^\s|;&]+)*?[ \t]+-p{_ARG.replace('(?!-)', '')}",),
     r"(?i:(?:mysql|mariadb)[^\n]*[ \t]-p)"),
    # docker / podman / helm ... login -p PW, sshpass -p PW, redis-cli -a PW
    (("g(?<=log)(?=in)", "h(?<=ssh)(?=pass)", "-(?<=redis-)(?=cli)"), True,
     (rf"{_START}(?:login|sshpass)\b[^\n|;&]*?[ \t](?:-p|--password)(?:[ \t]+|=){_ARG}",
      rf"{_START}redis-cli\b[^\n|;&]*?[ \t](?:-a|--pass)[ \t]+{_ARG}"),
     r"(?i:(?:login|sshpass)[^\n|;&]*[ \t](?:-p|--password)(?:[ \t]+|=)|redis-cli[^\n|;&]*[ \t](?:-a|--pass)[ \t])"),
    # --password PW, --token PW, --client-secret PW (a space, not `=`: that is an assignment)
    (("-(?<=--)(?=[a-z0-9-]*(?:passw|secret|token|api-key|access-key))",), True,
     (rf"{_START}--(?:[a-z0-9-]*-)?(?:passw(?:or)?d|secret|token|api-key|access-key|secret-key)[ \t]+{_ARG}",),
     r"(?i:--(?:[a-z0-9-]*-)?(?:passw(?:or)?d|secret|token|api-key|access-key|secret-key)[ \t])"),
    # aws configure set aws_secret_access_key V, npm config set //host/:_authToken V
    (("g(?<=config)",), True, (rf"{_START}config(?:ure)?[ \t]+set[ \t]+(?:--?[\w-]+[ \t]+)*[^\s=]*?(?:{_WORDS}|pass|pwd)[ \t]+{_ARG}",),
     r"(?i:config(?:ure)?[ \t]+set[ \t])"),
)


# a `.netrc` password: `machine HOST login USER password PW`, or `password PW` alone on its line
# (not a lowercase word there: `password required` is prose)
def _check_netrc_line(text: str, match: re.Match, start: int, end: int):
    value = text[start:end]
    return None if value.lower() in _STOP or (value.isalpha() and value.islower()) else (start, end)


_NETRC = (rf"{_START}login[ \t]+[^\s\"'\\]+[ \t]+password[ \t]+{_ARG}",
          (rf"(?:^|(?<=\n)|(?<=\\n))[ \t]*password[ \t]+{_ARG}[ \t]*(?=$|\r?\n|\\+[nr])", _check_netrc_line))


# AWS's secret access key where no key names it: the console's CSV, `aws sts ... --output text`
# or `table`, the bare output of `aws configure get`. 40 characters of base64 standing alone (a
# space, quote, comma or `|` around them, never `=`, `.`, `-`), with a digit and letters and not
# all hexadecimal (a git SHA). Run on the text with its escapes blanked: `\t` before it is a space.
_TOKEN_CHAR = r"[A-Za-z0-9/+]"
_STANDALONE_40 = (rf"(?<![A-Za-z0-9/+=._~-])(?={_TOKEN_CHAR}{{0,39}}[0-9])"
                  rf"(?=(?:{_TOKEN_CHAR}{{0,39}}[A-Za-z]){{2}})(?![0-9a-fA-F]{{40}}(?!{_TOKEN_CHAR}))"
                  rf"{_TOKEN_CHAR}{{40}}(?![A-Za-z0-9/+=._~-])(?P<aws_secret_key>)")
# what it holds, in the raw text: the 40 characters, after an escape's last character too
_STANDALONE_40_PREFILTER = (r"""(?:^|[^A-Za-z0-9/+=._~-]|\\[nrtbf"/']|\\u[0-9A-Fa-f]{4})"""
                            r"[A-Za-z0-9/+]{40}(?:$|[^A-Za-z0-9/+=._~-])")
_PRINTABLE = frozenset(b"\t\n\r" + bytes(range(32, 127)))


def _check_standalone(text: str, match: re.Match, start: int, end: int):
    """Not a path (`/tmp/tmpovkwa9k2/crush/projects/webshop/`), nor base64 of text (a small file's
    `Data`): a key decodes to random bytes, 30 of them all printable by chance about once in 10^13."""
    value = text[start:end]
    if value.count("/") >= 2 and (value[0] == "/" or value[-1] == "/" or any(
            len(part) >= 3 and part.isalpha() and part.islower() for part in value.split("/"))):
        return None
    try:
        if set(base64.b64decode(value, validate=True)) <= _PRINTABLE:
            return None
    except ValueError:
        pass
    return start, end


# an STS session token, by the prefix every one starts with (`FwoGZXIvYXdz`, `IQoJb3JpZ2luX2Vj`)
_SESSION_TOKEN = r"(?:F[wQ]oGZXIvYXdz|[IA][Qg]oJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{20,}(?P<aws_session_token>)"


# an Azure SAS's signature, in a URL's query or a connection string's SharedAccessSignature: an
# HMAC-SHA256 in base64 (43 characters and `=`), URL-encoded or not. Only the signature goes: what
# the SAS grants and until when stay readable. detect-secrets has a rule for the account key only.
_SAS_SIGNATURE = r"(?:(?<=[?&])|(?<=\\u0026))sig=(?P<azure_sas>(?:[A-Za-z0-9+/]|%2[BbFf]){43}(?:=|%3[Dd]))"


def _check_rule(text: str, match: re.Match, start: int, end: int):
    """A detect-secrets match: its longest group of 8+ characters (the value of an assignment),
    else the whole match less the boundary characters some rules take (`"`, space, `=`); never
    ending inside an escape."""
    groups = [match.span(i) for i in range(1, (match.re.groups or 1)) if match.span(i)[0] >= 0]
    longest = max(groups, key=lambda span: span[1] - span[0], default=(0, 0))
    if longest[1] - longest[0] >= 8:
        start, end = longest
    subject = match.string  # the text with its escapes blanked
    while start < end and subject[start] in " \t\r\n\"'=:":
        start += 1
    while start < end and subject[end - 1] in " \t\r\n\"'\\":
        end -= 1
    return (start, end) if start < end else None


_RULES = tuple(  # run on the text with its escapes blanked (None): their rules want a space around a token
    (redact_rules.GATES.get(plugin, ""), None,
     tuple((f"{pattern}(?P<{kind}>)", _check_rule) for k, p_, pattern in redact_rules.RULES
           if p_ == plugin for kind in (k,)), redact_rules.PREFILTERS.get(plugin, ""))
    for plugin in dict.fromkeys(p_ for _, p_, _ in redact_rules.RULES)
)


# (gate, on the lowercased text?, patterns[, prefilter]). Scanning text once per shape costs more
# than the matching, so one gate regex runs first, on the lowercased text, and a shape's patterns
# run only where its gate fired. Each gate starts with its trigger's rarest letter, which the
# engine skips to; "" = always run. The prefilter, where given, is what whole columns are
# scanned for instead of the gate (see "whole columns" below): a pattern without lookarounds
# that every match of the shape's patterns contains.
_SHAPES = (
    (r"v(?<=priv)(?=ate)", False, (_PEM + "(?P<private_key>)",), r"-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY"),
    ("", False, (r"A[KS]IA[A-Z0-9]{16}(?P<aws_access_key>)",)),  # ASIA has no rare letter
    ("", None, ((_STANDALONE_40, _check_standalone),), _STANDALONE_40_PREFILTER),
    (r"y(?<=gzxivy)(?=xdz)|j(?<=b3j)(?=pz2lux2vj)", False, (_SESSION_TOKEN,),
     r"F[wQ]oGZXIvYXdz|[IA][Qg]oJb3JpZ2luX2Vj"),
    (r"w(?<=passw)(?=ord[ \t])", True, _NETRC,
     rf"""(?i:login[ \t]+[^{_WS}"'\\]+[ \t]+password[ \t]|(?:^|\n|\\n)[ \t]*password[ \t])"""),
    (r"_(?<=gh[pousr]_)|_(?<=github_)(?=pat_)", False,
     (r"gh[pousr]_[A-Za-z0-9]{30,}(?P<github_token>)", r"github_pat_[A-Za-z0-9_]{20,}(?P<github_token>)")),
    (r"k(?<=sk)(?=[-_])", False, (_SK,), r"sk(?:-[A-Za-z0-9_-]{20}|_(?:live|test)_)"),
    (r"k(?<=rk)(?=_)", False, (r"rk_(?:live|test)_[A-Za-z0-9]{16,}(?P<stripe_key>)",), "rk_(?:live|test)_"),
    (r"x(?=ox[abposr]-)", False, (r"xox[abposr]-[A-Za-z0-9-]{10,}(?P<slack_token>)",)),
    (r"p(?<=xap)(?=p-)|e(?<=xoxe)(?=[.-])", False,
     (r"(?:xapp|xoxe(?:\.xox[abposr])?)-[A-Za-z0-9-]{10,}(?P<slack_token>)",)),
    (r"_(?<=whsec_)", False, (r"whsec_[A-Za-z0-9+/=]{24,}(?P<stripe_key>)",)),
    (r"k(?<=slack)(?=\.com/)", False,
     (r"hooks\.slack\.com/(?P<slack_webhook>(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,})",)),
    (r"z(?<=aiz)(?=a)", False, (r"AIza[A-Za-z0-9_-]{35}(?P<google_api_key>)",)),
    (r"-(?<=glpat-)", False, (r"glpat-[A-Za-z0-9_-]{20,}(?P<gitlab_token>)",)),
    (r"_(?<=npm_)", False, (r"npm_[A-Za-z0-9]{30,}(?P<npm_token>)",), r"npm_[A-Za-z0-9]{30}"),
    (r"_(?<=hf_)", False, (r"hf_[A-Za-z0-9]{30,}(?P<huggingface_token>)",), r"hf_[A-Za-z0-9]{30}"),
    (r"j(?<=eyj)", False, (r"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*(?P<jwt>)",),
     r"eyJ[A-Za-z0-9_-]{5,}\.eyJ"),
    (r":(?=//)", False, (rf"://[^\s:/@\"'\\\[]*:(?P<url_password>{_NOT_REF}[^\s/\"'\\]+)@",),
     rf"""://[^{_WS}:/@"'\\\[]*:[^{_WS}/"'\\]+@"""),
    (r"g(?<=sig)(?==)", False, (_SAS_SIGNATURE,), r"sig=(?:[A-Za-z0-9+/]|%2[BbFf]){43}"),
    (r"z(?<=authoriz)", True, (_AUTHORIZATION,), r"""(?i:authorization(?:\\*["'])?[ \t]*[:=])"""),
    (r"b(?=earer)", True, (rf"bearer[ \t]+(?=[a-z0-9._~+/=-]*[0-9])(?P<auth_header>{_NOT_REF}{_B64}{{8,}}+)",),
     r"(?i:bearer[ \t]+[a-z0-9._~+/=-]{8})"),
    (r"w(?<=passw)", True, (_assignment(_KEYS[0]),), _ASSIGNED),
    (r"c(?<=sec)(?=ret)", True, (_assignment(_KEYS[1]), _assignment("aws_secret_access_key", "aws_secret_key")),
     _ASSIGNED),
    (r"k(?<=tok)(?=en)", True, (_assignment(_KEYS[2]),), _ASSIGNED),
    (r"k(?<=[ies_-]k)(?=ey)", True, (_assignment(_KEYS[3]),), _ASSIGNED),  # api_key, privatekey, access-key
    (("s(?<=pas)(?=s)", "w(?<=[_-]pw)", "k(?<=tok)(?=en)", "c(?<=sec)(?=ret)", "k(?=ey)", "h(?<=auth)",
      "d(?<=cred)(?=ential)"), True, ((_ENV, _check_env), (_NAMED, _check_assignment)), _ASSIGNED),
    *_CLI,
    *_RULES,
)
def _alternatives(gate) -> list[str]:
    return [a for a in (gate.split("|") if isinstance(gate, str) else gate) if a]


_GATE = re.compile("|".join(f"(?:{alternative})(?P<g{i}_{j}>)" for i, (gate, *_) in enumerate(_SHAPES)
                            for j, alternative in enumerate(_alternatives(gate))))
_ALWAYS = frozenset(i for i, (gate, *_) in enumerate(_SHAPES) if not gate)
_REGEXES = tuple((lowered, tuple((re.compile(p), None) if isinstance(p, str) else (re.compile(p[0]), p[1])
                                 for p in patterns)) for _, lowered, patterns, *_ in _SHAPES)
_MARKERS = frozenset({"key", "user"})  # named groups that are not kinds
KINDS = frozenset(re.sub(r"_\d+$", "", n) for _, rs in _REGEXES for r, _ in rs for n in r.groupindex) - _MARKERS
_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _lower(text: str) -> str:
    low = text.lower()  # positions must match the text's: a rare character lowers to two
    return low if len(low) == len(text) else text.translate(_ASCII_LOWER)


# an escape, at any depth of JSON in JSON (`\\n`, `\\\\n`, `\\u00e9`): blanked, the text keeps its length
_ESCAPE = re.compile(r"\\+(?:u[0-9A-Fa-f]{4}|[nrtbf\"/'])?|[^\x00-\x7f]|['`]")  # and non-ASCII and quotes


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


# The gate reports one alternative per position, the first that fires there: where another
# shape's gate starts with the same character, it is tried at that position too.
_BY_TRIGGER: dict[str, list[tuple[int, re.Pattern]]] = {}
for _i, (_gate_, *_) in enumerate(_SHAPES):
    for _alternative in _alternatives(_gate_):
        _trigger = _alternative[1] if _alternative[0] in "\\[" else _alternative[0]
        _BY_TRIGGER.setdefault(_trigger, []).append((_i, re.compile(_alternative)))


def _gate(low: str) -> list[tuple[int, int]]:  # (position, shape) wherever a gate fires
    fired = []
    for m in _GATE.finditer(low):
        position, shape = m.start(), int(m.lastgroup[1:].partition("_")[0])
        fired.append((position, shape))
        fired += ((position, i) for i, regex in _BY_TRIGGER[low[position]] if i != shape and regex.match(low, position))
    return fired


def _matches(text: str) -> list[tuple[int, int, int, str]]:
    """(start, match start, end, kind) of every shape's matches, overlaps included."""
    low, found, blanked = _lower(text), [], None
    for lowered, regexes in (_REGEXES[i] for i in _ALWAYS.union(i for _, i in _gate(low))):
        if lowered is None:
            blanked = blanked or _ESCAPE.sub(lambda m: " " * len(m.group()), text)
        subject = low if lowered else text if lowered is not None else blanked
        for regex, check in regexes:
            match = regex.search(subject)
            while match:
                name = match.lastgroup
                start, end = match.span(name)
                if start == end:  # the empty marker: the whole match is the secret
                    start, end = match.span()
                span = check(text, match, start, end) if check else (start, end)
                if span:
                    found.append((_past_escape(text, span[0]), match.start(), span[1], re.sub(r"_\d+$", "", name)))
                match = regex.search(subject, match.end() if match.end() > match.start() else match.end() + 1)
    return found


_GENERIC = frozenset({"secret_assignment", "cli_password"})  # kinds that say where, not what


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each secret in `text`, in order; overlapping finds are merged."""
    found: list[tuple[str, int, int]] = []
    for start, _, end, kind in sorted(_matches(text)) if text else ():
        if found and start < found[-1][2]:  # inside the previous one (`token=ghp_...`): the token names it
            named = kind if found[-1][0] in _GENERIC and kind not in _GENERIC else found[-1][0]
            found[-1] = (named, found[-1][1], max(end, found[-1][2]))
        elif start < end:
            found.append((kind, start, end))
    return found


# A printable character written as a JSON escape (`\u0073k-ant-...`, at any depth of JSON in
# JSON): no encoder writes one, but a reader decoding the text reads the key it spells. Not
# `"`, `\` (their escapes are needed), `<`, `>`, `&` (Go's encoder escapes them), `'` (some do).
_SPELT_ESCAPE = r"\\u00(?:2[134589a-fA-F]|3[0-9abdfABDF]|[46][0-9a-fA-F]|5[0-9abd-fABD-F]|7[0-9a-eA-E])"
_SPELT = re.compile(rf"\\+{_SPELT_ESCAPE[2:]}")  # the backslashes of every depth with it


def redact_text(text: str) -> tuple[str, Counter]:
    """`text` with each secret replaced by `[REDACTED:<kind>]`, and the kinds replaced. Printable
    characters written as escapes (`_SPELT_ESCAPE`) are read as what they spell; where that shows a secret, the
    text comes back with them written plainly (the same JSON), the secret replaced."""
    text, kinds = _replaced(text)
    if _SPELT.search(text):
        plain, more = _replaced(_SPELT.sub(lambda m: chr(int(m.group()[-2:], 16)), text))
        if more:
            return plain, kinds + more
    return text, kinds


def _replaced(text: str) -> tuple[str, Counter]:
    kinds: Counter = Counter()
    for _ in range(4):  # again on the result: a bounded rule (`{20,50}(?!\w)`) may fit only now
        secrets = find_secrets(text)
        if not secrets:
            break
        pieces, last = [], 0
        for kind, start, end in secrets:
            pieces += (text[last:start], f"[REDACTED:{kind}]")
            last = end
        text = "".join(pieces) + text[last:]
        kinds.update(kind for kind, _, _ in secrets)
    return text, kinds


# --- whole columns ----------------------------------------------------------------------
# redact_text runs Python regexes over a cell; on every cell of a column that is most of a team
# ingest. A cell can hold a secret only where a shape's gate fires (or an ungated shape matches:
# `_matches` runs nothing else), so one regex over the whole column, in polars (Rust's regex
# engine: linear time, no lookarounds), picks the few cells that may, and only those go through
# redact_text: what comes out is redact_text's, cell by cell. The column regex takes each shape's
# prefilter, or its gate with the lookarounds made part of the match (`k(?<=tok)(?=en)` ->
# `token`), case-insensitive as the gates see lowercased text (Python lowers only A-Z and the
# Kelvin sign to ASCII; Rust folds both). It is wider than the gates and shapes, never narrower;
# tests/test_redact_columnar.py checks that against redact_text on every cell.


def _group_end(pattern: str, start: int) -> int:
    """The index just past the group that opens at `start`."""
    depth, i = 0, start
    while True:
        char = pattern[i]
        if char == "\\":
            i += 1
        elif char == "[":
            i = pattern.index("]", i + 2)
        elif char in "()":
            depth += 1 if char == "(" else -1
            if not depth:
                return i + 1
        i += 1


def _folded(alternative: str) -> str:
    """A gate alternative as a plain pattern: its lookbehind (which ends with the trigger
    character) and its lookahead, one after the other, case-insensitive."""
    trigger = re.match(r"\\.|\[[^\]]*\]|.", alternative).group()
    rest, behind, ahead = alternative[len(trigger):], trigger, ""
    if rest.startswith("(?<="):
        end = _group_end(rest, 0)
        behind, rest = rest[4:end - 1], rest[end:]
        if not re.search(rf"(?:{trigger})$", behind):
            raise ValueError(f"gate {alternative!r}: the lookbehind must end with the trigger {trigger!r}")
    if rest.startswith("(?="):
        end = _group_end(rest, 0)
        ahead, rest = rest[3:end - 1], rest[end:]
    if rest:
        raise ValueError(f"gate {alternative!r}: expected a trigger, (?<=...) and (?=...), found {rest!r}")
    return f"(?i:(?:{behind}){f'(?:{ahead})' if ahead else ''})"


def _prefilters(gate, lowered, patterns, prefilter="") -> list[str]:
    """What a column is scanned for on a shape's behalf."""
    if prefilter or gate:
        return [prefilter] if prefilter else [_folded(alternative) for alternative in _alternatives(gate)]
    if lowered is None:  # on blanked text, a shape's own pattern is no prefilter for the raw text
        raise ValueError(f"an ungated rule on blanked text needs a gate or a prefilter: {patterns}")
    plain = [re.sub(r"\(\?P<\w+>", "(?:", p if isinstance(p, str) else p[0]) for p in patterns]
    return [f"(?i:{p})" if lowered else p for p in plain]


_PREFILTERS = tuple(dict.fromkeys([*(p for shape in _SHAPES for p in _prefilters(*shape)), _SPELT_ESCAPE]))
COLUMN_PREFILTER = "|".join(_PREFILTERS)
# the standalone AWS secret's counted run, in one regex with the others, made the whole scan much
# slower; as a scan of its own it adds far less (docs/BENCHMARKS.md, "Figures behind the code's
# choices")
_SCANS = ("|".join(p for p in _PREFILTERS if p != _STANDALONE_40_PREFILTER), _STANDALONE_40_PREFILTER)
_TEXT_TYPES = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)


def _is_text(type_: pa.DataType) -> bool:
    return any(is_(type_) for is_ in _TEXT_TYPES)


# Up to this many cells (a run log row, a small source's dict rows) each goes through the rules
# directly: the column scan's set-up is then the bulk of the work (docs/BENCHMARKS.md, "Figures
# behind the code's choices"). The prefilter is wider than every rule
# (tests/test_redact_columnar.py), so the same cells change.
FEW_CELLS = 64


def _secret_edits(columns: list) -> tuple[list[dict[int, str]], Counter]:
    """redact_text on every cell of each column (Arrow text arrays), all scanned in one pass:
    for each column, {row: redacted text} of the cells it changes; and the kinds found."""
    ends = list(accumulate(len(column) for column in columns))
    edits: list[dict[int, str]] = [{} for _ in columns]
    counts: Counter = Counter()
    done: dict[str, tuple[str, Counter]] = {}  # a repeated value (a path, a title) is redacted once
    for position, value in _candidates(columns, ends[-1] if ends else 0):
        text, kinds = done.get(value) or done.setdefault(value, redact_text(value))
        counts.update(kinds)
        if text != value:
            column = bisect_right(ends, position)
            edits[column][position - (ends[column - 1] if column else 0)] = text
    return edits, counts


def _candidates(columns: list, cells: int):
    """(position, text) of the cells that may hold a secret, positions counted across columns."""
    if cells <= FEW_CELLS:
        values = (v for column in columns for v in column.to_pylist())
        return [(i, v) for i, v in enumerate(values) if v]
    # one Series over one chunked array: a Series per column cost its set-up each
    # (docs/BENCHMARKS.md, "Figures behind the code's choices")
    chunks = [chunk for column in columns for chunk in (column.chunks if isinstance(column, pa.ChunkedArray) else [column])]
    if len({chunk.type for chunk in chunks}) > 1:  # string, large_string, string_view: one type
        chunks = [chunk.cast(pa.large_string()) for chunk in chunks]
    scanned = pl.Series(values=pa.chunked_array(chunks, chunks[0].type))
    picked = scanned.str.contains(_SCANS[0])
    for prefilter in _SCANS[1:]:
        picked = picked | scanned.str.contains(prefilter)
    positions = picked.arg_true()
    return zip(positions.to_list(), scanned.gather(positions).to_list())


def _with_edits(column: pa.ChunkedArray, edits: dict[int, str]) -> pa.ChunkedArray:
    """The column with the cells in `edits` replaced."""
    type_ = pa.large_string() if pa.types.is_string_view(column.type) else column.type  # no kernel for views
    mask = [False] * len(column)
    for row in edits:
        mask[row] = True
    replaced = pc.replace_with_mask(column.cast(type_), pa.array(mask), pa.array([edits[r] for r in sorted(edits)], type_))
    return replaced.cast(column.type)


def _digest(value) -> str:
    return "sha256:" + hashlib.sha256(str(value).encode()).hexdigest()


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


# --- rows and tables -------------------------------------------------------------------


def redact_tables(tables: Mapping[str, pa.Table], policy: Policy) -> tuple[dict[str, pa.Table], Counter]:
    """Each table with `policy`'s `<table>.<column>` actions applied, and what was done: secrets
    by kind, and `hash:`/`drop:` cells (non-null values). A column a table lacks is skipped. All
    the text columns are scanned in one pass: one source's tables in one call cost less than
    one call each (the column regex warms up once)."""
    plans = {}
    for table, data in tables.items():
        present = set(data.column_names)
        actions = [(name, action) for name, action in policy.for_table(table) if name in present]
        plans[table] = actions, [name for name, action in actions
                                 if action == "redact" and _is_text(data.schema.field(name).type)]
    edits, counts = _secret_edits([tables[table].column(name) for table, (_, texts) in plans.items() for name in texts])
    edited, done = iter(edits), {}
    for table, (actions, texts) in plans.items():
        data = tables[table]
        for name, changed in zip(texts, edited):
            if changed:
                data = data.set_column(data.schema.get_field_index(name), name, _with_edits(data.column(name), changed))
        for name, action in actions:
            if action in ("hash", "drop"):
                column = data.column(name)
                if len(column) - column.null_count:
                    counts[f"{action}:{table}.{name}"] += len(column) - column.null_count
                column = (pa.nulls(len(column), column.type) if action == "drop" else
                          pa.array([None if v is None else _digest(v) for v in column.to_pylist()], pa.string()))
                data = data.set_column(data.schema.get_field_index(name), name, column)
        done[table] = data
    return done, counts


def redact_table(table_name: str, data: pa.Table, policy: Policy) -> tuple[pa.Table, Counter]:
    """redact_tables on one table."""
    done, counts = redact_tables({table_name: data}, policy)
    return done[table_name], counts


def redact_rows(rows: dict[str, list[dict]], policy: Policy) -> Counter:
    """redact_tables' work on rows as lists of dicts, in place (the `sources` run log, tests):
    the same cells change, the same counts come back. Non-text values are not redacted."""
    cells = {(table, column): [row for row in table_rows if isinstance(row.get(column), str) and row[column]]
             for table, table_rows in rows.items() for column, action in policy.for_table(table) if action == "redact"}
    arrays, odd = [], set()
    for (table, column), with_text in cells.items():
        try:
            arrays.append(pa.array([row[column] for row in with_text], pa.string()))
        except UnicodeEncodeError:  # a lone surrogate: no Arrow string holds it, redact_text does
            odd.add((table, column))
            arrays.append(pa.array([], pa.string()))
    edits, counts = _secret_edits(arrays)
    for (key, with_text), changed in zip(cells.items(), edits):
        if key in odd:
            for i, row in enumerate(with_text):
                changed[i], kinds = redact_text(row[key[1]])
                counts.update(kinds)
        for i, text in changed.items():
            with_text[i][key[1]] = text
    for table, table_rows in rows.items():
        for column, action in policy.for_table(table):
            if action in ("hash", "drop"):
                counts += Counter({f"{action}:{table}.{column}": _hash_or_drop(table_rows, column, action)})
    return counts


def _hash_or_drop(rows: list[dict], column: str, action: str) -> int:
    """Hash or drop the column's non-null values; how many."""
    done = [row for row in rows if row.get(column) is not None]
    for row in done:
        row[column] = None if action == "drop" else _digest(row[column])
    return len(done)


def redact_log_row(row: dict, policy: Policy) -> Counter:
    """Apply `policy`'s `sources.<column>` actions to one row of the `sources` run log, in place:
    its text fields (`warnings`, `error`, `db_path`, `project_path`, ...) lose their secrets as a
    data table's do (an unknown part type's name, an error quoting a command, can hold a key).
    Returns the counts `redact_rows` gives. Call it on the row before it is written, in team mode
    only, with the policy the source's data rows had."""
    return redact_rows({"sources": [row]}, policy)
