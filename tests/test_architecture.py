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
