"""GPUDirect on GKE nodes: the GPU NICs' network objects and the vendor's node agents (NCCL
plugin installer, NRI device injector). Vendor facts follow Google's published setup (sources
beside each value; tests/vendor/ keeps them as test data)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
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
from gpu_cluster.components.workload.pod_args import node_affinity
from gpu_cluster.config.netmodes.gke_rdma import MODE as GIB
from gpu_cluster.facts.gpudirect import (
    DEVICE_INJECTOR_APP,
    GIB_HOST_DIR,
    HOST_LIB_DIR,
    HOST_TOOLS_IMAGE,
    NODE_AGENT_NAMESPACE,
    NRI_INJECTOR_IMAGE,
    PAUSE_IMAGE,
    GibRelease,
    GpuDirectRelease,
    installer_app,
)
from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.plan.netmodes.gke_networks import gke_network_objects, gpu_network_name
from gpu_cluster.plan.podspec import IDLE_RESOURCES, NodeRequirement
from gpu_cluster.plan.scan_exceptions import NODE_AGENT_EXCEPTIONS, skip_annotations
from gpu_cluster.plan.shipped import SCRIPTS_PATH

# Node label GKE sets on every GPU node.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# Node-side TCPXO setup script, run in the host's namespaces by the installer DaemonSet.
TCPXO_PREINSTALL = SCRIPTS_PATH / "tcpxo-preinstall.sh"


# What TCPXO's installer manifest runs before its entry point (CEA nccl-tcpxo-installer.yaml).
_CHMOD_ENTRY = "chmod 755 /scripts/container_entry.sh\n"


@dataclass(frozen=True)
class GpuNicNetwork:
    """One GPU NIC's VPC and subnet by GCP name; `subnet`, when given, is created first.
    network_name: its Network object's name (default vpc<N>); device_mode: RDMA for an RDMA
    NIC, NetDevice otherwise."""

    vpc_name: str
    subnet_name: str
    subnet: pulumi.Resource | None = None
    network_name: str | None = None
    device_mode: str = "NetDevice"


@dataclass(frozen=True)
class GpuDirectNodesArgs:
    """gpu_nics: the GPU NICs in NIC order (GKENetworkParamSet and Network gpu<N>... per NIC).
    release: the pinned GPUDirect (TCPX/TCPXO) or gIB release whose node agents run on the GPU
    nodes, or None for the network objects only. agents_after: what the node agents wait for
    (the GPU node pool); the network objects wait for no node."""

    gpu_nics: Sequence[GpuNicNetwork]
    release: GpuDirectRelease | GibRelease | None
    agents_after: Sequence[pulumi.Resource] = ()


class GpuDirectNodes(pulumi.ComponentResource):
    """Pods' GPU NIC networks and the node agents; `ready` lists what pods must wait for."""

    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: GpuDirectNodesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:gpudirect_nodes:GpuDirectNodes", name, None, opts)
        self.ready = []
        for index, nic in enumerate(args.gpu_nics, start=1):
            network = nic.network_name or gpu_network_name(index)
            suffix = nic.network_name or str(index)
            for manifest in gke_network_objects(
                network, nic.vpc_name, nic.subnet_name, nic.device_mode
            ):
                self.ready.append(
                    ManifestResource(
                        f"{name}-{manifest['kind'].lower()}-{suffix}",
                        manifest,
                        pulumi.ResourceOptions(
                            parent=self, depends_on=[nic.subnet] if nic.subnet else None
                        ),
                    )
                )
        # The agents wait for the GPU nodes: the Kubernetes provider's DaemonSet await is
        # kstatus's (pulumi/pulumi-kubernetes provider/pkg/await/daemonset.go), which calls a
        # DaemonSet with no matching node (desiredNumberScheduled 0) ready at once
        # (kubernetes-sigs/cli-utils pkg/kstatus/status/core.go daemonsetConditions). Created
        # before the pool they would prove nothing, and the training pods would race them onto
        # the new nodes (the NRI injector must run before a pod's containers are created to
        # give them their devices). After the pool, ready means on every GPU node.
        after = pulumi.ResourceOptions(parent=self, depends_on=list(args.agents_after))
        if isinstance(args.release, GibRelease):
            self.ready.append(self._gib_installer(name, args.release, after))
        elif args.release is not None:
            self.ready.extend(self._node_agents(name, args.release, after))
        self.register_outputs({})

    def _node_agents(
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
        if release.installer_prepares_host:
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
                    + (_CHMOD_ENTRY if release.installer_prepares_host else "")
                    + "/scripts/container_entry.sh install --install-nccl\n"
                    "mkdir -p /usr/local/nvidia/lib64\n"
                    f"cp -r /var/lib/{release.mode}/lib64/. /usr/local/nvidia/lib64\n"
                    'echo "installation finishes"\n'
                ],
            )
        )
        pause = _pause()
        installer = self._node_agent(
            f"{name}-{installer_app(release.mode)}",
            installer_app(release.mode),
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
            f"{name}-{DEVICE_INJECTOR_APP}",
            DEVICE_INJECTOR_APP,
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

    def _gib_installer(
        self, name: str, release: GibRelease, opts: pulumi.ResourceOptions
    ) -> k8s.apps.v1.DaemonSet:
        """Google's gIB installer (CEA gpudirect-rdma/nccl-rdma-installer.yaml as of the
        release, see gpu_cluster/facts/gpudirect.py): copies the plugin, its NCCL, tuner
        configs and set_nccl_env.sh to the node. No device injector: the RDMA NICs reach pods
        as networks."""
        on_rdma_nodes = AffinityArgs(
            node_affinity=node_affinity(
                (
                    NodeRequirement(
                        ACCELERATOR_LABEL,
                        "In",
                        tuple(MACHINES[m].accelerator for m in GIB.machines()),
                    ),
                )
            )
        )
        return self._node_agent(
            f"{name}-{GIB.node_agent_apps[0]}",
            GIB.node_agent_apps[0],
            on_rdma_nodes,
            init_containers=[_gib_installer_container(release)],
            containers=[_pause()],
            volumes=[
                _host_path("library-dir-host", HOST_LIB_DIR, "DirectoryOrCreate"),
                _host_path("gib", GIB_HOST_DIR),
            ],
            opts=opts,
        )

    def _node_agent(
        self,
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
                namespace=NODE_AGENT_NAMESPACE,
                labels=selector,
                annotations=skip_annotations(NODE_AGENT_EXCEPTIONS),
            ),
            spec=DaemonSetSpecArgs(
                selector=LabelSelectorArgs(match_labels=selector),
                template=PodTemplateSpecArgs(metadata=ObjectMetaArgs(labels=selector), spec=spec),
            ),
            opts=opts,
        )


def _gib_installer_container(release: GibRelease) -> ContainerArgs:
    """Privileged because it writes into the host's driver directory (Google's manifest)."""
    host_lib = "/usr/local" + HOST_LIB_DIR
    host_gib = "/usr/local" + GIB_HOST_DIR
    install = " ".join(("/scripts/container_entry.sh", "install", *release.install_flags))
    return ContainerArgs(
        name="nccl-rdma-installer",
        image=release.installer_image,
        security_context=SecurityContextArgs(privileged=True),
        # Google's 150m CPU request; the memory request is ours (see _node_agents).
        resources=ResourceRequirementsArgs(requests={"cpu": "150m", "memory": "128Mi"}),
        volume_mounts=[
            VolumeMountArgs(name="library-dir-host", mount_path=host_lib),
            VolumeMountArgs(name="gib", mount_path=host_gib),
        ],
        command=["/bin/sh", "-c"],
        args=[
            "set -ex\n"
            f"{install}\n"
            f"cp -r /var/lib/gib/lib64/. {host_lib}\n"
            f"cp -r /var/lib/gib/. {host_gib}\n"
            'echo "installation finishes"\n'
        ],
    )


def _pause() -> ContainerArgs:
    """The installers' work is done by their init containers; pause keeps the pod alive."""
    return ContainerArgs(
        name="pause",
        image=PAUSE_IMAGE,
        resources=ResourceRequirementsArgs(requests=IDLE_RESOURCES, limits=IDLE_RESOURCES),
        security_context=SecurityContextArgs(
            allow_privilege_escalation=False,
            read_only_root_filesystem=True,
            run_as_non_root=True,
            run_as_user=65535,  # the pause image's nobody user
            capabilities=CapabilitiesArgs(drop=["ALL"]),
        ),
    )


def _host_path(name: str, path: str, kind: str | None = None) -> VolumeArgs:
    return VolumeArgs(name=name, host_path=HostPathVolumeSourceArgs(path=path, type=kind))
