"""Plain descriptions of pod pieces, shared by the pure decision functions.

Network modes and platforms describe what they add to the training pod with these small frozen
types; `components/workload/pod_args.py` is the one place that turns them into the Kubernetes
SDK's typed Args.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# A container that only has to stay up: idles in its image and exits at once on SIGTERM (a
# plain `sleep` as PID 1 ignores it and waits out the grace period).
IDLE_COMMAND = ("/bin/bash", "-c", "trap 'exit 0' TERM; sleep infinity & wait")
# The `app.kubernetes.io/component` label of the image pre-pull pods (openshift.prePull).
PRE_PULL_COMPONENT = "image-pre-pull"
# The stack's scripts ConfigMap, mounted read-only in its pods (launchers, checks, preflight).
SCRIPTS_VOLUME = "gpu-cluster-scripts"
SCRIPTS_DIR = "/opt/gpu-cluster"
# An idle container's requests, its limits the same (a namespace quota may demand limits).
IDLE_RESOURCES = {"cpu": "10m", "memory": "16Mi"}


@dataclass(frozen=True)
class Mount:
    volume: str
    path: str
    read_only: bool = False


@dataclass(frozen=True)
class EmptyDir:
    name: str
    memory: bool = False
    size_limit: str | None = None


@dataclass(frozen=True)
class HostPath:
    name: str
    path: str
    type: Literal["Directory", "DirectoryOrCreate", "CharDevice", ""] = "Directory"


@dataclass(frozen=True)
class ConfigMapVolume:
    name: str
    config_map: str
    default_mode: int = 0o555  # scripts are executable, never writable


@dataclass(frozen=True)
class ClaimVolume:
    name: str
    claim: str


Volume = EmptyDir | HostPath | ConfigMapVolume | ClaimVolume


@dataclass(frozen=True)
class ExecProbe:
    """A startup probe that runs a command in the container."""

    command: tuple[str, ...]
    initial_delay_seconds: int
    period_seconds: int
    timeout_seconds: int
    failure_threshold: int


@dataclass(frozen=True)
class Container:
    """A container other than the training one: an init step or a native sidecar."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    # (variable, Secret name, key in the Secret): values that must never be literal env.
    secret_env: tuple[tuple[str, str, str], ...] = ()
    mounts: tuple[Mount, ...] = ()
    capabilities: tuple[str, ...] = ()
    # "Always" on an init container makes it a native sidecar (Kubernetes >= 1.29).
    restart_policy: Literal["Always"] | None = None
    cpu_request: str = "100m"
    memory_request: str = "128Mi"
    # None: no limit, for daemons whose throttling or OOM kill would stall the GPU traffic.
    cpu_limit: str | None = "1"
    memory_limit: str | None = "512Mi"
    # Whether the image writes only to mounted volumes.
    read_only_root: bool = True
    # Root in the container, overriding the pod's non-root default: added capabilities are only
    # effective for root (Kubernetes grants no ambient capabilities).
    run_as_root: bool = False
    # False keeps the runtime's default capabilities (the added ones come on top), for vendor
    # daemons that are only published and supported that way.
    drop_all_capabilities: bool = True
    # On a native sidecar a startup probe also holds the later containers until it passes.
    startup_probe: ExecProbe | None = None
    # A fixed non-root UID, where the platform assigns none (an SCC with runAsUser RunAsAny).
    run_as_user: int | None = None


@dataclass(frozen=True)
class PodNetworking:
    """What a network mode contributes to the training pod."""

    annotations: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    # Extended resources requested (and limited) by the training container, e.g. RDMA VFs.
    resources: dict[str, int] = field(default_factory=dict)
    # Linux capabilities the training container needs beyond the restricted baseline.
    capabilities: tuple[str, ...] = ()
    # The training container runs as UID 0, the only way an added capability is effective
    # (Kubernetes grants no ambient capabilities: kubernetes/kubernetes#56374).
    training_runs_as_root: bool = False
    init_containers: tuple[Container, ...] = ()
    volumes: tuple[Volume, ...] = ()
    mounts: tuple[Mount, ...] = ()


@dataclass(frozen=True)
class NodeRequirement:
    """One `requiredDuringScheduling` node-affinity expression."""

    key: str
    operator: Literal["In", "Exists"]
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodPlacement:
    """Where the platform lets training pods run (on top of one pod per node)."""

    node_requirements: tuple[NodeRequirement, ...]
    # Taints of GPU nodes that the training pods tolerate: (key, effect); effect "": every effect.
    tolerations: tuple[tuple[str, str], ...] = (("nvidia.com/gpu", "NoSchedule"),)
    # None: the platform assigns one (OpenShift SCCs pick from the namespace's UID range).
    run_as_user: int | None = None
