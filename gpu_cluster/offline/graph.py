"""The order `pulumi up` creates a stack's resources in, read from a render's resources.json.

The Python SDK registers a resource only once what it waits for is registered, and the engine
answers a registration only once the resource is created (pulumi/pulumi sdk/python/lib/pulumi/
runtime/resource.py prepare_resource). A resource waits for:

- `dependsOn`: its `depends_on` (a component expanded to its resources) and every resource whose
  output its inputs use, the RegisterResource request's `dependencies`;
- its provider: the provider reference needs the provider's URN and ID (_create_provider_ref),
  and a provider waits for its own dependencies like any resource;
- its parent: the child awaits the parent's URN, which a component gets only once what the
  component depends on exists, so a child waits for everything its ancestors wait for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpu_cluster.offline.engine import mock_id

PROVIDER_TYPE_PREFIX = "pulumi:providers:"


@dataclass(frozen=True)
class Edge:
    """`urn` waits for `prerequisite` because of `why` (dependsOn, provider or parent)."""

    urn: str
    prerequisite: str
    why: str


def parent_urn(urn: str) -> str | None:
    """The URN of the parent a resource's URN names (its type chain without the last type),
    or None for a child of the stack (resource_urn in engine.py builds them this way)."""
    head, types, _ = urn.rsplit("::", 2)
    if "$" not in types:
        return None
    return f"{head}::{types.rsplit('$', 1)[0]}::"


class Graph:
    """Resources by URN and what each waits for, from resources.json rows."""

    def __init__(self, rows: Iterable[Mapping[str, Any]]) -> None:
        self.rows = {row["urn"]: row for row in rows}
        providers = {
            mock_id(row["name"]): urn
            for urn, row in self.rows.items()
            if row["type"].startswith(PROVIDER_TYPE_PREFIX)
        }
        self.edges: dict[str, list[Edge]] = {urn: [] for urn in self.rows}
        for urn, row in self.rows.items():
            options = row["options"]
            for dependency in sorted(set(options["dependsOn"])):
                self.edges[urn].append(Edge(urn, dependency, "dependsOn"))
            if options.get("provider"):
                self.edges[urn].append(Edge(urn, providers[options["provider"]], "provider"))
            parent = self._parent(urn, row["parent"])
            if parent is not None:
                self.edges[urn].append(Edge(urn, parent, "parent"))

    def _parent(self, urn: str, parent_name: str) -> str | None:
        prefix = parent_urn(urn)
        if prefix is None:
            return None
        parent = prefix + parent_name
        assert parent in self.rows, f"{urn}: parent {parent} is not in the render"
        return parent

    def with_edge(self, urn: str, prerequisite: str, why: str) -> Graph:
        """A copy with one more edge (bench/: the graph as it was before an edge was cut)."""
        copy = Graph(())
        copy.rows = self.rows
        copy.edges = {u: list(e) for u, e in self.edges.items()}
        copy.edges[urn].append(Edge(urn, prerequisite, why))
        return copy

    def label(self, urn: str) -> str:
        row = self.rows[urn]
        return f"{row['type']} {row['name']}"

    def path_to(self, urn: str, target: Callable[[str], bool]) -> list[Edge] | None:
        """The shortest chain of edges from `urn` to a resource `target` accepts (breadth
        first, so a failure names the most direct one), or None when it waits for none."""
        came_by: dict[str, Edge | None] = {urn: None}
        frontier = [urn]
        while frontier:
            following = []
            for current in frontier:
                for edge in self.edges[current]:
                    if edge.prerequisite in came_by:
                        continue
                    came_by[edge.prerequisite] = edge
                    if target(edge.prerequisite):
                        path = []
                        step: Edge | None = edge
                        while step is not None:
                            path.append(step)
                            step = came_by[step.urn]
                        return path[::-1]
                    following.append(edge.prerequisite)
            frontier = following
        return None

    def describe(self, path: list[Edge]) -> str:
        """A chain as `A -(why)-> B -(why)-> C`."""
        return self.label(path[0].urn) + "".join(
            f" -({e.why})-> {self.label(e.prerequisite)}" for e in path
        )

    def waits_for(self, urn: str) -> set[str]:
        """Every resource `urn` waits for, directly or not."""
        seen: set[str] = set()
        stack = [urn]
        while stack:
            for edge in self.edges[stack.pop()]:
                if edge.prerequisite not in seen:
                    seen.add(edge.prerequisite)
                    stack.append(edge.prerequisite)
        return seen

    def finish_times(self, duration: Callable[[str], float]) -> dict[str, float]:
        """When each resource is done if everything starts as soon as what it waits for is
        done and takes `duration(urn)`: the critical-path schedule of `pulumi up`."""
        done: dict[str, float] = {}
        visiting: set[str] = set()

        def finish(urn: str) -> float:
            if urn in done:
                return done[urn]
            assert urn not in visiting, f"dependency cycle through {self.label(urn)}"
            visiting.add(urn)
            start = max((finish(e.prerequisite) for e in self.edges[urn]), default=0.0)
            visiting.discard(urn)
            done[urn] = start + duration(urn)
            return done[urn]

        for urn in self.rows:
            finish(urn)
        return done

    def critical_path(self, urn: str, finish: Mapping[str, float]) -> list[str]:
        """The chain of resources that decides when `urn` is done (`finish`: finish_times)."""
        path = [urn]
        while self.edges[path[-1]]:
            last = max(self.edges[path[-1]], key=lambda e: finish[e.prerequisite])
            path.append(last.prerequisite)
        return path[::-1]
