"""The network modes, found through NETWORK_MODES: one plug-in module each in this package
(base.py says what a plug-in contributes), and the pod parts of those that add more than
environment in plan/netmodes/. docs/development.md, "Add a network mode", says how to add one.

Nothing outside the plug-ins asks which mode a stack runs: it asks the stack's plug-in
(`mode_of`) for what it needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_cluster.config.netmodes import gke_rdma, openshift_rdma, tcp, tcpx, tcpxo
from gpu_cluster.config.netmodes.base import ModePlugin

if TYPE_CHECKING:
    from gpu_cluster.config.schema import Settings

# By key, in the order the schema lists their names and each platform's allowed modes.
NETWORK_MODES: dict[str, ModePlugin] = {
    m.key: m for m in (tcp.MODE, openshift_rdma.MODE, tcpxo.MODE, tcpx.MODE, gke_rdma.MODE)
}


def mode_names() -> list[str]:
    """Every `networkMode` value, once each, in the registry's order."""
    return list(dict.fromkeys(m.name for m in NETWORK_MODES.values()))


def names_on(platform: str) -> list[str]:
    """The `networkMode` values `platform` offers."""
    return [m.name for m in NETWORK_MODES.values() if platform in m.platforms]


def find_mode(platform: str, name: str) -> ModePlugin | None:
    """The plug-in of `name` on `platform`, None where the platform does not offer it."""
    return next(
        (m for m in NETWORK_MODES.values() if m.name == name and platform in m.platforms), None
    )


def mode_of(s: Settings) -> ModePlugin:
    """The stack's plug-in (the rules refuse a mode its platform does not offer)."""
    mode = find_mode(s.platform, s.network_mode)
    if mode is None:
        raise LookupError(f"networkMode {s.network_mode!r} on {s.platform!r}: no plug-in")
    return mode
