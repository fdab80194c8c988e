"""The run template of a JobSet stack (workload.kind jobset), and a run made from it (pure).

The stack publishes, in a ConfigMap of its namespace, the JobSet it renders for its own run
(with every piece of fabric wiring, the queue label and the topology annotation) and the few
facts a new run needs besides (where the user's command starts in the training container's,
how many nodes the queue's quota holds). `gpu-cluster run submit` fills it in: a name, a node
count, an image, env and a command, and nothing else of the stack is needed.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpu_cluster.config.checkpoints import CHECKPOINT_DIR_ENV
from gpu_cluster.config.values import PROGRAM_ENV_NAMES
from gpu_cluster.config.workload import job_set_hostname
from gpu_cluster.facts.kubernetes import ENV_VAR_NAME
from gpu_cluster.facts.kueue import JOBSET_API, PRIORITY_CLASS_LABEL
from gpu_cluster.plan.launch import TRAINING_CONTAINER, pod_dns_name, rendezvous_id

# The ConfigMap's keys: the JobSet, and the run's parameters (RunParams).
JOB_SET_KEY = "jobset.json"
PARAMS_KEY = "run.json"
# A JobSet's name is a DNS-1035 label (kubernetes-sigs/jobset api/jobset/v1alpha2
# jobset_webhook.go: validateJobSetName), and its pods' hostnames add -<job>-<i>-<j> within 63.
RUN_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
RUN_NAME_MAX = 40


def template_name(stack_name: str) -> str:
    """The run template ConfigMap of the stack whose `name` is `stack_name`."""
    return f"{stack_name}-run-template"


def submitter_role_name(stack_name: str) -> str:
    return f"{stack_name}-run-submitter"


@dataclass(frozen=True)
class Rule:
    """One RBAC PolicyRule."""

    api_groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    resource_names: tuple[str, ...] = ()


def submitter_rules(stack_name: str) -> tuple[Rule, ...]:
    """What `gpu-cluster run` does in the namespace, and nothing more: JobSets made, listed, read
    and deleted; their pods, logs and the namespace's events read; Kueue's view of the queue
    read; the template read."""
    return (
        Rule(("jobset.x-k8s.io",), ("jobsets",), ("create", "list", "get", "delete")),
        Rule(("",), ("pods",), ("get", "list")),
        Rule(("",), ("pods/log",), ("get",)),
        # The Job failures `run status`'s ledger counts restarts from.
        Rule(("",), ("events",), ("list",)),
        Rule(("kueue.x-k8s.io",), ("workloads", "localqueues"), ("get", "list")),
        Rule(("",), ("configmaps",), ("get",), (template_name(stack_name),)),
    )


@dataclass(frozen=True)
class RunParams:
    """What a run needs besides the JobSet: the training container's name, where the user's
    command starts in its command (after the admission gate, checks and launcher), the queue's
    quota in nodes (None: not known to the stack, a referenced queue), GPUs per node, and the
    directory the runs' checkpoint directories are made in (workload.runs.checkpointDir; None:
    the pods share no writable storage, or a template published before runs had one), and the
    Kueue priority classes a run may ask for (workload.queue.priorityClasses' names)."""

    container: str
    user_command_from: int
    max_nodes: int | None
    gpus_per_node: int
    checkpoint_root: str | None = None
    priority_classes: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps(
            {
                "container": self.container,
                "userCommandFrom": self.user_command_from,
                "maxNodes": self.max_nodes,
                "gpusPerNode": self.gpus_per_node,
                "checkpointRoot": self.checkpoint_root,
                "priorityClasses": list(self.priority_classes),
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> RunParams:
        data = json.loads(text)
        return RunParams(
            container=data["container"],
            user_command_from=int(data["userCommandFrom"]),
            max_nodes=None if data["maxNodes"] is None else int(data["maxNodes"]),
            gpus_per_node=int(data["gpusPerNode"]),
            checkpoint_root=data.get("checkpointRoot"),
            priority_classes=tuple(data.get("priorityClasses", ())),
        )


def run_params(
    command: Sequence[str],
    user_command: Sequence[str],
    max_nodes: int | None,
    gpus: int,
    checkpoint_root: str | None,
    priority_classes: tuple[str, ...] = (),
) -> RunParams:
    """The parameters of a stack whose training container runs `command`, which ends with the
    user's `user_command` (workload.command)."""
    assert tuple(command[len(command) - len(user_command) :]) == tuple(user_command)
    return RunParams(
        TRAINING_CONTAINER,
        len(command) - len(user_command),
        max_nodes,
        gpus,
        checkpoint_root,
        priority_classes,
    )


def checkpoint_dir(params: RunParams, run: str) -> str | None:
    """Run `run`'s own checkpoint directory, None when the stack has no root for them."""
    return None if params.checkpoint_root is None else f"{params.checkpoint_root}/{run}"


def template_job_set(
    labels: Mapping[str, str], annotations: Mapping[str, str], spec: Any
) -> dict[str, Any]:
    """The template's JobSet: the stack's own run (the `spec` it is given, in manifest form)
    without its name and namespace."""
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": {"labels": dict(labels), "annotations": dict(annotations)},
        "spec": spec,
    }


class RunRequestError(ValueError):
    """A run that cannot be made from the template (a bad name, node count or env)."""


@dataclass(frozen=True)
class RunRequest:
    """What a submitter asks for: None keeps the stack's (its image, its node count, its
    command; no priority class)."""

    name: str
    nodes: int | None = None
    image: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()
    priority: str | None = None


def parse_env(pairs: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """`K=V` arguments as (name, value), each name one a run may set."""
    parsed: list[tuple[str, str]] = []
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not ENV_VAR_NAME.fullmatch(name):
            raise RunRequestError(f"--env {pair!r}: give NAME=VALUE")
        if name in PROGRAM_ENV_NAMES:
            raise RunRequestError(
                f"--env {name}: the run sets it itself (its rank, rendezvous or network)"
            )
        parsed.append((name, value))
    return tuple(parsed)


def check_name(name: str) -> None:
    if len(name) > RUN_NAME_MAX or not RUN_NAME.fullmatch(name):
        raise RunRequestError(
            f"run name {name!r}: lowercase letters, digits and '-', starting with a letter, at "
            f"most {RUN_NAME_MAX} characters"
        )


def check_nodes(nodes: int, params: RunParams) -> None:
    if nodes < 1:
        raise RunRequestError(f"--nodes {nodes}: at least 1")
    if params.max_nodes is not None and nodes > params.max_nodes:
        raise RunRequestError(
            f"--nodes {nodes}: the queue's quota holds {params.max_nodes} GPU nodes, so Kueue "
            "would never admit the run; nothing was created"
        )


def check_priority(priority: str, params: RunParams) -> None:
    if priority not in params.priority_classes:
        offered = ", ".join(params.priority_classes) or "none (workload.queue.priorityClasses)"
        raise RunRequestError(
            f"--priority {priority}: not a priority class of the stack; it offers {offered}; "
            "nothing was created"
        )


def _set_env(env: list[dict[str, Any]], name: str, value: str) -> None:
    for entry in env:
        if entry.get("name") == name:
            entry.clear()
            entry.update(name=name, value=value)
            return
    env.append({"name": name, "value": value})


def _job(job_set: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = job_set["spec"]["replicatedJobs"]
    job: dict[str, Any] = replicated["template"]["spec"]
    return job


def run_nodes(job_set: Mapping[str, Any]) -> int:
    """A run's node count (its one Job's parallelism)."""
    return int(_job(dict(job_set))["parallelism"])


def fill(
    template: Mapping[str, Any], params: RunParams, request: RunRequest, namespace: str
) -> dict[str, Any]:
    """The JobSet of run `request` in `namespace`, from the stack's `template`."""
    check_name(request.name)
    job_set = copy.deepcopy(dict(template))
    job_set["metadata"] = {**job_set["metadata"], "name": request.name, "namespace": namespace}
    if request.priority is not None:
        check_priority(request.priority, params)
        job_set["metadata"]["labels"] = {
            **job_set["metadata"]["labels"],
            PRIORITY_CLASS_LABEL: request.priority,
        }
    spec = job_set["spec"]
    job = _job(job_set)
    nodes = request.nodes if request.nodes is not None else int(job["parallelism"])
    check_nodes(nodes, params)
    job["parallelism"] = job["completions"] = nodes
    pod_spec = job["template"]["spec"]
    (container,) = (c for c in pod_spec["containers"] if c["name"] == params.container)
    if request.image is not None:
        container["image"] = request.image
    if request.command:
        gate_and_launcher = container["command"][: params.user_command_from]
        container["command"] = [*gate_and_launcher, *request.command]
    env: list[dict[str, Any]] = container.setdefault("env", [])
    # The rendezvous of this run: rank 0's name in the stack's headless Service, its own id.
    service = spec["network"]["subdomain"]
    master = pod_dns_name(job_set_hostname(request.name, 0), service, namespace)
    _set_env(env, "MASTER_ADDR", master)
    _set_env(env, "RDZV_ID", rendezvous_id(namespace, request.name))
    if request.nodes is not None:
        for name in ("NNODES", "TORCHRUN_NNODES"):
            _set_env(env, name, str(nodes))
        _set_env(env, "WORLD_SIZE", str(nodes * params.gpus_per_node))
    checkpoints = checkpoint_dir(params, request.name)
    if checkpoints is not None:
        _set_env(env, CHECKPOINT_DIR_ENV, checkpoints)
    # Last: the submitter's own values win (a CHECKPOINT_DIR of their choosing, too).
    for name, value in request.env:
        _set_env(env, name, value)
    return job_set
