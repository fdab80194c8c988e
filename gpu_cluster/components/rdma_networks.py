"""The RDMA NICs' Multus NetworkAttachmentDefinitions (SR-IOV, macvlan or host-device)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from gpu_cluster.components.k8s_objects import ManifestResource
from gpu_cluster.components.namespace import adopted, taken_over
from gpu_cluster.config.sections.network import NicSettings, RdmaSettings
from gpu_cluster.plan.netmodes.openshift_rdma import network_attachment


@dataclass(frozen=True)
class RdmaNetworksArgs:
    """namespace: where the attachments live. rdma: the NICs and how to attach them
    (gpu_cluster.plan.netmodes.openshift_rdma.network_attachment). adopt: import attachments
    that exist instead of creating them. after: what they wait for (the namespace)."""

    namespace: str
    rdma: RdmaSettings
    adopt: bool = False
    after: Sequence[pulumi.Resource] = ()


class RdmaNetworks(pulumi.ComponentResource):
    """One NetworkAttachmentDefinition per RDMA NIC, named as the NIC's network."""

    attachments: list[pulumi.Resource]

    def __init__(
        self, name: str, args: RdmaNetworksArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:rdma_networks:RdmaNetworks", name, None, opts)
        a = args
        child = pulumi.ResourceOptions(parent=self, depends_on=list(a.after))

        def attachment(nic: NicSettings) -> ManifestResource:
            manifest = network_attachment(nic, a.rdma, a.namespace)
            resource = f"{name}-nad-{nic.network}"
            if not a.adopt:
                return ManifestResource(resource, manifest, child)
            adopt = pulumi.ResourceOptions.merge(child, adopted(a.namespace, nic.network))
            return ManifestResource(resource, taken_over(manifest), adopt)

        self.attachments = [attachment(nic) for nic in a.rdma.nics]
        self.register_outputs({"networks": [nic.network for nic in a.rdma.nics]})
