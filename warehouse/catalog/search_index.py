"""The search index behind `agentlake search`: BM25 over messages and tool calls (DuckDB's `fts`).

fts keeps its index as tables and macros in a schema of the indexed table's database, and a
DuckLake catalog refuses them (its commit fails on the macros' NULL-typed columns), so the index
is a DuckDB file of its own beside the catalog, `<stem>.search.duckdb` (`search_path`). It holds:

- `docs`: one row per searchable document with the keys of its session (provider, machine,
  user, source_id, session_id), its project, day and time, role, kind and tool, and its text:
  a message's text, reasoning and bang-mode shell commands and output (its tool calls are
  documents of their own); a tool call's name, command or input, file path and result. A body is
  cut at BODY_CHARS (a file read back whole would outweigh every other word of its session).
- `indexed`: per source (machine/user/provider/source_id), the signature of the landing files
  its documents were read from, as the catalog's `_agentlake_merged` records them.
- fts's schema `fts_main_docs`: the BM25 index over `docs.body` (Porter stems, English stop
  words, letters and digits of any script, a Chinese or Japanese character a word; accents folded,
  case ignored: TOKENIZE).

The merge keeps it current (`warehouse.catalog.build.refresh`), on a copy of the file renamed over
it (a reader opens the old index or the new one, whole, and never meets the writer's lock). Only
the sources whose landing files changed, or that are gone, are read again: their documents are
deleted and read anew, and fts's own tables are updated for those documents alone as
`create_fts_index` would have built them (`_unindex_deleted`, `_index_new`, `_recount`), so fts's
`match_bm25` scores as over a new index. A whole build indexes its documents the same way, into
the tables `create_fts_index` made empty (its tokenizer is not ours). The index is built whole, in
a new file, when there is none, for `merge --full`, for another FORMAT, when it is small
(WHOLE_BELOW) or when the changed sources held more than WHOLE_SHARE of it (docs/BENCHMARKS.md,
"Search"). `indexed` tells a
merge with nothing new to index from one with. The tables hold what was landed, so in team mode
the index holds the redacted text only.
"""

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from warehouse.lake import ducklake
from warehouse.lake.locks import held
from warehouse.catalog.merge import MERGED

# what `meta.format` records: another value is rebuilt whole (1: words of a-z and 0-9 only; 2: fts's
# 571 English stop words)
FORMAT = "3"
BODY_CHARS = 20_000
# the tables a document is read from: a source whose files of these changed is read again
READS = ("messages", "parts", "tool_calls")
# the index's words (TOKENIZE): letters and digits of any script, accents folded (strip_accents)
# and case ignored; what is neither splits words (fts's default also dropped digits, and every
# letter outside a-z). Chinese and Japanese, written without spaces between words, are a word per
# character (CJK_RANGES): `東京` is 東 and 京, and a "quoted phrase" finds them side by side.
IGNORE = r"[^\p{L}\p{N}]+"
# the words left out of the index and of a query: Lucene's English stop set, Elasticsearch's
# `_english_`. fts's own `english` list (571 words) held words people search their sessions for:
# `help`, `value`, `name`, `first`, `use`, `c`, `x`, `example` (a trial: `search help` was refused)
STOP_WORDS = ("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no",
              "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this",
              "to", "was", "will", "with")
CJK_RANGES = ((0x3005, 0x3007), (0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
              (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x20000, 0x3134F))  # ideographs, kana, their marks
CJK = "[" + "".join(f"\\x{{{lo:X}}}-\\x{{{hi:X}}}" for lo, hi in CJK_RANGES) + "]"
# fts's own tokenize macro, with the characters of CJK set apart, Greek's final sigma a sigma
# (lower case keeps ς, and upper case has one Σ for both) and German's ß ss (GRÖSSE is how capitals
# write größe): the index is built and updated with it (_create_fts), and
# warehouse.serve.search.tokens reads a query and a snippet alike
TOKENIZE = (f"string_split_regex(regexp_replace(regexp_replace(replace(replace(lower(strip_accents(CAST(s AS VARCHAR))), "
            f"'ς', 'σ'), 'ß', 'ss'), "
            f"{ducklake.sql_string(IGNORE)}, ' ', 'g'), {ducklake.sql_string('(' + CJK + ')')}, ' \\1 ', 'g'), '\\s+')")
SOURCE_KEY = "concat_ws('/', machine, \"user\", provider, source_id)"
STEMMER = "porter"
FTS = "search.fts_main_docs"  # fts's tables and macros, in the index file attached as `search`
# when the changed and removed sources held more than this share of the documents, the index is
# built whole, in a new file: updating fts's tables cost as much from there (docs/BENCHMARKS.md)
WHOLE_SHARE = 1 / 2
# an index of fewer documents is built whole: the update's own statements cost more than that
WHOLE_BELOW = 1_000


def search_path(catalog: Path) -> Path:
    """The index's file: `<home>/warehouse.search.duckdb` for `<home>/warehouse.ducklake`."""
    catalog = Path(catalog)
    return catalog.with_name(catalog.stem + ".search.duckdb")


def due_marker(catalog: Path) -> Path:
    """Present while a merge's index update is owed: one cut off is done by the next merge."""
    return owed_marker(search_path(catalog))


def owed_marker(index: Path) -> Path:
    """due_marker of the index file `index`, wherever it is kept."""
    return index.with_name("." + index.name + ".due")


def _of_this_format(index: Path) -> Path:
    """Touched once the index file has been found, or written, in this FORMAT, and good while the
    index is no newer (another release writing it after makes it so): a merge with nothing new asks
    two stats, not a DuckDB connection to the index (a few ms on every no-op ingest)."""
    return index.with_name(f".{index.name}.format-{FORMAT}")


def of_another_format(index: Path) -> bool:
    """An index file written in another FORMAT (an older release's), to be built again whole; one
    that cannot be read is too (a damaged file is made again)."""
    if not index.exists():
        return False
    marker = _of_this_format(index)
    if marker.exists() and marker.stat().st_mtime >= index.stat().st_mtime:
        return False
    try:
        with duckdb.connect(str(index), read_only=True) as con:
            current = con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() == (FORMAT,)
    except duckdb.Error:
        return True
    if current:
        _mark_format(index)
    return not current


def _mark_format(index: Path) -> None:
    try:
        _of_this_format(index).touch()
    except OSError:  # asked again next time
        pass


@dataclass
class IndexResult:
    documents: int = 0  # documents in the index now
    sources_read: int = 0  # sources whose documents were read from the tables again
    sources_removed: int = 0
    rebuilt: bool = False  # built whole (False: updated for the changed sources, or nothing had changed)
    seconds: float = 0.0


def open_fts(path: Path, read_only: bool = True):
    """A connection to an index file with fts loaded (offline, its binary checked)."""
    own = ducklake.pinned_binary("fts")
    con = duckdb.connect(str(path), read_only=read_only,
                         config={"allow_unsigned_extensions": "true"} if own else {})
    try:
        ducklake.load_packaged(con, "fts", own)
    except BaseException:
        con.close()
        raise
    return con


@dataclass
class Staged:
    """What an update reads from the catalog, read in the merge's transaction before its commit
    (`stage`): there the merge's own rows and files are at hand, where a read of the committed
    catalog looks its files and statistics up again (docs/BENCHMARKS.md, "Figures behind the
    code's choices")."""

    now: dict  # per source, its signature as the merge commits it
    indexed: "_Indexed"  # what the index held when staged
    file: tuple | None  # the index file then (_file_state): another update since voids the stage
    read: frozenset  # the sources whose documents are in temp STAGED


STAGED = "_search_staged"


def stage(lake, target: Path, full: bool, merged: set[str]) -> Staged:
    """In the merge's transaction, last: the signatures, and the documents the update will read,
    into a temporary table. Only when those documents are few: of sources this merge inserted
    (`merged`: machine/user/provider/source_id), whose rows a merge whose marts share its
    transaction bounds, and of others fewer than WHOLE_BELOW by the index's count (a small index
    built whole); otherwise the update reads them from the committed catalog (the signatures and
    what the index held, read here, serve it either way)."""
    now, file = _signatures(lake), _file_state(target)
    indexed = _indexed(target)
    changed, gone, rebuilt = _plan(now, indexed, full)
    read = set()
    if changed or gone or not target.exists():
        read = set(now) if rebuilt else changed
    others = read - merged
    if others and (not others <= set(indexed.documents)
                   or sum(indexed.documents[k] for k in others) >= WHOLE_BELOW):
        read = set()  # the documents are read from the committed catalog: the signatures still serve
    if read:
        _pick_sources(lake, read)
        lake.execute(f"CREATE OR REPLACE TEMP TABLE {STAGED} AS {_docs_of(read)}")
    return Staged(now, indexed, file, frozenset(read))


def _plan(now: dict[str, str], indexed: "_Indexed", full: bool) -> tuple[set[str], set[str], bool]:
    """The sources whose documents changed and those gone, against what the index was read from
    (every source for `full`), and whether the index is built whole (_worth_building_whole)."""
    old = {} if full else indexed.signatures
    changed = {k for k, sig in now.items() if old.get(k) != sig}
    gone = set(old) - set(now)
    return changed, gone, not old or _worth_building_whole(indexed, changed | gone)


def _file_state(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def update(catalog: Path, data_path: str | None = None, *, full: bool = False, con=None,
           index: Path | None = None, staged: Staged | None = None) -> IndexResult:
    """Bring the index of `catalog` up to date with its published tables (see the module);
    `full`: every source read again (`agentlake merge --full`). `con`: a connection with the
    catalog attached as `lake`, used instead of one of its own (the merge's writer, once its tables
    and marts are committed: a connection of its own paid DuckLake's catalog load again).
    `index`: the index's file, when not the one beside the catalog (the center's copy of a team
    catalog in PostgreSQL, warehouse.catalog.team_index)."""
    start = time.perf_counter()
    target = index or search_path(catalog)
    with held(target.with_name("." + target.name + ".lock")):
        if con is None:
            result = ducklake.retried_with_more_memory(
                lambda limit: _update(Path(catalog), target, data_path, full, limit))
        else:
            try:
                result = ducklake.retried_with_more_memory(lambda limit: _update_on(con, target, full, limit, staged))
            finally:  # after a retry's second attempt, which reads it again
                if staged and staged.read:
                    con.execute(f"DROP TABLE IF EXISTS temp.main.{STAGED}")
    result.seconds = time.perf_counter() - start
    return result


def _update(catalog: Path, target: Path, data_path: str | None, full: bool,
            memory_limit: str | None = None) -> IndexResult:
    # under the writer's cap, spilling beside the index as the writer does beside the catalog (a
    # temporary folder may be memory itself): uncapped, a whole build over a team's history grew
    # the process past the merge itself (docs/BENCHMARKS.md, "A team of 10, 30 and 100 machines");
    # one that runs out anyway is run again with most of the machine's memory
    spill = target.with_name(f".{target.name}.spill")
    with ducklake.connect(catalog, data_path, ours=True, settings={
            "memory_limit": memory_limit or ducklake.WRITER_SETTINGS["memory_limit"],
            "temp_directory": str(spill)}) as lake:
        return _update_on(lake, target, full)


def _update_on(lake, target: Path, full: bool, memory_limit: str | None = None,
               staged: Staged | None = None) -> IndexResult:
    """The update on `lake`, a connection with the catalog attached as `lake` (its default)."""
    result = IndexResult()
    if memory_limit:  # a retry's, on a connection opened with the writer's cap
        lake.execute(f"SET memory_limit = '{memory_limit}'")
    # by its path only where the connection allows that (the pinned ducklake: ducklake._opened)
    ducklake.load_packaged(lake, "fts", ducklake.pinned_binary("fts") if ducklake.pinned_binary() else None)
    if staged is not None and staged.file != _file_state(target):
        staged = None  # the index changed since: read from the catalog
    indexed = staged.indexed if staged else _indexed(target)
    now = staged.now if staged else _signatures(lake)
    changed, gone, rebuilt = _plan(now, indexed, full)
    if not changed and not gone and target.exists():
        result.documents = sum(indexed.documents.values())
        return result
    result.sources_read, result.sources_removed = len(changed), len(gone)
    # the update is written to a copy renamed over the index: a reader opens the old index or
    # the new one, whole, and never waits on the writer's lock of the file
    result.rebuilt = rebuilt
    work = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    work.unlink(missing_ok=True)
    attached = False
    try:
        if not result.rebuilt:
            shutil.copyfile(target, work)
        lake.execute(f"ATTACH {ducklake.sql_string(work)} AS search")
        attached = True
        read = staged.read if staged else frozenset()
        if result.rebuilt:
            _build_whole(lake, now, read)
        else:
            _update_sources(lake, changed, gone, read)
        lake.execute("DELETE FROM search.indexed")
        lake.execute("INSERT INTO search.indexed SELECT unnest(?), unnest(?)", [list(now), list(now.values())])
        result.documents = _documents(lake)
        lake.execute("DETACH search")  # checkpointed: the file is whole on its own
        attached = False
        os.replace(work, target)
        _mark_format(target)
    finally:
        if attached:  # an error half-way: the connection may be the merge's, which goes on
            try:
                lake.execute(f"USE {ducklake.CATALOG}")
                lake.execute("DETACH search")
            except duckdb.Error:
                pass
        work.unlink(missing_ok=True)
    return result


def _build_whole(lake, now: dict[str, str], staged: frozenset = frozenset()) -> None:
    """Every source's documents read into a new file, and fts's index built over them. `staged`:
    the sources whose documents `stage` read."""
    _prepare(lake)
    _create_fts(lake)
    _insert_sources(lake, set(now), staged=staged)
    _index_new(lake, after=0)
    _recount(lake)
    _sort_terms(lake)


def _update_sources(lake, changed: set[str], gone: set[str], staged: frozenset = frozenset()) -> None:
    """In a copy of the index: the documents of `changed` and `gone` taken out, those of `changed`
    read again, and fts's tables updated for those documents only."""
    (last,) = lake.execute("SELECT COALESCE(MAX(doc_id), 0) FROM search.docs").fetchone()
    _delete_sources(lake, changed | gone)
    # numbered after every doc_id fts holds: a new document never takes a deleted one's
    _insert_sources(lake, changed, after=last, staged=staged)
    _unindex_deleted(lake)
    _index_new(lake, after=last)
    _recount(lake)


def _worth_building_whole(indexed: "_Indexed", sources: set[str]) -> bool:
    """The index is small (WHOLE_BELOW), or `sources` held more than WHOLE_SHARE of its documents."""
    documents = sum(indexed.documents.values())
    replaced = sum(indexed.documents.get(source, 0) for source in sources)
    return documents < WHOLE_BELOW or replaced > WHOLE_SHARE * documents


def _documents(lake) -> int:
    return lake.execute("SELECT COUNT(*) FROM search.docs").fetchone()[0]


def _create_fts(lake) -> None:
    """fts's schema over `docs` while it holds no document (its tables, stop words and macros), its
    tokenize macro then replaced by TOKENIZE: create_fts_index tokenizes with the macro it has just
    made, so the documents are indexed after, as an update indexes new ones (_index_new)."""
    lake.execute("USE search")
    try:
        lake.execute("CREATE OR REPLACE TEMP TABLE _stop_words (sw VARCHAR)")
        # one statement of literals: DuckDB binds each row of an executemany on its own (and looks
        # for pandas each time), and a parameter of a merge's connection cost more than the words
        lake.execute("INSERT INTO _stop_words VALUES " + ", ".join(f"({ducklake.sql_string(w)})" for w in STOP_WORDS))
        lake.execute(f"PRAGMA create_fts_index('docs', 'doc_id', 'body', stemmer = '{STEMMER}', "
                     f"stopwords = '_stop_words', ignore = {ducklake.sql_string(IGNORE)}, strip_accents = 1, "
                     f"lower = 1, overwrite = 1)")
        lake.execute(f"CREATE OR REPLACE MACRO {FTS}.tokenize(s) AS {TOKENIZE}")
        lake.execute("DROP TABLE temp._stop_words")
    finally:
        lake.execute(f"USE {ducklake.CATALOG}")


def _sort_terms(lake) -> None:
    """fts's `terms` (a row per word of every document) in term order: a search reads the rows of
    its own terms, and DuckDB skips the row groups whose term ids are not among them
    (warehouse.serve.search.bm25_sql). An update appends its documents' rows after them."""
    lake.execute(f"CREATE TABLE {FTS}.terms_sorted AS SELECT * FROM {FTS}.terms ORDER BY termid, docid")
    lake.execute(f"DROP TABLE {FTS}.terms")
    lake.execute(f"ALTER TABLE {FTS}.terms_sorted RENAME TO terms")


def _signatures(lake) -> dict[str, str]:
    """Per source, its landing files of READS with their versions, as the catalog merged them."""
    files = " OR ".join(f"path LIKE '%/{t}.parquet'" for t in READS)
    rows = lake.execute(
        f"SELECT regexp_extract(path, '^_landing/(.*)/[^/]+$', 1) AS source, "
        f"string_agg(regexp_extract(path, '[^/]+$') || '=' || version, ',' ORDER BY path) "
        f"FROM {MERGED} WHERE ({files}) AND path NOT LIKE '%/_runs/%' GROUP BY ALL").fetchall()
    return dict(rows)


@dataclass
class _Indexed:
    signatures: dict = field(default_factory=dict)  # per source, what its documents were read from
    documents: dict = field(default_factory=dict)  # per source, how many documents it has


def _indexed(target: Path) -> _Indexed:
    """What the index was read from, and each source's documents, in one look at the file (a
    connection of its own costs a new DuckDB); empty for no index, or one of another format
    (rebuilt whole)."""
    if not target.exists():
        return _Indexed()
    try:
        with duckdb.connect(str(target), read_only=True) as con:
            if con.execute("SELECT value FROM meta WHERE key = 'format'").fetchone() != (FORMAT,):
                return _Indexed()
            return _Indexed(dict(con.execute("SELECT source, signature FROM indexed").fetchall()),
                            dict(con.execute("SELECT source, COUNT(*) FROM docs GROUP BY source").fetchall()))
    except duckdb.Error:  # damaged or cut short: made again
        return _Indexed()


def _prepare(lake) -> None:
    lake.execute(f"""CREATE TABLE search.docs (
        doc_id BIGINT, source VARCHAR, kind VARCHAR, provider VARCHAR, machine VARCHAR, "user" VARCHAR,
        source_id VARCHAR, session_id VARCHAR, message_id VARCHAR, tool_call_id VARCHAR, project VARCHAR,
        "date" DATE, "at" TIMESTAMP, role VARCHAR, tool_name VARCHAR, tool_category VARCHAR, file_path VARCHAR,
        body VARCHAR)""")
    lake.execute("CREATE TABLE search.indexed (source VARCHAR, signature VARCHAR)")
    lake.execute("CREATE TABLE search.meta (key VARCHAR, value VARCHAR)")
    lake.execute("INSERT INTO search.meta VALUES ('format', ?)", [FORMAT])


def _pick_sources(lake, sources: set[str]) -> None:
    lake.execute("CREATE OR REPLACE TEMP TABLE search_keys (source VARCHAR)")
    lake.execute("INSERT INTO search_keys SELECT unnest(?)", [sorted(sources)])


def _delete_sources(lake, sources: set[str]) -> None:
    """The documents of `sources` deleted, their doc_ids kept in `deleted_docs` (_unindex_deleted)."""
    _pick_sources(lake, sources)
    lake.execute("CREATE OR REPLACE TEMP TABLE deleted_docs AS "
                 "SELECT doc_id FROM search.docs WHERE source IN (SELECT source FROM search_keys)")
    lake.execute("DELETE FROM search.docs WHERE doc_id IN (SELECT doc_id FROM deleted_docs)")


def _insert_sources(lake, sources: set[str], after: int = 0, staged: frozenset = frozenset()) -> None:
    """The documents of `sources` read from the tables (from those `stage` read, when it read
    them all), numbered from `after` + 1."""
    _pick_sources(lake, sources)
    read = (f"SELECT * FROM temp.main.{STAGED} WHERE source IN (SELECT source FROM search_keys)"
            if sources and sources <= staged else _docs_of(sources))
    lake.execute(f"INSERT INTO search.docs SELECT {after} + row_number() OVER () AS doc_id, * FROM ({read})")


def _docs_of(sources: set[str]) -> str:
    """The query of the documents of `sources` (in temp `search_keys`: _pick_sources)."""
    # their source_ids as constants too: a filter the scan can prune the tables' files by
    ids = ", ".join(ducklake.sql_string(key.rsplit("/", 1)[-1]) for key in sorted(sources)) or "NULL"
    return _DOCS.replace("{ids}", ids)


# fts's index over search.docs: `docs` (docid, name: our doc_id, len: terms kept), `terms` (one row
# per term kept of a document), `dict` (termid, term, df: documents holding it), `stats`
# (num_docs, avgdl). match_bm25 reads those only, so updating them as create_fts_index would have
# built them scores as a new index does. A term kept: a word of fts's `tokenize` macro, not empty,
# not a stop word, stemmed (fts 1.5.5's create_fts_index).
def _unindex_deleted(lake) -> None:
    """fts's rows of the documents _delete_sources took out of search.docs removed, their terms'
    df lowered (found by their ids: an anti-join against every document cost more with the index)."""
    lake.execute(f"""CREATE OR REPLACE TEMP TABLE fts_deleted AS
        SELECT docid FROM {FTS}.docs WHERE name IN (SELECT doc_id FROM deleted_docs)""")
    lake.execute(f"""UPDATE {FTS}.dict SET df = df - held.documents
        FROM (SELECT termid, COUNT(DISTINCT docid) AS documents FROM {FTS}.terms
              WHERE docid IN (SELECT docid FROM fts_deleted) GROUP BY termid) AS held
        WHERE dict.termid = held.termid""")
    lake.execute(f"DELETE FROM {FTS}.terms WHERE docid IN (SELECT docid FROM fts_deleted)")
    lake.execute(f"DELETE FROM {FTS}.docs WHERE docid IN (SELECT docid FROM fts_deleted)")
    lake.execute(f"DELETE FROM {FTS}.dict WHERE df = 0")  # as a new index, which has no such term


def _index_new(lake, after: int) -> None:
    """The documents of search.docs that fts does not hold yet (those numbered after `after`, the
    largest doc_id before the update: fts held every one up to it) tokenized and added to its tables."""
    lake.execute(f"""CREATE OR REPLACE TEMP TABLE fts_new_docs AS
        SELECT (SELECT COALESCE(MAX(docid) + 1, 0) FROM {FTS}.docs) + row_number() OVER (ORDER BY doc_id) - 1
               AS docid, doc_id AS name, body
        FROM search.docs WHERE doc_id > {int(after)}""")
    lake.execute(f"""CREATE OR REPLACE TEMP TABLE fts_new_terms AS
        WITH words AS (SELECT docid, unnest({FTS}.tokenize(body)) AS w FROM fts_new_docs)
        SELECT docid, stem(w, '{STEMMER}') AS term FROM words
        WHERE w IS NOT NULL AND w <> '' AND w NOT IN (SELECT sw FROM {FTS}.stopwords)""")
    lake.execute(f"""INSERT INTO {FTS}.docs (docid, name, len)
        SELECT d.docid, d.name, COALESCE(n.len, 0) FROM fts_new_docs AS d
        LEFT JOIN (SELECT docid, COUNT(*) AS len FROM fts_new_terms GROUP BY docid) AS n USING (docid)""")
    lake.execute(f"""INSERT INTO {FTS}.dict (termid, term, df)
        SELECT (SELECT COALESCE(MAX(termid) + 1, 0) FROM {FTS}.dict) + row_number() OVER (ORDER BY term) - 1,
               term, 0
        FROM (SELECT DISTINCT term FROM fts_new_terms WHERE term NOT IN (SELECT term FROM {FTS}.dict))""")
    lake.execute(f"""UPDATE {FTS}.dict SET df = df + held.documents
        FROM (SELECT term, COUNT(DISTINCT docid) AS documents FROM fts_new_terms GROUP BY term) AS held
        WHERE dict.term = held.term""")
    lake.execute(f"""INSERT INTO {FTS}.terms (docid, fieldid, termid)
        SELECT t.docid, 0, dict.termid FROM fts_new_terms AS t JOIN {FTS}.dict AS dict USING (term)""")


def _recount(lake) -> None:
    """fts's stats as create_fts_index computes them."""
    lake.execute(f"DELETE FROM {FTS}.stats")
    lake.execute(f"INSERT INTO {FTS}.stats SELECT COUNT(docid), SUM(len) / COUNT(len) FROM {FTS}.docs")


_PICK = f"source_id IN ({{ids}}) AND {SOURCE_KEY} IN (SELECT source FROM search_keys)"
# a message's own words: its text, reasoning and bang-mode commands, in order (tool calls and
# their results are documents of their own)
_DOCS = f"""
    SELECT {SOURCE_KEY} AS source, 'message' AS kind, provider, machine, "user", source_id, session_id,
           message_id, NULL AS tool_call_id, project, min("date") AS "date", min(created_at) AS "at",
           any_value(role) AS role, NULL AS tool_name, NULL AS tool_category, NULL AS file_path,
           left(string_agg(concat_ws(' ', text, reasoning, shell_command, shell_output), chr(10)
                           ORDER BY part_index), {BODY_CHARS}) AS body
    FROM parts
    WHERE {_PICK} AND part_type IN ('text', 'reasoning', 'shell_command')
      AND COALESCE(text, reasoning, shell_command, shell_output) IS NOT NULL
    GROUP BY provider, machine, "user", source_id, session_id, message_id, project
    UNION ALL
    SELECT {SOURCE_KEY}, 'tool_call', provider, machine, "user", source_id, session_id,
           COALESCE(message_id, result_message_id), tool_call_id, project, "date", called_at, 'tool',
           tool_name, tool_category, file_path,
           left(concat_ws(chr(10), tool_name, COALESCE(command, input, input_raw),
                          CASE WHEN strpos(COALESCE(command, input, input_raw, ''), file_path) = 0
                               THEN file_path END,
                          result_text), {BODY_CHARS})
    FROM tool_calls
    WHERE {_PICK}"""
