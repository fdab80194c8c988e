"""The package's layers stay apart: vendor facts, config schema, pure planning, Pulumi components,
offline tooling (docs/development.md); imports only run downward."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "gpu_cluster"
# Layer -> package prefixes its modules must not import.
FORBIDDEN = {
    "facts": (
        "pulumi",
        "pydantic",
        "gpu_cluster.config",
        "gpu_cluster.plan",
        "gpu_cluster.components",
        "gpu_cluster.offline",
    ),
    "config": ("pulumi", "gpu_cluster.plan", "gpu_cluster.components", "gpu_cluster.offline"),
    "plan": (
        "pulumi",
        "pulumi_gcp",
        "pulumi_kubernetes",
        "gpu_cluster.components",
        "gpu_cluster.offline",
    ),
    "components": ("gpu_cluster.offline",),
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_a_layer_imports_nothing_below_it(layer: str) -> None:
    modules = sorted((PACKAGE / layer).rglob("*.py"))
    assert modules
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules
        for name in sorted(_imports(path))
        if any(name == f or name.startswith(f"{f}.") for f in FORBIDDEN[layer])
    ]
    assert offenders == []


def test_the_components_are_small() -> None:
    # No class over about 200 lines: a bigger one is a cut not yet made.
    sizes = {
        f"{path.relative_to(PACKAGE)}:{node.name}": node.end_lineno - node.lineno + 1
        for path in (PACKAGE / "components").rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.ClassDef) and node.end_lineno is not None
    }
    assert len(sizes) >= 8
    assert {name: n for name, n in sizes.items() if n > 200} == {}


def test_nothing_in_the_package_imports_its_public_api() -> None:
    # gpu_cluster.api is the users' view: a module inside that imported it would tie the
    # internals to the promise and make a circle of every re-exported module.
    importers = [
        str(path.relative_to(ROOT))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "api.py" and any(n == "gpu_cluster.api" for n in _imports(path))
    ]
    assert importers == []
