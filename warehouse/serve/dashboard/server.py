"""The team dashboard: pages over the marts, charts rendered to SVG on the server.

Nothing is fetched by the browser but the page itself (no script, no CDN), so it works on a
closed network and renders the same everywhere. Pages (warehouse.serve.dashboard.pages): the overview
(`/`), a project (`/project?project=...`), a session's transcript (`/session?source=...&id=...&machine=...`,
warehouse.serve.dashboard.transcript),
an insight (`/insight?name=...`) and a search (`/search?q=...`, warehouse.serve.dashboard.search_page);
a table's every row as CSV (`/csv?table=...`, with the page's filters and `sort`). Filters (dates, project, agent, user, machine, rows per ranking, the time chart's
grain) are a plain GET form, validated: a bad value is named on the page, never silently dropped.
"""

import html
import os
import queue
import socket
import threading
from contextlib import contextmanager
from http.server import HTTPServer

from warehouse.catalog.search_index import search_path
from warehouse.lake.ducklake import damage_hint, one_snapshot, storage_failure
from warehouse.lake.pg_catalog import is_postgres
from warehouse.lake.zones import UTC
from warehouse.serve.dashboard import page_parts, pages, transcript
from warehouse.serve.dashboard.request import parse_request
from warehouse.serve.dashboard.search_page import search_page
from warehouse.serve.dashboard.zoned import LocalMarts
from warehouse.serve.report import pair_without_sessions

PATHS = ("/", "/index.html", "/project", "/session", "/insight", "/csv", "/search")


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def render(con, path: str, query: str, budgets=(), config_file=None, zone: str = UTC, local=None,
           index=None) -> tuple:
    """(HTML, status) of one page; a request with filter problems is answered 400, with the page.
    A CSV (`/csv`) is (text, status, its headers: its type and file name). `budgets`: config.toml's
    (`config_file`), shown against this month's spend. Every figure of a page is read in one read
    transaction, from one snapshot of the catalog: a merge committed meanwhile (a central catalog's)
    shows on the next page, never on half of this one; and DuckLake loads the snapshot once, not
    for each of the page's queries. `zone`: whose days the pages count, unless the page names its
    own (`tz=`); `local` (zoned.LocalMarts) keeps a zone's marts for the connection's next pages.
    `index`: the search index's file (`/search`), or a function giving it; None where there is none."""
    with one_snapshot(con):
        return _render(con, path, query, budgets, config_file, zone, local, index)


def _say_if_the_pair_is_empty(req, rows) -> None:
    """A user and a machine, each in the lake, with no session together: their machines, as the
    report's note says (a team lead's trial saw $0 everywhere without a word)."""
    user = req.filters.user
    said = pair_without_sessions(user, req.filters.machine, {r[3] for r in rows if r[2] == user and r[3] is not None})
    if said:
        req.notes.append(said)


def _render(con, path: str, query: str, budgets, config_file, zone, local, index=None) -> tuple:
    rows = con.execute('SELECT DISTINCT project, provider, "user", machine FROM daily_costs').fetchall()
    projects, providers, users, machines = (sorted({r[i] for r in rows if r[i] is not None}) for i in range(4))
    req = parse_request(query, projects, providers, path, users, machines, zone)
    _say_if_the_pair_is_empty(req, rows)
    if req.filters.zone != UTC:
        (local or LocalMarts()).use(con, req.filters.zone)
    req.budgets, req.config_file = tuple(budgets), None if config_file is None else str(config_file)
    pages.check_sorts(con, req)
    if path == "/csv":
        return pages.download(con, req)
    if path == "/session":
        body, status = transcript.session_page(con, req)
    elif path == "/insight":
        body, status = pages.insight_page(con, req)
    elif path == "/search":
        body, status = search_page(con, req, index, projects, providers)
    elif path == "/project":
        body, status = pages.project_page(con, req, projects, providers), 200
    else:
        body, status = pages.overview(con, req, projects, providers), 200
    return body, 400 if req.errors and status == 200 else status


def catalog_identity(warehouse):
    """What changes when a merge publishes a new catalog (warehouse.lake.ducklake.publish renames a
    new file over it: a new inode); None when there is no warehouse (yet), and for the team's
    catalog in PostgreSQL, which each request attaches anew: its last commit, at once."""
    if is_postgres(warehouse):
        return None
    try:
        st = os.stat(warehouse)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


class Reader:
    """One read-only connection per published catalog, a cursor of it per request. Opening the
    catalog (extensions, ATTACH) costs most of a page's budget (docs/BENCHMARKS.md, "Figures behind
    the code's choices"); a new catalog file gets a new connection at once, so a rebuilt warehouse
    shows on the next reload as before."""

    def __init__(self, warehouse, data_path: str | None = None):
        self.warehouse, self.lock, self.identity, self.con = warehouse, threading.Lock(), None, None
        self.data_path = data_path  # the layout's, for a home moved or copied (warehouse.lake.ducklake.connect)
        self.local = LocalMarts()  # the marts over other zones' days, of `con`'s snapshot

    def cursor(self):
        return self.opened()[0]

    def opened(self) -> tuple:
        """(a cursor, the LocalMarts of its connection)."""
        from warehouse.lake.ducklake import CATALOG
        from warehouse.serve.read_only_sql import open_reader

        # `agentlake sql`'s connection: no file reachable but the tables', the configuration locked
        if os.name == "nt":  # Windows cannot rename a new catalog over a file held open: none kept
            return open_reader(self.warehouse, self.data_path), LocalMarts()
        identity = catalog_identity(self.warehouse)
        with self.lock:
            if self.con is None or identity is None or identity != self.identity:
                # the old connection is left to the requests still using it (their cursors keep it)
                self.con, self.identity = open_reader(self.warehouse, self.data_path), identity
                self.local = LocalMarts()
            cur, local = self.con.cursor(), self.local
        cur.execute(f"USE {CATALOG}")
        return cur, local


class PageCache:
    """Rendered pages by (the published catalog's file identity, path, query). A merge publishes
    a new catalog file (warehouse.lake.ducklake.publish: a rename, so a new inode), which changes the
    key: a rebuilt warehouse still shows on the next reload, and until then a page seen once (the
    way back from a drill-down, a reload on Monday morning) costs no query at all."""

    def __init__(self, size: int = 64):
        from collections import OrderedDict

        self.size, self.pages, self.lock = size, OrderedDict(), threading.Lock()
        self.drawers = {}  # key -> [its lock, requests holding or waiting for it]

    @staticmethod
    def key(warehouse, path: str, query: str, zone: str = UTC):
        identity = catalog_identity(warehouse)  # None: no warehouse (yet), nothing to cache
        if identity is not None and path == "/search":  # the merge updates the index after it publishes
            index = catalog_identity(search_path(warehouse))
            identity = None if index is None else identity + index
        # and the page's day: the windows a click sets and this month's budgets end today
        return None if identity is None else (*identity, page_parts.today(page_parts.page_zone(query, zone)), path, query)

    def get(self, key):
        if key is None:
            return None
        with self.lock:
            if key in self.pages:
                self.pages.move_to_end(key)
                return self.pages[key]
        return None

    def put(self, key, page) -> None:
        if key is None:
            return
        with self.lock:
            self.pages[key] = page
            while len(self.pages) > self.size:
                self.pages.popitem(last=False)

    @contextmanager
    def drawing(self, key):
        """Held while a page not kept yet is drawn: the first request for it draws it, the ones
        that come meanwhile wait, then find it kept (`get`) instead of each drawing it again (a
        link posted in a team's channel is opened by everyone at once)."""
        if key is None:
            yield
            return
        with self.lock:
            drawer = self.drawers.setdefault(key, [threading.Lock(), 0])
            drawer[1] += 1
        try:
            with drawer[0]:
                yield
        finally:
            with self.lock:
                drawer[1] -= 1
                if not drawer[1]:
                    del self.drawers[key]


@contextmanager
def running(warehouse, **kwargs):
    """The dashboard served from a thread of this process (`make_server`'s arguments), its URL
    while the block runs: for a notebook or a test, where `agentlake dashboard` would block."""
    server = make_server(warehouse, **kwargs)
    # a short poll: the block's end (shutdown) waits for the loop to look, 0.5 s by default
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()


BACKLOG = 1024  # connections the kernel holds while every worker is busy (Linux caps it at net.core.somaxconn)
WORKERS = 8  # requests served at once; the others wait their turn in order, without a thread each
WAITING = 64  # connections taken from the backlog to wait for a worker (beyond: the backlog holds them)
IDLE_TIMEOUT = 30  # seconds a connection may stay silent, or stall, before its worker is freed
WORKER_NAME = "agentlake-dashboard"


class PooledHTTPServer(HTTPServer):
    """http.server's server with a listen backlog a team's burst fits in, and a fixed pool of
    workers instead of a thread per connection. socketserver's backlog of 5 dropped the burst's
    other connections (reset minutes later), and a thread each drew the same pages all at once.

    A connection is taken from the backlog only when a worker is free or one of the `WAITING`
    places is (so a flood costs no more file descriptors than that); on Linux only once its
    request has come (TCP_DEFER_ACCEPT), so a connection that sends nothing (a browser's
    preconnect) takes no worker. One that stalls is closed after `IDLE_TIMEOUT`. The workers are
    daemon threads, as socketserver's were: Ctrl-C stops the server at once."""

    request_queue_size = BACKLOG

    def __init__(self, address, handler, workers: int = WORKERS):
        self.size, self.workers, self.waiting = workers, [], queue.SimpleQueue()
        self.places = threading.BoundedSemaphore(workers + WAITING)
        self.stopping = threading.Event()
        super().__init__(address, handler)

    def server_bind(self):
        defer_accept = getattr(socket, "TCP_DEFER_ACCEPT", None)
        if defer_accept is not None:
            self.socket.setsockopt(socket.IPPROTO_TCP, defer_accept, IDLE_TIMEOUT)
        super().server_bind()

    def process_request(self, request, client_address):
        while not self.places.acquire(timeout=0.2):  # every place taken: wait, unless stopping
            if self.stopping.is_set():
                self.shutdown_request(request)
                return
        if len(self.workers) < self.size:  # started as the first requests come
            worker = threading.Thread(target=self._work, name=f"{WORKER_NAME}-{len(self.workers)}", daemon=True)
            worker.start()
            self.workers.append(worker)
        self.waiting.put((request, client_address))

    def _work(self):
        while (item := self.waiting.get()) is not None:
            request, client_address = item
            try:
                self.finish_request(request, client_address)
            except Exception:  # noqa: BLE001  (as socketserver does: reported, and the worker goes on)
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)
                self.places.release()

    def shutdown(self):
        self.stopping.set()  # the loop may be waiting for a place: it stops waiting
        try:
            super().shutdown()
        finally:
            self.stopping.clear()

    def server_close(self):
        super().server_close()
        while True:  # the connections still waiting are closed; the requests being served finish
            try:
                item = self.waiting.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                self.shutdown_request(item[0])
        for _ in self.workers:
            self.waiting.put(None)


TOKEN_ENV = "AGENTLAKE_DASHBOARD_TOKEN"
COOKIE = "agentlake_dashboard_token"
LOOPBACK_NAMES = ("localhost",)


def _host_name(header: str | None) -> str | None:
    """The name in a Host header, without its port: `[::1]:8765` -> `::1`, `Example.COM.` -> `example.com`."""
    if not header:
        return None
    header = header.strip().lower()
    if header.startswith("["):
        name, sep, _ = header[1:].partition("]")
        return name if sep else None
    if header.count(":") == 1:
        header = header.split(":", 1)[0]
    return header.rstrip(".") or None


def _ip(name: str):
    import ipaddress

    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    """True for an address only this machine can reach (127.0.0.0/8, ::1, `localhost`)."""
    ip = _ip(_host_name(host) or "")
    return host.lower() in LOOPBACK_NAMES or (ip is not None and ip.is_loopback)


def host_allowed(header: str | None, loopback: bool, allowed: frozenset[str]) -> bool:
    """Whether to answer a request that names this Host. Bound to loopback: loopback names only, so
    a page on another site cannot reach the dashboard by rebinding its own name to 127.0.0.1.
    Bound beyond loopback: also IP literals (no rebinding through an IP), this machine's names and
    the names given (`allowed_hosts`)."""
    name = _host_name(header)
    if name is None:
        return False
    ip = _ip(name)
    if name in LOOPBACK_NAMES or (ip is not None and ip.is_loopback) or name in allowed:
        return True
    return not loopback and ip is not None


def new_token() -> str:
    """A token to require when none is given (the dashboard beyond loopback, `agentlake mcp --http`)."""
    import secrets

    return secrets.token_urlsafe(24)


def token_matches(given: str | None, expected: bytes) -> bool:
    """Whether `given` is the token, compared in constant time (no timing tells its prefix)."""
    import hmac

    return given is not None and hmac.compare_digest(given.encode(), expected)


def make_server(warehouse, host: str = "127.0.0.1", port: int = 8765, *, token: str | None = None,
                allowed_hosts=(), log=None, data_path: str | None = None, workers: int = WORKERS, budgets=(),
                config_file=None, zone: str = UTC, index=None):
    """An HTTP server for the pages. Requests read the published catalog read-only through one
    connection per catalog file (`Reader`), and a page seen before is served again until a merge
    publishes a new catalog (`PageCache`): a rebuilt warehouse shows up on the next reload.

    Exposure: a request is answered only when its Host header names this server (see
    `host_allowed`), which defeats DNS rebinding. A token (`token`, else $AGENTLAKE_DASHBOARD_TOKEN)
    is required on every request when set; bound beyond loopback one is always required, and made
    up and printed when none is given. It is given once as `?token=...` (answered by a cookie and
    a redirect to the same page without it), then the cookie carries it. `log` (default: stderr)
    gets the warning for a non-loopback bind, with the URL to open. `server.url` is that URL.

    A burst (a link the whole team opens at once) waits in the listen backlog and is served by
    `workers` threads (`PooledHTTPServer`); a page is drawn once for the requests that ask for it
    together (`PageCache.drawing`).

    `budgets` (warehouse.lake.config.Budget, read from `config_file` by the caller: a bad file
    stops it at start, not a page) are shown on the overview and drawn on the monthly cost chart.
    `zone` (an IANA name, checked by the caller): whose days the pages count unless one names its own.
    `index`: what `/search` searches, a function giving the index's file at each search (a team
    catalog's, fetched from the lake: `agentlake dashboard`); by default the file beside the catalog.
    """
    import hashlib
    import sys
    from http.cookies import SimpleCookie
    from http.server import BaseHTTPRequestHandler
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit

    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
    loopback = is_loopback(host)
    if not loopback and not token:
        token = new_token()
    allowed = {_host_name(h) for h in allowed_hosts} - {None}
    if not loopback:
        for name in (socket.gethostname(), socket.getfqdn()):
            if name:
                allowed.add(name.lower().rstrip("."))
    allowed = frozenset(allowed)
    expected = token.encode() if token else None
    # the cookie holds a digest of the token: any token is a valid cookie value, and the token
    # itself is never stored by the browser
    cookie_value = hashlib.sha256(b"agentlake-dashboard:" + expected).hexdigest() if expected else None

    def token_ok(given: str | None) -> bool:
        return token_matches(given, expected)

    def cookie_ok(given: str | None) -> bool:
        return token_matches(given, cookie_value.encode())

    cache, reader = PageCache(), Reader(warehouse, data_path)
    # given only when set: render(con, path, query) stays the whole call without them
    index = index or (None if is_postgres(warehouse) else search_path(warehouse))
    settings = {k: v for k, v in (("budgets", tuple(budgets)), ("config_file", config_file), ("zone", zone),
                                  ("index", index)) if v}

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_TIMEOUT  # a stalled connection frees its worker

        def _send(self, status: int, body: bytes, headers=()):
            self.send_response(status)
            if not any(name == "Content-Type" for name, _ in headers):
                self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            # the page needs nothing from elsewhere, may not be framed, and leaks no URL onwards
            self.send_header("Content-Security-Policy",
                             "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
                             "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
            self.send_header("X-Frame-Options", "DENY")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("Cache-Control", "no-store")
            for name, value in headers:
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_HEAD(self):
            self.do_GET()

        def do_GET(self):
            if not host_allowed(self.headers.get("Host"), loopback, allowed):
                self._send(400, b"<h1>agentlake</h1><p>unexpected Host header: open the dashboard by the "
                                b"address it was started on (or allow this name).</p>")
                return
            url = urlsplit(self.path)
            if expected is not None:
                params = parse_qsl(url.query, keep_blank_values=True)
                given = [v for k, v in params if k == "token"]
                if given:
                    if not token_ok(given[-1]):
                        self._send(401, b"<h1>agentlake</h1><p>wrong token.</p>")
                        return
                    rest = urlencode([(k, v) for k, v in params if k != "token"])
                    path = url.path if url.path in PATHS else "/"  # never off-site (`//host`)
                    location = path + (f"?{rest}" if rest else "")
                    self._send(303, b"", [("Location", location),
                                          ("Set-Cookie", f"{COOKIE}={cookie_value}; Path=/; Max-Age=2592000; HttpOnly; SameSite=Strict")])
                    return
                cookie = SimpleCookie()
                try:
                    cookie.load(self.headers.get("Cookie") or "")
                except Exception:
                    cookie = SimpleCookie()
                if not cookie_ok(cookie[COOKIE].value if COOKIE in cookie else None):
                    self._send(401, b"<h1>agentlake</h1><p>this dashboard needs its token: open the URL "
                                    b"it printed when it started (<code>?token=...</code>) once.</p>")
                    return
            if url.path not in PATHS:
                self.send_error(404)
                return
            try:
                key = PageCache.key(warehouse, url.path, url.query, zone)
                body, status, headers = cache.get(key) or (None, None, ())
                if body is None:
                    with cache.drawing(key):
                        body, status, headers = cache.get(key) or (None, None, ())  # drawn by a request waited for
                        if body is None:
                            con, local = reader.opened()
                            with con:
                                text, status, *more = render(con, url.path, url.query, local=local, **settings)
                            body, headers = text.encode(), tuple(more[0]) if more else ()
                            cache.put(key, (body, status, headers))
            except Exception as exc:  # shown to the user, not a stack trace in the terminal
                said = (storage_failure(exc, reader.con.cursor() if reader.con is not None else None)
                        or f"{exc}{damage_hint(exc)}")  # the lake's storage; a table file lost
                body, status = f"<h1>agentlake</h1><p>cannot read {_e(warehouse)}: {_e(said)}</p>".encode(), 500
                headers = ()
            self._send(status, body, headers)

        def log_message(self, format, *args):  # quiet: one line per request is noise here
            pass

    class Server(PooledHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, port), Handler, workers)
    from warehouse.serve.dashboard.charts import warm_up

    threading.Thread(target=warm_up, daemon=True).start()  # the first page then renders as fast as the next
    shown = host if ":" not in host else f"[{host}]"
    if host in ("0.0.0.0", "::", ""):
        shown = socket.gethostname()
    server.url = f"http://{shown}:{server.server_address[1]}/" + (f"?token={quote(token, safe='')}" if token else "")
    if not loopback:
        log(f"warning: the dashboard listens on {host or '0.0.0.0'}, beyond this machine: anyone who can "
            f"reach port {server.server_address[1]} and has the token sees every project's costs. "
            f"Open {server.url}")
    return server
