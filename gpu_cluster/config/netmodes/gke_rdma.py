"""`rdma` on GKE: GPUDirect RDMA with Google's gIB NCCL plugin on A3 Ultra and A4 (8 RoCE NICs
in one VPC, a second gVNIC with its own). Its pod is plan/netmodes/gke_rdma.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes.gke_modes import GkeGpuDirectMode, older_than
from gpu_cluster.facts.fabric import RDMA_FABRIC_GBPS
from gpu_cluster.facts.gpudirect import (
    GIB_RELEASES,
    RDMA_NIC_COUNT,
    GibRelease,
    gib_releases_for,
    gke_minor,
    installer_app,
)
from gpu_cluster.facts.machines import MACHINES

if TYPE_CHECKING:
    from gpu_cluster.config.schema import Settings
    from gpu_cluster.config.sections.gcp import GcpSettings


class GkeRdma(GkeGpuDirectMode):
    key = "gke_rdma"
    name = "rdma"
    # On GKE rdma runs through gIB: NCCL's own IB transport there would be a silent fallback.
    transport = "gib"
    # The gIB installer; no device injector: the RDMA NICs reach pods as networks.
    node_agent_apps = (installer_app("rdma"),)

    def gke_version_problems(self, s: Settings, gcp: GcpSettings, minor: int) -> list[str]:
        out = _release_problems(gcp, minor)
        floor = MACHINES[gcp.machine_type].rdma_min_gke
        if floor is not None and older_than(gcp.min_master_version, floor):
            out.append(
                f"gpu-cluster:gcp.minMasterVersion = {gcp.min_master_version!r} is older than "
                f"GPUDirect RDMA's minimum on {gcp.machine_type}: use {floor} or newer"
            )
        return out

    def release(self, s: Settings) -> GibRelease:
        """The gIB release the stack runs (validated by the rules)."""
        assert s.gcp is not None
        name = s.gcp.gpudirect_release
        return GIB_RELEASES[name or gib_releases_for(gke_minor(s.gcp.min_master_version))[-1]]

    def nccl_env(self, s: Settings) -> dict[str, str]:
        """The pinned gIB release's script, and what Google's workloads on the machine export
        after it."""
        assert s.gcp is not None
        return self.release(s).env_for(MACHINES[s.gcp.machine_type])

    def gpu_nic_count(self, s: Settings) -> int:
        return 1  # the second gVNIC

    def rdma_nic_count(self, s: Settings) -> int:
        return RDMA_NIC_COUNT

    def fabric_gbps(self, s: Settings) -> float | None:
        return RDMA_FABRIC_GBPS


def _release_problems(gcp: GcpSettings, minor: int) -> list[str]:
    name = gcp.gpudirect_release
    if name is not None:
        release = GIB_RELEASES.get(name)
        if release is None:
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is not a known gIB (rdma) release; "
                f"allowed: {', '.join(map(repr, GIB_RELEASES))}"
            ]
        if not release.serves_gke_minor(minor):
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is published for GKE "
                f"{release.gke_minors_text()}, not for gcp.minMasterVersion "
                f"{gcp.min_master_version!r}"
            ]
    elif not gib_releases_for(minor):
        return [
            f"gpu-cluster:gcp.minMasterVersion = {gcp.min_master_version!r}: no gIB release is "
            f"published for GKE 1.{minor}; releases: "
            + ", ".join(f"{n} (GKE {r.gke_minors_text()})" for n, r in GIB_RELEASES.items())
        ]
    return []


MODE = GkeRdma()
