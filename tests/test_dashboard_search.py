"""Search on the dashboard, in a real headless browser: the box on every page, `/search`'s
ranked hits (warehouse.serve.search over the index the merge keeps) with their matches marked,
each linked to its session's transcript at the matching message, and a transcript's markup
escaped. The lake is test_search's (ten sessions on known topics), built once."""

import html
import re
from urllib.parse import urlencode, urljoin

import pytest

from tests.support_browser import DUMP_DOM
from tests.test_dashboard import browse, chromium, screenshot, serve, tab  # noqa: F401  (fixtures)
from tests.test_dashboard_people import get
from tests.test_search import _build


@pytest.fixture(scope="module")
def searched(built_once):
    layout, _root = built_once("search", _build, workers=True)
    server = serve(layout.warehouse)
    yield f"http://127.0.0.1:{server.server_address[1]}/", layout
    server.shutdown()
    server.server_close()


def _evaluate(tab, expression: str):
    return tab.call("Runtime.evaluate", expression=expression, returnByValue=True)["result"].get("value")


def _hits(dom: str) -> list[tuple[str, str, str]]:
    """(link, head, snippet HTML) of each hit, in order."""
    found = re.findall(r'<li class="hit"><div class="hit-head"><a class="hit-link" href="([^"]+)">(.*?)</div>'
                       r'<p class="snippet">(.*?)</p></li>', dom, re.S)
    return [(html.unescape(link), head, snippet) for link, head, snippet in found]


def test_the_box_searches_and_the_first_hit_opens_its_session_at_the_message(searched, tab, tmp_path):
    base, _layout = searched
    # what the header's GET form sends, with the page's zone; the page shot, then read as it stands
    url = urljoin(base, "search?" + urlencode({"q": "checkout mobile", "tz": "Asia/Tokyo"}))
    screenshot(url, tab, tmp_path, "search")
    dom = _evaluate(tab, DUMP_DOM)
    hits = _hits(dom)
    assert hits, dom
    link, head, snippet = hits[0]
    assert "id=s-css" in link and link.endswith("#m-s-css-u")  # the user's message, asked on day 9
    assert "The <mark>checkout</mark> button" in snippet and "<mark>mobile</mark>" in snippet
    assert "2026-01-10 09:00 Asia/Tokyo" in head and "user message" in head  # 00:00 UTC, in Tokyo
    assert re.search(r'id="search-summary">\d+ hits? for <q>checkout mobile</q>, best first \(a page shows at '
                     r"most 50\)", dom)
    # the transcript, scrolled to the message the fragment names (the browser's own :target),
    # with the search box in its header
    transcript = browse(urljoin(base, link), tab)
    box = re.search(r'<form class="search-box"[^>]*action="/search"[^>]*>(.*?)</form>', transcript, re.S)
    assert box and '<input type="search" name="q"' in box.group(1)
    target = _evaluate(tab, "(() => { const t = document.querySelector(':target');"
                            " return t && [t.id, t.querySelector('.msg').textContent]; })()")
    assert target and target[0] == "m-s-css-u" and "checkout button overlaps" in target[1], target


def test_markup_in_a_transcript_is_shown_as_text_never_run(searched, tab):
    base, _layout = searched
    dom = browse(urljoin(base, "search?q=script+alert"), tab)
    link, _head, snippet = _hits(dom)[0]
    assert "&lt;<mark>script</mark>&gt;<mark>alert</mark>(\"lint\")&lt;/<mark>script</mark>&gt;" in snippet
    assert _evaluate(tab, "document.scripts.length") == 0 and "<script" not in dom
    transcript = browse(urljoin(base, link), tab)
    assert _evaluate(tab, "document.scripts.length") == 0 and "<script" not in transcript
    assert '&lt;script&gt;alert("lint")&lt;/script&gt;' in transcript


SAID = [
    ("q=", 200, 'id="search-empty">Type words to search for'),
    ("q=zebra", 200, 'id="search-none">Nothing matches <q>zebra</q>.</p>'),
    ("q=zebra&project=shop", 200, 'Nothing matches <q>zebra</q> with these filters. <a href="/search?q=zebra">'),
    ("q=%22open", 400, 'id="search-bad">Cannot search for that: unclosed quote'),
    ("q=pytest&tool=shel&role=boss", 400, "no tool &#x27;shel&#x27; in the index (close ones: shell)"),
    ("q=pytest&role=user&kind=tool_call", 400, "role user keeps messages and kind tool_call keeps tool calls: no hit"),
]


def test_the_page_says_why_it_shows_no_hit(searched):
    base, _layout = searched
    for query, status, said in SAID:
        got, page = get(urljoin(base, "search?" + query))
        assert got == status and said in page, (query, page)
        assert ("role: &#x27;boss&#x27; is not one of" in page) == ("role=boss" in query), query


def test_without_an_index_the_page_names_the_command_that_builds_it(searched, tmp_path):
    from warehouse.serve.dashboard.server import Reader, render

    _base, layout = searched
    page, status = render(Reader(layout.warehouse).cursor(), "/search", "q=docker",
                          index=tmp_path / "warehouse.search.duckdb")
    assert status == 503 and "No search index yet: `agentlake merge` (or the next `agentlake ingest`)" in page
