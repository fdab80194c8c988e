"""GPUDirect-TCPX and -TCPXO (A3 High, A3 Mega): a pinned release's NCCL plugin installer, RxDM
sidecar and settings (facts/gpudirect.py RELEASES), one VPC per GPU NIC. tcpx.py and tcpxo.py
are its two modes; their pods are plan/netmodes/gpudirect_tcp.py."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes.gke_modes import GkeGpuDirectMode
from gpu_cluster.facts.gpudirect import (
    DEVICE_INJECTOR_APP,
    RELEASES,
    GpuDirectRelease,
    gke_minor,
    installer_app,
    release_for,
    releases_for,
)

if TYPE_CHECKING:
    from gpu_cluster.config.schema import Settings
    from gpu_cluster.config.sections.gcp import GcpSettings


class GpuDirectTcpMode(GkeGpuDirectMode):
    # RxDM runs as a native sidecar of the training pod.
    native_sidecars = True
    nics_from_release = True
    # The line rate of the machine's GPU NICs, GB/s (facts/fabric.py).
    line_rate_gbps: float

    def __init__(self) -> None:
        # The plugin installer, and the NRI injector that gives RxDM its devices.
        self.node_agent_apps = (installer_app(self.name), DEVICE_INJECTOR_APP)

    def gke_version_problems(self, s: Settings, gcp: GcpSettings, minor: int) -> list[str]:
        return release_problems(self.name, gcp, minor)

    def release(self, s: Settings) -> GpuDirectRelease:
        return gpudirect_release(s)

    def nccl_env(self, s: Settings) -> dict[str, str]:
        """The pinned release's settings: TCPX's list, or TCPXO's profile and its directory."""
        return dict(self.release(s).nccl_env)

    def gpu_nic_count(self, s: Settings) -> int:
        return self.release(s).nic_count

    def fabric_gbps(self, s: Settings) -> float | None:
        return self.line_rate_gbps


def gpudirect_release(s: Settings) -> GpuDirectRelease:
    """The GPUDirect release (TCPX or TCPXO) a tcpx or tcpxo stack runs (validated by the
    rules)."""
    assert s.gcp is not None
    gcp = s.gcp
    return release_for(s.network_mode, gcp.gpudirect_release, gke_minor(gcp.min_master_version))


def release_problems(mode: str, gcp: GcpSettings, minor: int) -> list[str]:
    allowed = [k for k, r in RELEASES.items() if r.mode == mode]
    name = gcp.gpudirect_release
    if name is not None:
        release = RELEASES.get(name)
        if release is None or release.mode != mode:
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is not a known {mode} release; "
                f"allowed: {', '.join(map(repr, allowed))}"
            ]
        if not release.serves_gke_minor(minor):
            fits = " or ".join(map(repr, releases_for(mode, minor))) or "another GKE minor"
            return [
                f"gpu-cluster:gcp.gpudirectRelease = {name!r} is published for GKE "
                f"{release.gke_minors_text()}, not for gcp.minMasterVersion "
                f"{gcp.min_master_version!r}; use {fits}"
            ]
    elif not releases_for(mode, minor):
        return [
            f"gpu-cluster:gcp.minMasterVersion = {gcp.min_master_version!r}: no {mode} release "
            f"is published for GKE 1.{minor}; releases: "
            + ", ".join(f"{n} (GKE {RELEASES[n].gke_minors_text()})" for n in allowed)
        ]
    return []
