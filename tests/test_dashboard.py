"""The dashboard in a real headless browser (Debian's Chromium): the charts render with the
fixture's data, and the filters change them."""

import os
import re
import shutil
import subprocess
import threading

import pytest

from warehouse.dashboard import make_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if not CHROMIUM and not os.environ.get("CI"):  # CI installs it (.ci/run); a laptop may not have it
    pytest.skip("no chromium on this machine: apt-get install chromium", allow_module_level=True)

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def dashboard(lake):
    server = make_server(lake.warehouse, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def browse(url: str, tmp_path, *extra) -> str:
    """The DOM as Chromium built it."""
    out = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *extra, "--dump-dom", url],
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def chart(dom: str, chart_id: str) -> str:
    return re.search(rf'<figure id="{chart_id}">(.*?)</figure>', dom, re.S).group(1)


def test_charts_render_with_the_fixture_data(dashboard, lake, tmp_path):
    from tests.conftest import scalar

    dom = browse(dashboard, tmp_path)
    for chart_id in ("cost-over-time", "cost-by-project", "cost-by-model", "tool-usage"):
        assert chart(dom, chart_id).count('class="bar') > 0, chart_id
    over_time = chart(dom, "cost-over-time")
    day_one = scalar(lake, "SELECT SUM(cost_usd) FROM daily_costs WHERE date = '2026-01-01'")
    assert f"2026-01-01 · shop: ${day_one:.4f}" in over_time
    assert "unknown cost" in chart(dom, "cost-by-model")  # glm-4.6: unknown, not drawn as $0
    assert "1 rows with unknown cost" in dom
    png = tmp_path / "dashboard.png"
    browse(dashboard, tmp_path, f"--screenshot={png}", "--window-size=900,1400")
    assert png.stat().st_size > 10_000


def test_filters_change_the_page(dashboard, tmp_path):
    crush = browse(dashboard + "?provider=crush", tmp_path)
    assert "Total cost: $1.3000" in crush
    assert "glm-4.6" not in chart(crush, "cost-by-model")
    window = browse(dashboard + "?provider=crush&since=2026-01-03&until=2026-01-05", tmp_path)
    assert "Total cost: $0.1000" in window
    assert chart(window, "cost-over-time").count('class="bar"') == 3
    assert re.search(r'<option value="crush" selected', window)


def test_token_once_then_the_cookie_in_a_real_browser(lake, tmp_path):
    """A dashboard with a token: Chromium without it gets the 401 page; with `?token=` once it is
    redirected to the page (token gone from the URL) and the cookie carries it from then on."""
    server = make_server(lake.warehouse, port=0, token="tok-123")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    try:
        assert "needs its token" in browse(url, tmp_path)
        assert "Total cost" not in browse(url, tmp_path)
        dom = browse(url + "?provider=crush&token=tok-123", tmp_path)
        assert "Total cost: $1.3000" in dom
        assert chart(dom, "cost-by-model").count('class="bar') > 0
        dom = browse(url + "?provider=crush", tmp_path)  # same profile: the cookie is enough now
        assert "Total cost: $1.3000" in dom
    finally:
        server.shutdown()
        server.server_close()
