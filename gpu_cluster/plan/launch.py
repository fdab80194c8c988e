"""How training starts: names, rendezvous env, DeepSpeed hostfile and config, user commands.

Pure functions of the settings; the workload component ships their results in a ConfigMap and
the pod env, and the stack exports the commands.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from gpu_cluster.config.derived import elastic_range, runs_preflight, world_size
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.storage import WORKSPACE_PATH
from gpu_cluster.config.workload import job_set_hostname
from gpu_cluster.facts.gpudirect import NODE_AGENT_NAMESPACE
from gpu_cluster.facts.kubernetes import parse_quantity
from gpu_cluster.plan.health_gate import health_gate_check
from gpu_cluster.plan.nccl import NCCL_ENV_FILE
from gpu_cluster.plan.podspec import PRE_PULL_COMPONENT, SCRIPTS_DIR

# Kubernetes' default cluster DNS domain (kubelet --cluster-domain).
CLUSTER_DOMAIN = "cluster.local"
TRAINING_CONTAINER = "training"
DATASETS_PATH = "/datasets"
HOSTFILE = "hostfile"
# Exit codes no restart can fix: the launchers' configuration errors (78, EX_CONFIG in
# sysexits.h; scripts/launch-common.sh: a training script that is not there among them) and
# usage errors (2: the launchers' own and the storage check's). A training script's own code
# does not reach the pod under torchrun, which exits 1 whatever its workers' codes.
CONFIG_ERROR_EXIT_CODES = (2, 78)
DEEPSPEED_CONFIG = "ds_config.json"


def service_name(s: Settings) -> str:
    """The headless Service that gives every pod a stable DNS name."""
    return f"{s.name}-headless"


def pod_names(s: Settings) -> list[str]:
    """The pods' hostnames, by index: the StatefulSet's pod names, or the JobSet's hostnames."""
    if s.workload.kind == "jobset":
        return [job_set_hostname(s.name, i) for i in range(s.nodes)]
    return [f"{s.name}-{i}" for i in range(s.nodes)]


def pod_dns_name(hostname: str, service: str, namespace: str) -> str:
    """A pod's name in its headless Service's DNS domain."""
    return f"{hostname}.{service}.{namespace}.svc.{CLUSTER_DOMAIN}"


def pod_dns_names(s: Settings) -> list[str]:
    return [pod_dns_name(pod, service_name(s), s.namespace) for pod in pod_names(s)]


def rendezvous_id(namespace: str, run: str) -> str:
    """torchrun's --rdzv-id of a run: unique in the cluster."""
    return f"{namespace}-{run}"


def master_addr(s: Settings) -> str:
    return pod_dns_names(s)[0]


def rendezvous_env(s: Settings) -> dict[str, str]:
    """Env every training container gets (NODE_RANK comes from the pod-index label)."""
    lo, hi = elastic_range(s)
    return {
        "NNODES": str(s.nodes),
        "GPUS_PER_NODE": str(s.gpus_per_node),
        "WORLD_SIZE": str(world_size(s)),
        "MASTER_ADDR": master_addr(s),
        "MASTER_PORT": str(s.launcher.master_port),
        "TORCHRUN_NNODES": str(s.nodes) if lo == hi else f"{lo}:{hi}",
        "TORCHRUN_MAX_RESTARTS": str(s.launcher.max_restarts),
        "RDZV_ID": rendezvous_id(s.namespace, s.name),
        "NCCL_ENV_FILE": NCCL_ENV_FILE,
        "DEEPSPEED_HOSTFILE": f"{SCRIPTS_DIR}/{HOSTFILE}",
        "DEEPSPEED_CONFIG": f"{SCRIPTS_DIR}/{DEEPSPEED_CONFIG}",
        # The launchers run preflight.sh first when asked; it checks /dev/shm against this.
        "PREFLIGHT": "1" if runs_preflight(s) else "0",
        "SHM_MIN_BYTES": str(quantity_bytes(s.pod.shm_size)),
    }


def quantity_bytes(quantity: str) -> int:
    """A Kubernetes quantity (validated by the schema) in bytes, rounded up as the kubelet sizes a
    memory-backed emptyDir (pkg/volume/emptydir/empty_dir.go: size=sizeLimit.Value())."""
    return math.ceil(parse_quantity(quantity))


def hostfile(s: Settings) -> str:
    """DeepSpeed hostfile: one line per pod, from the actual node and GPU counts."""
    return "".join(f"{host} slots={s.gpus_per_node}\n" for host in pod_dns_names(s))


def deepspeed_config(s: Settings) -> dict[str, Any]:
    ds = s.launcher.deepspeed
    zero: dict[str, Any] = {"stage": ds.zero_stage}
    if ds.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return {
        "train_batch_size": ds.micro_batch_size * ds.gradient_accumulation_steps * world_size(s),
        "train_micro_batch_size_per_gpu": ds.micro_batch_size,
        "gradient_accumulation_steps": ds.gradient_accumulation_steps,
        "bf16": {"enabled": ds.precision == "bf16"},
        "fp16": {"enabled": ds.precision == "fp16"},
        "zero_optimization": zero,
    }


# Runs on the user's machine, from the installed package or the repository (never a copy read
# from a pod: whoever can edit the namespace's ConfigMap would run code on the workstation).
LAUNCH_ALL_MODULE = "gpu_cluster.launch_all"


@dataclass(frozen=True)
class Kube:
    """How the user's commands reach the stack's cluster: `cli` (oc or kubectl) with `target`,
    the flags naming the stack's kubeconfig file and/or context (outputs.kube_target), on every
    call, never whatever kubeconfig or context is current."""

    cli: str
    target: tuple[str, ...]

    def argv(self, *args: str) -> list[str]:
        return [self.cli, *self.target, *args]


def launcher(s: Settings) -> str:
    """The configured launcher script in the pods."""
    return f"{SCRIPTS_DIR}/launch-{s.launcher.kind}.sh"


# A StatefulSet's training container: idles, and on SIGTERM stops the training a user started in
# it, giving it the pod's grace period.
IDLE_TRAINING = "idle-training.sh"


def idle_training_command(grace_seconds: int) -> tuple[str, ...]:
    """What a StatefulSet's training container runs (scripts/idle-training.sh)."""
    return (f"{SCRIPTS_DIR}/{IDLE_TRAINING}", str(grace_seconds))


def run_command(s: Settings) -> tuple[str, ...]:
    """What a JobSet's training container runs: the launcher with the training script."""
    return (launcher(s), *s.workload.command)


def launch_command(s: Settings, kube: Kube, script: str = f"{WORKSPACE_PATH}/train.py") -> str:
    """One command that starts the configured launcher on every pod, exits with the first
    failing pod's code and stops every pod's training on a failure or Ctrl-C."""
    return on_every_pod(s, kube, [launcher(s), script])


def stop_command(s: Settings, kube: Kube) -> str:
    """Stop the training on every pod (launch-stop.sh: SIGTERM, then SIGKILL after its grace),
    as launchCommand does on Ctrl-C: for a training whose launchCommand is gone (a closed
    terminal, a laptop that slept), which goes on in the pods. The pods stay."""
    return on_every_pod(s, kube, [f"{SCRIPTS_DIR}/launch-stop.sh"])


def status_command(s: Settings, kube: Kube) -> str:
    """The pods with their nodes, then each pod's answer whether its training runs
    (launch-status.sh: "running (pid N)" or "not running"), as a JobSet stack's statusCommand
    shows its run. Reads only: a pod that does not answer gets `-` (the CLI's error on stderr)
    and the others are still asked; in a subshell, so that `eval` leaves no variable behind."""
    pods = pod_names(s)
    listed = shlex.join(kube.argv("get", "-n", s.namespace, "pods", "-o", "wide", *pods))
    exec_in = shlex.join(kube.argv("exec", "-n", s.namespace))
    status = shlex.join(["-c", TRAINING_CONTAINER, "--", f"{SCRIPTS_DIR}/launch-status.sh"])
    # launch-status.sh's "not running" is exit 3; any other failure is the pod not answering.
    each = f"""printf '%s: ' "$pod"; {exec_in} "$pod" {status} || [ $? -eq 3 ] || echo '-'"""
    return f"{listed} && (for pod in {shlex.join(pods)}; do {each}; done)"


def on_every_pod(s: Settings, kube: Kube, command: list[str]) -> str:
    """`command` in every pod's training container through the package's launch-all.sh: exits
    with the first failing pod's code, stops the others on that failure or on Ctrl-C."""
    target = kube.argv(s.namespace, s.name, str(s.nodes))
    # python3, not python: macOS has only the former. From the project directory the package
    # imports without installing (it needs nothing outside the standard library to get here).
    return shlex.join(["python3", "-m", LAUNCH_ALL_MODULE, *target, *command])


# Prints when each phase of a run's start happened, from the cluster's records (stdlib only).
TIMELINE_MODULE = "gpu_cluster.timeline"


def node_agents(s: Settings) -> tuple[tuple[str, str], ...]:
    """The pods that prepare a GPU node for the training pods, as (namespace, label selector):
    GKE's GPUDirect node agents (facts/gpudirect.py), the image pre-pull (openshift.prePull)."""
    if s.platform == "gke":
        apps = mode_of(s).node_agent_apps
        return ((NODE_AGENT_NAMESPACE, f"k8s-app in ({','.join(apps)})"),) if apps else ()
    if s.openshift.pre_pull:
        instance = f"app.kubernetes.io/instance={s.name}"
        return ((s.namespace, f"{instance},app.kubernetes.io/component={PRE_PULL_COMPONENT}"),)
    return ()


def timeline_command(s: Settings, kube: Kube) -> str:
    """The table of the run's start: submitted, health gate, admitted, nodes, agents,
    scheduled, pulled, started, ready, first step."""
    kind = "jobset" if s.workload.kind == "jobset" else "statefulset"
    agents = [arg for ns, selector in node_agents(s) for arg in ("--agents", f"{ns}:{selector}")]
    check = health_gate_check(s)
    gate = ["--health-check", check] if check is not None else []
    pattern = s.launcher.first_step_pattern
    step = ["--first-step", pattern] if pattern is not None else []
    argv = kube.argv(*agents, *gate, *step, s.namespace, kind, s.name)
    return shlex.join(["python3", "-m", TIMELINE_MODULE, *argv])


# The shell starts with the NCCL settings the launchers load (launch-common.sh): the GPUDirect
# release's script and the settings detect-rdma.sh wrote (NCCL_IB_HCA, the GID index), so torchrun
# or a test run by hand uses the same NICs and values. A missing release script is reported and
# the shell opens anyway, to look into it.
_SHELL = (
    f"PROG=shell; . {SCRIPTS_DIR}/launch-common.sh; "
    "source_nccl_init_script || true; source_nccl_env_file; exec bash"
)


def shell_command(s: Settings, kube: Kube) -> str:
    pod0 = kube.argv("exec", "-it", "-n", s.namespace, f"{s.name}-0", "-c", TRAINING_CONTAINER)
    return shlex.join([*pod0, "--", "bash", "-c", _SHELL])


def sync_command(s: Settings, kube: Kube, local_dir: str = "./") -> str:
    """Copy local code to every pod's workspace (per-pod storage has no shared volume)."""
    verb = "rsync" if kube.cli == "oc" else "cp"  # kubectl has no rsync
    copy = shlex.join(kube.argv(verb, "-n", s.namespace, "-c", TRAINING_CONTAINER, local_dir))
    # `|| exit` in a subshell: stop at the first failed pod with its code, not the last pod's.
    return (
        f"(for i in $(seq 0 {s.nodes - 1}); do {copy} {s.name}-$i:{WORKSPACE_PATH}/ || exit; done)"
    )
