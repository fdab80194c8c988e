"""Fabric and storage verification: what "fast enough" means per network mode, the command that
checks both on every pod of a StatefulSet after `pulumi up`, and the gates a JobSet run passes
before training (pure)."""

from __future__ import annotations

from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.fabric import RDMA_FABRIC_GBPS
from gpu_cluster.facts.machines import MACHINES
from gpu_cluster.plan.launch import Kube, on_every_pod
from gpu_cluster.plan.podspec import SCRIPTS_DIR

CHECK_SCRIPT = "allreduce_check.py"
# The modules it (and STORAGE_CHECK) imports from beside it, shipped with it.
CHECK_MODULES = ("fabric_figures.py", "nccl_logs.py", "fabric_verdict.py")
# What a JobSet run's pods start with: the check, then the launcher if it passed.
FABRIC_GATE = "fabric-gate.sh"
# Measures each storage.volumes path, then starts what follows it if every threshold was met.
STORAGE_CHECK = "storage_check.py"

# What the fabric check holds to its floor: the average all_gather bus bandwidth (GB/s, nccl-tests'
# busbw = algbw (n-1)/n) over the sweep's three largest sizes (scripts/allreduce_check.py).
# GKE's GPUDirect machines (tcpx on A3 High, tcpxo on A3 Mega, rdma with gIB on A3 Ultra and A4):
# the floor Google's own NCCL health check holds each machine to, for the same quantity.
# GoogleCloudPlatform/cluster-health-scanner deploy/helm/health_checks/nccl_healthcheck/
# {a3,a3plus,a3ultra,a4}.yaml (BANDWIDTH_THRESHOLD, START_MESSAGE_SIZE 2G, END_MESSAGE_SIZE 8G,
# NHOSTS 2) at 81c525d (2025-10-31): it fails a node pair whose all_gather_perf (nccl_startup.py
# BENCHMARK) "Avg bus bandwidth" over 2G, 4G, 8G (run-nccl-combined-plugins.sh -f 2) is below
# the threshold (nccl_startup.py process_test_result). tests/vendor/cluster_health_scanner.yaml.
# Each machine's floor: GpuMachine.busbw_floor_gbps (facts/machines.py).
GKE_CHECK_MAX_BYTES = "8G"  # the scanner's END_MESSAGE_SIZE (binary units, as nccl-tests reads it)
# rdma on OpenShift: no vendor floor for the cluster's own NICs, whose speed the program cannot
# know (it assumed 200G ones). The check reads each node's RDMA interfaces' link speeds and holds
# the average to this fraction of the slowest node's sum: the fraction the scanner holds RoCE
# machines to, A3 Ultra / A4's 250 GB/s of their 8 x 400 Gb/s (facts/fabric.py).
RDMA_LINE_RATE_FRACTION = MACHINES["a4-highgpu-8g"].busbw_floor_gbps / RDMA_FABRIC_GBPS
# tcp: no vendor floor for NCCL over sockets, nor a link speed to read (the pod network). A sanity
# floor: NVIDIA/nccl#450 measured all_reduce busbw of 4-6 GB/s over 100 Gb/s TCP (4 nodes), and
# all_gather moves as much per link with no tree to shortcut it; 2.5 stays under the low end.
TCP_BUSBW = 2.5
# Everywhere else the sweep ends at 1 GiB, as it always has.
DEFAULT_MAX_BYTES = "1G"


def expected_transport(s: Settings) -> str:
    """The transport the stack's mode promises, as the check script names it."""
    return mode_of(s).transport


def _gke_machine(s: Settings) -> str | None:
    """The GKE machine whose GPUDirect fabric the check measures, or None (not GKE, or a mode
    that runs on any machine: the rules tie the others to theirs)."""
    if s.gcp is None or not mode_of(s).machines():
        return None
    return s.gcp.machine_type


def threshold_args(s: Settings) -> list[str]:
    """The check's floor: verify.expectedBusbwGbps, the GKE machine's, a fraction of the RDMA
    NICs' line rate as the pods read it, or the tcp floor."""
    given = s.verify.expected_busbw_gbps
    machine = _gke_machine(s)
    if given is None and machine is not None:
        given = MACHINES[machine].busbw_floor_gbps
    interfaces = mode_of(s).line_rate_interfaces(s)
    if given is None and interfaces:
        return [
            "--line-rate-fraction",
            f"{RDMA_LINE_RATE_FRACTION:g}",
            "--line-rate-interfaces",
            ",".join(interfaces),
        ]
    return ["--expected-busbw-gbps", f"{TCP_BUSBW if given is None else given:g}"]


def check_max_bytes(s: Settings) -> str:
    """verify.maxBytes, or the size the expectation is measured at."""
    if s.verify.max_bytes is not None:
        return s.verify.max_bytes
    return GKE_CHECK_MAX_BYTES if _gke_machine(s) is not None else DEFAULT_MAX_BYTES


def check_args(s: Settings) -> list[str]:
    args = [
        "--backend",
        "nccl",
        "--max-bytes",
        check_max_bytes(s),
        "--iters",
        str(s.verify.iters),
        *threshold_args(s),
        "--expected-transport",
        expected_transport(s),
    ]
    if s.verify.require_gdr:
        args.append("--require-gdr")
    return args


def fabric_check(s: Settings) -> tuple[str, ...]:
    """The fabric check (all_gather) through launch-torchrun.sh, on the pods' rendezvous, with the
    stack's thresholds."""
    return (f"{SCRIPTS_DIR}/launch-torchrun.sh", f"{SCRIPTS_DIR}/{CHECK_SCRIPT}", *check_args(s))


def _rate(gbps: float | None) -> str:
    return "" if gbps is None else f"{gbps:g}"


def storage_gate(s: Settings) -> list[str]:
    """The storage check of every storage.volumes path, ending in `--`: what follows runs only
    when it passed ([] without volumes). One stream per GPU, as a checkpoint writes a shard per
    rank."""
    if not s.storage.volumes:
        return []
    args = [
        f"{SCRIPTS_DIR}/{STORAGE_CHECK}",
        "--bytes",
        s.verify.storage_check_bytes,
        "--streams",
        str(s.gpus_per_node),
    ]
    for v in s.storage.volumes:
        limits = f"{v.mount_path}:{_rate(v.min_write_gbps)}:{_rate(v.min_read_gbps)}"
        args += ["--read-only", limits] if v.read_only else [limits]
    return [*args, "--"]


def fabric_gate(s: Settings, launch: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The fabric check through fabric-gate.sh, then `launch` if it passed; with no `launch`,
    the check alone (its exit code 75 when it could not run)."""
    return (f"{SCRIPTS_DIR}/{FABRIC_GATE}", *check_args(s), "--", *launch)


def gated(s: Settings, launch: tuple[str, ...]) -> tuple[str, ...]:
    """A JobSet run's command: `launch` once the storage and fabric checks passed on the run's
    pods (verify.enabled), else `launch` as it is."""
    if not s.verify.enabled:
        return launch
    return (*storage_gate(s), *fabric_gate(s, launch))


def verify_command(s: Settings, kube: Kube) -> str:
    """Runs the storage check (each pod's own figures) and then the fabric check on every
    pod; pod 0 prints the report and the verdict, and the command exits with the first failing
    pod's code (0 PASS, 1 FAIL). Through launch-all.sh, as training is: a pod that fails early
    or Ctrl-C stops the check on every pod instead of leaving the other ranks waiting in the
    rendezvous."""
    return on_every_pod(
        s,
        kube,
        [
            *storage_gate(s),
            # A fixed world and its own rendezvous id: never joins a running training job.
            "env",
            f"TORCHRUN_NNODES={s.nodes}",
            f"RDZV_ID=verify-{s.name}",
            *fabric_check(s),
        ],
    )
