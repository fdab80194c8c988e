"""What a network mode is to the program: the base every mode's plug-in extends.

A mode is one value of `networkMode` on one or more platforms (`rdma` is two modes: Multus RoCE
on OpenShift, gIB on GKE). Its plug-in, one module in this package, says what the stack config
needs of it (rules, the keys it reads, its GPUDirect release), the NCCL environment of the
training container, the GKE node agents and NICs it needs, and what the fabric check holds it
to. What it adds to the pod beyond its environment (sidecars, networks, volumes) needs the
plan layer's pod types, so that part is registered beside them (plan/netmodes/). The defaults
here are those of a mode that needs nothing: NCCL over the pod network.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.facts.gpudirect import GibRelease, GpuDirectRelease

if TYPE_CHECKING:  # the schema reads the registry: the types only
    from gpu_cluster.config.schema import Settings
    from gpu_cluster.config.sections.gcp import GcpSettings
    from gpu_cluster.config.sections.network import RdmaSettings


class ModePlugin:
    """One network mode's plug-in: override what the mode has."""

    # The registry's key, unique: the mode's module name.
    key: str
    # The `networkMode` value that selects it, and the platforms it serves that value on.
    name: str
    platforms: tuple[str, ...]
    # The transport the fabric check expects, as scripts/allreduce_check.py names it.
    transport: str
    # Whether its pod runs native sidecars (they need Kubernetes NATIVE_SIDECAR_MINOR).
    native_sidecars = False
    # Whether the stack reads gcp.gpudirectRelease (the mode runs a GPUDirect release).
    reads_release = False
    # Whether its GPU NIC count comes from the release (not countable while it is in question).
    nics_from_release = False
    # Whether NCCL needs Google's net plugin (an image that selects another one is warned of).
    needs_google_plugin = False
    # Whether the launchers run preflight.sh unless verify.preflight says otherwise.
    preflight_by_default = False
    # The stack's own section this mode reads (`tcp`, `rdma`), kept dormant under other modes.
    section: str | None = None
    # The node agents' DaemonSets (kube-system, by `k8s-app`) it needs on GKE GPU nodes.
    node_agent_apps: tuple[str, ...] = ()

    def machines(self) -> tuple[str, ...]:
        """The GKE machine types it runs on (facts/machines.py), each a whole machine whose
        fabric floor the check holds it to; () where any node serves."""
        return ()

    def problems(self, s: Settings) -> list[str]:
        """What the stack must also set for this mode, before any other rule runs."""
        return []

    def gke_version_problems(self, s: Settings, gcp: GcpSettings, minor: int) -> list[str]:
        """GKE versions and releases this mode needs (minor: gcp.minMasterVersion's)."""
        return []

    def nccl_env(self, s: Settings) -> dict[str, str]:
        """The NCCL (and related) variables of the training container, but NCCL_DEBUG."""
        return {}

    def release(self, s: Settings) -> GpuDirectRelease | GibRelease | None:
        """The GPUDirect release whose node agents and settings a GKE stack runs."""
        return None

    def gpu_nic_count(self, s: Settings) -> int:
        """GKE GPU NICs (or second gVNIC) with a VPC each."""
        return 0

    def rdma_nic_count(self, s: Settings) -> int:
        """GKE RDMA NICs, each with a subnet of the one RoCE VPC."""
        return 0

    def fabric_gbps(self, s: Settings) -> float | None:
        """The line rate of the NICs NCCL uses, GB/s; None: the pod network's, unknown."""
        return None

    def rdma(self, s: Settings) -> RdmaSettings | None:
        """The `rdma` section when this mode reads it."""
        return None

    def line_rate_interfaces(self, s: Settings) -> tuple[str, ...]:
        """Pod interfaces whose link speeds give the fabric check's floor where no floor is
        known; () where one is."""
        return ()
