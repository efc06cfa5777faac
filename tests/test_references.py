"""What the code's comments and docstrings and the docs pages name is here: every path of this
repository they give exists, every dotted name (`transforms.pricing.price_buckets`) resolves to a
module or a module's attribute, every `<name>.md` is one of the project's pages (or says whose it
is), and a citation of a page's section (`docs/FORMATS.md, "Codex: token usage"`) finds that
heading. Notes kept outside the repository are not here for a reader of a fresh clone, so nothing
may point at them. Stopwatch figures live in docs/BENCHMARKS.md, not in comments.

The paths and modules are matched as tests/test_docs.py matches them in the docs' code spans
(its `REPO_PATH`, `MODULE` and `_module`), here in all the text: comments, docstrings, pages."""

import ast
import io
import re
import subprocess
import tokenize
from functools import cache
from pathlib import Path

import pytest

from tests.test_docs import FILE_TYPES, MADE_HERE, MODULE, REPO_PATH, ROOT, _anchors, _module

# the test modules' own package too (`tests.conftest.ingest`)
DOTTED = re.compile(MODULE.pattern.replace("|notebooks)", "|notebooks|tests)"))
assert DOTTED.pattern != MODULE.pattern, "tests/test_docs.py's MODULE changed: extend it with `tests` again"
PAGE = re.compile(r"(?<![\w./<>~-])((?:docs/)?[A-Za-z][\w-]*\.md)\b")
# a page's sections, cited as `docs/FORMATS.md, "Codex: token usage"` (`..., "A" and "B"`)
CITATION = re.compile(r'\b((?:docs/)?[A-Z][\w-]*\.md|README),\s+("[^"]{1,120}"(?:(?:,\s*|\s+and\s+)"[^"]{1,120}")*)')
# pages of other projects a text may name bare, each with the word that must say whose it is
UPSTREAM_PAGES = {
    "session.md": "pi",  # pi's session format (badlogic/pi-mono, packages/coding-agent/docs/)
    "CLAUDE.md": "Claude Code",  # Claude Code's project instructions
}
OUTSIDE = re.compile(r"/work/|\bshared/(?:docs|reference)\b|\bproviders\.md\b|\bcrush-format\.md\b")
NOT_SCANNED = ("tests/fixtures/",)  # data copied from upstream, kept byte for byte


def _tracked(suffix: str) -> list[Path]:
    # the files git does not track yet too (not those it ignores): a new agent's folder before its first commit
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", f"*{suffix}"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split("\0")
    return [ROOT / n for n in sorted(names) if n and not n.startswith(NOT_SCANNED) and (ROOT / n).exists()]


def _python_text(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring of a Python file; comments on lines of their
    own that follow each other are one text, as they are read."""
    source = path.read_text(encoding="utf-8")
    out: list[tuple[int, str]] = []
    last = None  # the line of the last comment that stood on a line of its own
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        alone = tok.line.lstrip().startswith("#")
        text = tok.string.lstrip("#").strip()
        if alone and last == tok.start[0] - 1:
            out[-1] = (out[-1][0], f"{out[-1][1]}\n{text}")
        else:
            out.append((tok.start[0], text))
        last = tok.start[0] if alone else None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.append((first.lineno, first.value.value))
    return out


@cache
def _texts() -> list[tuple[str, int, str]]:
    """(file, line, text) of every comment, docstring and page the references are looked for in."""
    out = []
    for path in _tracked(".py"):
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, line, text) for line, text in _python_text(path)]
    for path in _tracked(".md"):
        rel = path.relative_to(ROOT).as_posix()
        out += [(rel, n, line) for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)]
    return out


# -- the checks, each over any text ------------------------------------------------------------

@cache
def _ignored(path: str) -> bool:
    """A path git ignores is one a run makes (a cache, an export), not a file of the repository."""
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0


def missing_paths(text: str) -> list[str]:
    """The repository paths a text gives that are not here (a glob must match something). A
    placeholder (`transforms/<agent>/`) ends the path: what comes before it is checked."""
    out = []
    for path in REPO_PATH.findall(text):
        path = path.rstrip(".").rstrip("/")  # a sentence's full stop; a folder's slash
        if not path or path in MADE_HERE:
            continue
        # what is here first: asking git starts a process (about 200 of them, once for every path)
        if not next(ROOT.glob(path), None) and not _ignored(path):
            out.append(path)
    return out


@cache
def _names_in(origin: str) -> dict[str, ast.AST]:
    """The names a module's source defines at its top level (functions, classes, assignments,
    imports), each with its node."""
    tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    return _defined(tree.body)


def _defined(body) -> dict[str, ast.AST]:
    names: dict[str, ast.AST] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        names[name.id] = node
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names[(alias.asname or alias.name).split(".")[0]] = node
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            names.update(_defined(node.body))
    return names


def unresolved(dotted: str) -> str | None:
    """Why a dotted name is not a module of this repository or an attribute of one (None: it is)."""
    parts = dotted.split(".")
    if parts[-1] in FILE_TYPES:  # a file's name (`warehouse.duckdb`), not a module
        return None
    for cut in range(len(parts), 0, -1):
        spec = _module(".".join(parts[:cut]))
        if spec is not None:
            break
    else:
        return f"no module {parts[0]}"
    rest = parts[cut:]
    if not rest:
        return None
    if spec.origin is None or not spec.origin.endswith(".py"):
        return f"no module {'.'.join(parts[:cut + 1])}"
    names, owner = _names_in(spec.origin), ".".join(parts[:cut])
    for name in rest:
        node = names.get(name)
        if node is None:
            return f"{owner} has no {name}"
        if not isinstance(node, ast.ClassDef):  # a function's or a value's attributes are not looked into
            return None
        names, owner = _defined(node.body), f"{owner}.{name}"
    return None


def unknown_pages(text: str) -> list[str]:
    """The `<name>.md` a text names that are neither a page of this repository (its root or docs/)
    nor an upstream page the text says is another project's."""
    out = []
    for page in PAGE.findall(text):
        name = page.removeprefix("docs/")
        if (ROOT / page).exists() or (ROOT / "docs" / name).exists() or (ROOT / name).exists():
            continue
        whose = UPSTREAM_PAGES.get(name)
        if whose and re.search(rf"\b{re.escape(whose)}\b", text):
            continue
        out.append(page)
    return out


@cache
def _headings(page: Path) -> tuple[str, ...]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.M | re.S)
    return tuple(h.strip() for h in re.findall(r"^#+ (.+)$", text, flags=re.M))


def _finds(section: str, page: Path) -> bool:
    """A heading is cited by its words, whole or up to a comma, colon or bracket of its own
    (`"Memory"` finds "Memory, and a team's marts that ran out of it (...)"), or by its anchor."""
    return any(h == section or re.match(rf"{re.escape(section)}\s*[,:(]", h) for h in _headings(page)) \
        or section in _anchors(page)


def wrong_citations(text: str) -> list[str]:
    """`<page>.md, "Section"` citations whose page has no such heading (README topics are links,
    tests/test_docs.py checks those)."""
    out = []
    for page, sections in CITATION.findall(text):
        if page == "README":
            continue
        path = ROOT / page if (ROOT / page).exists() else ROOT / "docs" / page.removeprefix("docs/")
        if not path.exists():
            out.append(f"{page} (no such page)")
            continue
        cited = (" ".join(s.split()) for s in re.findall(r'"([^"]+)"', sections))  # a heading wrapped over lines
        out += [f'{page}, "{section}"' for section in cited if not _finds(section, path)]
    return out


# A stopwatch figure: a time or a memory peak measured, not a setting (a timeout, a memory cap).
# Milliseconds, microseconds and MiB are always measured here; seconds and MB/GB when they are
# what something took or cost, or set against another figure (the examples are in PLANTED).
_NUMBER = r"~?\d[\d,]*(?:\.\d+)?(?:\s?(?:-|to)\s?\d[\d,]*(?:\.\d+)?)?"
_FIGURE = rf"{_NUMBER}(?:\s?(?:ms|µs|us|MiB|MB|GB|kB)|\s(?:s|min))\b"  # "404s" is no time
_SENTENCE = r"(?:[^.;]|\.\d)"  # a stretch of one sentence (a decimal point does not end it)
STOPWATCH = re.compile(
    rf"{_NUMBER}\s?(?:ms|µs|us|MiB)\b"
    rf"|\b(?:took|takes|cost|costs|paid|peaked at|waited)\b{_SENTENCE}{{0,50}}?{_FIGURE}"
    rf"|{_FIGURE}{_SENTENCE}{{0,40}}?(?:\binstead of\b|\bagainst\b|->|→|\bdown to\b|\bnow\b)"
    rf"{_SENTENCE}{{0,20}}?{_FIGURE}"
    rf"|{_FIGURE} of an? {_SENTENCE}{{0,30}}?{_FIGURE}"
    rf"|\bmeasured\b{_SENTENCE}{{0,80}}?{_FIGURE}|{_FIGURE}{_SENTENCE}{{0,80}}?\bmeasured\b")


def stopwatch_figures(text: str) -> list[str]:
    return [m.group(0) for m in STOPWATCH.finditer(text)]


def unresolved_names(text: str) -> list[str]:
    return [f"{dotted}: {why}" for dotted in DOTTED.findall(text) if (why := unresolved(dotted))]


def outside(text: str) -> list[str]:
    return OUTSIDE.findall(text)


# -- the tests ---------------------------------------------------------------------------------

@pytest.fixture
def texts(built_once):
    """_texts(), read once for all of the run's workers (tokenizing every file is most of this module's time)."""
    return built_once("reference-texts", lambda root: _texts(), workers=True)


def _failures(texts, check, *, pages=True) -> list[str]:
    return [f"{rel}:{line}: {found}" for rel, line, text in texts if pages or not rel.endswith(".md")
            for found in check(text)]


def test_paths_named_exist(texts):
    assert _failures(texts, missing_paths) == []


def test_dotted_names_resolve(texts):
    assert _failures(texts, unresolved_names) == []


def test_pages_named_are_ours_or_say_whose(texts):
    assert _failures(texts, unknown_pages) == []


def test_section_citations_find_their_heading(texts):
    assert _failures(texts, wrong_citations) == []


def test_nothing_points_outside_the_repository(texts):
    assert _failures(texts, outside) == []


def test_comments_carry_no_stopwatch_figures(texts):
    """A figure measured belongs in docs/BENCHMARKS.md ("Figures behind the code's choices"),
    where it can be dated and measured again; a comment keeps the reason and points there."""
    assert _failures(texts, stopwatch_figures, pages=False) == []


# -- the checks catch what they are for ---------------------------------------------------------

PLANTED = [
    ("see transforms/crush/nowhere.py", missing_paths),
    ("see docs/NOWHERE.md.", missing_paths),
    ("transforms.crush.nowhere reads it", unresolved_names),
    ("transforms.pricing.no_such_function", unresolved_names),
    ("transforms.pricing.Buckets.no_such_method", unresolved_names),
    ("tests.conftest.no_such_helper", unresolved_names),
    ("as providers.md says", unknown_pages),
    ("docs/session.md describes it", unknown_pages),
    ("session.md describes it", unknown_pages),
    ('docs/FORMATS.md, "No such section"', wrong_citations),
    ('docs/FORMATS.md, "Codex: tools" and "Codex: nothing"', wrong_citations),
    ('docs/NOWHERE.md, "Anything"', wrong_citations),
    ("the notes in /work/shared/docs", outside),
    ("crush-format.md §4", outside),
    ("1.6 s to read it, now 0.1 s", stopwatch_figures),
    ("took 2.7 s instead of 0.5 s", stopwatch_figures),
    ("a catalog lookup (20-50 ms)", stopwatch_figures),
    ("peaked at 1,055 MiB", stopwatch_figures),
    ("3.7 s of a 22 s cold ingest", stopwatch_figures),
]


@pytest.mark.parametrize("text, check", PLANTED)
def test_a_planted_bad_reference_is_caught(text, check):
    assert check(text)


@pytest.mark.parametrize("text, check", [
    ("transforms/crush/parts.py, transforms/<agent>/ and tests/test_*.py.", missing_paths),
    ("notebooks/__marimo__/session/ (ignored: a run makes it)", missing_paths),
    ("transforms.crush.parts.PartColumns.add, transforms.pricing.Buckets and tests.conftest.ingest",
     unresolved_names),
    ("pi's own session.md", unknown_pages),
    ("badlogic/pi-mono's packages/coding-agent/docs/session.md", missing_paths),
    ('docs/FORMATS.md, "Codex: tools" and "Codex: token usage"', wrong_citations),
    ('docs/BENCHMARKS.md, "Memory"', wrong_citations),  # a heading by its words up to its comma
    ('docs/FORMATS.md, "Codex: replayed history,\n    forks and sub-agents"', wrong_citations),
    ("a 512 MB cap, a 5 s timeout, 250 files per read, 64 KiB, its 404s", stopwatch_figures),
    ("messages 30 s apart from 45 s before midnight", stopwatch_figures),
])
def test_what_is_here_passes(text, check):
    assert not check(text)


def test_comments_and_docstrings_are_what_is_read(tmp_path):
    """A planted file: its comments (one text when they follow each other) and docstrings are
    read, its code and other strings are not."""
    planted = tmp_path / "planted.py"
    planted.write_text('''"""Reads transforms/crush/nowhere.py."""
x = "transforms/crush/not_read.py"  # a trailing comment: docs/NOWHERE.md


def f():
    """See docs/FORMATS.md, "No such section"."""
    # it took 2.7 s
    # instead of 0.5 s
''')
    texts = [text for _, text in _python_text(planted)]
    assert sorted(found for text in texts for found in missing_paths(text)) == ["docs/NOWHERE.md",
                                                                              "transforms/crush/nowhere.py"]
    assert [found for text in texts for found in wrong_citations(text)] == ['docs/FORMATS.md, "No such section"']
    assert "it took 2.7 s\ninstead of 0.5 s" in texts and stopwatch_figures("it took 2.7 s\ninstead of 0.5 s")
    assert not any("not_read" in text for text in texts)
