"""The team dashboard: one HTML page over the marts, charts drawn as SVG on the server.

Nothing is fetched by the browser but the page itself (no script, no CDN), so it works on a
closed network and renders the same everywhere. Filters (dates, project, agent) are a plain
GET form and use the same `Filters` as `agentlake report`.
"""

import html
import os
from datetime import date
from urllib.parse import parse_qs

from warehouse.report import Filters, run_query

PALETTE = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac")


def filters_from_query(query: str) -> Filters:
    params = {k: v[0] for k, v in parse_qs(query).items() if v and v[0]}

    def day(key):
        try:
            return date.fromisoformat(params[key]) if key in params else None
        except ValueError:
            return None

    return Filters(day("since"), day("until"), params.get("project"), params.get("provider"))


def _e(value) -> str:
    return html.escape("" if value is None else str(value))


def stacked_bars(title: str, rows: list[tuple], chart_id: str, width=760, height=260) -> str:
    """Vertical bars per x, stacked by series. rows: (x, series, value).
    Unknown values (NULL) are left out, not drawn as 0; the page counts them separately."""
    rows = [r for r in rows if r[0] is not None and r[2] is not None]
    xs = sorted({r[0] for r in rows})
    series = sorted({r[1] for r in rows}, key=str)
    totals = {x: sum(float(r[2] or 0) for r in rows if r[0] == x) for x in xs}
    top = max(totals.values(), default=0) or 1
    step = (width - 60) / max(len(xs), 1)
    parts, base = [], {x: 0.0 for x in xs}
    for r in sorted(rows, key=lambda r: (r[0], series.index(r[1]))):
        x, s, v = r[0], r[1], float(r[2] or 0)
        h = v / top * (height - 40)
        y = height - 20 - base[x] - h
        base[x] += h
        color = PALETTE[series.index(s) % len(PALETTE)]
        parts.append(f'<rect class="bar" x="{50 + xs.index(x) * step:.1f}" y="{y:.1f}" width="{max(step - 4, 1):.1f}" '
                     f'height="{h:.1f}" fill="{color}"><title>{_e(x)} · {_e(s)}: ${v:.4f}</title></rect>')
    labels = "".join(f'<text x="{50 + i * step:.1f}" y="{height - 4}" font-size="10">{_e(x)}</text>'
                     for i, x in enumerate(xs) if len(xs) <= 14 or i % (len(xs) // 14 + 1) == 0)
    legend = "".join(f'<span class="key"><i style="background:{PALETTE[i % len(PALETTE)]}"></i>{_e(s)}</span>'
                     for i, s in enumerate(series))
    return (f'<figure id="{chart_id}"><figcaption>{_e(title)} (max ${top:.4f}/day)</figcaption>'
            f'<svg width="{width}" height="{height}" role="img">{"".join(parts)}{labels}</svg>'
            f'<div class="legend">{legend}</div></figure>')


def hbars(title: str, rows: list[tuple], chart_id: str, unit: str = "$", width=760) -> str:
    """Horizontal bars: rows (label, value, overlay?) where overlay is drawn over the bar (errors)."""
    top = max((float(r[1] or 0) for r in rows), default=0) or 1
    span = width - 340  # room for the label on the left and the value on the right
    height = 22 * len(rows) + 10
    parts = []
    for i, r in enumerate(rows):
        label, y = r[0], 5 + i * 22
        parts.append(f'<text x="0" y="{y + 14}" font-size="12">{_e(label)}</text>')
        if r[1] is None:  # an unpriced model: say so, never draw it as $0
            parts.append(f'<text class="unknown" x="266" y="{y + 13}" font-size="11">unknown cost</text>')
            continue
        value = float(r[1])
        w = value / top * span
        parts.append(f'<rect class="bar" x="260" y="{y}" width="{w:.1f}" height="16" fill="{PALETTE[0]}">'
                     f'<title>{_e(label)}: {unit}{value:g}</title></rect>')
        if len(r) > 2 and r[2]:
            ow = float(r[2]) / top * span
            parts.append(f'<rect class="bar error" x="260" y="{y}" width="{ow:.1f}" height="16" fill="{PALETTE[2]}">'
                         f'<title>{_e(label)}: {r[2]} errors or non-zero exits</title></rect>')
        text = f"{unit}{value:.4f}" if unit == "$" else f"{value:g}"
        parts.append(f'<text x="{266 + w:.1f}" y="{y + 13}" font-size="11">{_e(text)}</text>')
    if not rows:
        parts.append('<text x="0" y="20">no data for these filters</text>')
        height = 30
    return (f'<figure id="{chart_id}"><figcaption>{_e(title)}</figcaption>'
            f'<svg width="{width}" height="{height}" role="img">{"".join(parts)}</svg></figure>')


def _options(values: list, selected: str | None) -> str:
    out = ['<option value="">(all)</option>']
    out += [f'<option value="{_e(v)}"{" selected" if v == selected else ""}>{_e(v)}</option>' for v in values]
    return "".join(out)


def page(con, filters: Filters) -> str:
    _, over_time = run_query(con, "SELECT date, project, SUM(cost_usd) FROM daily_costs {w} GROUP BY ALL", filters)
    _, by_project = run_query(con, "SELECT project || ' · ' || provider, SUM(cost_usd) AS c FROM daily_costs {w} "
                              "GROUP BY ALL ORDER BY c DESC NULLS LAST LIMIT 15", filters)
    _, by_model = run_query(con, "SELECT COALESCE(model, '(session-level)') || ' · ' || provider, SUM(cost_usd) AS c "
                            "FROM daily_costs {w} GROUP BY ALL ORDER BY c DESC NULLS LAST LIMIT 15", filters)
    _, tools = run_query(con, "SELECT tool_name, SUM(calls) AS n, SUM(errors) + SUM(nonzero_exits) FROM tool_usage {w} "
                         "GROUP BY ALL ORDER BY n DESC LIMIT 15", filters)
    _, totals = run_query(con, "SELECT SUM(cost_usd), COUNT(*) FILTER (WHERE cost_source = 'unknown') "
                          "FROM daily_costs {w}", filters)
    projects = [r[0] for r in con.execute("SELECT DISTINCT project FROM daily_costs ORDER BY 1").fetchall()]
    providers = [r[0] for r in con.execute("SELECT DISTINCT provider FROM daily_costs ORDER BY 1").fetchall()]
    cost, unknown = totals[0]
    note = f" · {unknown} rows with unknown cost (not counted as $0)" if unknown else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentlake dashboard</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #222; }}
form {{ display: flex; gap: 12px; align-items: end; flex-wrap: wrap; margin-bottom: 16px; }}
label {{ display: flex; flex-direction: column; font-size: 12px; }}
figure {{ margin: 18px 0; }} figcaption {{ font-weight: 600; margin-bottom: 6px; }}
.legend {{ font-size: 12px; }} .key {{ margin-right: 12px; }}
.key i {{ display: inline-block; width: 10px; height: 10px; margin-right: 4px; }}
</style></head><body>
<h1>agentlake</h1>
<form method="get">
  <label>since <input type="date" name="since" value="{_e(filters.since)}"></label>
  <label>until <input type="date" name="until" value="{_e(filters.until)}"></label>
  <label>project <select name="project">{_options(projects, filters.project)}</select></label>
  <label>agent <select name="provider">{_options(providers, filters.provider)}</select></label>
  <button type="submit">apply</button>
</form>
<p id="total">Total cost: ${float(cost or 0):.4f}{_e(note)} · root sessions only, sub-agents included once</p>
{stacked_bars("Cost over time, by project", over_time, "cost-over-time")}
{hbars("Cost by project", by_project, "cost-by-project")}
{hbars("Cost by model", by_model, "cost-by-model")}
{hbars("Tool calls (red: errors and non-zero exits)", tools, "tool-usage", unit="")}
</body></html>"""


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


def make_server(warehouse, host: str = "127.0.0.1", port: int = 8765, *, token: str | None = None,
                allowed_hosts=(), log=None):
    """An HTTP server for the page. Each request opens the warehouse read-only afresh, so a
    rebuilt warehouse shows up on the next reload and no lock is ever held between requests.

    Exposure: a request is answered only when its Host header names this server (see
    `host_allowed`), which defeats DNS rebinding. A token (`token`, else $AGENTLAKE_DASHBOARD_TOKEN)
    is required on every request when set; bound beyond loopback one is always required, and made
    up and printed when none is given. It is given once as `?token=...` (answered by a cookie and
    a redirect to the same page without it), then the cookie carries it. `log` (default: stderr)
    gets the warning for a non-loopback bind, with the URL to open. `server.url` is that URL.
    """
    import hashlib
    import hmac
    import secrets
    import socket
    import sys
    from http.cookies import SimpleCookie
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import parse_qsl, quote, urlencode, urlsplit

    from warehouse.views import connect

    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
    loopback = is_loopback(host)
    if not loopback and not token:
        token = secrets.token_urlsafe(24)
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
        return given is not None and hmac.compare_digest(given.encode(), expected)

    def cookie_ok(given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), cookie_value.encode())

    class Handler(BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, headers=()):
            self.send_response(status)
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
                    path = url.path if url.path in ("/", "/index.html") else "/"  # never off-site (`//host`)
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
            if url.path not in ("/", "/index.html"):
                self.send_error(404)
                return
            try:
                with connect(warehouse) as con:
                    body, status = page(con, filters_from_query(url.query)).encode(), 200
            except Exception as exc:  # shown to the user, not a stack trace in the terminal
                body, status = f"<h1>agentlake</h1><p>cannot read {_e(warehouse)}: {_e(exc)}</p>".encode(), 500
            self._send(status, body)

        def log_message(self, format, *args):  # quiet: one line per request is noise here
            pass

    class Server(ThreadingHTTPServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    server = Server((host, port), Handler)
    shown = host if ":" not in host else f"[{host}]"
    if host in ("0.0.0.0", "::", ""):
        shown = socket.gethostname()
    server.url = f"http://{shown}:{server.server_address[1]}/" + (f"?token={quote(token, safe='')}" if token else "")
    if not loopback:
        log(f"warning: the dashboard listens on {host or '0.0.0.0'}, beyond this machine: anyone who can "
            f"reach port {server.server_address[1]} and has the token sees every project's costs. "
            f"Open {server.url}")
    return server
