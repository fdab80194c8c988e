"""The network modes' own sections: `rdma` (OpenShift) and its NICs, `tcp`, and NCCL's common
settings."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field, model_validator

from gpu_cluster.config.base import Section
from gpu_cluster.config.reads import ReadWhen
from gpu_cluster.config.values import (
    Cidr,
    DnsLabel,
    HostInterface,
    Interface,
    PrivateCidr,
    ResourceName,
    Subdomain,
)

if TYPE_CHECKING:  # the predicates get the whole config
    pass


_NAD_FIELD = ReadWhen(
    lambda s: s.rdma is not None and s.rdma.network_attachments != "reference",
    "rdma.networkAttachments is 'create' or 'adopt' (they describe the "
    "NetworkAttachmentDefinition, which a stack that references it does not render)",
)
_MACHINECONFIG = ReadWhen(
    lambda s: s.rdma is not None and s.rdma.memlock == "machineconfig",
    "rdma.memlock is 'machineconfig'",
)


# An SR-IOV VF flag as a SriovNetwork spells it (k8snetworkplumbingwg/sriov-network-operator
# api/v1/sriovnetwork_types.go at 249e200: spoofChk and trust, enum on/off).
OnOff = Literal["on", "off"]


class NicSettings(Section):
    """One RDMA NIC as the pod sees it (net1..netN) and how Multus attaches it."""

    interface: Interface
    """Pod interface (`net1`...): an interface name of 1..15 letters, digits, `_`, `.`, `-`."""
    network: Subdomain  # NetworkAttachmentDefinition name (a custom resource's: DNS subdomain)
    """NetworkAttachmentDefinition name (a DNS-1123 subdomain)."""
    flavour: Literal["sriov", "macvlan", "host-device"]
    """CNI plugin."""
    resource: ResourceName  # device-plugin resource the pod requests for this NIC
    """Device-plugin resource, an extended resource `<domain>/<name>`, not `kubernetes.io/`:
    one of its own per sriov or host-device NIC (`openshift.io/eno5np0rdma`,
    `nvidia.com/hostdev_eno5np0`); macvlan NICs may share one (`rdma/rdma_shared_device_a`).
    """
    # The NetworkAttachmentDefinition's IPAM range and routes: required of a stack that creates or
    # adopts the NADs, unread when it only references them (rules.py).
    subnet: Annotated[PrivateCidr | None, _NAD_FIELD] = None
    """Whereabouts range, a private CIDR (one per NIC, non-overlapping, an address per pod);
    required unless `rdma.networkAttachments: reference` (a referenced NAD has its own).
    """
    routes: Annotated[tuple[Cidr, ...], _NAD_FIELD] = ()
    """Extra routes via this NIC, a list of CIDRs (not with `networkAttachments: reference`)."""
    # Host interface for macvlan (its parent) or host-device (the device moved into the pod).
    master: Annotated[HostInterface | None, _NAD_FIELD] = None
    """Parent host interface (any name the kernel allows): macvlan only, required for it unless
    `networkAttachments: reference` (sriov and host-device get the allocated device from
    `resource`).
    """
    # The VF's spoof check and trust mode, as a SriovNetwork's spoofChk and trust. Unset leaves
    # them out of the NAD, as the operator renders an unset field, and sriov-cni then leaves the
    # VF's flags as they are (k8snetworkplumbingwg/sriov-network-operator api/v1/helper.go
    # RenderNetAttDef at 249e200; k8snetworkplumbingwg/sriov-cni pkg/sriov/sriov.go at 1b7acc5).
    spoof_chk: Annotated[OnOff | None, _NAD_FIELD] = None
    """SR-IOV only: the VF's spoof check (`on`, `off`), as a SriovNetwork's `spoofChk`; unset:
    left as the VF has it. `off` lets the pod send from addresses that are not its own.
    """
    trust: Annotated[OnOff | None, _NAD_FIELD] = None
    """SR-IOV only: the VF's trust mode (`on`, `off`), as a SriovNetwork's `trust`; unset: left as
    the VF has it. `on` lets the pod change its MAC address and turn on promiscuous mode.
    """
    # mlx5 device behind the interface; None = detected at pod start (the default: SR-IOV VF
    # device names follow VF allocation, so a pin can go stale).
    hca: str | None = Field(default=None, pattern=r"^[a-z0-9_]+$")
    """RDMA device behind the interface, `mlx5_N` (all NICs or none); unset: detected. A pin that
    does not match what the pod has stops the pod, naming the device found.
    """

    @model_validator(mode="after")
    def _master_only_for_macvlan(self) -> NicSettings:
        if self.flavour != "macvlan" and self.master is not None:
            # Multus hands sriov and host-device the device the kubelet allocated for
            # 'resource'; a fixed device would override it (containernetworking/plugins
            # host-device.go getLink checks `device` first).
            raise ValueError(
                f"flavour {self.flavour!r} takes its device from 'resource'; remove 'master'"
            )
        for key, value in (("spoofChk", self.spoof_chk), ("trust", self.trust)):
            if value is not None and self.flavour != "sriov":
                raise ValueError(
                    f"{key!r} sets a flag of an SR-IOV VF; flavour {self.flavour!r} has none: "
                    f"remove {key!r}"
                )
        return self


# How RDMA memory registration gets enough locked memory (see RdmaSettings.memlock).
MemlockStrategy = Literal["root-ipc-lock", "machineconfig", "preconfigured"]
# What the program does about an object that may already exist in the cluster.
ExistingObject = Literal["create", "adopt", "reference"]


class RdmaSettings(Section):
    """RoCE over Multus-attached NICs (networkMode: rdma)."""

    nics: tuple[NicSettings, ...] = Field(min_length=1, max_length=16)
    """The RDMA NICs, in pod order (1..16); required in `rdma` mode."""
    # The interfaces' MTU is the node's: an SR-IOV VF's is the SriovNetworkNodePolicy's (sriov-cni
    # ignores a NAD's mtu), a macvlan's its parent's unless the NAD sets a smaller one. So it is a
    # fact only when stated: None = not checked, macvlan NADs inherit the parent's.
    mtu: int | None = Field(default=None, ge=1280, le=9216)
    """MTU each RDMA interface must have: preflight then checks it, and macvlan NADs set it (at most
    the parent interface's). Unset: preflight only reports each interface's MTU; macvlan
    interfaces get their parent's, SR-IOV VFs the SriovNetworkNodePolicy `mtu` (never a NAD's).
    """
    # Pod interface NCCL uses for bootstrap (the cluster network, not an RDMA NIC).
    bootstrap_interface: Interface = "eth0"
    """`NCCL_SOCKET_IFNAME` for bootstrap, matched exactly (`=eth0`); an interface name as
    `rdma.nics[].interface`.
    """
    # None: NCCL >= 2.21 picks the GID ('nccl') when every NIC has its own GID table (sriov,
    # host-device); detected per pod ('auto') when a macvlan shares an HCA, where NCCL's pick
    # (lowest RoCE v2 IPv4 index) can be another pod's or the host's GID. Or a fixed index.
    gid_index: Literal["auto", "nccl"] | Annotated[int, Field(ge=0, le=255)] | None = None
    """Default `nccl`; `auto` if a NIC is macvlan. `nccl`: left to NCCL >= 2.21 (each SR-IOV VF /
    host-device NIC has its own GID table); `auto`: detected per pod by the interface's own IPv4
    address (a macvlan's shared HCA also lists the host's and other pods' GIDs); or a fixed
    index.
    """
    # root-ipc-lock: only the training container runs as UID 0 with IPC_LOCK (own SCC);
    # machineconfig: a CRI-O drop-in raises the default memlock on the GPU MachineConfigPool
    # (cluster-admin; every node of the pool reboots); preconfigured: the nodes already do.
    memlock: MemlockStrategy = "root-ipc-lock"
    """How verbs memory registration gets enough locked memory; see docs/operations.md, "OpenShift:
    RDMA memory locking".
    """
    # MachineConfigPool of the GPU nodes (memlock: machineconfig).
    machine_config_pool: Annotated[DnsLabel, _MACHINECONFIG] = "worker"
    """MachineConfigPool of the GPU nodes (`memlock: machineconfig`). Unset it is `worker`,
    every worker node, with a warning: set a pool of the GPU nodes only (or `worker` to keep it).
    """
    # The memlock MachineConfig is cluster-wide, one per pool, shared by every stack on it
    # (memlock: machineconfig). create: this stack creates and owns it; adopt: it exists (made
    # by a stack since destroyed, or by hand) and this stack takes it over; reference: another
    # stack or the platform team owns it and this one only relies on it. A created or adopted
    # one is kept on `pulumi destroy`: removing it reboots the pool under every other stack.
    machine_config: Annotated[ExistingObject, _MACHINECONFIG] = "create"
    """The pool's memlock MachineConfig (`memlock: machineconfig`, one per pool for every stack on
    it): create and own it, import an existing one and own it, or rely on another owner's; never
    deleted by the stack (see docs/operations.md, "OpenShift: RDMA memory locking").
    """
    # NetworkAttachmentDefinitions: create them, adopt existing ones (Pulumi import) or use
    # existing ones by name without managing them.
    network_attachments: ExistingObject = "create"
    """The NADs: create them, import existing ones, or use existing ones by name."""
    # NCCL_MIN_CTAS (since NCCL 2.17, replacing NCCL_MIN_NCHANNELS; up to 64 since 2.25, 32
    # before: NVIDIA/nccl docs/userguide/source/env.rst at 5067397); None = NCCL's default.
    min_ctas: int | None = Field(default=None, ge=1, le=64)
    """`NCCL_MIN_CTAS`, the minimum number of CTAs (channels) per collective (NCCL >= 2.17;
    above 32 needs NCCL >= 2.25); unset: NCCL's default.
    """
    # Documented NCCL_NET_GDR_LEVEL values; None lets NCCL decide from the topology.
    gdr_level: Literal["LOC", "PIX", "PXB", "PHB", "SYS"] | None = None
    """`NCCL_NET_GDR_LEVEL`; unset: NCCL decides from the topology. A level but `LOC` without
    `verify.requireGdr` is warned about: nothing then checks that GPUDirect RDMA is there."""
    cross_nic: Literal[0, 1, 2] = 0
    """`NCCL_CROSS_NIC`."""
    ib_timeout: int | None = Field(default=None, ge=1, le=31)
    """`NCCL_IB_TIMEOUT`; unset: NCCL's default."""
    traffic_class: int | None = Field(default=None, ge=0, le=255)
    """`NCCL_IB_TC`; unset: NCCL's default."""
    service_level: int | None = Field(default=None, ge=0, le=15)
    """`NCCL_IB_SL`; unset: NCCL's default."""
    qps_per_connection: int | None = Field(default=None, ge=1, le=128)
    """`NCCL_IB_QPS_PER_CONNECTION`; unset: NCCL's default."""

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "minNchannels" in data:
            raise ValueError(
                "rdma.minNchannels was replaced by rdma.minCtas: NCCL 2.17 deprecated "
                "NCCL_MIN_NCHANNELS for NCCL_MIN_CTAS; rename the key (same value, 1..64)"
            )
        return data

    @property
    def gid(self) -> Literal["auto", "nccl"] | int:
        """gidIndex with its default resolved (see the field's comment)."""
        if self.gid_index is not None:
            return self.gid_index
        return "auto" if any(nic.flavour == "macvlan" for nic in self.nics) else "nccl"


class TcpSettings(Section):
    """Plain-Ethernet NCCL (networkMode: tcp)."""

    socket_ifname: str = "^lo,docker"
    """`NCCL_SOCKET_IFNAME` in `tcp` mode."""
    # NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD must stay <= 64 (NCCL env docs).
    socket_nthreads: int | None = Field(default=None, ge=1, le=16)
    """NCCL socket threads (`NCCL_SOCKET_NTHREADS`; its product with `tcp.nsocksPerThread` <= 64);
    unset: NCCL's default.
    """
    nsocks_per_thread: int | None = Field(default=None, ge=1, le=64)
    """Sockets per thread (`NCCL_NSOCKS_PERTHREAD`; its product with `tcp.socketNthreads` <= 64);
    unset: NCCL's default.
    """


class NcclSettings(Section):
    debug: Literal["VERSION", "WARN", "INFO", "TRACE"] = "WARN"
    """`NCCL_DEBUG`."""
