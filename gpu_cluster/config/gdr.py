"""GPUDirect RDMA's warning: an rdma stack that asks NCCL for it without checking it."""

from __future__ import annotations

from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings

# NCCL_NET_GDR_LEVEL's one value that turns GPUDirect RDMA off (NVIDIA/nccl 5067397
# docs/userguide/source/env.rst, NCCL_NET_GDR_LEVEL: "LOC: Never use GPU Direct RDMA").
GDR_OFF = "LOC"


def gdr_warnings(s: Settings) -> list[str]:
    """A warning when rdma.gdrLevel widens GPUDirect RDMA (any level but LOC) while nothing
    checks it: without a GDR path (DMA-BUF or nvidia-peermem) NCCL stages through host memory
    whatever the level, and only verify.requireGdr makes preflight and the fabric check fail
    then. Unset, NCCL picks the level from the topology (env.rst: "If this isn't specified, NCCL
    will attempt to optimally select a value")."""
    rdma = mode_of(s).rdma(s)
    if rdma is None:
        return []
    level = rdma.gdr_level
    if level is None or level == GDR_OFF or (s.verify.enabled and s.verify.require_gdr):
        return []
    why = "verify.enabled is false" if not s.verify.enabled else "verify.requireGdr is false"
    return [
        f"gpu-cluster:rdma.gdrLevel is '{level}' but {why}: nothing checks that GPUDirect RDMA "
        "is there (preflight only warns), and without it NCCL stages through host memory "
        "whatever the level; set verify.requireGdr to true (preflight and the fabric check "
        "then fail without it), or unset rdma.gdrLevel (NCCL picks the level from the topology)"
    ]
