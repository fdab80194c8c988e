"""An A3 Mega pool with GPUDirect-TCPXO and a training workload, added to an existing GKE
cluster given by name: the gpu_cluster package's components, without the full platform.

Kubernetes objects go to the cluster of the current kubeconfig context (`gcloud container
clusters get-credentials <clusterName>`), or to `kubeContext` when set.
"""

import pulumi
import pulumi_kubernetes as k8s

from gpu_cluster.api import (
    GpuDirectNodes,
    GpuDirectNodesArgs,
    GpuNicNetwork,
    GpuNodePool,
    GpuNodePoolArgs,
    TrainingAccess,
    TrainingAccessArgs,
    TrainingNamespace,
    TrainingNamespaceArgs,
    TrainingWorkload,
    gke_placement,
    gpudirect_release,
    labels,
    pod_networking,
    validate_settings,
    workload_args,
)

POOL = "a3mega"
config = pulumi.Config()
gke_version = config.get("gkeVersion") or "1.35"
settings = validate_settings(
    {
        "platform": "gke",
        "name": POOL,
        "namespace": config.require("namespace"),
        "nodes": config.require_int("nodes"),
        "networkMode": "tcpxo",
        "kubernetesVersion": gke_version,
        "gcp": {
            "project": config.require("project"),
            "region": config.require("region"),
            "zone": config.require("zone"),
            "machineType": "a3-megagpu-8g",
            "minMasterVersion": gke_version,
        },
        # One claim per pod on GKE's default class: Persistent Disk has no shared claims.
        "storage": {"mode": "per-pod"},
    }
)
release = gpudirect_release(settings)
networks = config.require_object("gpuNetworks")
if len(networks) != release.nic_count:
    raise pulumi.RunError(
        f"gpuNetworks: GPUDirect-TCPXO needs {release.nic_count} (one per GPU NIC), "
        f"not {len(networks)}"
    )
assert settings.gcp is not None

pool = GpuNodePool(
    POOL,
    GpuNodePoolArgs(
        cluster=config.require("clusterName"),
        project=settings.gcp.project,
        zone=settings.gcp.zone,
        region=settings.gcp.region,
        pool_name=POOL,
        machine_type=settings.gcp.machine_type,
        node_count=settings.nodes,
        gpu_nics=[(n["vpc"], n["subnet"]) for n in networks],
    ),
)
provider = k8s.Provider(
    f"{POOL}-k8s",
    context=config.get("kubeContext"),
    enable_server_side_apply=True,
    opts=pulumi.ResourceOptions(depends_on=[pool.node_pool]),
)
in_cluster = pulumi.ResourceOptions(providers=[provider])
namespace = TrainingNamespace(
    POOL, TrainingNamespaceArgs(settings.namespace, labels=labels(settings)), in_cluster
)
gpudirect = GpuDirectNodes(
    POOL,
    GpuDirectNodesArgs([GpuNicNetwork(n["vpc"], n["subnet"]) for n in networks], release),
    in_cluster,
)
access = TrainingAccess(
    POOL,
    TrainingAccessArgs(POOL, settings.namespace, labels(settings), after=[namespace.namespace]),
    in_cluster,
)
workload = TrainingWorkload(
    f"{POOL}-workload",
    workload_args(
        settings,
        pod_networking(settings, f"{POOL}-scripts"),
        gke_placement(POOL),
        access.service_account_name,
    ),
    opts=pulumi.ResourceOptions(
        providers=[provider], depends_on=[namespace.namespace, *access.ready, *gpudirect.ready]
    ),
)
pulumi.export("nodePoolName", pool.node_pool.name)
pulumi.export("statefulSetName", workload.controller_name)
