"""What the training workload is made of, whatever kind of controller runs its pods."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from gpu_cluster.config.sections.compute import PodSettings
from gpu_cluster.config.sections.runs import RunSubmitters
from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.plan.podspec import Container, Mount, PodNetworking, PodPlacement, Volume
from gpu_cluster.plan.run_metrics import MetricsScrape


@dataclass(frozen=True)
class JobSetRun:
    """A run as a JobSet (workload.kind jobset): its pods run `command` (the launcher and the
    training script, behind the fabric gate when verify.enabled), the set restarts up to
    `max_restarts` times, waits in LocalQueue `queue_name` and puts every pod in one domain of
    `required_level` (None: anywhere), restarting as `restart_strategy` says (JobSet's
    failurePolicy.restartStrategy); `annotations`: the JobSet's own (its
    ProvisioningRequest's parameters). `user_command`: the end of `command` a submitted run
    replaces (workload.command); `max_nodes`: the queue's quota in nodes (None: unknown);
    `submitters`: who gets the submitter Role (workload.runs.submitters); `checkpoint_root`:
    where each submitted run's checkpoint directory is made (workload.runs.checkpointDir);
    `priority_classes`: the names a submitted run may ask for (workload.queue.priorityClasses)."""

    command: tuple[str, ...]
    max_restarts: int
    restart_strategy: str
    queue_name: str
    required_level: str | None
    annotations: dict[str, str] = field(default_factory=dict)
    user_command: tuple[str, ...] = ()
    max_nodes: int | None = None
    submitters: RunSubmitters = field(default_factory=RunSubmitters)
    checkpoint_root: str | None = None
    priority_classes: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrainingWorkloadArgs:
    """What the training workload is made of (gpu_cluster.components.shared_args.workload_args
    decides it from stack config).

    name: the pods' controller object's (StatefulSet or JobSet), and the prefix of its objects'
    (<name>-scripts, -env, -code-sync, -peers-only). namespace, labels: of every object.
    replicas: pods, one per GPU node. image: the training image. gpus_per_node: GPUs each pod
    requests. pod: the training container's requests, limits and /dev/shm size. storage: the
    workspace and datasets claims.
    claims_after: what every claim waits for (the StorageClass it names, when the platform
    creates it). pods_after: what the controller object waits for besides its own objects (the
    GPU nodes, their agents, the pods' grants and networks); the other objects wait only for
    what the component does (the namespace). master_port: the rendezvous port. service_name: the
    headless Service's. scripts: the scripts ConfigMap's files. env: the training container's
    plain env (rendezvous). networking: the network mode's contribution to the pod. placement:
    where pods run, as which UID. start_timeout_minutes: how long `pulumi up` waits for the pods
    to run (a StatefulSet's).
    service_account: the pods' ServiceAccount. sidecars, sidecar_volumes, sidecar_mounts: extra
    init containers (code sync) with their volumes and the training container's mounts of them.
    secret_env_keys, secret_env: env variables from a Secret (<name>-env) and its data.
    code_sync_source: the code-sync Secret's data (<name>-code-sync) when its source is secret.
    data_volumes, data_mounts, data_annotations: the training-data volumes (storage.volumes), the
    training container's mounts of them and what the pods carry for them.
    scan_exceptions: checks the security scanners skip on the controller object, with their
    reasons. metrics_port: the training container's port for the run's metrics (None: none);
    metrics_scrape: the platform's object that has them scraped.
    run: the JobSet run; None: a StatefulSet of idle pods."""

    name: str
    namespace: str
    labels: dict[str, str]
    replicas: int
    image: str
    gpus_per_node: int
    pod: PodSettings
    storage: StorageSettings
    master_port: int
    service_name: str
    scripts: dict[str, str]
    env: dict[str, str]
    networking: PodNetworking
    placement: PodPlacement
    service_account: pulumi.Input[str]
    start_timeout_minutes: int
    claims_after: tuple[pulumi.Resource, ...] = ()
    pods_after: tuple[pulumi.Resource, ...] = ()
    sidecars: tuple[Container, ...] = ()
    sidecar_volumes: tuple[Volume, ...] = ()
    sidecar_mounts: tuple[Mount, ...] = ()
    secret_env_keys: tuple[str, ...] = ()
    secret_env: pulumi.Output[dict[str, str]] | None = None
    code_sync_source: pulumi.Output[dict[str, str]] | None = None
    data_volumes: tuple[Volume, ...] = ()
    data_mounts: tuple[Mount, ...] = ()
    data_annotations: dict[str, str] = field(default_factory=dict)
    scan_exceptions: dict[str, str] = field(default_factory=dict)
    metrics_port: int | None = None
    metrics_scrape: MetricsScrape | None = None
    run: JobSetRun | None = None
