"""GKE platform: the GPU VPCs, the cluster with its system pool, the A3 pool, the GPUDirect
node pieces and the same training workload as on OpenShift, composed from the reusable
components. The stack's settings become the components' arguments here (the steps on Google
Cloud in gke_gcp) and nowhere else."""

from __future__ import annotations

import dataclasses

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from gpu_cluster.components.cloud_dashboard import (
    CloudMonitoringDashboard,
    CloudMonitoringDashboardArgs,
)
from gpu_cluster.components.gcp_vpc import GpuVpcs
from gpu_cluster.components.gke_cluster import GkeCluster
from gpu_cluster.components.gke_gcp import gke_cluster, gpu_networks, gpu_node_pool, pool_name
from gpu_cluster.components.gke_storage import GkeStorageClass, GkeStorageClassArgs
from gpu_cluster.components.gpu_pool import GpuNodePool
from gpu_cluster.components.gpudirect_nodes import GpuDirectNodes, GpuDirectNodesArgs, GpuNicNetwork
from gpu_cluster.components.moved import moved_from
from gpu_cluster.components.namespace import TrainingNamespace
from gpu_cluster.components.node_identity import NodeIdentity, NodeIdentityArgs
from gpu_cluster.components.shared_args import (
    labels,
    namespace_args,
    queued,
    run_outputs,
    training_storage,
    workload_args,
)
from gpu_cluster.components.training_access import TrainingAccess, TrainingAccessArgs
from gpu_cluster.components.training_storage import (
    BucketAccess,
    LustreNetwork,
    TrainingStorage,
)
from gpu_cluster.components.workload import TrainingWorkload
from gpu_cluster.config.derived import shows_dashboard
from gpu_cluster.config.gke import cluster_problems
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.sections.gcp import GcpSettings
from gpu_cluster.facts.gcp_network import AddressPlan
from gpu_cluster.facts.kueue import GKE_QUEUED_TAINT
from gpu_cluster.plan.dashboard_forms import cloud_monitoring_dashboard
from gpu_cluster.plan.data_volumes import (
    bucket_grants,
    buckets_to_create,
    lustre_to_create,
    uses_gcs_fuse,
)
from gpu_cluster.plan.gke_identity import pod_principal
from gpu_cluster.plan.gke_storage import storage_class_to_create
from gpu_cluster.plan.netmodes import pod_networking
from gpu_cluster.plan.netmodes.gke_rdma import GVNIC_NETWORK, rdma_network_name
from gpu_cluster.plan.outputs import GKE_CLI, gke_context, stack_outputs
from gpu_cluster.plan.podspec import NodeRequirement, PodPlacement

# Node label GKE sets on every node.
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# UID the training container runs as on GKE (no SCC assigns one there).
TRAINING_UID = 10001  # above 10000, clear of host users


# The taint GKE puts on a node it is about to terminate (host maintenance, preemption). The
# training pods tolerate it with every effect, as Google's JobSets do (AI-Hypercomputer/
# gpu-recipes src/helm-charts/{a3mega,a3ultra,a4}/jobset/templates/workload-jobset.yaml, 2e1fd5e):
# pods a run restarts on its fixed set of nodes then start and train until the node goes,
# instead of one of them waiting out the maintenance while the others hold their GPUs idle.
IMPENDING_TERMINATION_TAINT = "cloud.google.com/impending-node-termination"


def gke_placement(pool_name: str, queued: bool = False) -> PodPlacement:
    """The pool's nodes; with queued provisioning also the taint GKE puts on them."""
    placement = PodPlacement(
        node_requirements=(NodeRequirement(NODE_POOL_LABEL, "In", (pool_name,)),),
        tolerations=(("nvidia.com/gpu", "NoSchedule"), (IMPENDING_TERMINATION_TAINT, "")),
        run_as_user=TRAINING_UID,
    )
    if not queued:
        return placement
    queued_taint = (GKE_QUEUED_TAINT, "NoSchedule")
    return dataclasses.replace(placement, tolerations=(*placement.tolerations, queued_taint))


def _gpu_nic_networks(s: Settings, plan: AddressPlan, vpcs: GpuVpcs) -> list[GpuNicNetwork]:
    """Additional NICs in the node's order: GPU (or second gVNIC) VPCs, then RDMA subnets."""
    return [
        GpuNicNetwork(
            f"{s.name}-gpu{index}",
            f"{s.name}-gpu{index}",
            subnet,
            network_name=GVNIC_NETWORK if plan.rdma_nics else None,
        )
        for index, (_, subnet) in enumerate(vpcs.gpu_nics, start=1)
    ] + [
        GpuNicNetwork(
            f"{s.name}-rdma",
            f"{s.name}-rdma-{index}",
            subnet,
            network_name=rdma_network_name(index),
            device_mode="RDMA",
        )
        for index, subnet in enumerate(vpcs.rdma_subnets)
    ]


def _gpudirect(
    name: str,
    s: Settings,
    plan: AddressPlan,
    vpcs: GpuVpcs,
    gpu_pool: GpuNodePool,
    opts: pulumi.ResourceOptions,
) -> GpuDirectNodes:
    """The NICs' Network objects and the mode's node agents (gIB for RDMA NICs, the GPUDirect
    release for GPU NICs, none without either), which wait for the GPU pool."""
    release = mode_of(s).release(s)
    nics = _gpu_nic_networks(s, plan, vpcs)
    return GpuDirectNodes(
        name, GpuDirectNodesArgs(nics, release, agents_after=(gpu_pool.node_pool,)), opts
    )


def _storage_class(
    name: str, s: Settings, opts: pulumi.ResourceOptions
) -> tuple[pulumi.Resource, ...]:
    """The class the claims name, which they wait for, unless GKE installs it or the stack
    references one."""
    spec = storage_class_to_create(
        s.platform, s.storage.storage_class, s.storage.storage_class_mode
    )
    if spec is None:
        return ()
    return (GkeStorageClass(name, GkeStorageClassArgs(spec, labels(s)), opts).storage_class,)


def _bucket_access(s: Settings, g: GcpSettings, account: pulumi.Output[str]) -> BucketAccess:
    """The buckets the stack creates and grants its pods' ServiceAccount `account`; an IAM
    principal names the project by number, which only GCP knows."""
    number = gcp.organizations.get_project_output(project_id=g.project).number
    principal = pulumi.Output.all(number, account).apply(
        lambda v: pod_principal(v[0], g.project, s.namespace, v[1])
    )
    return BucketAccess(g.project, g.region, buckets_to_create(s), bucket_grants(s), principal)


def _data_volumes(
    name: str,
    s: Settings,
    g: GcpSettings,
    vpcs: GpuVpcs,
    account: pulumi.Output[str],
    after: list[pulumi.Resource],
    opts: pulumi.ResourceOptions,
) -> TrainingStorage | None:
    """The data volumes with the buckets their pods' ServiceAccount `account` is granted and
    the Lustre instances on the host VPC; their claims wait for `after`."""
    buckets = _bucket_access(s, g, account) if uses_gcs_fuse(s) else None
    instances = lustre_to_create(s)
    lustre = (
        LustreNetwork(g.project, g.zone, vpcs.host_network.id, s.name, instances)
        if instances
        else None
    )
    return training_storage(name, s, after, opts, buckets, lustre)


def _workload(
    name: str,
    s: Settings,
    g: GcpSettings,
    account: pulumi.Output[str],
    secret_env: pulumi.Output[dict[str, str]] | None,
    claims_after: tuple[pulumi.Resource, ...],
    pods_after: tuple[pulumi.Resource, ...],
    after: list[pulumi.Resource],
    opts: pulumi.ResourceOptions,
) -> TrainingWorkload:
    """The training workload on the GPU pool, with its queue when it has one; everything of
    it waits for `after` (the namespace), its claims for `claims_after`, its pods for
    `pods_after`."""
    networking = pod_networking(s, f"{s.name}-scripts")
    workload = workload_args(
        s,
        networking,
        gke_placement(pool_name(g), g.queued_provisioning),
        account,
        secret_env,
        claims_after,
        pods_after=pods_after,
    )
    return TrainingWorkload(
        f"{name}-workload",
        queued(name, s, workload, after, opts),
        opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)),
    )


class GkePlatform(pulumi.ComponentResource):
    """One GKE training cluster: networks, cluster, A3 pool, GPUDirect daemons, workload."""

    cluster: gcp.container.Cluster
    system_pool: gcp.container.NodePool
    node_pool: gcp.container.NodePool
    outputs: dict[str, object]

    def __init__(
        self,
        name: str,
        settings: Settings,
        secret_env: pulumi.Output[dict[str, str]] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        problems = cluster_problems(settings)
        if problems:  # load_settings refuses these already; Settings built in code too
            raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
        super().__init__("gpu-cluster:gke:GkePlatform", name, None, opts)
        s = settings
        assert s.gcp is not None  # guaranteed by the schema
        g = s.gcp
        # The pieces used to be this component's own children: they keep their URNs by alias.
        moved = moved_from(self)
        plan, vpcs = gpu_networks(name, s, g, moved)
        identity = NodeIdentity(
            name, NodeIdentityArgs(g.project, s.name), pulumi.ResourceOptions(parent=self)
        )
        cluster = gke_cluster(name, s, g, plan, vpcs, identity, moved)
        gpu_pool = gpu_node_pool(name, s, g, vpcs, cluster, identity, moved)

        provider = self._kubernetes_provider(name, cluster)
        in_cluster = pulumi.ResourceOptions.merge(
            moved, pulumi.ResourceOptions(providers=[provider])
        )
        depends: list[pulumi.Resource] = []
        ns_args = namespace_args(s)
        if ns_args is not None:
            depends.append(TrainingNamespace(name, ns_args, in_cluster).namespace)
        gpudirect = _gpudirect(name, s, plan, vpcs, gpu_pool, in_cluster)
        access = TrainingAccess(
            name,
            TrainingAccessArgs(s.name, s.namespace, labels(s), after=depends[:1]),
            in_cluster,
        )
        in_this = pulumi.ResourceOptions(parent=self, providers=[provider])
        account = access.service_account_name
        claims_after = _storage_class(name, s, in_this)
        data = _data_volumes(name, s, g, vpcs, account, depends, in_this)
        pods_after = (
            gpu_pool.node_pool,
            *gpudirect.ready,
            *(data.ready if data is not None else ()),
        )
        self.workload = _workload(
            name, s, g, account, secret_env, claims_after, pods_after, depends, in_this
        )

        if shows_dashboard(s):
            dashboard = CloudMonitoringDashboardArgs(g.project, cloud_monitoring_dashboard(s))
            CloudMonitoringDashboard(name, dashboard, pulumi.ResourceOptions(parent=self))

        self.cluster = cluster.cluster
        self.system_pool = cluster.system_pool
        self.node_pool = gpu_pool.node_pool
        self.outputs = self._stack_outputs(s, g)
        self.register_outputs(
            {"clusterName": self.cluster.name, "nodePoolName": self.node_pool.name}
        )

    def _kubernetes_provider(self, name: str, cluster: GkeCluster) -> k8s.Provider:
        return k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig,
            enable_server_side_apply=True,
            # The cluster's own objects need its system pool (cluster DNS, GKE's webhooks), never
            # the GPU pool: they are created while it comes up; only what runs on GPU nodes
            # waits for it (the node agents and the training pods).
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster.system_pool]),
        )

    def _stack_outputs(self, s: Settings, g: GcpSettings) -> dict[str, object]:
        return {
            # The context get-credentials writes: the commands fail until it has run.
            **stack_outputs(s, GKE_CLI, ("--context", gke_context(s))),
            **run_outputs(s, self.workload),
            "clusterName": self.cluster.name,
            "clusterEndpoint": self.cluster.endpoint,
            "nodePoolName": self.node_pool.name,
            "getCredentialsCommand": pulumi.Output.concat(
                "gcloud container clusters get-credentials ",
                self.cluster.name,
                f" --zone {g.zone} --project {g.project}",
            ),
        }
