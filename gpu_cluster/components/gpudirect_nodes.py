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
from gpu_cluster.components.workload import node_affinity
from gpu_cluster.plan.gpudirect import (
    HOST_TOOLS_IMAGE,
    NRI_INJECTOR_IMAGE,
    PAUSE_IMAGE,
    GpuDirectRelease,
)
from gpu_cluster.plan.netmodes import gke_network_objects
from gpu_cluster.plan.podspec import NodeRequirement
from gpu_cluster.plan.scan_exceptions import NODE_AGENT_EXCEPTIONS, skip_annotations
from gpu_cluster.plan.shipped import SCRIPTS_PATH

# Node label GKE sets on every GPU node.
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
# Node-side TCPXO setup script, run in the host's namespaces by the installer DaemonSet.
TCPXO_PREINSTALL = SCRIPTS_PATH / "tcpxo-preinstall.sh"


@dataclass(frozen=True)
class GpuNicNetwork:
    """One GPU NIC's VPC and subnet by GCP name; `subnet`, when given, is created first."""

    vpc_name: str
    subnet_name: str
    subnet: pulumi.Resource | None = None


@dataclass(frozen=True)
class GpuDirectNodesArgs:
    """gpu_nics: the GPU NICs in NIC order (GKENetworkParamSet and Network gpu<N>... per NIC).
    release: the pinned GPUDirect release whose node agents run on the GPU nodes, or None for
    the network objects only."""

    gpu_nics: Sequence[GpuNicNetwork]
    release: GpuDirectRelease | None


class GpuDirectNodes(pulumi.ComponentResource):
    """Pods' GPU NIC networks and the node agents; `ready` lists what pods must wait for."""

    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: GpuDirectNodesArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:gpudirect_nodes:GpuDirectNodes", name, None, opts)
        self.ready = []
        for index, nic in enumerate(args.gpu_nics, start=1):
            for manifest in gke_network_objects(index, nic.vpc_name, nic.subnet_name):
                self.ready.append(
                    ManifestResource(
                        f"{name}-{manifest['kind'].lower()}-{index}",
                        manifest,
                        pulumi.ResourceOptions(
                            parent=self, depends_on=[nic.subnet] if nic.subnet else None
                        ),
                    )
                )
        if args.release is not None:
            self.ready.extend(self._node_agents(name, args.release))
        self.register_outputs({})

    def _node_agents(self, name: str, release: GpuDirectRelease) -> list[pulumi.Resource]:
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
        )
        return [installer, injector]

    def _node_agent(
        self,
        resource_name: str,
        app: str,
        affinity: AffinityArgs,
        init_containers: list[ContainerArgs],
        containers: list[ContainerArgs],
        volumes: list[VolumeArgs],
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
            opts=pulumi.ResourceOptions(parent=self),
        )


def _host_path(name: str, path: str) -> VolumeArgs:
    return VolumeArgs(name=name, host_path=HostPathVolumeSourceArgs(path=path))
