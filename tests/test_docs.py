"""The docs describe what the code does: the README is the front door, docs/CLI.md the reference
of the command, and both agree with the parser (`--help`) and with the exit codes the code uses."""

import argparse
import ast
import importlib.util
import re
from pathlib import Path

import pytest

from pipelines.cli import command_parsers, parser
from transforms.contract import ALL_TABLES
from warehouse.catalog.tables_doc import render

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
CLI_DOC = (ROOT / "docs" / "CLI.md").read_text()
MAIN_COMMAND = ("python3 -m venv .venv && .venv/bin/pip install -q -c requirements.lock -e . "
                "&& .venv/bin/agentlake quickstart")
# pages another engineer owns, or generated from the code: their links are checked, not their words
NOT_OURS = {"ARCHITECTURE.md", "BENCHMARKS.md", "TABLES.md"}


def _ci_command() -> str:
    return (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]


def _commands() -> dict[str, tuple[argparse.ArgumentParser, list[str]]]:
    """Each subcommand by its name, with its parser and its other names (`views` for `merge`)."""
    out: dict[str, tuple[argparse.ArgumentParser, list[str]]] = {}
    seen: dict[int, str] = {}
    for name, sub in command_parsers(parser()).items():
        if id(sub) in seen:
            out[seen[id(sub)]][1].append(name)
        else:
            seen[id(sub)] = name
            out[name] = (sub, [])
    return out


def _options(sub: argparse.ArgumentParser, *, hidden: bool = True) -> set[str]:
    """The option strings a subcommand takes (`hidden=False`: only those its --help shows)."""
    return {o for a in sub._actions if a.option_strings and (hidden or a.help != argparse.SUPPRESS)
            for o in a.option_strings if o not in ("-h", "--help")}


def _sections(text: str) -> dict[str, str]:
    """A page's `## ` sections by title (the text before the first one under "")."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {"": parts[0], **{parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}}


def _command_section(name: str) -> str:
    section = _sections(CLI_DOC).get(f"`agentlake {name}`")
    assert section is not None, f"docs/CLI.md has no section `## \\`agentlake {name}\\``"
    return section


OTHER_PROGRAMS = {"systemctl", "launchctl", "crontab", "dagster", "aws", "python", ".venv/bin/pip"}
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
OPTION_OR_SHORT = re.compile(r"(?<![\w-])(?:--[a-z][a-z0-9-]*|-[a-zA-Z](?![\w-]))")  # `-f FILE` too


# -- the README -------------------------------------------------------------------------------

def test_tables_doc_is_current():
    assert (ROOT / "docs" / "TABLES.md").read_text() == render(), \
        "regenerate: python -m warehouse.catalog.tables_doc > docs/TABLES.md"


def test_readme_names_every_command_and_table():
    for name, (_, aliases) in _commands().items():
        for each in (name, *aliases):
            assert f"agentlake {each}" in README, f"README does not mention `agentlake {each}`"
    lake_doc = (ROOT / "docs" / "LAKE.md").read_text()
    for table in ALL_TABLES:
        assert f"`{table.name}`" in README, table.name
        assert f"`{table.name}`" in lake_doc, table.name


def test_marts_doc_names_every_mart():
    from warehouse.catalog.marts import MARTS

    marts_doc = (ROOT / "docs" / "MARTS.md").read_text()
    assert MARTS and all(f"## `{mart}`" in marts_doc for mart in MARTS)


def test_the_agents_counted_in_words_are_as_many_as_agentlake_reads():
    """The front pages say how many agents agentlake reads, in words: a new agent changes it."""
    from transforms.providers import PROVIDERS

    ones = "one two three four five six seven eight nine".split()
    words = {n: w for n, w in zip(range(13, 20), "thirteen fourteen fifteen sixteen seventeen eighteen nineteen".split())}
    words |= {20 + i: "twenty" + (f"-{ones[i - 1]}" if i else "") for i in range(10)}
    assert len(PROVIDERS) in words, f"{len(PROVIDERS)} agents: give this test the word"
    said = words[len(PROVIDERS)]
    counted = re.compile(rf"\b({'|'.join(words.values())})(?= (?:coding )?(?:agents|normalisers))")
    for doc in ("README.md", "docs/AGENTS.md", "docs/SOURCES.md", "transforms/providers.py"):
        found = counted.findall((ROOT / doc).read_text().lower())
        assert found and set(found) == {said}, f"{doc}: {len(PROVIDERS)} agents are {said!r}, not {found}"


def test_readme_test_command_is_what_ci_runs():
    ci = _ci_command()
    assert f"```sh\n{ci}\n```" in README  # a command of its own, as CI runs it
    assert f"```sh\n{MAIN_COMMAND}\n```" in README


def test_readme_is_a_front_door():
    """Under 150 lines, none over 120 characters but the two commands, and one line per command."""
    lines = README.splitlines()
    assert len(lines) < 150
    long = [line for line in lines if len(line) > 120 and line not in (MAIN_COMMAND, _ci_command())]
    assert long == []
    for name in _commands():
        mine = [line for line in lines if re.match(rf"- `agentlake {name}[ `]", line)]
        assert len(mine) == 1, f"README: one line `- \\`agentlake {name}\\`: ...`, found {mine}"


def test_code_pointing_at_the_readme_finds_its_topic():
    """Messages and generated docs say `README, "Project names"`: the README
    names each such topic as a link to the page that holds it."""
    said = set()
    for package in ("pipelines", "warehouse", "transforms"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.JoinedStr):  # an f-string: its literal parts
                    text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    text = node.value
                else:
                    continue
                said |= set(re.findall(r'README, "([^"]+)"', text))
    assert said, "no code names a README topic any more: drop this test"
    for topic in sorted(said):
        assert f"[{topic}](" in README, f"README has no link named {topic!r}"


# -- docs/CLI.md, the parser and the code ----------------------------------------------------------

def test_every_command_has_a_section_naming_each_of_its_options():
    """Each option its --help shows begins a bullet of its command's section, such as "- `--top N`: ..."."""
    for name, (sub, aliases) in _commands().items():
        section = _command_section(name)
        bullets = re.findall(r"^- (.*(?:\n  .*)*)", section, flags=re.M)
        named = {o for bullet in bullets for o in OPTION_OR_SHORT.findall(bullet.split(": ", 1)[0])}
        missing = _options(sub, hidden=False) - named
        assert not missing, f"docs/CLI.md, `agentlake {name}`: no bullet for {sorted(missing)}"
        for alias in aliases:
            assert f"agentlake {alias}" in section


def test_the_cli_doc_names_no_option_the_commands_do_not_take():
    """In a command's section an option is that command's, unless a code span gives it to another
    (`agentlake merge --lake ...`, `` `merge --full` ``); elsewhere it is some command's."""
    commands = _commands()
    every = set().union(*(_options(sub) for sub, _ in commands.values())) | {"--help"} | _options(parser())
    by_name = {n: sub for name, (sub, aliases) in commands.items() for n in (name, *aliases)}
    for title, section in _sections(CLI_DOC).items():
        own = re.fullmatch(r"`agentlake (\w+)`", title)
        known = _options(by_name[own.group(1)]) if own else every
        prose = section
        for span in re.findall(r"`([^`\n]+)`", section):
            if span.split()[0] in OTHER_PROGRAMS:  # `systemctl --user enable --now ...`
                prose = prose.replace(f"`{span}`", "")
                continue
            other = re.match(r"(?:agentlake )?(\w+)\b", span)
            if other and other.group(1) in by_name:  # this span speaks of another command
                prose = prose.replace(f"`{span}`", "")
                unknown = set(OPTION.findall(span)) - _options(by_name[other.group(1)])
                assert not unknown, f"docs/CLI.md, {title}: `{span}` names {sorted(unknown)}"
        unknown = set(OPTION.findall(prose)) - known
        assert not unknown, f"docs/CLI.md, {title or 'the opening'}: {sorted(unknown)} unknown to the parser"


def test_defaults_and_choices_are_the_parsers():
    """Each option's default and choices, as the parser has them, in its --help and in docs/CLI.md."""
    for name, (sub, _) in _commands().items():
        section = _command_section(name)
        for action in sub._actions:
            if not action.option_strings or action.help in (None, argparse.SUPPRESS):
                continue
            for choice in action.choices or ():
                assert f"`{choice}`" in section or f"|{choice}" in section, (name, action.dest, choice)
            if action.default not in (None, False, [], argparse.SUPPRESS):
                default = str(action.default)
                assert default in action.help, (name, action.dest, "its --help does not say", default)
                assert re.search(rf"default `?{re.escape(default)}`?|`{re.escape(default)}` \(the default\)",
                                 section), (name, action.dest, "docs/CLI.md does not say", default)


def test_every_option_has_its_help():
    for name, (sub, _) in _commands().items():
        bare = [a.dest for a in sub._actions if a.help is None]
        assert bare == [], f"`agentlake {name} --help` says nothing of {bare}"
        with pytest.raises(SystemExit):
            sub.parse_args(["--help"])  # and it prints (no `%` left unescaped in a help string)


def _exit_codes_in_code() -> set[int]:
    """The statuses the CLI returns: every whole number in a `return` of a function of
    pipelines/cli.py, commands.py, reading.py or command_args.py that returns an exit status
    (`-> int`: main, the commands), and of the run
    summary's `exit_code` (warehouse/land/ingest.py); argparse exits 2 on bad usage."""
    def own_returns(function):  # not those of a function defined inside it
        todo = list(function.body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Return) and node.value is not None:
                yield node
            elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                todo.extend(ast.iter_child_nodes(node))

    cli = ast.Module(body=[node for name in ("cli.py", "commands.py", "reading.py", "command_args.py")
                           for node in ast.parse((ROOT / "pipelines" / name).read_text()).body], type_ignores=[])
    ingest = ast.parse((ROOT / "warehouse" / "land" / "ingest.py").read_text())
    functions = [f for f in ast.walk(cli)
                 if isinstance(f, ast.FunctionDef) and f.returns is not None and ast.unparse(f.returns) == "int"]
    summary = [f for f in ast.walk(ingest) if isinstance(f, ast.FunctionDef) and f.name == "exit_code"]
    assert {"main", "cmd_ingest"} <= {f.name for f in functions} and len(summary) == 1, \
        "the exit statuses moved: point this test at them"
    codes = {2}
    for function in functions + summary:
        for node in own_returns(function):
            codes |= {c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and type(c.value) is int}
    return codes


def test_exit_codes_are_the_ones_the_code_uses():
    table = _sections(CLI_DOC)["Exit status"]
    documented = {int(c) for c in re.findall(r"^\| `(\d+)` \|", table, flags=re.M)}
    assert documented == _exit_codes_in_code()
    epilog = parser().epilog
    assert all(re.search(rf"\b{code}\b", epilog) for code in documented), "agentlake --help's exit status"
    for code in documented - {0}:
        assert f"Exit `{code}`" in table or f"| `{code}` |" in table


# -- every page ----------------------------------------------------------------------------------

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_point_at_what_exists(page):
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} does not exist"
        if anchor and linked.suffix == ".md":
            assert anchor in _anchors(linked), f"{page.name}: {target} has no such heading"


REPO_PATH = re.compile(r"(?<![\w./<>~-])(?:\.ci|benchmarks|deploy|docs|notebooks|pipelines|tests|transforms|warehouse)/[\w./*-]*")
MODULE = re.compile(r"(?<![\w./<>~-])(?:pipelines|warehouse|transforms|notebooks)(?:\.\w+)+(?![\w/-])")
MADE_HERE = {"deploy/.env"}  # files a reader makes (`cp deploy/env.example deploy/.env`)
FILE_TYPES = {"ducklake", "duckdb", "py", "md", "toml", "yaml", "json", "parquet", "sql", "lock", "txt"}


def _module(name: str):
    try:
        return importlib.util.find_spec(name)
    except ModuleNotFoundError:  # a name under a module that is no package
        return None


@pytest.mark.parametrize("page", [p for p in PAGES if p.name not in NOT_OURS], ids=lambda p: p.name)
def test_paths_and_modules_the_docs_name_exist(page):
    for span in re.findall(r"`([^`\n]+)`", page.read_text()):
        for path in REPO_PATH.findall(span):
            if path in MADE_HERE:
                continue
            assert list(ROOT.glob(path.rstrip("/"))), f"{page.name}: `{span}` names {path}, which is not here"
        for dotted in MODULE.findall(span):
            parts = dotted.split(".")
            if parts[-1] in FILE_TYPES:  # a file's name (`warehouse.ducklake`), not a module
                continue
            for cut in range(len(parts), 0, -1):
                if _module(".".join(parts[:cut])) is not None:
                    break
            rest = parts[cut:]
            assert len(rest) <= 1, f"{page.name}: `{span}`: no module {dotted}"
            if rest:
                source = Path(_module(".".join(parts[:cut])).origin).read_text()
                assert re.search(rf"^(def|class) {rest[0]}\b|^{rest[0]} =", source, flags=re.M), \
                    f"{page.name}: `{span}`: {'.'.join(parts[:cut])} has no {rest[0]}"
