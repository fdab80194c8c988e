"""`gpu-cluster run submit | list | status | logs | stop`: named runs of a JobSet stack, made from
the run template the stack publishes in its namespace (plan.run_template), on the stack's kube
context, with no Pulumi and no change to the stack's config."""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from gpu_cluster.config.checkpoints import CHECKPOINT_DIR_ENV
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.facts.kueue import JOB_COMPLETION_INDEX_ANNOTATION, JOBSET_NAME_LABEL, QUEUE_LABEL
from gpu_cluster.ledger import workload_of
from gpu_cluster.offline.project import ProjectError
from gpu_cluster.offline.run_cluster import (
    CONFLICT,
    JOBSET_GROUP,
    JOBSET_VERSION,
    JOBSETS,
    KUEUE_GROUP,
    KUEUE_VERSION,
    NOT_FOUND,
    REQUEST_TIMEOUT_S,
    Right,
    RunCluster,
    RunCommandError,
    connect,
    is_status,
    lines,
)
from gpu_cluster.offline.run_ledger import run_ledger, svg, table_rows
from gpu_cluster.offline.run_records import last_step, run_records, start_table
from gpu_cluster.offline.run_state import (
    admission_lines,
    is_running,
    list_row,
    pod_rows,
    restarts,
    state,
)
from gpu_cluster.plan.run_template import (
    JOB_SET_KEY,
    PARAMS_KEY,
    RUN_NAME_MAX,
    RunParams,
    RunRequest,
    RunRequestError,
    checkpoint_dir,
    fill,
    parse_env,
    run_nodes,
    template_name,
)

# What each command does in the namespace (the submitter Role grants all of it).
LIST_RUNS = (
    Right("list", JOBSET_GROUP, JOBSETS),
    Right("list", KUEUE_GROUP, "workloads"),
    Right("list", "", "pods"),
)
STAMP_LENGTH = len("-1231-235959")


def _pods_of(name: str) -> str:
    return f"{JOBSET_NAME_LABEL}={name}"


def default_name(stack_name: str, now: datetime.datetime) -> str:
    """<stack name>-<MMDD-HHMMSS>, within a run name's length."""
    return f"{stack_name[: RUN_NAME_MAX - STAMP_LENGTH].rstrip('-')}-{now:%m%d-%H%M%S}"


def submit(cluster: RunCluster, args: argparse.Namespace) -> None:
    name = args.name or default_name(cluster.settings.name, datetime.datetime.now(datetime.UTC))
    request = RunRequest(
        name,
        args.nodes,
        args.image,
        parse_env(args.env),
        tuple(args.training_command),
        args.priority,
    )
    template = template_name(cluster.settings.name)
    cluster.require(
        (
            Right("get", "", "configmaps", name=template),
            Right("get", KUEUE_GROUP, "localqueues"),
            Right("create", JOBSET_GROUP, JOBSETS),
        )
    )
    data = cluster.template()
    params = RunParams.from_json(data[PARAMS_KEY])
    job_set = fill(json.loads(data[JOB_SET_KEY]), params, request, cluster.namespace)
    queue = job_set["metadata"]["labels"][QUEUE_LABEL]
    try:
        cluster.call(
            cluster.custom().get_namespaced_custom_object,
            KUEUE_GROUP,
            KUEUE_VERSION,
            cluster.namespace,
            "localqueues",
            queue,
        )
    except Exception as exc:
        if not is_status(exc, NOT_FOUND):
            raise
        raise RunCommandError(
            f"no queue: LocalQueue {queue!r} is not in namespace {cluster.namespace!r} (the "
            "stack's workload.queue); nothing was created"
        ) from None
    try:
        cluster.call(
            cluster.custom().create_namespaced_custom_object,
            JOBSET_GROUP,
            JOBSET_VERSION,
            cluster.namespace,
            JOBSETS,
            job_set,
        )
    except Exception as exc:
        if not is_status(exc, CONFLICT):
            raise
        raise RunCommandError(
            f"a run named {name!r} exists: stop it first, or give another --name"
        ) from None
    print(
        f"submitted run {name} ({run_nodes(job_set)} nodes) to LocalQueue {queue}; watch it: "
        f"gpu-cluster run status {name} --stack {cluster.stack}"
    )
    checkpoints = dict(request.env).get(CHECKPOINT_DIR_ENV) or checkpoint_dir(params, name)
    if checkpoints is not None:
        print(f"its checkpoints: {CHECKPOINT_DIR_ENV}={checkpoints}")


def list_runs(cluster: RunCluster, args: argparse.Namespace) -> None:
    cluster.require(LIST_RUNS)
    workloads = cluster.workloads()
    pods = cluster.pods(JOBSET_NAME_LABEL)
    now = datetime.datetime.now(datetime.UTC)
    rows: list[Sequence[str]] = [("NAME", "STATE", "NODES", "RESTARTS", "AGE")]
    for job_set in sorted(cluster.job_sets(), key=lambda j: j["metadata"]["creationTimestamp"]):
        name = job_set["metadata"]["name"]
        own = [p for p in pods if p["metadata"]["labels"].get(JOBSET_NAME_LABEL) == name]
        rows.append(list_row(job_set, workload_of(workloads, job_set), own, now))
    print("\n".join(lines(rows)))


def status(cluster: RunCluster, args: argparse.Namespace) -> None:
    cluster.require((Right("get", JOBSET_GROUP, JOBSETS), *LIST_RUNS[1:]))
    job_set = cluster.job_set(args.run)
    workload = workload_of(cluster.workloads(), job_set)
    pods = cluster.pods(_pods_of(args.run))
    running = sum(1 for p in pods if is_running(p))
    print(
        f"run {args.run}: {state(job_set, workload, running)}, {run_nodes(job_set)} nodes, "
        f"{restarts(job_set)} restarts"
    )
    print("\n".join(admission_lines(workload)))
    rows = pod_rows(pods)
    if rows:
        print("\n".join(lines([("RANK", "POD", "PHASE", "NODE", "RESTARTS"), *rows])))
    else:
        print("pods: none")
    print()
    cluster.require((Right("list", "", "events"), Right("get", "", "pods", "log")))
    container = RunParams.from_json(cluster.template()[PARAMS_KEY]).container
    records = run_records(cluster, pods, container)
    pattern = cluster.settings.launcher.first_step_pattern
    print("the current pods' start:")
    print(start_table(cluster, job_set, workload, pods, records, pattern))
    print()
    if pattern is None:
        print(
            "ledger: set launcher.firstStepPattern to see the last step and where the run's "
            "time went"
        )
        return
    print(last_step(records, pattern, datetime.datetime.now(datetime.UTC)))
    print()
    found = run_ledger(cluster, job_set, workload, pods, records, pattern)
    print("where the run's time went (gpu-cluster run status --help: the rules):")
    print("\n".join(lines(table_rows(found))))
    if args.svg is not None:
        args.svg.write_text(svg(found, f"run {args.run}: where its time went"), encoding="utf-8")
        print(f"drawn in {args.svg}")


def logs(cluster: RunCluster, args: argparse.Namespace) -> None:
    cluster.require((Right("list", "", "pods"), Right("get", "", "pods", "log")))
    cluster.job_set(args.run)  # an unknown run is said so, not "no pod"
    selector = f"{_pods_of(args.run)},{JOB_COMPLETION_INDEX_ANNOTATION}={args.rank}"
    pods = cluster.pods(selector)
    if not pods:
        raise RunCommandError(
            f"run {args.run} has no pod of rank {args.rank} now (gpu-cluster run status "
            f"{args.run} --stack {cluster.stack})"
        )
    newest = max(pods, key=lambda p: p["metadata"]["creationTimestamp"])
    answer = cluster.call(
        cluster.core().read_namespaced_pod_log,
        newest["metadata"]["name"],
        cluster.namespace,
        container=RunParams.from_json(cluster.template()[PARAMS_KEY]).container,
        follow=args.follow,
        _preload_content=False,
        # Following waits on the pod for as long as it writes: only the connection is bounded.
        timeout=(REQUEST_TIMEOUT_S, None) if args.follow else REQUEST_TIMEOUT_S,
    )
    for chunk in answer.stream(64 * 1024):
        sys.stdout.buffer.write(chunk)
        sys.stdout.buffer.flush()


def stop(cluster: RunCluster, args: argparse.Namespace) -> None:
    cluster.require((Right("get", JOBSET_GROUP, JOBSETS), Right("delete", JOBSET_GROUP, JOBSETS)))
    job_set = cluster.job_set(args.run)
    (replicated,) = job_set["spec"]["replicatedJobs"]
    pod_spec = replicated["template"]["spec"]["template"]["spec"]
    # Kubernetes' default when the pod sets none (core/v1 PodSpec).
    grace = pod_spec.get("terminationGracePeriodSeconds", 30)
    cluster.call(
        cluster.custom().delete_namespaced_custom_object,
        JOBSET_GROUP,
        JOBSET_VERSION,
        cluster.namespace,
        JOBSETS,
        args.run,
        # The JobSet stays, as stopped, until its Jobs and pods are gone: each pod gets SIGTERM
        # and its grace period to save a checkpoint first.
        propagation_policy="Foreground",
    )
    print(f"stopping run {args.run}: its pods get SIGTERM and {grace}s to checkpoint and exit")


COMMANDS: dict[str, Callable[[RunCluster, argparse.Namespace], None]] = {
    "submit": submit,
    "list": list_runs,
    "status": status,
    "logs": logs,
    "stop": stop,
}


def add_run_arguments(
    run_cmd: argparse.ArgumentParser, stack_arguments: Callable[[argparse.ArgumentParser], None]
) -> None:
    """`run`'s own subcommands, each with `stack_arguments` (--stack, --set, --project-dir)."""
    verbs = run_cmd.add_subparsers(dest="run_command", required=True, metavar="VERB")

    def verb(name: str, help_: str) -> argparse.ArgumentParser:
        parser = verbs.add_parser(name, help=help_, description=help_)
        stack_arguments(parser)
        return parser

    submit_cmd = verb(
        "submit",
        "a new run from the stack's run template, into the stack's LocalQueue (more nodes than "
        "the queue's quota are refused before anything is created)",
    )
    submit_cmd.add_argument("--name", help="the run's name (default: <stack name>-<MMDD-HHMMSS>)")
    submit_cmd.add_argument("--nodes", type=int, help="GPU nodes (default: the stack's)")
    submit_cmd.add_argument("--image", help="the training image (default: the stack's)")
    submit_cmd.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="(repeatable)"
    )
    submit_cmd.add_argument(
        "--priority",
        metavar="CLASS",
        help="a Kueue priority class the stack offers (workload.queue.priorityClasses); with "
        "workload.queue.preemption a run of a higher one may evict it (default: none, 0)",
    )
    submit_cmd.add_argument(
        "training_command",
        nargs="*",
        metavar="-- COMMAND ARGS",
        help="what the launcher runs on every pod (default: the stack's workload.command)",
    )
    verb("list", "the stack's runs: name, state, nodes, restarts, age")
    status_cmd = verb(
        "status",
        "a run's state, its admission by Kueue, its pods, their start phase by phase, and "
        "(with launcher.firstStepPattern) its first and last step and its goodput ledger: where "
        "its wall time went, by the rules of gpu_cluster/ledger.py",
    )
    status_cmd.add_argument("run", metavar="NAME")
    status_cmd.add_argument(
        "--svg", type=Path, metavar="FILE", help="also draw the ledger as an SVG picture in FILE"
    )
    verb(
        "stop", "delete a run: its pods get SIGTERM and their grace period to checkpoint"
    ).add_argument("run", metavar="NAME")
    logs_cmd = verb("logs", "a run's training output (rank 0's by default)")
    logs_cmd.add_argument("run", metavar="NAME")
    logs_cmd.add_argument("--rank", type=int, default=0, help="the pod's rank (default 0)")
    logs_cmd.add_argument("-f", "--follow", action="store_true", help="follow the output")


def run_command(args: argparse.Namespace, project_dir: Callable[[], Path]) -> int:
    """One `gpu-cluster run` verb; 2 when refused (said on stderr)."""
    try:
        cluster = connect(args.stack, tuple(args.set), project_dir())
        COMMANDS[args.run_command](cluster, args)
    except (ConfigError, FileNotFoundError, ProjectError, RunCommandError, RunRequestError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
