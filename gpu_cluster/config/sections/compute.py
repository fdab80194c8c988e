"""The training pod's own sections: its resources, its launcher, the code it syncs, and where
it runs on OpenShift."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from gpu_cluster.config.base import Section
from gpu_cluster.config.values import (
    CpuQuantity,
    Image,
    LabelKey,
    LogPattern,
    NodeName,
    Quantity,
    Subdomain,
    SyncPeriod,
)
from gpu_cluster.facts.kubernetes import resource_quantity

if TYPE_CHECKING:  # the predicates get the whole config
    pass


class PodSettings(Section):
    """Per-pod compute resources of the training container."""

    cpu_request: CpuQuantity = "32"
    """Training container CPU request, a quantity (a plain number too); <= `pod.cpuLimit`."""
    memory_request: Quantity = "128Gi"
    """Memory request (<= `pod.memoryLimit`)."""
    cpu_limit: CpuQuantity | None = None
    """CPU limit (unset: none)."""
    memory_limit: Quantity = "256Gi"
    """Memory limit."""
    # NCCL and the PyTorch dataloader use /dev/shm; the 64 MiB container default breaks them.
    shm_size: Quantity = "64Gi"
    """Size of the memory-backed `/dev/shm`."""
    # Kubernetes' default (core/v1 PodSpec terminationGracePeriodSeconds: 30).
    termination_grace_seconds: int = Field(default=30, ge=1, le=86400)
    """How long a training pod has after SIGTERM (a stop, a preemption, a restart of the set)
    before it is killed: size it for one checkpoint save (docs/operations.md, "Checkpoints: what
    a training script does")."""

    @model_validator(mode="after")
    def _requests_within_limits(self) -> PodSettings:
        # The API server refuses a request above its limit (kubernetes/kubernetes
        # pkg/apis/core/validation ValidateResourceRequirements: "must be less than or equal to").
        for resource, request, limit in (
            ("cpu", self.cpu_request, self.cpu_limit),
            ("memory", self.memory_request, self.memory_limit),
        ):
            if limit is not None and resource_quantity(request) > resource_quantity(limit):
                raise ValueError(
                    f"{resource}Request {request} is above {resource}Limit {limit}; Kubernetes "
                    "refuses a request larger than its limit"
                )
        return self


class DeepSpeedSettings(Section):
    zero_stage: Literal[0, 1, 2, 3] = 2
    """ZeRO stage in `ds_config.json`."""
    precision: Literal["bf16", "fp16", "fp32"] = "bf16"
    """Mixed precision."""
    micro_batch_size: int = Field(default=4, ge=1)
    """Per-GPU micro batch."""
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    """Gradient accumulation."""
    offload_optimizer: bool = False
    """ZeRO optimizer offload to CPU."""


class LauncherSettings(Section):
    kind: Literal["torchrun", "deepspeed"] = "torchrun"
    """What `launchCommand` starts."""
    # Elastic range for torchrun (--nnodes=min:max); both default to `nodes`.
    min_nodes: int | None = Field(default=None, ge=1)
    """Lower end of the torchrun elastic range (`--nnodes=min:max`); unset: `nodes`."""
    max_nodes: int | None = Field(default=None, ge=1)
    """Upper end of the torchrun elastic range (`--nnodes=min:max`); unset: `nodes`."""
    max_restarts: int = Field(default=0, ge=0, le=100)
    """torchrun `--max-restarts`."""
    master_port: int = Field(default=29500, ge=1024, le=65535)
    """Rendezvous port on pod 0."""
    first_step_pattern: LogPattern | None = None
    """The line the training prints at every step, as a Python regular expression matched
    anywhere in the line (e.g. `^step \\d+` or `'loss': `): `timelineCommand`'s `first step` is
    when pod 0's training container first printed such a line, `gpu-cluster run status`'s ledger
    and the runs' metrics (`monitoring.runMetrics`) count each one. Unset: no such phase, ledger
    or step metrics (the program cannot tell a step from the training's output by itself). With
    the runs' metrics on it is in the training pods' environment, so a change restarts them.
    """
    deepspeed: DeepSpeedSettings = DeepSpeedSettings()
    """`ds_config.json` settings (`launcher.kind: deepspeed`, or a script that calls
    `deepspeed.initialize`).
    """


class CodeSyncSettings(Section):
    """Keep a git repository checked out in every pod (git-sync as a native sidecar)."""

    repo: str = Field(pattern=r"^(https://|ssh://|git@)\S+$")
    """Repository (`https://`, `ssh://` or `git@` URL) a git-sync sidecar keeps checked out at
    `/code/current` in every pod; unset `codeSync`: no sync. A URL with credentials only as a
    secret (see docs/contract.md).
    """
    ref: str = "main"
    """Branch, tag or commit."""
    period: SyncPeriod = "60s"
    """How often to pull: a Go duration >= 10ms (`60s`, `1m30s`, `500ms`)."""
    # Existing Secret with keys `username` and `password` (an HTTPS token); None = public repo.
    credentials_secret: Subdomain | None = None
    """Existing Secret with keys `username` and `password` (token); unset: a public repository."""
    # kubernetes/git-sync release (registry.k8s.io/git-sync/git-sync): v4.7.1, newest v4 release
    # as of 2026-09 (kubernetes/git-sync releases; v4.6.0 was mostly CVE fixes, kubernetes/k8s.io
    # #9118). Same GITSYNC_* flags since v4.0.
    image: Image = "registry.k8s.io/git-sync/git-sync:v4.7.1"
    """git-sync release."""


class OpenShiftSettings(Section):
    # GPU nodes the pods may run on; empty = any node with GPUs.
    node_names: tuple[NodeName, ...] = ()
    """Only these nodes (node names of at most 63 characters, at least `nodes` of them); empty: any
    GPU node.
    """
    # Node label that marks GPU nodes (set by the NVIDIA GPU operator's feature discovery).
    gpu_node_label: LabelKey = "nvidia.com/gpu.present"
    """Label key GPU nodes carry (`=true`)."""
    pre_pull: bool = False
    """Pull `image` onto every node the training pods may run on (`nodeNames`, else every GPU
    node) before the workload starts or changes, and keep it there: a DaemonSet whose one
    container idles in that image (as xpk's `cluster cacheimage`). An `image` edit is pulled
    while the previous run still trains, and a tag no node can pull stops `pulumi up` before the
    workload is touched. Off by default: on a shared cluster with no `nodeNames` it pulls onto
    every GPU node.
    """
