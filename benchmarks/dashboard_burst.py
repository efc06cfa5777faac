"""Benchmark: the dashboard under a burst of concurrent requests (issue 32, item 19).

    .venv/bin/python benchmarks/dashboard_burst.py --workdir /tmp/benchburst --code /tmp/before --code /tmp/after

A link posted in a team's channel on Monday morning is opened by everyone at once. The lake is
the medium corpus of benchmarks/run.py (100 projects, 40 sessions each, over 180 days), built
once in --workdir by `agentlake ingest`. Each burst gets a fresh server process on loopback,
warmed by one page first (a server that has been running), then N clients (--clients, 50 and
200) connect at once and each GETs one page:

- one link: every client the same page, its first view (the server's kept pages are empty);
- every page different: each client another ranking length (`top=`), so no kept page answers.

Each request is timed from its connect to the last byte of the response, and its outcome kept:
complete (the whole body its Content-Length says), reset, refused, timed out (--timeout) or
cut short. p50 and p95 are of the complete requests of a burst; the table gives the medians
over --repeat bursts, and every lost request. Each --code is a source tree whose server is
measured (default: this checkout); their bursts are interleaved, so all see the same machine.
--workers compares pool sizes (`make_server(workers=...)`) the same way.
"""

import argparse
import math
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable

SERVER = r"""
import sys
sys.path.insert(0, sys.argv[1])
from warehouse.serve.dashboard import server as dashboard
workers = {"workers": int(sys.argv[3])} if sys.argv[3] != "default" else {}
s = dashboard.make_server(sys.argv[2], "127.0.0.1", 0, **workers)
print(s.server_address[1], dashboard.__file__, flush=True)
s.serve_forever()
"""


def build_lake(args, work: Path) -> Path:
    """The medium corpus' catalog in `work`, ingested once (--workdir keeps it)."""
    sys.path.insert(0, str(HERE))
    from run import _corpus  # the same generated corpus as the other benchmarks

    home = work / "home"
    if not (home / "warehouse.ducklake").exists():
        corpus = _corpus(args, work)
        env = {**os.environ, "AGENTLAKE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")}
        subprocess.run([str(Path(PY).with_name("agentlake")), "ingest", "--quiet", "--no-default",
                        "--crush-root", str(corpus)], env=env, check=True, cwd=HERE.parent)
    return home / "warehouse.ducklake"


def fetch(port: int, path: str, timeout: float) -> tuple[str, float]:
    """(outcome, seconds) of one GET on a new connection, read to its end."""
    start = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(1 << 16):
                data += chunk
    except ConnectionResetError:
        return "reset", time.perf_counter() - start
    except ConnectionRefusedError:
        return "refused", time.perf_counter() - start
    except TimeoutError:
        return "timed out", time.perf_counter() - start
    except OSError as exc:
        return type(exc).__name__, time.perf_counter() - start
    elapsed = time.perf_counter() - start
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("iso-8859-1").split("\r\n")
    length = next((int(v) for k, _, v in (line.partition(": ") for line in lines[1:])
                   if k.lower() == "content-length"), -1)
    ok = lines[0].split()[1:2] == ["200"] and len(body) == length
    return ("complete" if ok else "cut short"), elapsed


def burst(code: Path, warehouse: Path, clients: int, same_page: bool, timeout: float,
          workers: str = "default") -> list[tuple[str, float]]:
    """Every client's (outcome, seconds), on a fresh server of `code` warmed by one page."""
    server = subprocess.Popen([PY, "-c", SERVER, str(code), str(warehouse), workers], cwd=code,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port, module = server.stdout.readline().split()
        assert Path(module).is_relative_to(code), f"{module} is not {code}'s server"
        port = int(port)
        assert fetch(port, "/?top=7", timeout)[0] == "complete"  # warm: connection, chart engine
        results = [None] * clients
        ready = threading.Barrier(clients)

        def client(i: int) -> None:
            path = "/" if same_page else f"/?top={20 + i}"
            ready.wait()
            results[i] = fetch(port, path, timeout)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results
    finally:
        server.terminate()
        server.wait()


def label(code: Path, workers: str) -> str:
    return code.name if workers == "default" else f"{code.name}, {workers} workers"


def percentile(values: list[float], p: float) -> float:
    """Nearest rank: the smallest value at least p% of them are at or under."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", required=True, help="the corpus and its lake, kept for the next run")
    ap.add_argument("--code", action="append", type=Path, help="a source tree to serve from (repeatable)")
    ap.add_argument("--clients", default="50,200", help="concurrent requests per burst, comma-separated")
    ap.add_argument("--pages", choices=("one", "different", "both"), default="both",
                    help="one link, every page different, or both in turn")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300, help="seconds a client waits on its socket")
    ap.add_argument("--workers", default="default",
                    help="the servers' worker counts to compare, comma-separated (servers that have a pool)")
    ap.add_argument("--projects", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=int, default=180)
    args = ap.parse_args()
    codes = [c.resolve() for c in (args.code or [HERE.parent])]
    servers = [(code, w) for code in codes for w in args.workers.split(",")]
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    warehouse = build_lake(args, work)
    counts = [int(n) for n in args.clients.split(",")]
    scenarios = {"one link": True, "every page different": False}
    scenarios = {k: v for k, v in scenarios.items() if args.pages == "both" or v == (args.pages == "one")}
    runs = {}
    print(f"load average at the start: {os.getloadavg()[0]:.1f} ({os.cpu_count()} cores)", file=sys.stderr)
    for r in range(args.repeat):
        for name, same in scenarios.items():
            for n in counts:
                for code, workers in servers:
                    t = time.perf_counter()
                    results = burst(code, warehouse, n, same, args.timeout, workers)
                    runs.setdefault((code, workers, name, n), []).append(results)
                    lost = sum(outcome != "complete" for outcome, _ in results)
                    print(f"run {r + 1}: {label(code, workers)}, {name}, {n} clients: {time.perf_counter() - t:.1f} s, "
                          f"{lost} lost", file=sys.stderr, flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print("| server | pages | clients | p50 (s) | p95 (s) | slowest (s) | complete | lost (after s) |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for name in scenarios:
        for n in counts:
            for code, workers in servers:
                bursts = runs[(code, workers, name, n)]
                done = [[s for o, s in b if o == "complete"] for b in bursts]
                lost = [(o, s) for b in bursts for o, s in b if o != "complete"]
                p50 = statistics.median(percentile(d, 50) for d in done if d) if any(done) else math.nan
                p95 = statistics.median(percentile(d, 95) for d in done if d) if any(done) else math.nan
                slowest = max((s for d in done for s in d), default=math.nan)
                kinds = sorted({o for o, _ in lost})
                said = ", ".join(f"{sum(o == k for o, _ in lost)} {k}" for k in kinds)
                if lost:
                    said += f" ({min(s for _, s in lost):.0f}-{max(s for _, s in lost):.0f})"
                print(f"| {label(code, workers)} | {name} | {n} | {p50:.2f} | {p95:.2f} | {slowest:.2f} | "
                      f"{sum(map(len, done))} of {n * len(bursts)} | {said or 'none'} |")


if __name__ == "__main__":
    main()
