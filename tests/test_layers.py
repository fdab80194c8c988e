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


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    name = test.attr if isinstance(test, ast.Attribute) else getattr(test, "id", None)
    return name == "TYPE_CHECKING"


def _runtime_imports(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Every module `tree` imports when it runs, at module level or in a function: the
    targets as written (`from a import b`: `a.b` as well, in case b is a module), relative
    imports resolved; imports under `if TYPE_CHECKING:` are for the type checker only."""
    names: set[str] = set()
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            package = module if is_package else module.rpartition(".")[0]
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(p for p in (base, node.module or "") if p)
            names.add(source)
            names.update(f"{source}.{alias.name}" for alias in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return names


def import_graph() -> dict[str, set[str]]:
    """The package's modules, each with the package modules it imports at run time."""
    paths = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    return {
        module: {
            name
            for name in _runtime_imports(
                ast.parse(path.read_text()), module, path.name == "__init__.py"
            )
            if name in paths and name != module
        }
        for module, path in paths.items()
    }


def import_circles(graph: dict[str, set[str]]) -> list[str]:
    """One shortest circle through each module that is on one (a breadth-first search back to
    it), each set of modules once: `a -> b -> a`."""
    circles: dict[frozenset[str], str] = {}
    for start in sorted(graph):
        came_from: dict[str, str] = {}
        frontier = [start]
        while frontier and start not in came_from:
            step = []
            for module in frontier:
                for name in sorted(graph[module]):
                    if name not in came_from:
                        came_from[name] = module
                        step.append(name)
            frontier = step
        if start not in came_from:
            continue
        path = [start]
        while len(path) == 1 or path[-1] != start:
            path.append(came_from[path[-1]])
        circles.setdefault(frozenset(path), " -> ".join(reversed(path)))
    return sorted(circles.values())


def test_the_import_circle_finder_finds_a_circle_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert import_circles(graph) == ["a -> b -> c -> a"]
    assert import_circles({**graph, "c": {"d"}}) == []


def test_type_checking_imports_are_not_run_and_function_level_ones_are() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from . import sibling\n"
        "if TYPE_CHECKING:\n"
        "    from gpu_cluster.config.schema import Settings\n"
        "def build() -> None:\n"
        "    from gpu_cluster.components import gke\n"
    )
    assert _runtime_imports(ast.parse(source), "gpu_cluster.components.select", False) == {
        "typing",
        "typing.TYPE_CHECKING",
        "gpu_cluster.components",
        "gpu_cluster.components.sibling",
        "gpu_cluster.components.gke",
    }


def test_the_package_has_no_import_circle() -> None:
    # A circle makes a module's names depend on which module of it is imported first, and
    # ties modules that are meant to be read, tested and changed apart.
    graph = import_graph()
    assert len(graph) > 100
    assert import_circles(graph) == []
