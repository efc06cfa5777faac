"""Export the notebooks as static HTML that renders with no network.

`marimo export html` writes a page whose script and styles are fetched from cdn.jsdelivr.net
(marimo's frontend); on a closed network the page stays blank. This exporter writes the same
page with those URLs pointing at a copy of the frontend that ships inside the installed marimo
wheel (`marimo/_static`), next to the pages:

    AGENTLAKE_WAREHOUSE=... .venv/bin/python -m notebooks.export [-o DIR] [NOTEBOOK ...]

writes DIR/<notebook>.html for each notebook (default: all three, into `notebooks-html/`) and
DIR/assets/ once. The frontend is JavaScript modules, which browsers do not load from `file://`
pages: serve DIR over HTTP, with nothing but this machine (`python -m http.server -d DIR
--bind 127.0.0.1`), and open http://127.0.0.1:8000/cost_overview.html.

No session cache (`notebooks/__marimo__/session/`) is written: `marimo export html` writes one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOKS = ("cost_overview", "tool_usage", "session_explorer")
ASSETS = "assets"  # the page's relative URLs are ./assets/..., ./favicon.ico, ...


def frontend_dir() -> Path:
    import marimo

    static = Path(marimo.__file__).parent / "_static"
    if not (static / "index.html").is_file():
        raise RuntimeError(f"the installed marimo has no bundled frontend at {static}")
    return static


def copy_frontend(out: Path) -> None:
    """The frontend's files (assets/ and the icons), as the page's relative URLs name them."""
    static = frontend_dir()
    for item in static.iterdir():
        if item.name in ("index.html", "CLAUDE.md"):
            continue
        target = out / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)


def export_notebook(name: str, out: Path, include_code: bool = False, asset_url: str | None = ".") -> Path:
    """Run notebooks/<name>.py and write out/<name>.html, whose assets load from `./`
    (`asset_url=None`: from the CDN, as `marimo export html` does)."""
    from marimo._export.file import export_html
    from marimo._export.requests import HTMLFileExportRequest, NotebookExecutionOptions
    from marimo._schemas.export_options import HTMLExportOptions
    from marimo._server.utils import asyncio_run
    from marimo._utils.marimo_path import MarimoPath

    out.mkdir(parents=True, exist_ok=True)
    result = asyncio_run(export_html(HTMLFileExportRequest(
        path=MarimoPath(str(HERE / f"{name}.py")),
        options=HTMLExportOptions(files=(), include_code=include_code, asset_url=asset_url),
        execution=NotebookExecutionOptions(cli_args={}, argv=[], persist_session=False),  # no __marimo__/
    )))
    if result.did_error:
        raise RuntimeError(f"notebook {name} failed while exporting")
    text = result.contents if isinstance(result.contents, str) else result.contents.decode()
    if asset_url and "cdn.jsdelivr.net" in text.split("<body", 1)[0]:
        raise RuntimeError(f"{name}: the exported page still loads its frontend from a CDN")
    page = out / f"{name}.html"
    page.write_text(text)
    return page


def export_all(out: Path, names=NOTEBOOKS, include_code: bool = False) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    copy_frontend(out)
    return [export_notebook(name, out, include_code) for name in names]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m notebooks.export", description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="*", metavar="NOTEBOOK", help=f"{', '.join(NOTEBOOKS)} (default: all)")
    ap.add_argument("-o", "--output", default="notebooks-html", help="directory (default: notebooks-html)")
    ap.add_argument("--include-code", action="store_true", help="include the notebooks' code")
    args = ap.parse_args(argv)
    unknown = sorted(set(args.notebooks) - set(NOTEBOOKS))
    if unknown:
        ap.error(f"no such notebook: {', '.join(unknown)} (choose from {', '.join(NOTEBOOKS)})")
    try:
        import marimo  # noqa: F401
    except ImportError:
        print("the notebooks need the `notebooks` extra: .venv/bin/pip install -q -c requirements.lock "
              "-e '.[notebooks]'", file=sys.stderr)
        return 2
    missing, code = _no_warehouse()
    if missing:  # each notebook would fail on it, a traceback apiece
        print(f"error: {missing}", file=sys.stderr)
        return code
    out = Path(args.output)
    made = not out.exists()
    try:
        pages = export_all(out, args.notebooks or NOTEBOOKS, args.include_code)
    except RuntimeError as exc:  # marimo has printed the notebook's own error above
        if made:  # no folder of assets without its pages
            shutil.rmtree(out, ignore_errors=True)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for page in pages:
        print(page)
    print(f"serve it: {Path(sys.executable).name} -m http.server -d {out} --bind 127.0.0.1", file=sys.stderr)
    return 0


def _no_warehouse() -> tuple[str | None, int]:
    """Why the notebooks have no warehouse to read (the one `agentlake sql` reads), and the exit
    status `agentlake sql` gives for it (docs/CLI.md): (None, 0) when there is one."""
    from pipelines.reading import no_warehouse
    from warehouse.lake.config import ConfigError, reader_layout
    from warehouse.lake.layout import NotAHome
    from warehouse.lake.pg_catalog import is_postgres

    try:
        layout = reader_layout()
    except ConfigError as exc:
        return str(exc), 1
    except NotAHome as exc:
        return str(exc), 2
    if is_postgres(layout.warehouse) or Path(layout.warehouse).exists():
        return None, 0
    return f"{no_warehouse(layout)}; or name one with $AGENTLAKE_WAREHOUSE", 2


if __name__ == "__main__":
    os.environ.setdefault("MARIMO_SKIP_UPDATE_CHECK", "1")
    sys.exit(main())
