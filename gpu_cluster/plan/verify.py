"""Fabric verification: what "fast enough" means per network mode, and the command that checks
it on every pod after `pulumi up` (pure)."""

from __future__ import annotations

from gpu_cluster.config.settings import Settings, gpudirect_release
from gpu_cluster.plan.launch import on_every_pod
from gpu_cluster.plan.netmodes import SCRIPTS_DIR

CHECK_SCRIPT = "allreduce_check.py"

# Bus bandwidth (GB/s, all_reduce at the largest size) below which the fabric check fails.
# rdma: 24 GB/s per 200G RoCE NIC (NVIDIA/nccl-tests#119).
RDMA_BUSBW_PER_NIC = 24.0
# tcp: TCP over 100G measured 2.7-5 GB/s (NVIDIA/nccl#450); the floor of that range.
TCP_BUSBW = 2.5
# tcpxo: A3 Mega measures 180-190 GB/s of a 200 GB/s maximum (seed 004); 160 leaves headroom.
TCPXO_BUSBW = 160.0
# rdma on GKE (A3 Ultra / A4, gIB): Google's nightly gate for its GKE A3 Ultra and A4 blueprints
# fails a 2-node run whose "Avg bus bandwidth" is below 100 GB/s (GoogleCloudPlatform/
# cluster-toolkit tools/cloud-build/daily-tests/ansible_playbooks/test-validation/
# test-gke-a3-ultra.yml and test-gke-a4.yml, 1047080). That run is all_gather_perf -b 1K -e 8G
# (examples/gke-a4/nccl-jobset-example.yaml), averaged over all sizes, so 100 is a loose floor
# for all_reduce at the largest size: the sample 2-node A3 Ultra all_gather output shows
# 317-336 GB/s from 512 MiB to 8 GiB with a 120 GB/s average (examples/gke-consumption-options/
# dws-flex-start/README.md). Google publishes no 2-node all_reduce figure for these machines.
GIB_BUSBW = 100.0
# tcpx: no published figure in the references; 70% of A3 High's 4 x 200 Gbps (100 GB/s) line.
TCPX_BUSBW = 70.0

# The transport each mode promises, as the check script names it.
TRANSPORT = {"rdma": "ib", "tcp": "socket", "tcpxo": "tcpxo", "tcpx": "tcpx"}
# On GKE rdma runs through gIB: NCCL's own IB transport there would be a silent fallback.
GKE_RDMA_TRANSPORT = "gib"


def expected_transport(s: Settings) -> str:
    if s.network_mode == "rdma" and s.platform == "gke":
        return GKE_RDMA_TRANSPORT
    return TRANSPORT[s.network_mode]


def expected_busbw(s: Settings) -> float:
    if s.verify.expected_busbw_gbps is not None:
        return s.verify.expected_busbw_gbps
    if s.network_mode == "rdma" and s.platform == "gke":
        return GIB_BUSBW
    if s.network_mode == "rdma":
        assert s.rdma is not None
        return RDMA_BUSBW_PER_NIC * len(s.rdma.nics)
    if s.network_mode == "tcp":
        return TCP_BUSBW
    gpudirect_release(s)  # the pinned release must exist
    return TCPXO_BUSBW if s.network_mode == "tcpxo" else TCPX_BUSBW


def check_args(s: Settings) -> list[str]:
    args = [
        "--backend",
        "nccl",
        "--max-bytes",
        s.verify.max_bytes,
        "--iters",
        str(s.verify.iters),
        "--expected-busbw-gbps",
        f"{expected_busbw(s):g}",
        "--expected-transport",
        expected_transport(s),
    ]
    if s.verify.require_gdr:
        args.append("--require-gdr")
    return args


def verify_command(s: Settings, cli: str) -> str:
    """Runs the all-reduce check on every pod; pod 0 prints the report and the verdict, and the
    command exits with the first failing pod's code (0 PASS, 1 FAIL). Through launch-all.sh, as
    training is: a pod that fails early or Ctrl-C stops the check on every pod instead of
    leaving the other ranks waiting in the rendezvous."""
    return on_every_pod(
        s,
        cli,
        [
            # A fixed world and its own rendezvous id: never joins a running training job.
            "env",
            f"TORCHRUN_NNODES={s.nodes}",
            f"RDZV_ID=verify-{s.name}",
            f"{SCRIPTS_DIR}/launch-torchrun.sh",
            f"{SCRIPTS_DIR}/{CHECK_SCRIPT}",
            *check_args(s),
        ],
    )
