"""The edit matrix: for each plausible edit of each shipped stack, which resources the engine
would replace or delete (read from two real renders with gpu_cluster.offline.replacements),
held to a written policy of what may be replaced or deleted and what never may without an opt-in.

`MATRIX` is the reviewed table (edit -> the replacements and deletions of precious resources it
causes, "!" marking the ones the engine refuses because they are protected, "(retained)" the
ones that only drop the resource from the state and leave the object in the cluster);
`FROM_DEPLOYED` the same for edits of a stack deployed with other settings than its file's;
`violations` is the policy, independent of the tables. A change to the program that makes an
edit destroy something new fails here twice: the table no longer matches, and the policy names
the rule it breaks.
"""

from __future__ import annotations

import pytest

from gpu_cluster.offline.replacements import PRECIOUS, Step, destructive
from tests.conftest import (
    A4_WITHOUT_QUEUED,
    BARCELONA_RWX,
    GKE_RWX,
    TO_GKE,
    plan_from,
    plan_of,
)
from tests.edits import A4_STATEFULSET

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
BUCKET = "gcp:storage/bucket:Bucket"
LUSTRE_INSTANCE = "gcp:lustre/instance:Instance"
NAMESPACE = "kubernetes:core/v1:Namespace"
CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
NETWORKS = ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork")
IMAGE = "image=nvcr.io/nvidia/pytorch:25.02-py3"
JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py")
GKE_JOB_SET = (*JOB_SET, *GKE_RWX)
# The namespaces a GKE JobSet stack installs Kueue and JobSet into (QueueControllers).
CONTROLLER_NAMESPACES = (
    "-queue-controllers-kueue-namespace",
    "-queue-controllers-jobset-namespace",
)

# Keys that define the GPU node pool's hardware or networks: editing one is the explicit request
# for a new pool (its force-new fields change). The GPU NIC VPCs come and go with the mode.
POOL_KEYS = (
    "networkMode",
    "gcp.machineType",
    "gcp.provisioning",
    "gcp.queuedProvisioning",
    "gcp.reservation",
    "gcp.maxRunDurationSeconds",
    "gcp.maintenanceInterval",
    "gcp.gpudirectRelease",
    "gcp.placementMaxDistance",
    "gcp.secondaryBootDiskImage",
)
GPU_NETWORK_KEYS = ("networkMode", "gcp.machineType", "gcp.gpudirectRelease", "gcp.baseCidr")


def _edits_key(edit: tuple[str, ...], keys: tuple[str, ...]) -> bool:
    return any(e.split("=")[0] in keys for e in edit)


# The opt-in keys (docs/contract.md, "Opt-in keys") and what each lets go.
OPT_INS = {
    PVC: ("storage.protect=false",),
    BUCKET: ("storage.protect=false",),
    LUSTRE_INSTANCE: ("storage.protect=false",),
    CLUSTER: ("gcp.deletionProtection=false",),
    # A namespace leaves the cluster only with the claims in it: both opt-outs.
    NAMESPACE: ("storage.protect=false", "storage.retainOnDelete=false"),
}


def violations(
    edit: tuple[str, ...], steps: list[Step], deployed: tuple[str, ...] = ()
) -> list[str]:
    """The written policy: what may be replaced or deleted, and what never may. `deployed`:
    overrides the stack was deployed with besides its file (they may hold opt-ins)."""
    out = []
    # The last one wins; `!key` (a removal) sets nothing.
    settings = dict(e.split("=", 1) for e in (*deployed, *edit) if "=" in e)
    refused = [s for s in steps if s.protected and s.op in ("replace", "delete")]
    cluster_refused = any(s.type == CLUSTER for s in refused)
    for s in destructive(steps):
        what = f"{s.op} {s.type} {s.name}"
        opted_in = s.type in OPT_INS and all(
            settings.get(key) == value for key, value in (o.split("=") for o in OPT_INS[s.type])
        )
        if s.type in (PVC, BUCKET, LUSTRE_INSTANCE, CLUSTER):
            # Never without asking: protect makes the engine stop at preview.
            if not s.protected and not opted_in:
                out.append(f"{what}: {PRECIOUS[s.type]}, and nothing stops it")
        elif s.type == NAMESPACE and not s.name.endswith(CONTROLLER_NAMESPACES):
            # Deleting a namespace deletes its claims: only a retained namespace (dropped from
            # the state, left in the cluster) may go, or the engine refuses it (protected), or
            # the update stops at protected claims (the engine refuses the whole preview). The
            # controllers' namespaces (workload.controllers) hold Kueue and JobSet only.
            if not (s.retained or s.protected or opted_in) and not any(
                x.type == PVC for x in refused
            ):
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
    """Destructive steps on precious resources, counted by '<op> <Kind>' ('!' = refused,
    ' (retained)' = the object stays in the cluster)."""
    out: dict[str, int] = {}
    for s in destructive(steps):
        mark = "!" if s.protected else " (retained)" if s.retained else ""
        key = f"{s.op} {s.type.rsplit(':', 1)[-1]}{mark}"
        out[key] = out.get(key, 0) + 1
    return out


# (stack, edit) -> what it replaces or deletes among the precious resources.
MATRIX: dict[tuple[str, tuple[str, ...]], dict[str, int]] = {
    # barcelona: OpenShift, per-pod storage (2 pods x workspace, datasets), own namespace
    ("barcelona", ("nodes=4",)): {},
    ("barcelona", ("nodes=1",)): {"delete PersistentVolumeClaim!": 2},
    ("barcelona", ("storage.workspaceSize=200Gi",)): {},
    ("barcelona", ("storage.storageClass=fast",)): {"replace PersistentVolumeClaim!": 4},
    ("barcelona", BARCELONA_RWX): {"delete PersistentVolumeClaim!": 4},
    ("barcelona", ("name=renamed",)): {"replace PersistentVolumeClaim!": 4},
    ("barcelona", ("namespace=elsewhere",)): {"replace PersistentVolumeClaim!": 4},
    ("barcelona", ("networkMode=tcp",)): {},
    ("barcelona", (IMAGE,)): {},
    ("barcelona", ("openshift.prePull=false",)): {},
    ("barcelona", ("gpusPerNode=2",)): {},
    ("barcelona", ("rdma.gidIndex=nccl",)): {},
    ("barcelona", ("storage.retainOnDelete=false",)): {},
    # How long `pulumi up` awaits the pods: a resource option, nothing in the cluster changes.
    ("barcelona", ("workload.startTimeoutMinutes=60",)): {},
    # nerc-production: OpenShift, shared RWX claims, existing namespace
    ("nerc-production", ("nodes=8",)): {},
    ("nerc-production", ("storage.workspaceSize=200Gi",)): {},
    ("nerc-production", ("storage.storageClass=fast",)): {"replace PersistentVolumeClaim!": 2},
    ("nerc-production", ("storage.mode=per-pod",)): {"delete PersistentVolumeClaim!": 2},
    ("nerc-production", ("name=renamed",)): {"replace PersistentVolumeClaim!": 2},
    ("nerc-production", ("namespace=elsewhere",)): {"replace PersistentVolumeClaim!": 2},
    ("nerc-production", ("launcher.kind=deepspeed",)): {},
    ("nerc-production", (IMAGE,)): {},
    # The pods' controller switched: the StatefulSet goes, the JobSet comes, the claims stay.
    ("nerc-production", JOB_SET): {},
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
        "replace Namespace (retained)": 1,
        "replace PersistentVolumeClaim!": 4,
    },
    # The created namespace leaves the program; retained, it stays with its claims.
    ("gcp-a3", ("namespaceMode=reference",)): {"delete Namespace (retained)": 1},
    # Adopted under its own name: the same ID, an ordinary update (no import, no replacement).
    ("gcp-a3", ("namespaceMode=adopt",)): {},
    ("gcp-a3", (IMAGE,)): {},
    # Image streaming on the GPU pool: gcfs_config is updated in place, the pool kept.
    ("gcp-a3", ("gcp.imageStreaming=true",)): {},
    # A preloaded image's disk is a new pool (secondary boot disks are ForceNew).
    (
        "gcp-a3",
        (
            "gcp.imageStreaming=true",
            "gcp.secondaryBootDiskImage=projects/my-gpu-project/global/images/pytorch-25-01",
        ),
    ): {"replace NodePool": 1},
    # gcp-a4: GKE, A4, GPUDirect RDMA (second gVNIC VPC, one RoCE VPC with 8 subnets)
    ("gcp-a4", ("nodes=4",)): {},
    ("gcp-a4", ("gcp.machineType=a3-ultragpu-8g",)): {"delete NodePool": 1},
    ("gcp-a4", ("networkMode=tcp",)): {
        "delete Network": 2,
        "delete Subnetwork": 9,
        "replace NodePool": 1,
    },
    # The shipped capacity is flex-start with queued provisioning; without it, a reservation or
    # Spot is a new pool (queuedProvisioning is read with flex-start only).
    ("gcp-a4", ("gcp.queuedProvisioning=false",)): {"replace NodePool": 1},
    ("gcp-a4", (A4_WITHOUT_QUEUED, "gcp.provisioning=spot")): {"replace NodePool": 1},
    ("gcp-a4", (A4_WITHOUT_QUEUED, "gcp.provisioning=reservation", "gcp.reservation=a4-res")): {
        "replace NodePool": 1
    },
    ("gcp-a4", ("gcp.maxRunDurationSeconds=86400",)): {"replace NodePool": 1},
    # Another Filestore tier for the shared claims: new claims, the old ones stop at protect.
    ("gcp-a4", ("storage.storageClass=premium-rwx",)): {"replace PersistentVolumeClaim!": 2},
    ("gcp-a4", ("gcp.imageStreaming=true",)): {},
    # Its buckets: mount options and grants change in place (the pods restart); another bucket
    # is another volume and claim; a bucket that leaves the stack stops at protect.
    ("gcp-a4", ("storage.volumes[0].gcsFuse.use=checkpoints",)): {},
    ("gcp-a4", ("storage.volumes[1].gcsFuse.onlyDir=run-7",)): {},
    ("gcp-a4", ("storage.volumes[0].readOnly=false",)): {},
    ("gcp-a4", ("storage.volumes[1].gcsFuse.bucket=other-checkpoints",)): {
        "delete Bucket!": 1,
        "replace PersistentVolumeClaim!": 1,
    },
    ("gcp-a4", ("storage.volumes[1].gcsFuse.mode=reference",)): {"delete Bucket!": 1},
    # A renamed volume is another claim (<name>-<volume>): the old one stops at protect.
    ("gcp-a4", ("storage.volumes[1].name=ckpt",)): {"delete PersistentVolumeClaim!": 1},
    # a3-high: GKE, A3 High, TCPX (4 GPU VPCs)
    ("a3-high", ("nodes=8",)): {},
    ("a3-high", ("networkMode=tcp",)): {
        "delete Network": 4,
        "delete Subnetwork": 4,
        "replace NodePool": 1,
    },
    ("a3-high", ("gcp.zone=us-central1-b",)): {"replace Cluster!": 1, "replace NodePool": 2},
    ("a3-high", ("gcp.systemPool.minNodes=3",)): {},
    ("a3-high", GKE_RWX): {"delete PersistentVolumeClaim!": 4},
}


LUSTRE_VOLUME = "storage.volumes[2].managedLustre"
LUSTRE = (
    "storage.volumes[2].name=scratch",
    "storage.volumes[2].mountPath=/lustre",
    f"{LUSTRE_VOLUME}.instance=gke-lustre",
    f"{LUSTRE_VOLUME}.capacityGib=36000",
)
CREATED = "namespaceMode=create"
HEALTH_GATE = "workload.queue.healthGate.enabled=true"
GPU_ONLY = "workload.queue.healthGate.checks[0]=gpu"
RUNNER = "workload.queue.healthGate.runner.enabled=true"
NOT_RETAINED = "storage.retainOnDelete=false"
UNPROTECTED = "storage.protect=false"

# Edits of a stack deployed with overrides of its file (the state an earlier `pulumi up` wrote):
# (stack, deployed overrides, edit) -> as MATRIX. Above all the edits that take a namespace the
# program created out of it, which Kubernetes deletes with every claim in it unless it is
# retained, whatever the claims' own protection.
FROM_DEPLOYED: dict[tuple[str, tuple[str, ...], tuple[str, ...]], dict[str, int]] = {
    # Retained (the default): the namespace leaves the state and stays, with its claims.
    ("barcelona", (CREATED,), ("namespaceMode=reference",)): {"delete Namespace (retained)": 1},
    ("barcelona", ("namespaceMode=adopt",), ("namespaceMode=reference",)): {
        "delete Namespace (retained)": 1
    },
    ("barcelona", ("namespaceMode=adopt", NOT_RETAINED), ("namespaceMode=reference",)): {
        "delete Namespace (retained)": 1  # adopted: existed before the stack, always retained
    },
    # Not retained: the namespace carries the claims' protection, so the engine refuses.
    ("barcelona", (CREATED, NOT_RETAINED), ("namespaceMode=reference",)): {"delete Namespace!": 1},
    ("gcp-a3", (NOT_RETAINED,), ("namespaceMode=reference",)): {"delete Namespace!": 1},
    ("gcp-a3", (NOT_RETAINED,), ("namespace=elsewhere",)): {
        "replace Namespace!": 1,
        "replace PersistentVolumeClaim!": 4,
    },
    # Adopting another namespace imports it in place of the created one, and the engine deletes
    # the old one without checking its protect: the protected claims stop the update.
    ("gcp-a3", (NOT_RETAINED,), ("namespaceMode=adopt", "namespace=elsewhere")): {
        "replace Namespace": 1,
        "replace PersistentVolumeClaim!": 4,
    },
    ("gcp-a3", (NOT_RETAINED,), ("namespaceMode=adopt",)): {},
    # Lifting protect and deleting in one update: the engine reads protect from the state.
    ("gcp-a3", (NOT_RETAINED,), (UNPROTECTED, "namespaceMode=reference")): {"delete Namespace!": 1},
    # Both opt-outs deployed: the namespace goes, and its claims with it.
    ("gcp-a3", (NOT_RETAINED, UNPROTECTED), ("namespaceMode=reference",)): {"delete Namespace": 1},
    # A JobSet stack: an edit replaces the run (its JobSet), never a claim; back to a
    # StatefulSet keeps them too.
    ("nerc-production", JOB_SET, (IMAGE,)): {},
    ("nerc-production", JOB_SET, ("!workload",)): {},
    # A GKE JobSet stack installs Kueue and JobSet: another release is an update in place;
    # turning the install off, or going back to a StatefulSet, deletes both (their charts and
    # namespaces, which hold no claims), as removing cluster-toolkit's helm_release does.
    ("gcp-a3", GKE_JOB_SET, ("workload.controllers.kueueVersion=0.18.3",)): {},
    ("gcp-a3", GKE_JOB_SET, ("workload.controllers.install=false",)): {"delete Namespace": 2},
    ("gcp-a3", GKE_JOB_SET, ("!workload",)): {"delete Namespace": 2},
    # The node health gate comes, changes and goes beside the run, touching no claim.
    ("gcp-a3", GKE_JOB_SET, (HEALTH_GATE,)): {},
    ("gcp-a3", (*GKE_JOB_SET, HEALTH_GATE), ("workload.queue.healthGate.maxAgeHours=12",)): {},
    ("gcp-a3", (*GKE_JOB_SET, HEALTH_GATE), ("workload.queue.healthGate.enabled=false",)): {},
    # So does the stack's health runner: never a claim, never the run.
    ("gcp-a3", (*GKE_JOB_SET, HEALTH_GATE, GPU_ONLY), (RUNNER,)): {},
    (
        "gcp-a3",
        (*GKE_JOB_SET, HEALTH_GATE, GPU_ONLY, RUNNER),
        ("workload.queue.healthGate.runner.dcgmLevel=3",),
    ): {},
    # gcp-a4 as it shipped before (#44 item 1): a class made outside the stack deletes ours (it
    # holds no data), the claims stay.
    ("gcp-a4", A4_STATEFULSET, ("storage.storageClassMode=reference",)): {},
    # A Lustre instance grows in place; its tier and file system name are fixed at creation.
    ("gcp-a4", LUSTRE, (f"{LUSTRE_VOLUME}.capacityGib=72000",)): {},
    ("gcp-a4", LUSTRE, (f"{LUSTRE_VOLUME}.throughput=1000",)): {"replace Instance!": 1},
    ("gcp-a4", LUSTRE, (f"{LUSTRE_VOLUME}.filesystem=teamfs",)): {"replace Instance!": 1},
    # Leaving the platform: every claim and the namespace leave the program.
    ("nerc-production", (CREATED,), TO_GKE): {
        "delete Namespace (retained)": 1,
        "delete PersistentVolumeClaim!": 2,
    },
    ("nerc-production", (CREATED, NOT_RETAINED), TO_GKE): {
        "delete Namespace!": 1,
        "delete PersistentVolumeClaim!": 2,
    },
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


@pytest.mark.parametrize(
    ("stack", "deployed", "edit"),
    list(FROM_DEPLOYED),
    ids=[f"{s}:{','.join(d)}:{','.join(e)}" for s, d, e in FROM_DEPLOYED],
)
def test_edits_of_a_deployed_stack_replace_and_delete_only_what_the_policy_allows(
    stack: str, deployed: tuple[str, ...], edit: tuple[str, ...]
) -> None:
    steps = plan_from(stack, deployed, edit)
    assert violations(edit, steps, deployed) == []
    assert summary(steps) == FROM_DEPLOYED[stack, deployed, edit]


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
    # A namespace dropped from the program, neither retained nor protected, while no claim
    # stops the update: allowed only when the stack opted out of both protect and retention.
    dropped = Step(NAMESPACE, "ns", "delete")
    edit = ("namespaceMode=reference",)
    assert len(violations(edit, [dropped], (NOT_RETAINED,))) == 1
    protected_again = (NOT_RETAINED, UNPROTECTED, "storage.protect=true")  # the last one wins
    assert len(violations(edit, [dropped], protected_again)) == 1
    assert violations(edit, [dropped], (NOT_RETAINED, UNPROTECTED)) == []
    assert violations(edit, [Step(NAMESPACE, "ns", "delete", protected=True)]) == []
    controllers = Step(NAMESPACE, "gpu-cluster-queue-controllers-kueue-namespace", "delete")
    assert violations(("workload.controllers.install=false",), [controllers]) == []
    assert violations((UNPROTECTED,), [claim]) == []


def test_the_matrix_covers_every_shipped_stack_and_the_risky_edits() -> None:
    from tests.conftest import STACKS

    assert {stack for stack, _ in MATRIX} == set(STACKS)
    keys = {e.split("=")[0] for _, edit in MATRIX for e in edit}
    keys |= {e.split("=")[0] for _, _, edit in FROM_DEPLOYED for e in edit}
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
        "namespaceMode",
        "platform",
    } <= keys
