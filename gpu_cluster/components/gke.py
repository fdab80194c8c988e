"""GKE platform: the GPU VPCs, the cluster with its system pool, the A3 pool, the GPUDirect
node pieces and the same training workload as on OpenShift, composed from the reusable
components. The stack's settings become the components' arguments here and nowhere else."""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from gpu_cluster.components.gcp_vpc import GpuVpcs, GpuVpcsArgs
from gpu_cluster.components.gke_cluster import GkeCluster, GkeClusterArgs
from gpu_cluster.components.gpu_pool import GpuNodePool, GpuNodePoolArgs
from gpu_cluster.components.gpudirect_nodes import GpuDirectNodes, GpuDirectNodesArgs, GpuNicNetwork
from gpu_cluster.components.moved import moved_from
from gpu_cluster.components.namespace import TrainingNamespace
from gpu_cluster.components.platforms import labels, namespace_args, workload_args
from gpu_cluster.components.training_access import TrainingAccess, TrainingAccessArgs
from gpu_cluster.components.workload import TrainingWorkload
from gpu_cluster.config.settings import GcpSettings, Settings, gpu_nic_count, gpudirect_release
from gpu_cluster.plan.gcp_network import plan_addresses
from gpu_cluster.plan.netmodes import pod_networking
from gpu_cluster.plan.outputs import stack_outputs
from gpu_cluster.plan.podspec import NodeRequirement, PodPlacement

# Node label GKE sets on every node.
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# UID the training container runs as on GKE (no SCC assigns one there).
TRAINING_UID = 10001  # above 10000, clear of host users


def gke_placement(pool_name: str) -> PodPlacement:
    return PodPlacement(
        node_requirements=(NodeRequirement(NODE_POOL_LABEL, "In", (pool_name,)),),
        run_as_user=TRAINING_UID,
    )


def pool_name(gcp_settings: GcpSettings) -> str:
    return "a3mega" if gcp_settings.machine_type == "a3-megagpu-8g" else "a3high"


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
        super().__init__("gpu-cluster:gke:GkePlatform", name, None, opts)
        s = settings
        assert s.gcp is not None  # guaranteed by the schema
        g = s.gcp
        # The pieces used to be this component's own children: they keep their URNs by alias.
        moved = moved_from(self)
        plan = plan_addresses(g.base_cidr, gpu_nic_count(s))
        vpcs = GpuVpcs(name, GpuVpcsArgs(g.project, g.region, s.name, plan, g.private_nodes), moved)
        cluster = GkeCluster(
            name,
            GkeClusterArgs(
                cluster_name=s.name,
                project=g.project,
                zone=g.zone,
                network=vpcs.host_network.id,
                subnetwork=vpcs.host_subnet.id,
                control_plane_cidr=plan.control_plane if g.private_nodes else None,
                release_channel=g.release_channel,
                min_master_version=g.min_master_version,
                hold_minor_upgrades=g.hold_minor_upgrades,
                deletion_protection=g.deletion_protection,
                system_pool=g.system_pool,
            ),
            moved,
        )
        pool = pool_name(g)
        gpu_pool = GpuNodePool(
            name,
            GpuNodePoolArgs(
                cluster=cluster.cluster.name,
                project=g.project,
                zone=g.zone,
                region=g.region,
                pool_name=pool,
                machine_type=g.machine_type,
                node_count=s.nodes,
                gpu_nics=[(vpc.name, subnet.name) for vpc, subnet in vpcs.gpu_nics],
                provisioning=g.provisioning,
                reservation=g.reservation,
                maintenance_interval=g.maintenance_interval,
                placement_policy_name=f"{s.name}-compact",
                placement_max_distance=g.placement_max_distance,
            ),
            moved,
        )

        provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig,
            enable_server_side_apply=True,
            # Cluster DNS runs on the system pool, the GPUDirect daemons on the A3 pool.
            opts=pulumi.ResourceOptions(
                parent=self, depends_on=[cluster.system_pool, gpu_pool.node_pool]
            ),
        )
        in_cluster = pulumi.ResourceOptions.merge(
            moved, pulumi.ResourceOptions(providers=[provider])
        )
        depends: list[pulumi.Resource] = []
        ns_args = namespace_args(s)
        if ns_args is not None:
            depends.append(TrainingNamespace(name, ns_args, in_cluster).namespace)
        release = gpudirect_release(s) if plan.gpu_nics else None
        nics = [
            GpuNicNetwork(f"{s.name}-gpu{index}", f"{s.name}-gpu{index}", subnet)
            for index, (_, subnet) in enumerate(vpcs.gpu_nics, start=1)
        ]
        gpudirect = GpuDirectNodes(name, GpuDirectNodesArgs(nics, release), in_cluster)
        access = TrainingAccess(
            name,
            TrainingAccessArgs(s.name, s.namespace, labels(s), after=depends[:1]),
            in_cluster,
        )
        networking = pod_networking(s, f"{s.name}-scripts")
        self.workload = TrainingWorkload(
            f"{name}-workload",
            workload_args(
                s, networking, gke_placement(pool), access.service_account_name, secret_env
            ),
            opts=pulumi.ResourceOptions(
                parent=self, providers=[provider], depends_on=[*depends, *gpudirect.ready]
            ),
        )

        self.cluster = cluster.cluster
        self.system_pool = cluster.system_pool
        self.node_pool = gpu_pool.node_pool
        self.outputs = {
            **stack_outputs(s, cli="kubectl"),
            "clusterName": self.cluster.name,
            "clusterEndpoint": self.cluster.endpoint,
            "nodePoolName": self.node_pool.name,
            "getCredentialsCommand": pulumi.Output.concat(
                "gcloud container clusters get-credentials ",
                self.cluster.name,
                f" --zone {g.zone} --project {g.project}",
            ),
        }
        self.register_outputs(
            {"clusterName": self.cluster.name, "nodePoolName": self.node_pool.name}
        )
