"""GKE platform: VPCs, compact placement, the cluster, its system pool, the A3 node pool,
GPUDirect daemons and the same training workload as on OpenShift. Vendor facts follow Google's
published setup (sources beside each value; tests/vendor/ keeps them as test data)."""

from __future__ import annotations

import json

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
from pulumi_gcp.compute import (
    FirewallAllowArgs,
    ResourcePolicyGroupPlacementPolicyArgs,
    RouterNatArgs,
    SubnetworkSecondaryIpRangeArgs,
)
from pulumi_gcp.container import (
    ClusterArgs,
    ClusterIpAllocationPolicyArgs,
    ClusterMaintenancePolicyArgs,
    ClusterMaintenancePolicyDailyMaintenanceWindowArgs,
    ClusterMaintenancePolicyMaintenanceExclusionArgs,
    ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs,
    ClusterPrivateClusterConfigArgs,
    ClusterReleaseChannelArgs,
    NodePoolArgs,
    NodePoolAutoscalingArgs,
    NodePoolManagementArgs,
    NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs,
    NodePoolNetworkConfigArgs,
    NodePoolNodeConfigArgs,
    NodePoolNodeConfigGuestAcceleratorArgs,
    NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs,
    NodePoolNodeConfigGvnicArgs,
    NodePoolNodeConfigHostMaintenancePolicyArgs,
    NodePoolNodeConfigReservationAffinityArgs,
    NodePoolNodeConfigShieldedInstanceConfigArgs,
    NodePoolNodeConfigTaintArgs,
    NodePoolPlacementPolicyArgs,
    NodePoolUpgradeSettingsArgs,
)
from pulumi_kubernetes.apps.v1 import DaemonSetSpecArgs
from pulumi_kubernetes.core.v1 import (
    AffinityArgs,
    CapabilitiesArgs,
    ContainerArgs,
    HostPathVolumeSourceArgs,
    PodSecurityContextArgs,
    PodSpecArgs,
    PodTemplateSpecArgs,
    ResourceRequirementsArgs,
    SeccompProfileArgs,
    SecurityContextArgs,
    TolerationArgs,
    VolumeArgs,
    VolumeMountArgs,
)
from pulumi_kubernetes.meta.v1 import LabelSelectorArgs, ObjectMetaArgs

from gpu_cluster.components.k8s_objects import ManifestResource
from gpu_cluster.components.namespace import managed_namespace
from gpu_cluster.components.workload import TrainingWorkload, labels, node_affinity
from gpu_cluster.config.settings import GcpSettings, Settings, gpu_nic_count, gpudirect_release
from gpu_cluster.plan.gcp_network import A3_VPC_MTU, plan_addresses
from gpu_cluster.plan.gpudirect import (
    HOST_TOOLS_IMAGE,
    NRI_INJECTOR_IMAGE,
    PAUSE_IMAGE,
    GpuDirectRelease,
)
from gpu_cluster.plan.netmodes import gke_network_objects, pod_networking
from gpu_cluster.plan.outputs import stack_outputs
from gpu_cluster.plan.podspec import NodeRequirement, PodPlacement
from gpu_cluster.plan.scan_exceptions import NODE_AGENT_EXCEPTIONS, skip_annotations
from gpu_cluster.plan.shipped import SCRIPTS_PATH

# GKE accelerator type per machine (cloud.google.com/kubernetes-engine/docs/how-to/gpus; the
# cluster-toolkit gke-a3-megagpu and gke-a3-highgpu blueprints' accelerator_type).
ACCELERATOR = {"a3-megagpu-8g": "nvidia-h100-mega-80gb", "a3-highgpu-8g": "nvidia-h100-80gb"}
# Node labels GKE sets on every node.
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# Node-side TCPXO setup script, run in the host's namespaces by the installer DaemonSet.
TCPXO_PREINSTALL = SCRIPTS_PATH / "tcpxo-preinstall.sh"
# UID the training container runs as on GKE (no SCC assigns one there).
TRAINING_UID = 10001  # above 10000, clear of host users
# Nodes pull the plugin and sidecar images from Artifact Registry and reach Google APIs.
NODE_OAUTH_SCOPES = ["https://www.googleapis.com/auth/cloud-platform"]
# GKE's own workloads run on this pool (GoogleCloudPlatform/cluster-toolkit
# modules/scheduler/gke-cluster main.tf `system_node_pools`, name "system").
SYSTEM_POOL = "system"
# Upgrade one node at a time and never create a spare: an A3 surge node needs capacity that a
# reservation or a stockout rarely has (cluster-toolkit modules/compute/gke-node-pool and
# modules/scheduler/gke-cluster variables.tf `upgrade_settings`, 1047080).
UPGRADE_SETTINGS = NodePoolUpgradeSettingsArgs(strategy="SURGE", max_surge=0, max_unavailable=1)
# Shielded nodes with secure boot: only signed kernel modules load (COS's and GKE's GPU driver
# are signed). cluster-toolkit modules/compute/gke-node-pool and modules/scheduler/gke-cluster
# main.tf `shielded_instance_config`, `enable_secure_boot` default true (1047080).
SHIELDED_NODES = NodePoolNodeConfigShieldedInstanceConfigArgs(
    enable_secure_boot=True, enable_integrity_monitoring=True
)
# Start of the minor-upgrade hold. Fixed (a moving start would show a diff on every run); it
# lies in the past, as cluster-toolkit's gke-a3-highgpu blueprint's does (2026-04-01).
HOLD_START = "2026-11-01T00:00:00Z"


def gke_placement(pool_name: str) -> PodPlacement:
    return PodPlacement(
        node_requirements=(NodeRequirement(NODE_POOL_LABEL, "In", (pool_name,)),),
        run_as_user=TRAINING_UID,
    )


def pool_name(gcp_settings: GcpSettings) -> str:
    return "a3mega" if gcp_settings.machine_type == "a3-megagpu-8g" else "a3high"


def kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """In-memory kubeconfig that authenticates with gcloud's GKE auth plugin (no file on disk)."""
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True,
            "installHint": "gcloud components install gke-gcloud-auth-plugin",
        }
    }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": cluster_name,
                    "cluster": {
                        "server": f"https://{endpoint}",
                        "certificate-authority-data": ca_certificate,
                    },
                }
            ],
            "users": [{"name": cluster_name, "user": user}],
            "contexts": [
                {"name": cluster_name, "context": {"cluster": cluster_name, "user": cluster_name}}
            ],
            "current-context": cluster_name,
        }
    )


def _maintenance_policy(g: GcpSettings) -> ClusterMaintenancePolicyArgs | None:
    """Holds minor and node upgrades until the minor's end of support, so the cluster stays on
    the GKE minor its GPUDirect release is published for (cluster-toolkit
    examples/gke-a3-highgpu/gke-a3-highgpu.yaml `maintenance_exclusions`, 1047080); patch
    upgrades of the control plane still apply."""
    if not g.hold_minor_upgrades:
        return None
    return ClusterMaintenancePolicyArgs(
        # cluster-toolkit modules/scheduler/gke-cluster `maintenance_start_time` default 09:00.
        daily_maintenance_window=ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
            start_time="09:00"
        ),
        maintenance_exclusions=[
            ClusterMaintenancePolicyMaintenanceExclusionArgs(
                exclusion_name="no-minor-or-node-upgrades-indefinite",
                start_time=HOLD_START,
                exclusion_options=(
                    ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                        scope="NO_MINOR_OR_NODE_UPGRADES",
                        end_time_behavior="UNTIL_END_OF_SUPPORT",
                    )
                ),
            )
        ],
    )


def _system_pool_args(g: GcpSettings, cluster: pulumi.Input[str]) -> NodePoolArgs:
    """An untainted CPU pool: GKE's system workloads (kube-dns, metrics-server, konnectivity
    agents) tolerate neither the GPU pool's taint nor, provably for every one of them on every
    GKE version, cluster-toolkit's `components.gke.io/gke-managed-components` taint; untainted,
    they and any CPU helper a user adds always schedule (a deviation from cluster-toolkit,
    listed in tests/vendor/gke_cluster.yaml)."""
    sp = g.system_pool
    return NodePoolArgs(
        name=SYSTEM_POOL,
        project=g.project,
        location=g.zone,
        cluster=cluster,
        initial_node_count=sp.min_nodes,
        autoscaling=NodePoolAutoscalingArgs(
            total_min_node_count=sp.min_nodes, total_max_node_count=sp.max_nodes
        ),
        node_config=NodePoolNodeConfigArgs(
            machine_type=sp.machine_type,
            disk_size_gb=sp.disk_size_gb,
            image_type="COS_CONTAINERD",
            oauth_scopes=NODE_OAUTH_SCOPES,
            gvnic=NodePoolNodeConfigGvnicArgs(enabled=True),
            shielded_instance_config=SHIELDED_NODES,
        ),
        management=NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        upgrade_settings=UPGRADE_SETTINGS,
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
        super().__init__("gpu-cluster:gke:GkePlatform", name, None, opts)
        s = settings
        assert s.gcp is not None  # guaranteed by the schema
        g = s.gcp
        child = pulumi.ResourceOptions(parent=self)
        plan = plan_addresses(g.base_cidr, gpu_nic_count(s))
        release = gpudirect_release(s) if plan.gpu_nics else None

        host_vpc, host_subnet = self._vpc(
            f"{name}-host",
            f"{s.name}-host",
            g,
            plan.nodes,
            firewall_sources=[plan.nodes, plan.pods],
            opts=child,
            mtu=A3_VPC_MTU,
            secondary_ranges={"pods": plan.pods, "services": plan.services},
        )
        if g.private_nodes:
            # Private nodes have no public IPs: NAT lets them pull images and reach Google APIs.
            router = gcp.compute.Router(
                f"{name}-host",
                name=f"{s.name}-host",
                project=g.project,
                region=g.region,
                network=host_vpc.id,
                opts=child,
            )
            gcp.compute.RouterNat(
                f"{name}-host",
                RouterNatArgs(
                    name=f"{s.name}-host",
                    project=g.project,
                    region=g.region,
                    router=router.name,
                    nat_ip_allocate_option="AUTO_ONLY",
                    source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
                ),
                opts=child,
            )

        gpu_subnets = [
            self._vpc(
                f"{name}-gpu{index}",
                f"{s.name}-gpu{index}",
                g,
                cidr,
                firewall_sources=[cidr],
                opts=child,
                mtu=A3_VPC_MTU,
            )
            for index, cidr in enumerate(plan.gpu_nics, start=1)
        ]

        cluster = gcp.container.Cluster(
            f"{name}-cluster",
            ClusterArgs(
                name=s.name,
                project=g.project,
                location=g.zone,  # compact placement is single-zone
                network=host_vpc.id,
                subnetwork=host_subnet.id,
                networking_mode="VPC_NATIVE",
                ip_allocation_policy=ClusterIpAllocationPolicyArgs(
                    cluster_secondary_range_name="pods", services_secondary_range_name="services"
                ),
                # Multi-networking (one pod interface per GPU VPC) needs Dataplane V2.
                datapath_provider="ADVANCED_DATAPATH",
                enable_multi_networking=True,
                remove_default_node_pool=True,
                initial_node_count=1,
                release_channel=ClusterReleaseChannelArgs(channel=g.release_channel),
                min_master_version=g.min_master_version,
                maintenance_policy=_maintenance_policy(g),
                deletion_protection=g.deletion_protection,
                private_cluster_config=(
                    ClusterPrivateClusterConfigArgs(
                        enable_private_nodes=True,
                        enable_private_endpoint=False,
                        master_ipv4_cidr_block=plan.control_plane,
                    )
                    if g.private_nodes
                    else None
                ),
            ),
            # Pulumi's protect stops a replacement (any force-new field) or a destroy at preview;
            # gcp.deletionProtection: false lifts it together with GKE's own flag.
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(protect=g.deletion_protection)
            ),
        )

        system_pool = gcp.container.NodePool(
            f"{name}-{SYSTEM_POOL}",
            _system_pool_args(g, cluster.name),
            opts=child,
        )

        pool = pool_name(g)
        policy_name = self._placement_policy(name, s, g, child)
        node_pool = gcp.container.NodePool(
            f"{name}-{pool}",
            NodePoolArgs(
                name=pool,
                project=g.project,
                location=g.zone,
                cluster=cluster.name,
                node_count=s.nodes,
                node_config=self._node_config(s, g),
                network_config=NodePoolNetworkConfigArgs(
                    additional_node_network_configs=[
                        NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                            network=vpc.name, subnetwork=subnet.name
                        )
                        for vpc, subnet in gpu_subnets
                    ]
                )
                if gpu_subnets
                else None,
                # A reservation brings its own placement; adding one fails pool creation.
                placement_policy=None
                if g.provisioning == "reservation"
                else NodePoolPlacementPolicyArgs(type="COMPACT", policy_name=policy_name),
                management=NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
                upgrade_settings=UPGRADE_SETTINGS,
            ),
            opts=child,
        )

        provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=pulumi.Output.all(cluster.name, cluster.endpoint, cluster.master_auth).apply(
                lambda a: kubeconfig(a[0], a[1], a[2]["cluster_ca_certificate"])
            ),
            enable_server_side_apply=True,
            # Cluster DNS runs on the system pool, the GPUDirect daemons on the A3 pool.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[system_pool, node_pool]),
        )
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=provider)

        depends: list[pulumi.Resource] = []
        namespace = managed_namespace(f"{name}-namespace", s, k8s_opts)
        if namespace is not None:
            depends.append(namespace)
        for index, (_, subnet) in enumerate(gpu_subnets, start=1):
            for manifest in gke_network_objects(
                index, f"{s.name}-gpu{index}", f"{s.name}-gpu{index}"
            ):
                depends.append(
                    ManifestResource(
                        f"{name}-{manifest['kind'].lower()}-{index}",
                        manifest,
                        pulumi.ResourceOptions.merge(
                            k8s_opts, pulumi.ResourceOptions(depends_on=[subnet])
                        ),
                    )
                )
        if release is not None:
            depends.extend(self._gpudirect_daemons(name, release, k8s_opts))

        account = k8s.core.v1.ServiceAccount(
            f"{name}-training",
            metadata=ObjectMetaArgs(
                name=f"{s.name}-training", namespace=s.namespace, labels=labels(s)
            ),
            automount_service_account_token=False,
            opts=pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=depends[:1])
            ),
        )
        self.workload = TrainingWorkload(
            f"{name}-workload",
            s,
            pod_networking(s, f"{s.name}-scripts"),
            gke_placement(pool),
            account.metadata.name,
            secret_env,
            opts=pulumi.ResourceOptions(parent=self, providers=[provider], depends_on=depends),
        )

        self.cluster = cluster
        self.system_pool = system_pool
        self.node_pool = node_pool
        self.outputs = {
            **stack_outputs(s, cli="kubectl"),
            "clusterName": cluster.name,
            "clusterEndpoint": cluster.endpoint,
            "nodePoolName": node_pool.name,
            "getCredentialsCommand": pulumi.Output.concat(
                "gcloud container clusters get-credentials ",
                cluster.name,
                f" --zone {g.zone} --project {g.project}",
            ),
        }
        self.register_outputs({"clusterName": cluster.name, "nodePoolName": node_pool.name})

    @staticmethod
    def _vpc(
        resource_name: str,
        gcp_name: str,
        g: GcpSettings,
        cidr: str,
        firewall_sources: list[str],
        opts: pulumi.ResourceOptions,
        mtu: int | None = None,
        secondary_ranges: dict[str, str] | None = None,
    ) -> tuple[gcp.compute.Network, gcp.compute.Subnetwork]:
        """A custom-mode VPC with one regional subnet, and a firewall rule allowing all
        TCP/UDP/ICMP between addresses of `firewall_sources`."""
        network = gcp.compute.Network(
            resource_name,
            name=gcp_name,
            project=g.project,
            auto_create_subnetworks=False,
            mtu=mtu,
            opts=opts,
        )
        subnet = gcp.compute.Subnetwork(
            resource_name,
            name=gcp_name,
            project=g.project,
            region=g.region,
            network=network.id,
            ip_cidr_range=cidr,
            # Private nodes reach Google APIs (Artifact Registry, logging) without NAT.
            private_ip_google_access=True,
            secondary_ip_ranges=[
                SubnetworkSecondaryIpRangeArgs(range_name=k, ip_cidr_range=v)
                for k, v in (secondary_ranges or {}).items()
            ]
            or None,
            opts=opts,
        )
        gcp.compute.Firewall(
            f"{resource_name}-internal",
            name=f"{gcp_name}-internal",
            project=g.project,
            network=network.id,
            direction="INGRESS",
            source_ranges=firewall_sources,
            allows=[
                FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                FirewallAllowArgs(protocol="icmp"),
            ],
            opts=opts,
        )
        return network, subnet

    @staticmethod
    def _placement_policy(
        name: str, s: Settings, g: GcpSettings, opts: pulumi.ResourceOptions
    ) -> pulumi.Output[str] | None:
        """A named compact ResourcePolicy when the stack asks for a max distance."""
        if g.placement_max_distance is None:
            return None
        policy = gcp.compute.ResourcePolicy(
            f"{name}-placement",
            name=f"{s.name}-compact",
            project=g.project,
            region=g.region,
            group_placement_policy=ResourcePolicyGroupPlacementPolicyArgs(
                collocation="COLLOCATED", max_distance=g.placement_max_distance
            ),
            opts=opts,
        )
        return policy.name

    @staticmethod
    def _node_config(s: Settings, g: GcpSettings) -> NodePoolNodeConfigArgs:
        accelerator = ACCELERATOR[g.machine_type]
        return NodePoolNodeConfigArgs(
            machine_type=g.machine_type,
            image_type="COS_CONTAINERD",
            oauth_scopes=NODE_OAUTH_SCOPES,
            guest_accelerators=[
                NodePoolNodeConfigGuestAcceleratorArgs(
                    type=accelerator,
                    count=8,  # the machine's GPUs; pods request gpusPerNode of them
                    gpu_driver_installation_config=(
                        NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                            gpu_driver_version="LATEST"
                        )
                    ),
                )
            ],
            gvnic=NodePoolNodeConfigGvnicArgs(enabled=True),
            shielded_instance_config=SHIELDED_NODES,
            taints=[
                NodePoolNodeConfigTaintArgs(
                    key="nvidia.com/gpu", value="present", effect="NO_SCHEDULE"
                )
            ],
            spot=True if g.provisioning == "spot" else None,
            reservation_affinity=(
                NodePoolNodeConfigReservationAffinityArgs(
                    consume_reservation_type="SPECIFIC_RESERVATION",
                    key="compute.googleapis.com/reservation-name",
                    values=[g.reservation or ""],
                )
                if g.provisioning == "reservation"
                else None
            ),
            host_maintenance_policy=(
                NodePoolNodeConfigHostMaintenancePolicyArgs(
                    maintenance_interval=g.maintenance_interval
                )
                if g.maintenance_interval
                else None
            ),
        )

    def _gpudirect_daemons(
        self, name: str, release: GpuDirectRelease, opts: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The NCCL plugin installer and NRI device injector DaemonSets (kube-system).

        Both are vendor node agents that change the host (load kernel modules, bind PCI devices,
        copy libraries, inject device nodes): they need privileged, hostPID and hostNetwork,
        and run only on the A3 nodes, never in the training namespace.
        """
        only_a3 = AffinityArgs(
            node_affinity=node_affinity(
                (NodeRequirement(ACCELERATOR_LABEL, "In", (release.accelerator,)),)
            )
        )
        privileged = SecurityContextArgs(privileged=True)
        # Google's manifests request 150m CPU; the memory request is ours, so they are not
        # scheduled onto a node with no memory left.
        agent_requests = ResourceRequirementsArgs(requests={"cpu": "150m", "memory": "128Mi"})
        installer_init: list[ContainerArgs] = []
        if release.mode == "tcpxo":
            # Binds the aperture PCI devices (1ae0:0084) for the TCPXO LLCM path and loads
            # import-helper, in the host's namespaces (CEA nccl-tcpxo-installer.yaml).
            installer_init.append(
                ContainerArgs(
                    name="pre-installation",
                    image=HOST_TOOLS_IMAGE,
                    security_context=privileged,
                    resources=agent_requests,
                    command=["nsenter", "-at", "1", "--", "sh", "-c", TCPXO_PREINSTALL.read_text()],
                )
            )
        installer_init.append(
            ContainerArgs(
                name=f"nccl-{release.mode}-installer",
                image=release.installer_image,
                security_context=privileged,
                resources=agent_requests,
                volume_mounts=[
                    VolumeMountArgs(name="var-lib", mount_path="/var/lib"),
                    VolumeMountArgs(name="library-dir-host", mount_path="/usr/local"),
                ],
                command=["/bin/sh", "-c"],
                # Google's script (CEA nccl-tcpxo-installer.yaml also makes the entry point
                # executable; nccl-tcpx-installer.yaml does not).
                args=[
                    "set -ex\n"
                    + ("chmod 755 /scripts/container_entry.sh\n" if release.mode == "tcpxo" else "")
                    + "/scripts/container_entry.sh install --install-nccl\n"
                    "mkdir -p /usr/local/nvidia/lib64\n"
                    f"cp -r /var/lib/{release.mode}/lib64/. /usr/local/nvidia/lib64\n"
                    'echo "installation finishes"\n'
                ],
            )
        )
        # The installer's work is done by its init containers; pause keeps the pod alive.
        pause = ContainerArgs(
            name="pause",
            image=PAUSE_IMAGE,
            resources=ResourceRequirementsArgs(
                requests={"cpu": "10m", "memory": "16Mi"}, limits={"cpu": "10m", "memory": "16Mi"}
            ),
            security_context=SecurityContextArgs(
                allow_privilege_escalation=False,
                read_only_root_filesystem=True,
                run_as_non_root=True,
                run_as_user=65535,  # the pause image's nobody user
                capabilities=CapabilitiesArgs(drop=["ALL"]),
            ),
        )
        installer = self._node_agent(
            f"{name}-nccl-{release.mode}-installer",
            f"nccl-{release.mode}-installer",
            only_a3,
            init_containers=installer_init,
            containers=[pause],
            volumes=[
                _host_path("var-lib", "/var/lib"),
                _host_path("library-dir-host", "/home/kubernetes/bin"),
            ],
            opts=opts,
        )
        injector = self._node_agent(
            f"{name}-device-injector",
            "device-injector",
            only_a3,
            init_containers=[],
            containers=[
                ContainerArgs(
                    name="device-injector",
                    image=NRI_INJECTOR_IMAGE,
                    security_context=privileged,
                    resources=agent_requests,
                    volume_mounts=[
                        VolumeMountArgs(name="dev", mount_path="/dev"),
                        VolumeMountArgs(name="nri", mount_path="/var/run/nri"),
                    ],
                )
            ],
            volumes=[_host_path("dev", "/dev"), _host_path("nri", "/var/run/nri")],
            opts=opts,
        )
        return [installer, injector]

    @staticmethod
    def _node_agent(
        resource_name: str,
        app: str,
        affinity: AffinityArgs,
        init_containers: list[ContainerArgs],
        containers: list[ContainerArgs],
        volumes: list[VolumeArgs],
        opts: pulumi.ResourceOptions,
    ) -> k8s.apps.v1.DaemonSet:
        """A vendor node agent DaemonSet in kube-system, in the host's network and PID space."""
        selector = {"k8s-app": app}
        spec = PodSpecArgs(
            priority_class_name="system-node-critical",
            affinity=affinity,
            tolerations=[TolerationArgs(operator="Exists")],
            host_network=True,
            host_pid=True,
            # Neither agent talks to the Kubernetes API.
            automount_service_account_token=False,
            security_context=PodSecurityContextArgs(
                seccomp_profile=SeccompProfileArgs(type="RuntimeDefault")
            ),
            init_containers=init_containers or None,
            containers=containers,
            volumes=volumes,
        )
        return k8s.apps.v1.DaemonSet(
            resource_name,
            metadata=ObjectMetaArgs(
                name=app,
                namespace="kube-system",
                labels=selector,
                annotations=skip_annotations(NODE_AGENT_EXCEPTIONS),
            ),
            spec=DaemonSetSpecArgs(
                selector=LabelSelectorArgs(match_labels=selector),
                template=PodTemplateSpecArgs(metadata=ObjectMetaArgs(labels=selector), spec=spec),
            ),
            opts=opts,
        )


def _host_path(name: str, path: str) -> VolumeArgs:
    return VolumeArgs(name=name, host_path=HostPathVolumeSourceArgs(path=path))
