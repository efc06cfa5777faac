"""Issue 12, item 17: the dashboard is not easy to expose. Real HTTP requests to a real server
on 127.0.0.1: a Host header that does not name the server is refused (DNS rebinding), a bind
beyond loopback warns and needs a token, and the token is given once, then kept in a cookie."""

import http.client
import threading

import pytest

from tests.support_dashboard_built import lake_copy
from warehouse.serve.dashboard.server import make_server


def _started(warehouse, host="127.0.0.1", **kwargs):
    server = make_server(warehouse, host, 0, **kwargs)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server


def _stopped(server) -> None:
    server.shutdown()
    server.server_close()


@pytest.fixture
def serve(lake):
    started = []

    def start(host="127.0.0.1", **kwargs):
        started.append(_started(lake.warehouse, host, **kwargs))
        return started[-1]

    yield start
    for server in started:
        _stopped(server)


@pytest.fixture(scope="module")
def loopback(built_once):
    """A server as started by default (loopback, no token) for the tests that only read what it
    answers: one for them, over a copy of the lake they only read, whose kept pages they share."""
    server = _started(lake_copy(built_once, "exposure-read-only").warehouse)
    yield server
    _stopped(server)


def get(server, path="/", host=None, cookie=None):
    """GET on 127.0.0.1 with the Host header given (None: the one http.client sends)."""
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.putrequest("GET", path, skip_host=host is not None)
        if host is not None and host != "":
            conn.putheader("Host", host)
        if cookie:
            conn.putheader("Cookie", cookie)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode()
    finally:
        conn.close()


def test_loopback_dashboard_answers_loopback_names_only(loopback):
    """DNS rebinding: a page on evil.example rebinds its name to 127.0.0.1 and reads the
    dashboard with Host: evil.example. Bound to loopback, only loopback names are answered."""
    server = loopback
    port = server.server_address[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", f"[::1]:{port}", f"LOCALHOST.:{port}"):
        status, _, body = get(server, host=host)
        assert status == 200, host
        assert "Total cost" in body
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}", f"192.168.1.20:{port}"):
        status, _, body = get(server, host=host)
        assert status == 400, host
        assert "Total cost" not in body
    status, _, body = get(server, host="")  # no Host header at all (HTTP/1.0 style)
    assert status == 400 and "Total cost" not in body


def test_loopback_dashboard_needs_no_token_and_warns_nothing(serve, capfd):
    server = serve()
    status, headers, _ = get(server)
    assert status == 200 and "Set-Cookie" not in headers
    assert "token" not in server.url
    assert capfd.readouterr().err == ""


def test_names_can_be_allowed(serve):
    server = serve(allowed_hosts=["dash.example.org"])
    assert get(server, host="dash.example.org:8765")[0] == 200
    assert get(server, host="other.example.org")[0] == 400


def test_bind_beyond_loopback_warns_and_requires_a_token(serve, capfd):
    server = serve("0.0.0.0")
    port = server.server_address[1]
    err = capfd.readouterr().err
    assert "warning" in err and "0.0.0.0" in err
    assert "?token=" in server.url and server.url in err  # the URL to open, token included
    token = server.url.split("?token=", 1)[1]
    assert len(token) >= 24

    status, headers, body = get(server, host=f"127.0.0.1:{port}")
    assert status == 401 and "Total cost" not in body
    assert get(server, "/?token=wrong", host=f"127.0.0.1:{port}")[0] == 401
    assert get(server, "/", host=f"127.0.0.1:{port}", cookie="agentlake_dashboard_token=wrong")[0] == 401

    # the token once: a cookie, and a redirect to the same page without the token in the URL
    status, headers, _ = get(server, f"/?provider=crush&token={token}", host=f"127.0.0.1:{port}")
    assert status == 303
    assert headers["Location"] == "/?provider=crush"
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    assert token not in cookie  # the browser keeps a digest, not the token
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    status, _, body = get(server, "/?provider=crush", host=f"127.0.0.1:{port}", cookie=cookie)
    assert status == 200 and "Total cost: $1.3000" in body

    # an IP literal cannot be rebound, a foreign name can: refused even with the cookie
    assert get(server, "/", host=f"10.1.2.3:{port}", cookie=cookie)[0] == 200
    assert get(server, "/", host=f"evil.example:{port}", cookie=cookie)[0] == 400


def test_token_from_the_environment(serve, monkeypatch, capfd):
    monkeypatch.setenv("AGENTLAKE_DASHBOARD_TOKEN", "s3cret token/with;odd chars")
    server = serve()  # loopback, but a token was asked for: required too
    assert capfd.readouterr().err == ""  # loopback: no warning
    assert get(server)[0] == 401
    status, headers, _ = get(server, "/?token=s3cret%20token%2Fwith%3Bodd%20chars")
    assert status == 303 and headers["Location"] == "/"
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    assert get(server, cookie=cookie)[0] == 200


def test_token_redirect_never_leaves_the_site(serve):
    server = serve(token="t")
    status, headers, _ = get(server, "//evil.example/?token=t")
    assert status == 303 and headers["Location"] == "/"


def test_page_forbids_framing_and_outside_resources(loopback):
    _, headers, _ = get(loopback)
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


def test_every_page_is_guarded_and_the_token_redirect_keeps_the_page(serve):
    """The drill-down pages answer under the same Host check and token as the overview, and the
    token's redirect goes back to the page it was given on (never anywhere else)."""
    server = serve(token="t")
    port = server.server_address[1]
    for path in ("/project?project=shop", "/session?source=x&id=R", "/insight?name=insight_idle_cost"):
        assert get(server, path)[0] == 401, path
        assert get(server, path, host=f"evil.example:{port}")[0] == 400, path
    status, headers, _ = get(server, "/project?project=shop&token=t")
    assert status == 303 and headers["Location"] == "/project?project=shop"
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    status, headers, body = get(server, "/project?project=shop", cookie=cookie)
    assert status == 200 and "project shop" in body
    assert "default-src 'none'" in headers["Content-Security-Policy"]  # no script on any page: none needed
    assert "<script" not in body
    assert get(server, "/elsewhere", cookie=cookie)[0] == 404
