"""NCCL environment of the training container: the stack's debug level and its network mode's
settings (config/netmodes/, sources beside each setting)."""

from __future__ import annotations

from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings

# Where the RDMA detection init container writes the NCCL settings it works out per pod.
NCCL_ENV_FILE = "/var/run/gpu-cluster/nccl.env"


def nccl_env(s: Settings) -> dict[str, str]:
    """Every NCCL variable the training container gets, for the stack's network mode."""
    # The stack's level wins over a release's script (TCPXO's profile exports WARN): the launchers
    # put the pod's NCCL_* values back after sourcing it (scripts/launch-common.sh).
    return {"NCCL_DEBUG": s.nccl.debug, **mode_of(s).nccl_env(s)}
