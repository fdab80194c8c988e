"""Nothing the user owns is lost: common config edits never replace storage, the GKE cluster
or its host network.

The engine replaces a resource when its URN changes or an immutable field changes; these tests
compare both across a matrix of edits on every shipped stack.
"""

from __future__ import annotations

from typing import Any

import pytest

from components.offline import ProgramRun
from tests.conftest import run_stack

EDITS: dict[str, list[tuple[str, ...]]] = {
    "barcelona": [
        ("nodes=4",),
        ("nodes=1",),
        ("networkMode=tcp",),
        ("image=nvcr.io/nvidia/pytorch:25.02-py3",),
        ("gpusPerNode=2",),
        ("launcher.kind=torchrun",),
        ("nccl.debug=WARN", "pod.shmSize=64Gi"),
        ("rdma.gidIndex=nccl",),
    ],
    "nerc-production": [
        ("nodes=8",),
        ("gpusPerNode=8",),
        ("launcher.kind=deepspeed",),
        ("image=nvcr.io/nvidia/pytorch:25.02-py3",),
    ],
    "gcp-a3": [
        ("nodes=16",),
        ("nodes=512",),
        ("networkMode=tcp",),
        ("networkMode=tcp", "gpusPerNode=4"),
        ("image=nvcr.io/nvidia/pytorch:25.02-py3",),
        ("launcher.kind=deepspeed",),
        ("gcp.systemPool.machineType=e2-standard-8", "gcp.systemPool.maxNodes=20"),
    ],
    "a3-high": [("nodes=8",), ("networkMode=tcp",), ("gcp.systemPool.minNodes=3",)],
}

# Fields a change of which makes the engine replace the resource (Kubernetes: immutable after
# creation; GKE cluster and VPCs: force-new in the provider), by resource type.
IMMUTABLE: dict[str, tuple[tuple[str, ...], ...]] = {
    "kubernetes:core/v1:PersistentVolumeClaim": (
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("spec", "accessModes"),
        ("spec", "storageClassName"),
        ("spec", "volumeMode"),
    ),
    "kubernetes:apps/v1:StatefulSet": (
        ("metadata", "name"),
        ("metadata", "namespace"),
        ("spec", "selector"),
        ("spec", "serviceName"),
        ("spec", "podManagementPolicy"),
        ("spec", "volumeClaimTemplates"),
    ),
    "gcp:container/cluster:Cluster": ((),),  # every input
    "gcp:compute/network:Network": ((),),
}
HOST_ONLY = {"gcp:compute/network:Network": "gpu-cluster-host"}


def precious(run: ProgramRun) -> dict[str, tuple[str, dict[str, Any], dict[str, Any]]]:
    """URN -> (type, inputs, options) of everything whose replacement would lose user data."""
    out = {}
    for r in run.resources:
        if r.type in IMMUTABLE and HOST_ONLY.get(r.type, r.name) == r.name:
            out[r.urn] = (r.type, r.inputs, r.options)
    return out


def dig(value: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


CASES = [(stack, edit) for stack, edits in EDITS.items() for edit in edits]


@pytest.mark.parametrize(("stack", "edit"), CASES, ids=[f"{s}:{','.join(e)}" for s, e in CASES])
def test_edit_keeps_storage_cluster_and_network(stack: str, edit: tuple[str, ...]) -> None:
    before, after = precious(run_stack(stack)), precious(run_stack(stack, *edit))
    assert before, "nothing precious found: the test would prove nothing"
    assert set(after) == set(before), "a precious resource was added, removed or renamed"
    for urn, (type_, inputs, options) in before.items():
        _, new_inputs, new_options = after[urn]
        for path in IMMUTABLE[type_]:
            assert dig(new_inputs, path) == dig(inputs, path), f"{urn}: {'.'.join(path)} changed"
        assert new_options["retainOnDelete"] == options["retainOnDelete"], urn


def test_user_data_is_retained_by_default_on_every_stack() -> None:
    for stack in EDITS:
        run = run_stack(stack)
        claims = run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
        (sts,) = run.of_type("kubernetes:apps/v1:StatefulSet")
        policy = sts.inputs["spec"].get("persistentVolumeClaimRetentionPolicy")
        assert claims or policy, stack
        assert all(c.options["retainOnDelete"] for c in claims), stack
        if policy:
            assert policy == {"whenDeleted": "Retain", "whenScaled": "Retain"}, stack
