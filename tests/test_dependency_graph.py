"""What `pulumi up` makes each resource wait for, read from every shipped stack's render and
JobSet variants (gpu_cluster/offline/graph.py: dependsOn, provider and parent edges).

Only what runs on GPU nodes waits for the GPU node pool: the training pods (StatefulSet or
JobSet) and the node agents (DaemonSets, see gpudirect_nodes.py for why they do); the training
pods also wait for their buckets' grants. Every other
Kubernetes object waits only for the objects it names or lives in, and on GKE for the cluster
and its system pool (the provider). A failure names the chain of edges that makes the wait."""

from __future__ import annotations

import functools
import json

import pytest

from gpu_cluster.components.gke_cluster import SYSTEM_POOL
from gpu_cluster.config.schema import PROJECT
from gpu_cluster.offline.graph import PROVIDER_TYPE_PREFIX, Edge, Graph
from gpu_cluster.offline.render import resources_json
from gpu_cluster.offline.stack_files import stack_file_config
from tests.conftest import GKE_RWX, STACKS, run_stack

NODE_POOL = "gcp:container/nodePool:NodePool"
JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py", *GKE_RWX)
HEALTH_GATE = "workload.queue.healthGate.enabled=true"
Variant = tuple[str, tuple[str, ...]]
VARIANTS: list[Variant] = [(s, ()) for s in STACKS] + [
    ("nerc-production", JOB_SET),
    ("gcp-a3", JOB_SET),
    ("gcp-a4", JOB_SET),
    ("gcp-a4", (*JOB_SET, "gcp.queuedProvisioning=true")),
    ("gcp-a3", (*JOB_SET, HEALTH_GATE)),
    (
        "gcp-a3",
        (
            *JOB_SET,
            HEALTH_GATE,
            "workload.queue.healthGate.checks[0]=gpu",
            "workload.queue.healthGate.runner.enabled=true",
        ),
    ),
    (
        "gcp-a4",
        (
            "storage.volumes[2].name=scratch",
            "storage.volumes[2].mountPath=/lustre",
            "storage.volumes[2].managedLustre.instance=gke-lustre",
            "storage.volumes[2].managedLustre.capacityGib=36000",
        ),
    ),
]
# No variant switches platform: a GKE stack's variants are GKE ones (and have a GPU pool).
GKE_VARIANTS = [v for v in VARIANTS if stack_file_config(v[0])["gpu-cluster:platform"] == "gke"]
# The training pods' controller kinds.
TRAINING = ("StatefulSet", "JobSet")
# The Kubernetes kinds each kind may wait for directly: the namespace it lives in and the
# objects it names. Waiting for these one's own prerequisites is allowed too (allowed_kinds).
NAMESPACED = ("Namespace",)
NAMES_ITS_PREREQUISITES: dict[str, tuple[str, ...]] = {
    "Namespace": (),
    "StorageClass": (),
    # A bucket's or Lustre instance's volume: it names its claim, which binds to it whenever both
    # exist (and a Lustre instance's address: see allowed_cloud).
    "PersistentVolume": (),
    "SecurityContextConstraints": (),
    "MachineConfig": (),
    "GKENetworkParamSet": (),
    "Network": (),
    # The node agents wait for nothing; the image pre-pull (openshift.prePull) for its
    # namespace and the training account it runs as.
    "DaemonSet": (*NAMESPACED, "ServiceAccount"),
    "ServiceAccount": NAMESPACED,
    "ConfigMap": NAMESPACED,
    # A service-account token's Secret (Kueue's scrape on GKE) names its account: the token
    # controller deletes one whose account does not exist yet.
    "Secret": (*NAMESPACED, "ServiceAccount"),
    "Service": NAMESPACED,
    "NetworkPolicy": NAMESPACED,
    "NetworkAttachmentDefinition": NAMESPACED,
    "PersistentVolumeClaim": (*NAMESPACED, "StorageClass"),
    "Role": (*NAMESPACED, "SecurityContextConstraints"),  # it grants `use` of that SCC
    "RoleBinding": (*NAMESPACED, "Role", "ServiceAccount"),
    "ClusterRole": (),
    "ClusterRoleBinding": ("ClusterRole", "ServiceAccount"),
    # The scrape objects: Kueue's (GKE) names the token Secret it scrapes with.
    "PodMonitor": NAMESPACED,
    "PodMonitoring": (*NAMESPACED, "Secret"),
    # The node health gate's and runner's controllers (workload.queue.healthGate): their
    # account, grants and script; the runner's also its check's template and the admission
    # policy that confines its node writes.
    "Deployment": (
        *NAMESPACED,
        "ConfigMap",
        "RoleBinding",
        "ClusterRoleBinding",
        "PodTemplate",
        "ValidatingAdmissionPolicyBinding",
    ),
    # The runner's GPU check: its script.
    "PodTemplate": (*NAMESPACED, "ConfigMap"),
    "ValidatingAdmissionPolicy": (),
    "ValidatingAdmissionPolicyBinding": ("ValidatingAdmissionPolicy",),
    # A controller's chart (workload.controllers.install): its namespace, and Kueue's waits for
    # JobSet's (plan/controllers.py says why).
    "Chart": (*NAMESPACED, "Chart"),
    # Kueue's objects: all need Kueue's CRDs and webhooks, so the chart when the stack installs
    # it, else the reads of the CRDs that check the cluster's Kueue and JobSet serve what it
    # writes (a read waits for nothing). The flavor names its Topology and the ClusterQueue its
    # flavor, and waits for it: a new one (a new spec is a new name, plan/queue.py) is made
    # first, and the old one deleted only once nothing names it (Kueue holds it until then).
    "CustomResourceDefinition": (),
    "Topology": ("Chart", "CustomResourceDefinition"),
    "ResourceFlavor": ("Chart", "CustomResourceDefinition", "Topology"),
    "ClusterQueue": ("Chart", "CustomResourceDefinition", "ResourceFlavor"),
    "LocalQueue": (*NAMESPACED, "ClusterQueue"),
    "ProvisioningRequestConfig": ("Chart", "CustomResourceDefinition"),
    "AdmissionCheck": ("Chart", "CustomResourceDefinition"),
    # The training pods: their account and its grants, networks, scripts, secrets, claims,
    # Service (its DNS), the node agents, the memlock MachineConfig.
    "StatefulSet": (
        *NAMESPACED,
        "ServiceAccount",
        "RoleBinding",
        "MachineConfig",
        "NetworkAttachmentDefinition",
        "GKENetworkParamSet",
        "Network",
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "PersistentVolume",
        "Service",
        "DaemonSet",
    ),
}
# A JobSet's pods use the same, and it waits for its queue, all of it (Kueue admits nothing
# into a ClusterQueue whose flavor or Topology is missing), and for the controllers' charts
# (their webhooks default and suspend it).
NAMES_ITS_PREREQUISITES["JobSet"] = (
    *NAMES_ITS_PREREQUISITES["StatefulSet"],
    "Chart",
    "CustomResourceDefinition",
    "LocalQueue",
    "ResourceFlavor",
    "Topology",
    "AdmissionCheck",
    "ProvisioningRequestConfig",
    "Deployment",
)
# The run template (a ConfigMap holding a JobSet for `gpu-cluster run`, issue #40): it names the
# run's headless Service and account, and nothing a run waits for (GPU pool, queue, charts).
RUN_TEMPLATE = "ConfigMap (run template)"
NAMES_ITS_PREREQUISITES[RUN_TEMPLATE] = (*NAMESPACED, "Service", "ServiceAccount")
# Kinds that run on the GPU nodes and so wait for the GPU pool.
ON_GPU_NODES = (*TRAINING, "DaemonSet")
# The cloud resources a GKE Network object names besides the cluster: its VPC and subnet.
NETWORK_CLOUD_TYPES = ("gcp:compute/network:Network", "gcp:compute/subnetwork:Subnetwork")
# What the training pods mount from Cloud Storage: the buckets and their grants to the pods (a
# pod mounting a bucket it may not read fails its mount).
BUCKET_CLOUD_TYPES = ("gcp:storage/bucket:Bucket", "gcp:storage/bucketIAMMember:BucketIAMMember")
# A Lustre instance and what it needs first: its volume names the instance's address.
LUSTRE_CLOUD_TYPES = (
    "gcp:lustre/instance:Instance",
    "gcp:servicenetworking/connection:Connection",
    "gcp:compute/globalAddress:GlobalAddress",
    *NETWORK_CLOUD_TYPES,
)


@functools.cache
def graph(variant: Variant) -> Graph:
    stack, overrides = variant
    return Graph(json.loads(resources_json(run_stack(stack, *overrides))))


def kind(g: Graph, urn: str) -> str | None:
    """The Kubernetes kind of a Kubernetes object ("Chart" for a helm.v4.Chart, the objects
    of a chart), None for anything else."""
    row = g.rows[urn]
    if not row["type"].startswith("kubernetes:"):
        return None
    found = str(row["inputs"].get("kind") or row["type"].rsplit(":", 1)[1])
    if found == "ConfigMap" and row["inputs"]["metadata"]["name"].endswith("-run-template"):
        return RUN_TEMPLATE
    return found


def is_component(g: Graph, urn: str) -> bool:
    return str(g.rows[urn]["type"]).startswith(f"{PROJECT}:")


def is_gpu_pool(g: Graph, urn: str) -> bool:
    row = g.rows[urn]
    return bool(row["type"] == NODE_POOL and row["inputs"]["name"] != SYSTEM_POOL)


def kubernetes_objects(g: Graph) -> list[str]:
    return sorted(urn for urn in g.rows if kind(g, urn) is not None)


def of_kind(g: Graph, wanted: str) -> list[str]:
    return [urn for urn in kubernetes_objects(g) if kind(g, urn) == wanted]


def provider(g: Graph) -> str | None:
    found = [u for u, r in g.rows.items() if r["type"] == f"{PROVIDER_TYPE_PREFIX}kubernetes"]
    return found[0] if found else None


@functools.cache
def allowed_kinds(of: str) -> frozenset[str]:
    """The kinds `of` may wait for, directly or through one of them."""
    direct = NAMES_ITS_PREREQUISITES[of]
    return frozenset(direct).union(*(allowed_kinds(k) for k in direct if k != of))


def allowed_cloud(g: Graph, urn: str) -> set[str]:
    """The cloud resources a Kubernetes object may wait for: what the provider waits for (the
    cluster, its system pool), the GPU pool for what runs on GPU nodes, a Network object's
    VPC and subnet."""
    p = provider(g)
    allowed = g.waits_for(p) if p is not None else set()
    k = kind(g, urn)
    if k in ON_GPU_NODES:
        for pool in (u for u in g.rows if is_gpu_pool(g, u)):
            allowed |= {pool, *g.waits_for(pool)}
    if k in ("GKENetworkParamSet", "Network"):
        allowed |= {u for u in g.rows if g.rows[u]["type"] in NETWORK_CLOUD_TYPES}
    if k in TRAINING:
        allowed |= {u for u in g.rows if g.rows[u]["type"] in BUCKET_CLOUD_TYPES}
    if k in (*TRAINING, "PersistentVolume"):
        allowed |= {u for u in g.rows if g.rows[u]["type"] in LUSTRE_CLOUD_TYPES}
    return allowed


def needless_waits(g: Graph, urn: str) -> list[str]:
    """Each resource `urn` waits for and need not, as the chain of edges to it."""
    k = kind(g, urn)
    assert k is not None and k in NAMES_ITS_PREREQUISITES, f"no rule for {g.label(urn)}"
    cloud = allowed_cloud(g, urn) | ({p} if (p := provider(g)) else set())
    needless = [
        other
        for other in sorted(g.waits_for(urn))
        if not is_component(g, other)
        and (kind(g, other) not in allowed_kinds(k) if kind(g, other) else other not in cloud)
    ]
    return [_chain(g, urn, other) for other in needless]


def _chain(g: Graph, urn: str, other: str) -> str:
    path: list[Edge] | None = g.path_to(urn, lambda u: u == other)
    assert path is not None
    return g.describe(path)


def _id(variant: Variant) -> str:
    return " ".join((variant[0], *variant[1]))


@pytest.mark.parametrize("variant", VARIANTS, ids=_id)
def test_each_kubernetes_object_waits_only_for_what_it_names(variant: Variant) -> None:
    g = graph(variant)
    offenders = [chain for urn in kubernetes_objects(g) for chain in needless_waits(g, urn)]
    assert offenders == [], "needless waits:\n" + "\n".join(offenders)


@pytest.mark.parametrize("variant", GKE_VARIANTS, ids=_id)
def test_nothing_but_what_runs_on_gpu_nodes_waits_for_the_gpu_pool(variant: Variant) -> None:
    g = graph(variant)
    waiting = {
        urn: g.path_to(urn, lambda u: is_gpu_pool(g, u))
        for urn in [*kubernetes_objects(g), provider(g) or ""]
        if urn and kind(g, urn) not in ON_GPU_NODES
    }
    offenders = [g.describe(path) for path in waiting.values() if path is not None]
    assert offenders == [], "wait for the GPU pool:\n" + "\n".join(offenders)


@pytest.mark.parametrize("variant", GKE_VARIANTS, ids=_id)
def test_the_training_pods_and_node_agents_wait_for_the_gpu_pool(variant: Variant) -> None:
    g = graph(variant)
    (pool,) = [u for u in g.rows if is_gpu_pool(g, u)]
    for urn in [u for k in ON_GPU_NODES for u in of_kind(g, k)]:
        assert pool in g.waits_for(urn), g.label(urn)


@pytest.mark.parametrize("variant", VARIANTS, ids=_id)
def test_the_training_pods_wait_for_everything_they_use(variant: Variant) -> None:
    """The pods start only once their account, grants, networks, node agents, scripts,
    claims and queue exist (a missing edge would let them start too early, or fail)."""
    g = graph(variant)
    (pods,) = [u for k in TRAINING for u in of_kind(g, k)]
    # Of those kinds, all but the scrape of Kueue's metrics (GKE), which the pods do not use.
    used = [
        urn
        for urn in kubernetes_objects(g)
        if kind(g, urn) in NAMES_ITS_PREREQUISITES[str(kind(g, pods))]
        and "gpu-cluster:monitoring:KueueMetricsScrape" not in urn
    ]
    assert used
    missing = [g.label(urn) for urn in used if urn not in g.waits_for(pods)]
    assert missing == []
