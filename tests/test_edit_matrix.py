"""The edit matrix: for each plausible edit of each shipped stack, which resources the engine
would replace or delete (read from two real renders with gpu_cluster.offline.replacements),
held to a written policy of what may be replaced or deleted and what never may without an opt-in.

`MATRIX` is the reviewed table (edit -> the replacements and deletions of precious resources it
causes, "!" marking the ones the engine refuses because they are protected); `violations` is the
policy, independent of the table. A change to the program that makes an edit destroy something
new fails here twice: the table no longer matches, and the policy names the rule it breaks.
"""

from __future__ import annotations

import pytest

from gpu_cluster.offline.replacements import PRECIOUS, Step, destructive
from tests.conftest import plan_of

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "kubernetes:core/v1:Namespace"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
NETWORKS = ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork")
IMAGE = "image=nvcr.io/nvidia/pytorch:25.02-py3"

# Keys that define the GPU node pool's hardware or networks: editing one is the explicit request
# for a new pool (its force-new fields change). The GPU NIC VPCs come and go with the mode.
POOL_KEYS = (
    "networkMode",
    "gcp.machineType",
    "gcp.provisioning",
    "gcp.reservation",
    "gcp.maxRunDurationSeconds",
    "gcp.maintenanceInterval",
    "gcp.gpudirectRelease",
    "gcp.placementMaxDistance",
)
GPU_NETWORK_KEYS = ("networkMode", "gcp.machineType", "gcp.gpudirectRelease", "gcp.baseCidr")


def _edits_key(edit: tuple[str, ...], keys: tuple[str, ...]) -> bool:
    return any(e.split("=")[0] in keys for e in edit)


def violations(edit: tuple[str, ...], steps: list[Step]) -> list[str]:
    """The written policy: what may be replaced or deleted, and what never may."""
    out = []
    refused = [s for s in steps if s.protected and s.op in ("replace", "delete")]
    cluster_refused = any(s.type == CLUSTER for s in refused)
    for s in destructive(steps):
        what = f"{s.op} {s.type} {s.name}"
        if s.type in (PVC, CLUSTER):
            # Never without asking: protect makes the engine stop at preview.
            if not s.protected:
                out.append(f"{what}: {PRECIOUS[s.type]}, and nothing stops it")
        elif s.type == NAMESPACE:
            # Deleting a namespace deletes its claims: only a retained namespace (dropped from
            # the state, left in the cluster) may go, or the update stops at protected claims.
            if not s.retained and not any(x.type == PVC for x in refused):
                out.append(f"{what}: its claims would go with it")
        elif s.type == NODE_POOL:
            if not (_edits_key(edit, POOL_KEYS) or cluster_refused):
                out.append(f"{what}: only an edit of the pool's hardware or networks may")
        elif s.type in NETWORKS:
            host = s.name.endswith("-host")
            if host and not cluster_refused:
                out.append(f"{what}: the host VPC outlives every edit but re-addressing")
            if not host and not (_edits_key(edit, GPU_NETWORK_KEYS) or cluster_refused):
                out.append(f"{what}: GPU VPCs change only with the network mode or machine")
    return out


def summary(steps: list[Step]) -> dict[str, int]:
    """Destructive steps on precious resources, counted by '<op> <Kind>' ('!' = refused)."""
    out: dict[str, int] = {}
    for s in destructive(steps):
        key = f"{s.op} {s.type.rsplit(':', 1)[-1]}{'!' if s.protected else ''}"
        out[key] = out.get(key, 0) + 1
    return out


# (stack, edit) -> what it replaces or deletes among the precious resources.
MATRIX: dict[tuple[str, tuple[str, ...]], dict[str, int]] = {
    # barcelona: OpenShift, per-pod storage (2 pods x workspace, datasets), own namespace
    ("barcelona", ("nodes=4",)): {},
    ("barcelona", ("nodes=1",)): {"delete PersistentVolumeClaim!": 2},
    ("barcelona", ("storage.workspaceSize=200Gi",)): {},
    ("barcelona", ("storage.storageClass=fast",)): {"replace PersistentVolumeClaim!": 4},
    ("barcelona", ("storage.mode=rwx",)): {"delete PersistentVolumeClaim!": 4},
    ("barcelona", ("name=renamed",)): {"replace PersistentVolumeClaim!": 4},
    ("barcelona", ("namespace=elsewhere",)): {"replace PersistentVolumeClaim!": 4},
    ("barcelona", ("networkMode=tcp", "!rdma")): {},
    ("barcelona", (IMAGE,)): {},
    ("barcelona", ("gpusPerNode=2",)): {},
    ("barcelona", ("rdma.gidIndex=nccl",)): {},
    ("barcelona", ("storage.retainOnDelete=false",)): {},
    # nerc-production: OpenShift, shared RWX claims, existing namespace
    ("nerc-production", ("nodes=8",)): {},
    ("nerc-production", ("storage.workspaceSize=200Gi",)): {},
    ("nerc-production", ("storage.storageClass=fast",)): {"replace PersistentVolumeClaim!": 2},
    ("nerc-production", ("storage.mode=per-pod",)): {"delete PersistentVolumeClaim!": 2},
    ("nerc-production", ("name=renamed",)): {"replace PersistentVolumeClaim!": 2},
    ("nerc-production", ("namespace=elsewhere",)): {"replace PersistentVolumeClaim!": 2},
    ("nerc-production", ("launcher.kind=deepspeed",)): {},
    ("nerc-production", (IMAGE,)): {},
    # gcp-a3: GKE, A3 Mega, TCPXO (8 GPU VPCs), per-pod storage
    ("gcp-a3", ("nodes=16",)): {},
    ("gcp-a3", ("storage.workspaceSize=400Gi",)): {},
    ("gcp-a3", ("storage.storageClass=standard-rwo",)): {"replace PersistentVolumeClaim!": 4},
    ("gcp-a3", ("networkMode=tcp",)): {
        "delete Network": 8,
        "delete Subnetwork": 8,
        "replace NodePool": 1,
    },
    ("gcp-a3", ("networkMode=tcpx", "gcp.machineType=a3-highgpu-8g")): {
        "delete Network": 4,
        "delete Subnetwork": 4,
        "delete NodePool": 1,
    },
    ("gcp-a3", ("gcp.zone=us-central1-b",)): {"replace Cluster!": 1, "replace NodePool": 2},
    ("gcp-a3", ("gcp.releaseChannel=RAPID",)): {},
    ("gcp-a3", ("gcp.minMasterVersion=1.36", "kubernetesVersion=1.36")): {},
    ("gcp-a3", ("gcp.systemPool.machineType=e2-standard-8", "gcp.systemPool.maxNodes=20")): {},
    ("gcp-a3", ("gcp.provisioning=spot",)): {"replace NodePool": 1},
    ("gcp-a3", ("gcp.baseCidr=172.16.0.0/12",)): {"replace Cluster!": 1, "replace Subnetwork": 9},
    ("gcp-a3", ("gcp.privateNodes=false",)): {"replace Cluster!": 1},
    # Who may reach the control plane: updated in place.
    ("gcp-a3", ("gcp.authorizedNetworks[0].cidrBlock=198.51.100.0/24",)): {},
    (
        "gcp-a3",
        (
            "gcp.authorizedNetworks[1].cidrBlock=0.0.0.0/0",
            "gcp.authorizedNetworks[1].displayName=all",
        ),
    ): {},
    ("gcp-a3", ("name=renamed",)): {
        "replace Cluster!": 1,
        "replace NodePool": 2,
        "replace Network": 9,
        "replace Subnetwork": 9,
        "replace PersistentVolumeClaim!": 4,
    },
    ("gcp-a3", ("namespace=elsewhere",)): {
        "replace Namespace": 1,
        "replace PersistentVolumeClaim!": 4,
    },
    ("gcp-a3", (IMAGE,)): {},
    # gcp-a4: GKE, A4, GPUDirect RDMA (second gVNIC VPC, one RoCE VPC with 8 subnets)
    ("gcp-a4", ("nodes=4",)): {},
    ("gcp-a4", ("gcp.machineType=a3-ultragpu-8g",)): {"delete NodePool": 1},
    ("gcp-a4", ("networkMode=tcp",)): {
        "delete Network": 2,
        "delete Subnetwork": 9,
        "replace NodePool": 1,
    },
    # The shipped capacity is flex-start; a reservation or Spot is a new pool.
    ("gcp-a4", ("gcp.provisioning=spot",)): {"replace NodePool": 1},
    ("gcp-a4", ("gcp.provisioning=reservation", "gcp.reservation=a4-res")): {"replace NodePool": 1},
    ("gcp-a4", ("gcp.maxRunDurationSeconds=86400",)): {"replace NodePool": 1},
    # A class made outside the stack: ours is deleted (it holds no data), the claims stay.
    ("gcp-a4", ("storage.storageClassMode=reference",)): {},
    # a3-high: GKE, A3 High, TCPX (4 GPU VPCs)
    ("a3-high", ("nodes=8",)): {},
    ("a3-high", ("networkMode=tcp",)): {
        "delete Network": 4,
        "delete Subnetwork": 4,
        "replace NodePool": 1,
    },
    ("a3-high", ("gcp.zone=us-central1-b",)): {"replace Cluster!": 1, "replace NodePool": 2},
    ("a3-high", ("gcp.systemPool.minNodes=3",)): {},
    ("a3-high", ("storage.mode=rwx",)): {"delete PersistentVolumeClaim!": 4},
}


@pytest.mark.parametrize(
    ("stack", "edit"), list(MATRIX), ids=[f"{s}:{','.join(e)}" for s, e in MATRIX]
)
def test_edit_replaces_and_deletes_only_what_the_policy_allows(
    stack: str, edit: tuple[str, ...]
) -> None:
    steps = plan_of(stack, *edit)
    assert violations(edit, steps) == []
    assert summary(steps) == MATRIX[stack, edit]


def test_the_policy_catches_what_it_forbids() -> None:
    """The policy is not vacuous: unprotected claims or cluster, a stray pool or host VPC
    replacement are each reported."""
    claim = Step(PVC, "workspace-0", "replace", ("spec.storageClassName",), protected=False)
    cluster = Step(CLUSTER, "cluster", "replace", ("location",), protected=False)
    pool = Step(NODE_POOL, "a3mega", "replace", ("nodeConfig.spot",))
    host = Step(NETWORKS[0], "gpu-cluster-host", "delete")
    namespace = Step(NAMESPACE, "ns", "replace", ("metadata.name",))
    found = violations(("image=x:1",), [claim, cluster, pool, host, namespace])
    assert len(found) == 5, found
    assert violations(("gcp.provisioning=spot",), [pool]) == []
    retained = Step(NAMESPACE, "ns", "replace", ("metadata.name",), retained=True)
    assert violations(("namespace=elsewhere",), [retained]) == []


def test_the_matrix_covers_every_shipped_stack_and_the_risky_edits() -> None:
    from tests.conftest import STACKS

    assert {stack for stack, _ in MATRIX} == set(STACKS)
    keys = {e.split("=")[0] for _, edit in MATRIX for e in edit}
    assert {
        "nodes",
        "storage.workspaceSize",
        "storage.storageClass",
        "storage.mode",
        "name",
        "namespace",
        "networkMode",
        "image",
        "gcp.machineType",
        "gcp.zone",
        "gcp.minMasterVersion",
        "gcp.releaseChannel",
    } <= keys
