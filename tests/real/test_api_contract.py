"""Every config the program accepts renders objects the real API server accepts: the stack
variants of tests/test_schemas.py, and the property test's generated edits of every shipped
stack (values from tests/test_config_properties.py's table, derandomized), each object created on a
real kube-apiserver with the upstream CRDs (dry run: validated and admitted in full, then not
stored), its namespace created for real first."""

from __future__ import annotations

from typing import Any

import pulumi
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpu_cluster.offline.engine import ProgramRun, run_program
from tests.conftest import STACKS
from tests.edits import edited_config
from tests.test_config_properties import Edit, own_keys, plausible_edit, run_edited
from tests.test_schemas import VARIANTS
from tools.realtier.kube import CreateError, Kube

pytestmark = pytest.mark.real
Object = dict[str, Any]


def admitted(kube: Kube, objects: list[Object]) -> list[str]:
    """Create each object as a dry run; the API server's refusals, one line each."""
    for namespace in {o["metadata"].get("namespace") for o in objects} - {None}:
        if not kube.exists("v1", "Namespace", namespace):
            kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    refusals = []
    for obj in objects:
        try:
            kube.create(obj, dry_run=True)
        except CreateError as error:
            if not (obj["kind"] == "Namespace" and error.status == 409):  # created just above
                refusals.append(str(error))
    return refusals


@pytest.mark.parametrize(("stack", "overrides"), VARIANTS)
def test_every_variant_is_admitted(api: Kube, stack: str, overrides: tuple[str, ...]) -> None:
    config, secret_keys = edited_config(stack, overrides)
    run = run_program(config, secret_keys, stack)
    assert admitted(api, run.manifests()) == []


def plausible_edits(stack: str) -> st.SearchStrategy[list[Edit]]:
    """One to three edits of the stack's own platform's keys, to values from the property test's
    table: most render, unlike the property test's junk, so the API server sees many configs."""
    return st.lists(plausible_edit(own_keys(stack)), min_size=1, max_size=3)


@settings(
    max_examples=500,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(case=st.sampled_from(STACKS).flatmap(lambda s: st.tuples(st.just(s), plausible_edits(s))))
def test_every_config_the_program_accepts_is_admitted(
    api: Kube, case: tuple[str, list[Edit]]
) -> None:
    stack, changes = case
    run = ProgramRun()
    try:
        run_edited(stack, changes, run)
    except pulumi.RunError:
        event("refused by the program")
        return
    event("rendered")
    assert admitted(api, run.manifests()) == [], changes
