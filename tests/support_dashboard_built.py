"""What the dashboard's tests share: copies of the lakes they only read (one a module), and one
Chromium for the session, each test browsing in a browser context of its own."""

from tests.support_browser import Browser


def lake_copy(built_once, name: str, template: str = "known-totals", build=None):
    """A copy of the lake `built_once(template, build)` gives (by default the known-totals lake,
    conftest's `lake`), made once a session under `name`, for a module's tests that only read it."""
    from tests.conftest import _known_totals, copy_home
    from warehouse.lake.layout import Layout

    def copy(root):
        copy_home(built_once(template, build or _known_totals, workers=True).home, root / "home")
        return Layout.resolve(home=root / "home", machine="laptop", user="dev")

    return built_once(name, copy)


def shared_chromium(request) -> Browser:
    """The session's one headless Chromium, started by the first test that asks for it and
    closed when the session ends, where each module that browses started (and paid for) one of
    its own. Each test still browses in a browser context of its own (its own cookies and storage)."""

    def start(_root):
        browser = Browser()
        request.config.add_cleanup(browser.close)
        return browser

    return request.getfixturevalue("built_once")("chromium", start)

