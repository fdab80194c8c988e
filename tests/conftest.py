"""Shared fixtures: every test that needs a stack's desired state runs the real program."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpu_cluster.config.messages import nested_model
from gpu_cluster.config.schema import Settings
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.replacements import Key, Row, Step, index, plan
from gpu_cluster.offline.stack_files import engine_config

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))


@functools.cache
def _run(stack: str, overrides: tuple[str, ...]) -> ProgramRun:
    config, secret_keys = engine_config(stack, overrides)
    return run_program(config, secret_keys, stack)


def run_stack(stack: str, *overrides: str) -> ProgramRun:
    """The program's registrations for `stack` with `--set`-style overrides (cached)."""
    return _run(stack, overrides)


def manifests(run: ProgramRun, kind: str) -> list[dict[str, Any]]:
    return [m for m in run.manifests() if m["kind"] == kind]


def one(run: ProgramRun, kind: str) -> dict[str, Any]:
    found = manifests(run, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def pod_spec(run: ProgramRun) -> dict[str, Any]:
    spec: dict[str, Any] = one(run, "StatefulSet")["spec"]["template"]["spec"]
    return spec


def container(run: ProgramRun, name: str = "training") -> dict[str, Any]:
    spec = pod_spec(run)
    for c in spec["containers"] + spec.get("initContainers", []):
        if c["name"] == name:
            return dict(c)
    raise AssertionError(f"no container {name}")


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def schema_leaves(
    list_item: str, model: type[BaseModel] = Settings, prefix: str = ""
) -> dict[str, FieldInfo]:
    """Every leaf key of the stack-config schema as a user writes it, with its field; a list
    of sections spelled with `list_item` (`[0]` for a --set path, `[]` as README writes it)."""
    leaves: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        nested = nested_model(field.annotation)
        if nested is None:
            leaves[key] = field
        else:
            item = list_item if "tuple" in str(field.annotation) else ""
            leaves.update(schema_leaves(list_item, nested, f"{key}{item}."))
    return leaves


def schema_key_paths(list_item: str) -> list[str]:
    """schema_leaves' keys."""
    return list(schema_leaves(list_item))


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def plan_of(stack: str, *overrides: str) -> list[Step]:
    """What the engine would do to `stack` when `overrides` are applied to its stack file."""
    return plan(rows(run_stack(stack)), rows(run_stack(stack, *overrides)))


def rows(run: ProgramRun) -> dict[Key, Row]:
    """A run's registrations as `resources.json` rows, keyed as
    gpu_cluster.offline.replacements keys them."""
    return index(
        {"type": r.type, "name": r.name, "inputs": r.inputs, "options": r.options}
        for r in run.resources
    )
