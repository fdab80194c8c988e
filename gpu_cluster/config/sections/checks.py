"""The fabric and storage checks' section (`verify`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field

from gpu_cluster.config.base import Section
from gpu_cluster.config.netmodes import find_mode
from gpu_cluster.config.reads import VERIFY_ENABLED, ReadWhen
from gpu_cluster.config.values import (
    SweepSize,
)

if TYPE_CHECKING:  # the predicates get the whole config
    from gpu_cluster.config.schema import Settings


def _transport(s: Settings) -> str | None:
    mode = find_mode(s.platform, s.network_mode)
    return mode.transport if mode is not None else None


_CHECK = VERIFY_ENABLED


class VerifySettings(Section):
    """The built-in fabric check (all_gather bandwidth + transport) shipped to every pod."""

    enabled: bool = True
    """Ship the all_gather fabric check, after the storage check of the `storage.volumes` paths
    (`scripts/storage_check.py`): a StatefulSet stack exports `verifyCommand`; a JobSet stack's
    runs pass both on their nodes before training starts (`scripts/fabric-gate.sh`).
    """
    # PASS threshold for the average all_gather bus bandwidth over the sweep's three largest sizes;
    # None = the sourced default of the mode or, on GKE's GPUDirect machines, of the machine
    # (gpu_cluster/plan/verify.py).
    expected_busbw_gbps: Annotated[float | None, _CHECK] = Field(
        default=None, gt=0, allow_inf_nan=False
    )
    """PASS threshold, in GB/s, for the average all_gather bus bandwidth over the sweep's three
    largest sizes (what Google's NCCL health check measures). Default on GKE per machine: A3 High
    60, A3 Mega 150, A3 Ultra and A4 250; `rdma` on OpenShift: 0.625 x the slowest node's RDMA
    NICs' link speeds as the pods read them (not judged, with a warning, where a NIC reports
    none); `tcp`: 2.5 (see docs/operations.md, "Verify the fabric").
    """
    # Largest all_gather of the sweep (binary units); None = 8G on GKE's GPUDirect machines (the
    # size Google's health check measures its floor at), 1G elsewhere (plan/verify.py).
    max_bytes: Annotated[SweepSize | None, _CHECK] = None
    """Largest all_gather in the sweep: a size the check script reads (`64M`, `1G`, `2t`, `512MiB`,
    a number of bytes; binary units). Default `8G` on GKE's A3 / A4 machines in their GPUDirect
    mode, else `1G`.
    """
    iters: Annotated[int, _CHECK] = Field(default=20, ge=1, le=1000)
    """Timed iterations per size."""
    # Also require GPUDirect RDMA (GDRDMA) in rdma mode.
    require_gdr: Annotated[
        bool,
        ReadWhen(
            lambda s: s.verify.enabled and _transport(s) != "socket",
            "verify.enabled is true and networkMode is not 'tcp' (GPUDirect RDMA never shows on "
            "NCCL's socket transport)",
        ),
    ] = False
    """`rdma`: also require GPUDirect RDMA (`GDRDMA`) in the fabric check, and on OpenShift
    preflight fails a node without its path (DMA-BUF or `nvidia-peermem`; else a warning)."""
    storage_check_bytes: Annotated[
        SweepSize,
        ReadWhen(
            lambda s: s.verify.enabled and bool(s.storage.volumes),
            "verify.enabled is true and storage.volumes lists a volume",
        ),
    ] = "1G"
    """What the storage check writes and reads back on each `storage.volumes` path, per pod, in
    one file per GPU (binary units: `512M`, `1G`, `4G`); a read-only volume: read of the files
    there, up to this much.
    """
    # Launchers run preflight.sh (GPUs, /dev/shm, memlock, RDMA links, DeepSpeed) before
    # training; None = on in rdma mode (a too-small memlock must stop training), off otherwise.
    preflight: bool | None = None
    """Default `true` in `rdma`, else `false`: launchers run `preflight.sh` (GPUs, `/dev/shm`,
    DeepSpeed >= 0.14.5 for `deepspeed`, memlock, RDMA links and MTUs) and do not start training
    when it fails.
    """
