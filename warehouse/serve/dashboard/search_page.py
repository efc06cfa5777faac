"""The dashboard's search page (`/search?q=...`): `agentlake search`'s ranked hits
(warehouse.serve.search, over the index beside the catalog, or a team catalog's from the lake),
each linked to its session's transcript at the matching message. The page's filters are the
dashboard's (days of its zone, project, agent, user, machine) and the search's own (role, tool, kind).

A snippet is the text of a user's transcript: every piece of it is escaped, and the matches are
marked with <mark> around escaped text, never by markup the text could carry itself."""

from warehouse.catalog.team_index import NoPublishedIndex
from warehouse.serve.dashboard.page_parts import (
    about_data, escaped, filter_fields, layout, page_filters, select_options, zone_field)
from warehouse.serve.dashboard.request import Request
from warehouse.serve.dashboard.transcript import session_link
from warehouse.serve.search import (
    KINDS, QUERY_HELP, BadQuery, Hits, NoIndex, SearchFilters, anchor_fragment, local_time, search)

SEARCH_LIMIT = 50  # hits a page shows, best first; it says how many matched in all
ROLES = ("user", "assistant", "system", "developer", "tool")
OWN_FILTERS = ("role", "tool", "kind")  # the search's, beside the dashboard's


def html_mark(piece: str, matched: bool) -> str:
    """A snippet's piece as HTML: escaped, a match inside <mark>."""
    return f"<mark>{escaped(piece)}</mark>" if matched else escaped(piece)


def search_page(con, req: Request, index, projects: list[str], providers: list[str]) -> tuple[str, int]:
    """(HTML, status): the form, then the hits or what keeps them from being shown: an empty
    query (200), no index yet (503, with the command that builds it), a bad query or filter (400)."""
    query = req.params.get("q", "")
    role, tool, kind = _own_filters(req)
    form = search_form(req, projects, providers)
    status = 200
    if not query:
        body = _said("search-empty", "Type words to search for: " + QUERY_HELP + ".")
    elif index is None:
        body = _said("search-no-index", "No search index for this warehouse: a team catalog in PostgreSQL "
                                        "has its index in the lake, and this server was not given it.")
        status = 503
    else:
        index, body, status = _fetched(index)
        filters = SearchFilters(**vars(req.filters), role=role, tool=tool, kind=kind)
        try:
            if index is not None:
                body = _results(con, req, query, search(index, query, filters, SEARCH_LIMIT, mark=html_mark))
        except NoIndex:
            body = _said("search-no-index", "No search index yet: `agentlake merge` (or the next "
                                            "`agentlake ingest`) builds it beside the warehouse.")
            status = 503
        except BadQuery as exc:
            body = _said("search-bad", f"Cannot search for that: {exc}.")
            status = 400
    crumbs = [("overview", req.link("/")), ("search", None)]
    title = f"search: {query}" if query else "search"
    return layout(title, crumbs, body, req, form, about_data(con)), status


def _fetched(index) -> tuple:
    """(the index's file, None, 200), or (None, what the page says instead, 503) when a team
    catalog's cannot be fetched from the lake. `index`: the file, or a function giving it."""
    if not callable(index):
        return index, None, 200
    try:
        return index(), None, 200
    except NoPublishedIndex as exc:
        return None, _said("search-no-index", f"No search index yet: {exc}."), 503
    except OSError as exc:  # the lake or the team's catalog did not answer
        return None, _said("search-no-index", f"Cannot fetch the team's search index: {exc}."), 503


def _own_filters(req: Request) -> tuple[str | None, str | None, str | None]:
    """role, tool and kind as given; a role or kind the index has not is named and left out
    (a tool is checked by the search itself, against the tools the index holds)."""
    role, tool, kind = (req.params.get(k) or None for k in OWN_FILTERS)
    if role is not None and role not in ROLES:
        req.errors.append(f"role: {role!r} is not one of {', '.join(ROLES)}; ignored")
        role = None
    if kind is not None and kind not in KINDS:
        req.errors.append(f"kind: {kind!r} is not one of {', '.join(KINDS)}; ignored")
        kind = None
    return role, tool, kind


def search_form(req: Request, projects: list[str], providers: list[str]) -> str:
    p = req.params
    return f"""<form method="get" action="/search" id="search-form" role="search">
  <label>words <input type="search" name="q" value="{escaped(p.get('q', ''))}" style="width:24em" autofocus></label>
  <label>role <select name="role">{select_options(list(ROLES), p.get('role'))}</select></label>
  <label>tool <input type="text" name="tool" value="{escaped(p.get('tool', ''))}" placeholder="bash, Edit, shell, ..."
    style="width:10em"></label>
  <label>kind <select name="kind">{select_options(list(KINDS), p.get('kind'))}</select></label>
  {filter_fields(req, projects, providers)}
  {zone_field(req)}
  <button type="submit">search</button>
</form>"""


def _said(said_id: str, text: str) -> str:
    return f'<p class="empty" id="{said_id}">{escaped(text)}</p>'


def _results(con, req: Request, query: str, hits: Hits) -> str:
    if not hits:
        narrowed = any(k != "tz" for k in page_filters(req)) or any(req.params.get(k) for k in OWN_FILTERS)
        wider = (f' with these filters. <a href="{escaped(req.link("/search", q=query, **_cleared()))}">'
                 "Search without them</a>." if narrowed else ".")
        return f'<p class="empty" id="search-none">Nothing matches <q>{escaped(query)}</q>{wider}</p>'

    cut = f"the best {SEARCH_LIMIT} shown: narrow the search with the filters" if len(hits) < hits.total else \
        f"a page shows at most {SEARCH_LIMIT}"
    summary = (f'<p id="search-summary">{escaped(hits.counted())} for <q>{escaped(query)}</q>, best first ({escaped(cut)}); '
               f"times in {escaped(req.filters.zone)}.</p>")
    titles = _titles(con, hits)
    items = "".join(_hit(req, h, titles.get((h.machine, h.source_id, h.session_id))) for h in hits)
    return summary + f'<ol id="search-results">{items}</ol>'


def _cleared() -> dict:
    """The filters a search without them leaves out (the zone is kept: it is how the page reads)."""
    return {k: None for k in ("since", "until", "project", "agent", "user", "machine", *OWN_FILTERS)}


def _titles(con, hits: Hits) -> dict:
    """The hits' sessions' titles, by (machine, source_id, session_id)."""
    rows = con.execute("SELECT machine, source_id, session_id, title FROM sessions WHERE session_id IN "
                       "(SELECT unnest(?))", [sorted({h.session_id for h in hits})]).fetchall()
    return {tuple(r[:3]): r[3] for r in rows}


def _hit(req: Request, h, title: str | None) -> str:
    link = session_link(req, h.source_id, h.session_id, h.machine, h.user)
    if h.message_id:
        link += "#" + anchor_fragment(h.message_id)
    what = f"{h.tool_name or 'tool'} call" if h.kind == "tool_call" else f"{h.role} message"
    facts = " · ".join(escaped(v) for v in (h.provider, h.project or "(no project)", local_time(h.at, req.filters.zone), what,
                                       f"{h.user}@{h.machine}"))
    return (f'<li class="hit"><div class="hit-head"><a class="hit-link" href="{escaped(link)}">{escaped(title or h.session_id)}'
            f'</a> · {facts}</div><p class="snippet">{h.snippet}</p></li>')


