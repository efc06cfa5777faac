"""The pure library never imports Dagster: only pipelines/ may."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", ["transforms", "warehouse"])
def test_no_dagster_outside_pipelines(package):
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"{package}/ has no modules"
    offenders = [str(f.relative_to(ROOT)) for f in files if {"dagster", "pipelines"} & _imports(f)]
    assert offenders == []


def test_no_future_annotations_in_dagster_modules():
    # turns `context: AssetExecutionContext` into a string, which Dagster cannot resolve
    offenders = [str(f.relative_to(ROOT)) for f in (ROOT / "pipelines").rglob("*.py")
                 if "from __future__ import annotations" in f.read_text()]
    assert offenders == []


def test_every_provider_maps_tools_to_the_shared_categories():
    import importlib

    from transforms.contract import TOOL_CATEGORIES
    from transforms.providers import PROVIDERS

    # each agent's own MCP naming; OpenCode's `<server>_<tool>` cannot be told from a plugin tool
    mcp_names = {"crush": "mcp_github_create_issue", "codewhale": "mcp_github_create_issue",
                 "claude": "mcp__github__create_issue", "codex": "mcp__github__create_issue", "opencode": None,
                 "pi": "mcp__github__create_issue", "goose": "github__create_issue",
                 "kilo": "mcp--github--create_issue",
                 "codebuff": "mcp__github__create_issue",
                 "antigravity": None,  # no tool call is read from its store
                 "aider": None, "cursor": None,
                 "gemini": "mcp_github_create_issue",
                 "qwen": "mcp__github__create_issue",
                 "kimi": None,  # MCP tools keep their bare name (soul/toolset.py MCPTool)
                 "copilot": None,  # `<server>-<tool>`: told apart by the call's mcpServerName, not the name
                 "amp": "mcp__github__create_issue", "droid": "mcp__github__create_issue"}
    assert set(mcp_names) == set(PROVIDERS)
    for name, mcp in mcp_names.items():
        module = importlib.import_module(f"transforms.{name}.tools")
        # the vocabulary as data (transforms.tools.ToolVocabulary), or the first agents' dict
        categories = module.TOOLS.categories if hasattr(module, "TOOLS") else module._CATEGORY
        assert set(categories.values()) <= set(TOOL_CATEGORIES), module.__name__
        assert module.tool_category("no_such_tool") == "other", name
        if mcp:
            assert module.tool_category(mcp) == "mcp", name


def test_a_provider_is_one_folder_behind_one_interface():
    from transforms.providers import PROVIDERS

    for name, provider in PROVIDERS.items():
        assert provider.name == name
        assert (ROOT / "transforms" / name).is_dir()
        assert all(callable(getattr(provider, m)) for m in ("discover", "fingerprint", "extract"))


# The stages of warehouse/, bottom up: a stage imports only the stages below it (and transforms/).
STAGES = ("lake", "land", "catalog", "serve")


def _warehouse_imports(path: Path) -> set[str]:
    """The warehouse stages a module imports, anywhere in it (inside functions too)."""
    stages = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                   else [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                   else [])
        for module in modules:
            parts = module.split(".")
            if parts[0] == "warehouse" and len(parts) > 1:
                stages.add(parts[1])
            elif parts[0] == "warehouse" and isinstance(node, ast.ImportFrom):
                stages.update(a.name for a in node.names)
    return stages


def test_warehouse_is_one_package_per_stage():
    top = sorted(p.name for p in (ROOT / "warehouse").iterdir()
                 if p.name != "__pycache__" and p.name != "__init__.py")
    assert top == sorted(STAGES)


@pytest.mark.parametrize("stage", STAGES)
def test_a_stage_imports_only_the_stages_below_it(stage):
    allowed = set(STAGES[:STAGES.index(stage) + 1])
    offenders = {str(f.relative_to(ROOT)): sorted(_warehouse_imports(f) - allowed)
                 for f in sorted((ROOT / "warehouse" / stage).rglob("*.py"))}
    assert {f: bad for f, bad in offenders.items() if bad} == {}


def _project_imports(path: Path) -> set[str]:
    """The project's modules a file imports, anywhere in it (as files: `a/b.py` or `a/b/__init__.py`)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] + [f"{node.module}.{a.name}" for a in node.names]
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
        for name in names:
            base = ROOT / name.replace(".", "/")
            for candidate in (base.with_suffix(".py"), base / "__init__.py"):
                if candidate.is_file() and candidate != path:
                    found.add(str(candidate.relative_to(ROOT)))
    return found


def test_nothing_imports_in_a_circle():
    files = [f for package in ("transforms", "warehouse", "pipelines") for f in sorted((ROOT / package).rglob("*.py"))]
    graph = {str(f.relative_to(ROOT)): {m for m in _project_imports(f) if not m.endswith("__init__.py")}
             for f in files}
    circles, state = [], {}

    def visit(node, trail):
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                circles.append(trail[trail.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, trail + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_a_discover_module_without_env_vars_is_named_with_the_step_it_misses(monkeypatch):
    """A new agent's discover.py without ENV_VARS broke every test at import, and `agentlake
    schedule`, with a bare AttributeError."""
    import transforms.codewhale.discover as discover
    from transforms.providers import env_vars

    monkeypatch.delattr(discover, "ENV_VARS")
    with pytest.raises(AttributeError, match=r"transforms/codewhale/discover.py has no ENV_VARS: .*step 2"):
        env_vars()
