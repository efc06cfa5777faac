"""Issue 32, item 19: the dashboard under a burst, as when a link is posted in a team's channel on
Monday morning and everyone opens it at once. Real sockets to a real server on loopback, over the
known-totals lake: every connection is held, then answered in full, never reset or refused, and
a connection that sends nothing (or half a request) cannot keep the others waiting."""

import socket
import sys
import threading
from pathlib import Path

import pytest

from warehouse.serve.dashboard import server as dashboard
from warehouse.serve.dashboard.server import make_server


def kernel_backlog_cap() -> int:
    """The most connections the kernel holds for one listening socket, whatever it asks for."""
    somaxconn = Path("/proc/sys/net/core/somaxconn")
    return int(somaxconn.read_text()) if somaxconn.exists() else socket.SOMAXCONN


BURST = min(200, kernel_backlog_cap() - 1)


@pytest.fixture
def serve(lake):
    """A server not yet accepting: `start(server)` starts its loop. Every one is stopped after."""
    made, started = [], []

    def make(**kwargs):
        server = make_server(lake.warehouse, port=0, **kwargs)
        made.append(server)
        return server

    def start(server):
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append(server)

    yield make, start
    for server in started:
        server.shutdown()  # waits for a loop that was started
    for server in made:
        server.server_close()


def request(port: int, path: str = "/") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()


def read_response(sock: socket.socket) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one response read to the end of the connection."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers, body


def test_a_burst_is_held_in_the_backlog_then_answered_in_full(serve, monkeypatch):
    """BURST connections made while the server is not accepting yet (its accept loop busy, as in
    a burst): the listen backlog must hold them all. Each sends its request, then the server
    starts: every response arrives complete (status 200, the whole page its Content-Length
    says), none is reset, and the page is drawn once for them all, not once each."""
    drawn = []
    real_render = dashboard.render

    def render(con, path, query, **settings):
        drawn.append(path)
        return real_render(con, path, query, **settings)

    monkeypatch.setattr(dashboard, "render", render)
    make, start = serve
    server = make()
    port = server.server_address[1]
    socks = []
    try:
        for i in range(BURST):
            try:  # held by the kernel: the handshake completes at once, or the SYN is dropped
                socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError as exc:
                pytest.fail(f"connection {i + 1} of {BURST} not held by the listen backlog: {exc!r}")
        for sock in socks:
            sock.sendall(request(port))
        start(server)
        reset, answers = [], []
        for i, sock in enumerate(socks):
            sock.settimeout(120)
            try:
                answers.append(read_response(sock))
            except OSError as exc:
                reset.append((i, repr(exc)))
        assert not reset, f"{len(reset)} of {BURST} connections lost: {reset[:5]}"
        assert len(answers) == BURST
        for status, headers, body in answers:
            assert status == 200
            assert len(body) == int(headers["Content-Length"]) > 0
            assert b"Total cost" in body and body.rstrip().endswith(b"</html>")
        assert len({body for _, _, body in answers}) == 1
        assert drawn == ["/"]  # one render, the other requests waited for it and were given it
    finally:
        for sock in socks:
            sock.close()


def test_the_listening_socket_and_the_pool_are_bounded_as_configured(serve):
    """The live socket's backlog is the one asked for (as the kernel reports it: `ss`), and
    requests are served by a fixed pool of workers, not a thread each."""
    make, start = serve
    server = make()
    start(server)
    port = server.server_address[1]
    assert dashboard.BACKLOG >= 200 and server.request_queue_size == dashboard.BACKLOG
    if sys.platform == "linux":
        import subprocess

        listed = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
        send_q = int(listed.stdout.split()[2])  # a listening socket's Send-Q is its backlog
        assert send_q == min(dashboard.BACKLOG, kernel_backlog_cap())
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(3 * dashboard.WORKERS)]
    for sock in socks:
        sock.sendall(request(port, "/nowhere"))  # answered 404 without the lake: only the threads count
    for sock in socks:
        sock.settimeout(60)
        assert read_response(sock)[0] == 404
        sock.close()
    workers = [t for t in threading.enumerate() if t.name.startswith(dashboard.WORKER_NAME)]
    assert 0 < len(workers) <= dashboard.WORKERS


def test_connections_that_send_nothing_or_half_a_request_do_not_keep_others_waiting(serve, monkeypatch):
    """More connections than workers that send nothing (a browser's preconnect), then as many
    that send half a request and stall: a whole request on a new connection is still answered,
    and the stalled ones are closed once they have been idle too long."""
    monkeypatch.setattr(dashboard, "IDLE_TIMEOUT", 1)
    make, start = serve
    server = make()
    start(server)
    port = server.server_address[1]
    idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(dashboard.WORKERS + 2)]
    stalled = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(dashboard.WORKERS + 2)]
    try:
        for sock in stalled:
            sock.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode())  # no blank line: never ends
        sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        sock.sendall(request(port, "/nowhere"))  # served by a worker like a page, without drawing one
        status, headers, body = read_response(sock)
        assert status == 404 and len(body) == int(headers["Content-Length"]) > 0
        sock.close()
        for sock in stalled:
            sock.settimeout(60)
            assert sock.recv(65536) == b""  # closed by the server, not held forever
    finally:
        for sock in idle + stalled:
            sock.close()
