"""What GKE's GPUDirect modes share: each runs on the machines whose record names it
(facts/machines.py), whole, and holds the fabric check to the machine's floor."""

from __future__ import annotations

from gpu_cluster.config.netmodes.base import ModePlugin
from gpu_cluster.facts.gpudirect import gke_version_key
from gpu_cluster.facts.machines import machines_for


class GkeGpuDirectMode(ModePlugin):
    platforms = ("gke",)
    reads_release = True
    needs_google_plugin = True

    def machines(self) -> tuple[str, ...]:
        return machines_for(self.name)


def older_than(version: str, floor: str) -> bool:
    """Whether a minMasterVersion is older than an exact GKE version; "1.N" stands for the
    newest patch of 1.N, so only a minor below the floor's is older."""
    exact = version if "-gke." in version else f"{version}.999-gke.999999999"
    return gke_version_key(exact) < gke_version_key(floor)
