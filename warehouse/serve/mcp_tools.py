"""What `agentlake mcp`'s tools answer (the MCP glue: warehouse.serve.mcp_server): the history
of the agents' sessions, for the agents themselves to ask.

Every tool reads through `agentlake sql`'s connection (warehouse.serve.read_only_sql.open_reader:
the catalog read-only, no file reachable but the tables', the configuration locked), and
`run_sql` checks its statement as `agentlake sql` does. Every answer is bounded: its query is
interrupted after `Limits.seconds`, it holds at most `Limits.chars` characters and a tool's rows
at most `Limits.rows`; its first line says what was shown of how much, so that an agent never
takes a cut answer for the whole. The rest is JSON (the report's exactly as `agentlake report
--format json` prints it) or, for a transcript, text.
"""

import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import date

import duckdb

from warehouse.serve.formatting import json_text
from warehouse.serve.read_only_sql import NotOne, Refused, check
from warehouse.serve.report import (
    Filters, build, build_insights, empty_window, render_report, session_key, unknown_filters)
from warehouse.serve.report_options import BREAKDOWNS, parse_day


@dataclass(frozen=True)
class Limits:
    rows: int = 50  # rows a tool shows unless asked for fewer (or more, up to max_rows)
    max_rows: int = 500
    chars: int = 20_000  # characters of an answer, its first line included
    seconds: float = 30.0  # a query's time before it is interrupted
    cell_chars: int = 2_000  # characters of one value (a tool's output, a message's text)


class ToolError(ValueError):
    """An answer that is a refusal or a mistake of the caller's: said to the agent as the tool's error."""


# the call this thread answers: `stop`, set when its client cancelled it (warehouse.serve.mcp_server)
CALL = threading.local()


@contextmanager
def _deadline(cur, seconds: float):
    """Interrupt `cur`'s query after `seconds`, or at once when the call it answers was cancelled
    (a client that gave up left its query running to the deadline, both cores busy: a trial);
    DuckDB's InterruptException said as a ToolError."""
    stop, finished, until = getattr(CALL, "stop", None), threading.Event(), time.monotonic() + seconds

    def watch():  # again at every tick once due: DuckDB drops an interrupt sent between two queries
        while not finished.wait(0.05):
            if time.monotonic() >= until or (stop is not None and stop.is_set()):
                cur.interrupt()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    except duckdb.InterruptException:
        if stop is not None and stop.is_set():
            raise ToolError("cancelled by the client") from None
        raise ToolError(f"stopped after {seconds:g} seconds, the limit of a query here: narrow it") from None
    finally:
        finished.set()
        watcher.join()


# an offset past any session's messages or any index's hits (and within DuckDB's BIGINT, which a
# larger one overflowed: the SDK's bare "Error executing tool", a trial)
MAX_OFFSET = 10**12


def _check_offset(offset: int, wants: str) -> None:
    if offset < 0 or offset > MAX_OFFSET:
        raise ToolError(f"offset wants {wants}, from 0 to {MAX_OFFSET:,}")


def _count(n: int) -> str:
    return f"{n:,} row{'' if n == 1 else 's'}"


# the items of a list (or the entries of a map) shown of one value, the rest said
LIST_ITEMS = 100


def _clip(value, limit: int, cut: list | None = None):
    """A long text value cut at `limit` characters, saying how many more it had; inside lists,
    structs and maps too, a list past LIST_ITEMS items cut there (`list(text)` of a table held every
    text in one value, and run_sql said no value was cut: a trial). Each cut is counted in `cut`."""
    def said(n: int, what: str) -> str:
        if cut is not None:
            cut.append(1)
        return f"… [{n:,} more {what}]"

    if isinstance(value, str):
        return value if len(value) <= limit else value[:limit] + said(len(value) - limit, "characters")
    if isinstance(value, (list, tuple)):
        kept = [_clip(v, limit, cut) for v in value[:LIST_ITEMS]]
        return kept + [said(len(value) - LIST_ITEMS, "items")] if len(value) > LIST_ITEMS else kept
    if isinstance(value, dict):
        items = list(value.items())
        kept = {k: _clip(v, limit, cut) for k, v in items[:LIST_ITEMS]}
        if len(items) > LIST_ITEMS:
            kept["…"] = said(len(items) - LIST_ITEMS, "entries")
        return kept
    return value


def _fit_rows(columns: list[str], rows: list[tuple], budget: int) -> tuple[str, int]:
    """The JSON of as many leading rows as fit in `budget` characters, and how many that is."""
    def body(n: int) -> str:
        return json_text({"columns": columns, "rows": [list(r) for r in rows[:n]]}, indent=None, ensure_ascii=False)

    low, high = 0, len(rows)
    if len(body(high)) <= budget:
        return body(high), high
    while low < high:  # the most rows whose JSON fits
        mid = (low + high + 1) // 2
        low, high = (mid, high) if len(body(mid)) <= budget else (low, mid - 1)
    return body(low), low


def _fit_sections(sections, budget: int):
    """The report's JSON (render_report's own), rows cut from its longest rankings until it fits
    in `budget` characters; a cut is counted in their `not_shown`, as --top's is. And whether a
    section was cut for size."""
    cut = False
    text = render_report(sections, "json")
    while len(text) > budget and any(s.rows for s in sections):
        longest = max(sections, key=lambda s: len(s.rows))
        keep = len(longest.rows) // 2
        sections = [replace(s, rows=s.rows[:keep], more=s.more + len(s.rows) - keep) if s is longest else s
                    for s in sections]
        cut, text = True, render_report(sections, "json")
    return text, cut


def _limited(text: str, limit: int) -> str:
    """The last wall: an answer longer than `limit` characters is cut there, and says so."""
    if len(text) <= limit:
        return text
    note = f"\n[truncated at {limit:,} characters]"
    return text[:limit - len(note)] + note


def _filters(since, until, project, agent, user, machine=None) -> Filters:
    def day(value, name):
        if value in (None, "") or isinstance(value, date):
            return value or None
        try:
            return parse_day(value)
        except ValueError:
            raise ToolError(f"{name} wants a date, YYYY-MM-DD: {value!r}") from None

    filters = Filters(day(since, "since"), day(until, "until"), project or None, agent or None, user or None,
                      machine or None)
    if filters.since and filters.until and filters.since > filters.until:
        raise ToolError(f"since {filters.since} is after until {filters.until}: no day is in between")
    return filters


class Tools:
    """The tools over one warehouse; `reader` hands out a read-only cursor per call (the
    dashboard's Reader: one connection per published catalog, so a merge shows on the next call).
    `index()`: the search index's file, asked at each search (`agentlake mcp` fetches a team
    catalog's from the lake); by default the one beside the reader's catalog file."""

    def __init__(self, reader, limits: Limits = Limits(), index=None):
        self.reader, self.limits, self._index = reader, limits, index

    @contextmanager
    def _cursor(self):
        cur = self.reader.cursor()
        try:
            with _deadline(cur, self.limits.seconds):
                yield cur
        finally:
            cur.close()

    def _rows_wanted(self, limit: int | None) -> int:
        if limit is None:
            return self.limits.rows
        if limit < 1:
            raise ToolError("limit wants a positive number of rows")
        return min(limit, self.limits.max_rows)

    def _answer(self, head: str, body: str) -> str:
        return _limited(f"{head}\n{body}", self.limits.chars)

    def run_sql(self, query: str, limit: int | None = None) -> str:
        """One read-only statement, as `agentlake sql` runs it: its first rows as JSON
        (columns, rows), the first line saying how many of how many."""
        wanted = self._rows_wanted(limit)
        with self._cursor() as cur:
            try:
                check(cur, query)
            except (Refused, NotOne) as exc:
                raise ToolError(f"{exc} (run_sql reads only, as `agentlake sql` does)") from None
            except duckdb.InterruptException:
                raise
            except duckdb.Error as exc:  # a statement that does not parse: its reason, as `agentlake sql` says it
                raise ToolError(str(exc)) from None
            try:
                ran = cur.execute(query)
            except duckdb.InterruptException:
                raise
            except duckdb.Error as exc:
                raise ToolError(str(exc)) from None
            if ran is None or not cur.description:
                raise ToolError("nothing to run: give one SQL statement")
            columns = [d[0] for d in cur.description]
            rows = cur.fetchmany(wanted)
            rest, more = _count_rest(cur)
            total = len(rows) + rest
        limit = self.limits.cell_chars
        cuts = [[] for _ in rows]
        rows = [tuple(_clip(v, limit, cuts[i]) for v in r) for i, r in enumerate(rows)]
        head_room = self.limits.chars - 200
        body, shown = _fit_rows(columns, rows, head_room)
        counted = f"more than {_count(total)}" if more else _count(total)
        head = f"showing {shown:,} of {counted}"
        if rows and not shown:  # one row larger than the answer: its beginning, not nothing
            body = _limited(json_text({"columns": columns, "rows": [list(rows[0])]}, indent=None,
                                      ensure_ascii=False), head_room)
            head = f"showing the beginning of 1 of {counted} (the row is larger than {self.limits.chars:,} characters)"
        elif shown < len(rows):
            head += f" (cut to stay under {self.limits.chars:,} characters)"
        elif shown < total:
            head += f" (limit {wanted:,}; at most {self.limits.max_rows:,})"
        # what happened to the rows shown, not only the rule: "values cut" read as if some were
        cut = sum(len(c) for c in cuts[:max(shown, 1 if rows else 0)])
        said = (f"{cut:,} value{'s' * (cut != 1)} cut at {limit:,} characters or {LIST_ITEMS} items" if cut
                else f"no value cut (at most {limit:,} characters, {LIST_ITEMS} items each)")
        return self._answer(f"{head}; {said}", body)

    def usage_report(self, since=None, until=None, project=None, agent=None, user=None, by="project",
                     top: int = 10, machine=None) -> str:
        """`agentlake report --by BY --format json` with these filters (UTC days)."""
        if by not in BREAKDOWNS:
            raise ToolError(f"by must be one of {', '.join(BREAKDOWNS)}")
        return self._report(_filters(since, until, project, agent, user, machine),
                            lambda cur, f, n: build(cur, f, by=by, top=n), top, f"report --by {by}")

    def insights(self, since=None, until=None, project=None, agent=None, user=None, top: int = 3,
                 machine=None) -> str:
        """`agentlake report --insights --format json`: each insight's top findings and its SQL."""
        return self._report(_filters(since, until, project, agent, user, machine), build_insights, top,
                            "report --insights")

    def _report(self, filters: Filters, make, top: int, name: str) -> str:
        top = min(self._rows_wanted(top or self.limits.max_rows), self.limits.max_rows)
        with self._cursor() as cur:
            unknown = unknown_filters(cur, filters)
            if unknown:
                raise ToolError("; ".join(unknown))
            sections = make(cur, filters, top)
            empty = empty_window(cur, filters, flags=False)  # as the CLI's report notes it
        body, cut = _fit_sections(sections, self.limits.chars - 300)
        head = f"agentlake {name} --format json, UTC days; top {top} row{'' if top == 1 else 's'} per ranking (`not_shown` counts the rest)"
        if cut:
            head += f"; rankings cut further to stay under {self.limits.chars:,} characters"
        if empty:
            head += f"; {empty} (since= and until= take them)"
        return self._answer(head, body)

    def search_history(self, query: str, since=None, until=None, project=None, agent=None, user=None,
                       limit: int | None = None, offset: int = 0, machine=None) -> str:
        """`agentlake search`'s hits for `query` (warehouse.serve.search), best first, each with
        the session_key open_session takes; from hit `offset` on (0: the best), so that hits an
        answer's characters cut off can be asked for next (a trial could never see past the 93rd)."""
        from warehouse.catalog.search_index import open_fts, search_path
        from warehouse.serve.search import BadQuery, SearchFilters, search

        wanted = self._rows_wanted(limit)
        _check_offset(offset, "0 or the number of best hits to skip")
        f = _filters(since, until, project, agent, user, machine)
        try:
            index = self._index() if self._index else search_path(self.reader.warehouse)
        except OSError as exc:  # no copy in the lake yet, a lake or a catalog that does not answer
            raise ToolError(str(exc)) from None
        if not index.exists():
            raise ToolError(f"no search index at {index} yet: `agentlake merge` (or the next ingest) builds it")
        with open_fts(index) as con, _deadline(con, self.limits.seconds):
            try:
                hits = search(con, query, SearchFilters(f.since, f.until, f.project, f.provider, f.user, f.machine), wanted,
                              offset=offset)
            except BadQuery as exc:
                raise ToolError(str(exc)) from None
        columns = ["session_key", "project", "at", "role", "kind", "tool_name", "file_path", "snippet", "score"]
        rows = [(_key(h), h.project, h.at, h.role, h.kind, h.tool_name, h.file_path,
                 _clip(h.snippet, self.limits.cell_chars), h.score) for h in hits]
        body, shown = _fit_rows(columns, rows, self.limits.chars - 200)
        total = hits.total
        head = (f"showing {shown:,} of {total:,} hit{'' if total == 1 else 's'}" if not offset else
                f"showing hits {offset + 1:,} to {offset + shown:,} of {total:,}" if shown else
                f"no hit past the first {total:,} (offset {offset:,})")
        if shown < len(rows):
            head += f" (cut to stay under {self.limits.chars:,} characters)"
        elif offset + shown < total:
            head += f" (limit {wanted:,}; at most {self.limits.max_rows:,})"
        if offset + shown < total and shown:
            head += f"; the next ones: offset={offset + shown}"
        if shown:
            head += "; open one with open_session(session=<its session_key>)"
        elif not offset:  # as `agentlake search` says it
            head += "; nothing matches with these filters"
            if hits.held:
                first, last = hits.held
                scoped = " of these filters" if any((f.project, f.provider, f.user)) else ""
                head += (f"; the index holds nothing in these days: its messages and tool calls{scoped} are "
                         f"from {first} to {last}")
        return self._answer(head, body)

    def open_session(self, session: str, offset: int = 0) -> str:
        """A session's transcript from message `offset` on: its facts, then each message's text,
        tool calls and results, and cost, as far as the answer's characters go."""
        from warehouse.serve.session_text import NoMessageThere, transcript

        _check_offset(offset, "0 or a later message index")
        with self._cursor() as cur:
            key = _session_key(cur, session)
            try:
                return _limited(transcript(cur, key, offset, self.limits), self.limits.chars)
            except NoMessageThere as exc:
                raise ToolError(str(exc)) from None


# rows counted past those shown: past it a result is "more than" (counting 400 million rows ran
# into the query's time limit when the first five were ready: a trial)
COUNTED_ROWS = 1_000_000


def _count_rest(cur, chunk: int = 10_000, cap: int = COUNTED_ROWS) -> tuple[int, bool]:
    """How many rows are left in `cur`, fetched and dropped a chunk at a time, up to `cap`; and
    whether more were left past it."""
    n = 0
    while n < cap and (batch := cur.fetchmany(chunk)):
        n += len(batch)
    return n, n >= cap and bool(cur.fetchmany(1))


def _key(hit) -> str:
    """A search hit's session, as session_key names it."""
    return "/".join((hit.machine, hit.user, hit.provider, hit.source_id, hit.session_id))


def _session_key(cur, session: str) -> str:
    """The lake-wide key of `session`: a `session_key` as given, or the one session of that id."""
    found = [r[0] for r in cur.execute(
        f"SELECT {session_key()} AS k FROM sessions WHERE {session_key()} = ? OR session_id = ? ORDER BY k LIMIT 11",
        [session, session]).fetchall()]
    if session in found:
        return session
    if not found:
        raise ToolError(f"no session {session!r} in the warehouse: give a session_key "
                        "(machine/user/agent/source_id/session_id) or a session_id")
    if len(found) > 1:
        raise ToolError(f"several sessions have the id {session!r}: give one's session_key: "
                        + ", ".join(found[:10]) + (", ..." if len(found) > 10 else ""))
    return found[0]
