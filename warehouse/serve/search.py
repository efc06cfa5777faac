"""`agentlake search`: messages and tool calls ranked by BM25 over the search index.

The index (warehouse.catalog.search_index) is a DuckDB file beside the catalog, kept by the
merge; a search opens it read-only and reads nothing else. `search` is the one entry point, for
the CLI, the MCP server and the dashboard's search page alike.

Query syntax (QUERY_HELP): words, all of which a document must hold (stemmed: `migrations`
finds `migrate`; case and accents ignored; what is not a letter or a digit, in any script,
splits words, so `src/auth.py` is the words src, auth and py; a Chinese or Japanese character is
a word of its own); a "quoted phrase" must also appear as written
(case ignored); a -word must not appear, nor another word of its stem. English stop words (the,
a, of, ...) are ignored.

The scores are fts's BM25 (`match_bm25`'s formula and parameters), computed from the index's
own tables for the query's terms alone (`bm25_sql`); the best are ranked before their texts are
read (docs/BENCHMARKS.md, "Search").
"""

import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from pathlib import Path

import duckdb

from warehouse.catalog.search_index import CJK_RANGES, STEMMER, open_fts, search_path
from warehouse.lake.zones import UTC, clock
from warehouse.serve.report import Filters, unknown_name

QUERY_HELP = ("words that must all appear (stemmed, so migrations finds migrate; case ignored; what is not a "
              "letter or digit splits words); a \"quoted phrase\" that must appear as written; -word that must "
              "not appear (nor a word of its stem). English stop words (the, a, of) are ignored")
KINDS = ("message", "tool_call")
SNIPPET_CHARS = 220
LISTED_TOOLS = 12  # tools named when an unknown one has no close match
MARK = "**"  # around each match in a snippet (Markdown's bold: terminals and the MCP client read it)


class BadQuery(ValueError):
    """A query or a filter that cannot be searched: said to the user (the CLI's exit 2)."""


class NoIndex(FileNotFoundError):
    """No search index beside the warehouse yet."""


class Hits(list):
    """The hits shown, best first, and `total`: how many matched in all (a limit cuts the list)."""

    def __init__(self, hits=(), total: int = 0):
        super().__init__(hits)
        self.total = max(total, len(self))
        # no hit, and the window holds no document of the other filters: (first, last) day the index
        # holds of them (a docs example's --last 30d found nothing in the demo, without a word why)
        self.held: tuple | None = None

    def counted(self) -> str:
        """`3 hits`, or `10 of 1,234 hits` when the limit cut them."""
        noun = "hit" if self.total == 1 else "hits"
        return f"{len(self):,} {noun}" if len(self) == self.total else f"{len(self):,} of {self.total:,} {noun}"


@dataclass(frozen=True)
class SearchFilters(Filters):
    """The report's filters (days of `date`, UTC; project, provider, user, machine), and:"""

    role: str | None = None  # user, assistant, system, developer, tool (tool calls, and tool results' messages)
    tool: str | None = None  # a tool's native name or its category (shell, read, edit, ...)
    kind: str | None = None  # message or tool_call


@dataclass
class Hit:
    provider: str  # the agent
    machine: str
    user: str
    source_id: str
    session_id: str  # with provider, machine and source_id: the session (an id is unique within its source)
    project: str | None
    at: datetime | None  # when the message was sent or the tool called (UTC)
    role: str | None
    kind: str  # message or tool_call
    tool_name: str | None
    file_path: str | None
    snippet: str  # the text around the first match, each match between MARK (or as search's `mark` wrote it)
    score: float  # BM25; higher is better, comparable within one search only
    open_sql: str = ""  # the session's transcript as SQL (`agentlake sql`)
    open_command: str = ""  # that query as a command line
    dashboard_path: str = ""  # the session's page on `agentlake dashboard`, at the message
    message_id: str | None = None
    tool_call_id: str | None = None


@dataclass
class Query:
    words: list[str] = field(default_factory=list)  # ranked, all required
    phrases: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)


def parse(text: str) -> Query:
    """QUERY_HELP's syntax; BadQuery for an empty query, an unclosed quote or nothing to look for."""
    if text.count('"') % 2:
        raise BadQuery(f"unclosed quote in {text!r}: a phrase is \"between two quotes\"")
    q = Query()
    for minus, phrase, word in re.findall(r'(-?)"([^"]*)"|(\S+)', text):
        if minus and phrase.strip():  # read as "not the first word, but the last", it found the opposite
            raise BadQuery(f"a phrase cannot be excluded: -\"{phrase}\" in {text!r}; exclude its words one by "
                           f"one ({' '.join('-' + w for w in phrase.split())})")
        if phrase.strip():
            q.phrases.append(" ".join(phrase.split()))
            q.words += _words(phrase)
        elif word.startswith("-") and len(word) > 1:
            q.excluded += _words(word[1:])
        elif word:
            q.words += _words(word)
    if not q.words:
        raise BadQuery(f"nothing to search for in {text!r}: give a word (" + QUERY_HELP + ")")
    return q


def _words(text: str) -> list[str]:
    """The query's words as the index holds them (`tokens`): `café` is `cafe`, not `caf`."""
    return [w for _, _, w in tokens(text)]


def check_filters(filters: SearchFilters) -> None:
    """BadQuery for a kind the index has not, or filters no document can meet together: a tool
    call's role is `tool` and it names a tool; a message names none (one of role `tool`, a tool's
    result that an agent records as a message with text of its own, is still a message)."""
    if filters.kind is not None and filters.kind not in KINDS:
        raise BadQuery(f"no kind {filters.kind!r}: message or tool_call")
    calls_only = [said for said, on in ((f"tool {filters.tool}", filters.tool is not None),
                                        ("kind tool_call", filters.kind == "tool_call")) if on]
    messages_only = [said for said, on in ((f"role {filters.role}", filters.role not in (None, "tool")),
                                           ("kind message", filters.kind == "message")) if on]
    if calls_only and messages_only:
        raise BadQuery(f"{messages_only[0]} keeps messages and {calls_only[0]} keeps tool calls: no hit is both "
                       "(a tool call's role is tool); leave one out")


def search(con_or_paths, query: str, filters: SearchFilters | None = None, limit: int = 20,
           mark=None, offset: int = 0) -> Hits:
    """The `limit` best documents for `query` (QUERY_HELP), best first, among those `filters` keep
    (their days are those of `filters.zone`), and how many matched in all (`Hits.total`).

    `con_or_paths`: the warehouse's catalog (`<home>/warehouse.ducklake`: its index is the
    `warehouse.search.duckdb` beside it), the index file itself, or a connection from
    `warehouse.catalog.search_index.open_fts` (left open). Each Hit names its session (provider,
    machine, source_id, session_id), when and who, a snippet with the matches marked, its BM25
    score, and how to open the whole session (`open_sql`, `open_command`, `dashboard_path`).
    `mark(piece, matched)` writes each piece of a snippet (default: each match between MARK).
    `offset`: the best hits skipped (a page after the first: only its own bodies are read).
    Raises BadQuery for a query or filter that cannot be searched (an unknown project or agent is
    said with the close names the index holds), NoIndex when there is no index yet. Reads only."""
    q = parse(query)
    filters = filters or SearchFilters()
    if limit < 1:
        raise BadQuery(f"--limit must be 1 or more, not {limit}")
    check_filters(filters)
    if isinstance(con_or_paths, duckdb.DuckDBPyConnection):
        return _search(con_or_paths, q, filters, limit, mark, offset)
    path = Path(con_or_paths)
    if path.suffix == ".ducklake":
        path = search_path(path)
    if not path.exists():
        raise NoIndex(f"no search index at {path}: `agentlake merge` builds it")
    with open_fts(path) as con:
        return _search(con, q, filters, limit, mark, offset)


def _unknown_tool(con, tool: str) -> str | None:
    """A --tool no tool call in the index has, named with the close names (native or category)."""
    from difflib import get_close_matches

    names = {n for (n,) in con.execute("SELECT DISTINCT lower(tool_name) FROM docs WHERE tool_name IS NOT NULL "
                                       "UNION SELECT DISTINCT tool_category FROM docs WHERE tool_category IS NOT NULL"
                                       ).fetchall()}
    if tool.lower() in names:
        return None
    if not names:
        return f"no tool {tool!r} in the index: it holds no tool call"
    close = get_close_matches(tool.lower(), sorted(names), 3, 0.6)
    listed = ", ".join(sorted(names)[:LISTED_TOOLS]) + (", ..." if len(names) > LISTED_TOOLS else "")
    return f"no tool {tool!r} in the index" + (f" (close ones: {', '.join(close)})" if close else
                                               f"; its categories and names: {listed}")


def _day(zone: str) -> str:
    """A document's day in `zone`: the index's `date` is the UTC day of its time (`at`, naive UTC)."""
    if zone == UTC:
        return "date"
    name = zone.replace("'", "''")
    return f"""COALESCE(CAST(timezone('{name}', timezone('UTC', "at")) AS DATE), date)"""


def _search(con, q: Query, filters: SearchFilters, limit: int, mark=None, offset: int = 0) -> Hits:
    hits = _found(con, q, filters, limit, mark, offset)
    if not hits.total and (filters.since or filters.until):
        hits.held = _days_held_elsewhere(con, filters)
    return hits


def _days_held_elsewhere(con, filters: SearchFilters) -> tuple | None:
    """(first, last) day of the documents the other filters keep, when none is in the window."""
    from dataclasses import replace

    day = _day(filters.zone)
    clauses, params = _kept(replace(filters, since=None, until=None))
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    first, last, inside = con.execute(
        f"SELECT MIN({day}), MAX({day}), COUNT(*) FILTER (WHERE {day} BETWEEN ? AND ?) FROM docs {where}",
        [filters.since or date.min, filters.until or date.max, *params]).fetchone()
    return (first, last) if first is not None and not inside else None


def _kept(filters: SearchFilters) -> tuple[list[str], list]:
    """The documents `filters` keep, as SQL conditions on `docs` and their parameters: the days (of
    its zone), project, agent, user and machine, role, kind and tool."""
    where, params = filters.where(_day(filters.zone))
    clauses = [where.removeprefix("WHERE ")] if where else []
    for column, value in (("role", filters.role), ("kind", filters.kind)):
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(value)
    if filters.tool is not None:  # as --agent and the rest: any case (Bash is bash)
        clauses.append("(lower(tool_name) = lower(?) OR tool_category = lower(?))")
        params += [filters.tool, filters.tool]
    return clauses, params


def _found(con, q: Query, filters: SearchFilters, limit: int, mark=None, offset: int = 0) -> Hits:
    unknown = [s for s in (unknown_name(con, what, value, column, table="docs") for what, value, column in
                           (("project", filters.project, "project"), ("agent", filters.provider, "provider"),
                            ("user", filters.user, '"user"'), ("machine", filters.machine, "machine"))
                           if value is not None) if s]
    if filters.tool is not None:
        unknown += [s for s in [_unknown_tool(con, filters.tool)] if s]
    if unknown:
        raise BadQuery("; ".join(unknown))
    clauses, params = _kept(filters)
    for phrase in q.phrases:
        clauses.append("strpos(lower(body), ?) > 0")
        params.append(phrase.lower())
    extra = (" AND " + " AND ".join(clauses)) if clauses else ""
    stop = {w for (w,) in con.execute("SELECT sw FROM fts_main_docs.stopwords").fetchall()}
    words = list(dict.fromkeys(w for w in q.words if w not in stop))  # all required: each once
    if not words:
        raise BadQuery(f"only stop words to search for ({', '.join(q.words)}): give another word")
    stems = [s for (s,) in con.execute("SELECT DISTINCT stem(unnest(?), 'porter')", [words]).fetchall()]
    terms = con.execute("SELECT termid, df FROM fts_main_docs.dict WHERE term IN (SELECT unnest(?))",
                        [stems]).fetchall()
    if len(terms) < len(stems):  # a word no document holds: every word is required
        return Hits()
    # -word: the documents holding a word of its stem are left out, as a word is found by its stem
    excluded = [t for (t,) in con.execute(
        "SELECT termid FROM fts_main_docs.dict WHERE term IN (SELECT stem(unnest(?), 'porter'))",
        [q.excluded]).fetchall()] if q.excluded else []
    # the best `limit` ranked on their keys alone, then their texts read: ordered with every
    # column, all the matches' bodies were read and held (a common word matches 100,000s)
    rows = con.execute(f"""
        WITH matched AS (
            SELECT docs.doc_id, scores.score, docs."at"
            FROM ({bm25_sql(terms, excluded)}) AS scores JOIN (SELECT docid, "name" FROM fts_main_docs.docs) AS fd USING (docid)
                 JOIN docs ON docs.doc_id = fd."name"
            WHERE true{extra}),
        best AS (SELECT doc_id, score FROM matched ORDER BY score DESC, "at" DESC, doc_id LIMIT ? OFFSET ?)
        SELECT provider, machine, "user", source_id, session_id, project, "at", role, kind, tool_name,
               file_path, body, score, message_id, tool_call_id, counted.total
        FROM (SELECT COUNT(*) AS total FROM matched) AS counted  -- a row even when `offset` passed them all
             LEFT JOIN (best JOIN docs USING (doc_id)) ON true
        ORDER BY score DESC, "at" DESC, doc_id""", [*params, limit, offset]).fetchall()
    total = rows[0][-1] if rows else 0
    rows = [row for row in rows if row[3] is not None]  # source_id: null on the count's row alone
    matched = matching(con, [row[11] for row in rows], stems)  # the bodies' words the index matched
    return Hits([_hit(row[:-1], matched, q.phrases, mark) for row in rows], total)


# fts's BM25 parameters (match_bm25's defaults)
BM25_K, BM25_B = 1.2, 0.75


def bm25_sql(terms: list[tuple[int, int]], excluded: list[int] = ()) -> str:
    """(docid, score) of the documents holding every one of `terms` ((termid, df) from fts's
    `dict`) and none of `excluded` (term ids), scored as fts's `match_bm25(..., conjunctive := 1)`
    scores them. The term ids are
    written into the query: fts's macro looks them up in a subquery, so its scan of `terms` (a row
    per word of every document) reads every row, where constants let DuckDB skip the row groups
    of other terms (the index keeps `terms` sorted by term: warehouse.catalog.search_index)."""
    def without(ids: list[int]) -> str:
        listed = ", ".join(str(int(t)) for t in ids)
        return f" AND docid NOT IN (SELECT docid FROM fts_main_docs.terms WHERE termid IN ({listed}))" if ids else ""

    ids = ", ".join(str(int(termid)) for termid, _ in terms)
    dfs = " UNION ALL ".join(f"SELECT {int(termid)} AS termid, {int(df)} AS df" for termid, df in terms)
    k, b = BM25_K, BM25_B
    return f"""
        WITH tf AS (SELECT docid, termid, COUNT(*) AS tf FROM fts_main_docs.terms WHERE termid IN ({ids}) GROUP BY ALL),
             every AS (SELECT docid FROM tf GROUP BY docid HAVING COUNT(*) = {len(terms)}{without(excluded)})
        SELECT tf.docid, SUM(log(((s.num_docs - dfs.df) + 0.5) / (dfs.df + 0.5) + 1)
                             * ((tf.tf * ({k} + 1)) / (tf.tf + {k} * ((1 - {b}) + {b} * (d.len / s.avgdl))))) AS score
        FROM tf JOIN every USING (docid) JOIN fts_main_docs.docs AS d USING (docid) JOIN ({dfs}) AS dfs USING (termid),
             fts_main_docs.stats AS s
        GROUP BY tf.docid"""


def _hit(row, matched: set[str], phrases: list[str], mark=None) -> Hit:
    (provider, machine, user, source_id, session_id, project, at, role, kind, tool_name, file_path, body, score,
     message_id, tool_call_id) = row
    sql = transcript_sql(provider, machine, user, source_id, session_id)
    return Hit(provider, machine, user, source_id, session_id, project, at, role, kind, tool_name, file_path,
               snippet(body, matched, phrases, mark=mark), round(score, 4), sql, f"agentlake sql {shell_quoted(sql)}",
               dashboard_path(machine, source_id, session_id, message_id), message_id, tool_call_id)


def marked(piece: str, matched: bool) -> str:
    """A snippet's piece as the terminal and the MCP client read it: a match between MARK."""
    return f"{MARK}{piece}{MARK}" if matched else piece


# the index's tokenizer (search_index.TOKENIZE): lower(strip_accents(text)), split at what is not
# a letter or a digit of any script, a Chinese or Japanese character a word of its own
_RUN = re.compile(r"[^\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]+")  # no ASCII space or punctuation


@lru_cache(maxsize=8192)
def _folded(char: str) -> str:
    """`char` as strip_accents then lower leave it: a mark ("M" categories) is taken out, and what
    is left composed again (a Hangul syllable stays one letter); a final sigma is a sigma, ß is ss."""
    bare = "".join(c for c in unicodedata.normalize("NFD", char) if unicodedata.category(c)[0] != "M")
    return unicodedata.normalize("NFC", bare).lower().replace("ς", "σ").replace("ß", "ss")


@lru_cache(maxsize=8192)
def _wordy(char: str) -> bool:
    """A letter or a digit (Unicode's L and N categories: the index's \\p{L} and \\p{N})."""
    return unicodedata.category(char)[0] in "LN"


def _apart(char: str) -> bool:
    """A word on its own: a Chinese or Japanese character (search_index.CJK_RANGES)."""
    code = ord(char)
    return code >= 0x3005 and any(lo <= code <= hi for lo, hi in CJK_RANGES)


def tokens(text: str):
    """The words of `text` as the index reads them, each as (start, end, word): `end` the span's
    end in `text`, `word` the index's form (no accents, lower case)."""
    for run in _RUN.finditer(text):
        piece = run.group()
        if piece.isascii():  # ASCII letters and digits only
            yield run.start(), run.end(), piece.lower()
            continue
        start = end = None
        word = []
        for i, char in enumerate(piece, run.start()):
            folded = _folded(char)
            if not folded:  # a mark stripped: the letters around it stay one word
                end = i + 1 if start is not None else end
                continue
            for c in folded:
                if _wordy(c) and _apart(c):
                    if start is not None:
                        yield start, end, "".join(word)
                    yield i, i + 1, c
                    start, word = None, []
                elif _wordy(c):
                    start = i if start is None else start
                    end = i + 1
                    word.append(c)
                elif start is not None:
                    yield start, end, "".join(word)
                    start, word = None, []
        if start is not None:
            yield start, end, "".join(word)


def matching(con, bodies: list[str], stems: list[str]) -> set[str]:
    """The words of `bodies` that the index would match to `stems`: the same stem (Porter), and
    not a stop word (the index keeps none). A word starting with a stem is not one: `ts` stems
    to `t`, and `the`, `test` and `tmp` are no match."""
    found = " ".join(sorted({w for body in bodies for _, _, w in tokens(body)}))
    if not found:
        return set()
    # the words as one string: a list parameter of 1,000s of strings cost 10s of milliseconds to bind
    return {w for (w,) in con.execute(
        f"SELECT w FROM unnest(string_split(?, ' ')) AS t(w) WHERE stem(w, '{STEMMER}') IN (SELECT unnest(?)) "
        "AND w NOT IN (SELECT sw FROM fts_main_docs.stopwords)", [found, stems]).fetchall()}


def snippet(body: str, matched: set[str], phrases: list[str] = (), width: int = SNIPPET_CHARS, mark=None) -> str:
    """About `width` characters of `body` around its first match, on one line, each word of
    `matched` (words' index forms: `matching`) and each phrase marked: `mark(piece, matched)`
    writes each piece, matched or not (default `marked`; the dashboard's escapes every piece as HTML)."""
    mark = mark or marked
    spans = [m.span() for p in phrases
             for m in re.finditer(re.escape(p).replace(r"\ ", r"\s+"), body, re.IGNORECASE)]
    spans += [(a, b) for a, b, w in tokens(body) if w in matched]
    spans.sort(key=lambda span: (span[0], -span[1]))
    start = max(0, (spans[0][0] if spans else 0) - width // 3)
    end = start + width
    pieces, done = [], start
    for a, b in spans:
        if a == done and pieces and pieces[-1][1]:  # touching the last match (東 then 京): one mark
            if b <= end:
                pieces[-1] = (body[pieces[-1][2]:b], True, pieces[-1][2])
                done = b
        elif a >= done and b <= end:  # whole in the window, and not inside a phrase marked
            pieces += [(body[done:a], False, done), (body[a:b], True, a)]
            done = b
    pieces = [(piece, hit) for piece, hit, _ in pieces]
    pieces.append((body[done:end], False))
    # on one line: each run of white space one space, none at either end
    pieces = [(re.sub(r"\s+", " ", piece), hit) for piece, hit in pieces]
    pieces[0] = (pieces[0][0].lstrip(), pieces[0][1])
    pieces[-1] = (pieces[-1][0].rstrip(), pieces[-1][1])
    text = "".join(mark(piece, hit) for piece, hit in pieces if piece or hit)
    return ("..." if start else "") + text + ("..." if end < len(body) else "")


def transcript_sql(provider: str, machine: str, user: str, source_id: str, session_id: str) -> str:
    """The session's messages and parts in order (docs/LAKE.md, "Some questions, answered in SQL"),
    `what` each part's text: every column a document of the index is read from (a shell command
    and its output, a tool's name, input and result too), so that a hit's own part is never blank."""
    def lit(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    return ("SELECT m.message_index, m.role, p.part_type, COALESCE(p.text, p.reasoning, "
            "NULLIF(concat_ws(chr(10), p.shell_command, p.shell_output), ''), "
            "NULLIF(concat_ws(chr(10), p.tool_name, p.tool_input, p.tool_result), ''), "
            "p.finish_reason) AS what FROM messages m JOIN parts p USING (provider, machine, \"user\", source_id, "
            f"session_id, message_id) WHERE m.provider = {lit(provider)} AND m.machine = {lit(machine)} "
            f"AND m.\"user\" = {lit(user)} "
            f"AND m.source_id = {lit(source_id)} AND m.session_id = {lit(session_id)} "
            "ORDER BY m.message_index, p.part_index")


def shell_quoted(text: str) -> str:
    """`text` in double quotes for a POSIX shell (the SQL's own quotes are single)."""
    return '"' + re.sub(r'(["\\$`])', r"\\\1", text) + '"'


def dashboard_path(machine: str, source_id: str, session_id: str, message_id: str | None = None) -> str:
    """The session's transcript page, at the message when one is given."""
    from urllib.parse import urlencode

    path = "/session?" + urlencode({"source": source_id, "id": session_id, "machine": machine})
    return path + (f"#{anchor_fragment(message_id)}" if message_id else "")


def message_anchor(message_id: str) -> str:
    """The id of a message's element on the transcript page (a search hit links to it)."""
    return f"m-{message_id}"


def anchor_fragment(message_id: str) -> str:
    """message_anchor as a URL's fragment: percent-encoded (a browser decodes it to find the id)."""
    from urllib.parse import quote

    return quote(message_anchor(message_id), safe="")


def local_time(at: datetime | None, zone: str = UTC) -> str:
    """A hit's time (naive UTC) in `zone`, the zone named."""
    return "no time" if at is None else f"{clock(at, zone):%Y-%m-%d %H:%M} {zone}"


def render(hits: list[Hit], fmt: str = "table", zone: str = UTC) -> str:
    """Hits as a block each (table, times in `zone`) or as a JSON list of objects (times in UTC)."""
    if fmt == "json":
        import json
        from dataclasses import asdict

        return json.dumps([{**asdict(h), "at": h.at.isoformat() + "Z" if h.at else None} for h in hits], indent=2)
    blocks = []
    for n, h in enumerate(hits, 1):
        what = f"{h.tool_name or 'tool'} call" if h.kind == "tool_call" else f"{h.role} message"
        blocks.append(f"{n}. {h.provider} | {h.project} | {local_time(h.at, zone)} | {what} | {h.user}@{h.machine} | score {h.score}\n"
                      f"   {h.snippet}\n"
                      f"   open: {h.open_command}")
    return "\n\n".join(blocks)
