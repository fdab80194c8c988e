"""`python3 -m gpu_cluster.timeline CLI TARGET... [--agents NS:SELECTOR]... [--health-check CHECK]
[--first-step PATTERN] NAMESPACE KIND NAME`:
when each phase of a training run's start happened, from the cluster's own records, as a table
(timelineCommand). KIND: jobset or statefulset. TARGET: --kubeconfig FILE and/or --context
CONTEXT (then --cluster CLUSTER), as the stack names its cluster. --agents: the pods that prepare
a GPU node for training (GKE's GPUDirect node agents, the image pre-pull), by namespace and
label selector. --health-check: the node health gate's Kueue AdmissionCheck. --first-step: a
regular expression for a line the training prints at its first step.

The phases, each the moment the last of the run's pods (or nodes) got there: submitted (the
controller object created), health gate (the gate found the run's nodes healthy), admitted
(Kueue's Workload, JobSet runs), nodes ready (the nodes the pods run on), agents ready (the
agents' pods on those nodes Ready), scheduled, sandbox ready (the pod's sandbox, network and
volumes made), image pulled (the kubelet's Pulled event, when it still exists), initialized
(init steps done: NIC detection, GPUDirect setup), started (the training container running),
ready, and first step (pod 0's training container first printed a line --first-step matches, by
the kubelet's timestamps).
Standard library only, for python3 as launch_all is."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any, NamedTuple

Object = dict[str, Any]
USAGE = (
    "usage: python3 -m gpu_cluster.timeline CLI [--kubeconfig FILE] [--context CONTEXT] "
    "[--cluster CLUSTER] [--agents NAMESPACE:SELECTOR]... [--health-check CHECK] "
    "[--first-step PATTERN] NAMESPACE jobset|statefulset NAME"
)
AGENTS_FLAG = "--agents"
HEALTH_CHECK_FLAG = "--health-check"
FIRST_STEP_FLAG = "--first-step"
# How much of pod 0's log is read for the first step: its start, where the step is.
FIRST_STEP_LOG_BYTES = 16 * 2**20
# How kubectl and oc report a request the user's rights do not allow.
FORBIDDEN = "(Forbidden)"
TARGET_FLAGS = ("--kubeconfig", "--context", "--cluster")
# The label the JobSet controller puts on its pods (jobset api/jobset/v1alpha2 JobSetNameKey).
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
# The index the Job controller gives an Indexed Job's pod (kubernetes batch/v1
# JobCompletionIndexAnnotation): rank 0 is index 0.
JOB_COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# The StatefulSet's pods, by the labels the program gives them (components/shared_args.py labels).
STATEFUL_SET_PODS = "app.kubernetes.io/instance={name},app.kubernetes.io/component=training"
TRAINING_CONTAINER = "training"
# Set by the kubelet once a pod's sandbox, network and volumes are made, before any image pull
# (kubernetes core/v1 PodReadyToStartContainers, KEP-3085; on by default since 1.29).
SANDBOX_READY_CONDITION = "PodReadyToStartContainers"
# The phases of a start, in the order it takes them ("admitted": JobSet runs only; "health
# gate": runs behind the node health gate; "agents ready": stacks with node agents).
PHASES = (
    "submitted",
    "health gate",
    "admitted",
    "nodes ready",
    "agents ready",
    "scheduled",
    "sandbox ready",
    "image pulled",
    "initialized",
    "started",
    "ready",
    "first step",
)


class Phase(NamedTuple):
    name: str
    at: datetime | None


class Run(NamedTuple):
    """What the cluster says about one run: its controller object, Kueue Workloads, pods,
    their nodes, the namespace's events and the node agents' pods (None: the stack has none)."""

    controller: Object
    workloads: list[Object]
    pods: list[Object]
    nodes: list[Object]
    events: list[Object]
    agents: list[Object] | None = None
    # What the user may not read (RBAC): its phases show '-'.
    unreadable: tuple[str, ...] = ()
    # The node health gate's AdmissionCheck (None: the run has none).
    health_check: str | None = None
    # When pod 0 printed its first step (None: not yet, or not recorded); shown when asked.
    first_step: datetime | None = None
    asked_first_step: bool = False


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _condition(obj: Object, kind: str) -> datetime | None:
    """When `obj`'s condition `kind` last became True; None while it is not True."""
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind and condition.get("status") == "True":
            return _time(condition.get("lastTransitionTime"))
    return None


def _last(times: list[datetime | None]) -> datetime | None:
    """The moment the last of them got there; None until all have."""
    if not times or any(t is None for t in times):
        return None
    return max(t for t in times if t is not None)


def _started(pod: Object) -> datetime | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == TRAINING_CONTAINER:
            return _time(((status.get("state") or {}).get("running") or {}).get("startedAt"))
    return None


def _pulled(pod: Object, events: list[Object]) -> datetime | None:
    name = pod["metadata"]["name"]
    times = [
        _time(e.get("lastTimestamp") or e.get("eventTime"))
        for e in events
        if e.get("reason") == "Pulled"
        and (e.get("involvedObject") or {}).get("name") == name
        and TRAINING_CONTAINER in (e.get("involvedObject") or {}).get("fieldPath", "")
    ]
    return max((t for t in times if t is not None), default=None)


def _agents_ready(run: Run) -> datetime | None:
    """When the agents' pods were last Ready on the run's nodes; None until every pod is on a
    node and every such node has them Ready (a node is as ready as its last agent)."""
    placed = [p["spec"].get("nodeName") for p in run.pods]
    if not placed or None in placed:
        return None
    on_node: dict[str, list[datetime | None]] = {name: [] for name in placed}
    for agent in run.agents or []:
        node = agent["spec"].get("nodeName")
        if node in on_node:
            on_node[node].append(_condition(agent, "Ready"))
    if not on_node or any(not times for times in on_node.values()):
        return None
    return _last([t for times in on_node.values() for t in times])


def _check_ready(workload: Object, check: str) -> datetime | None:
    """When admission check `check` last answered Ready on `workload`; None while it is not."""
    for state in (workload.get("status") or {}).get("admissionChecks") or []:
        if state.get("name") == check and state.get("state") == "Ready":
            return _time(state.get("lastTransitionTime"))
    return None


def phases(run: Run) -> list[Phase]:
    """The run's PHASES with their times."""
    pods, nodes = run.pods, run.nodes
    at = {
        "submitted": _time(run.controller["metadata"].get("creationTimestamp")),
        "health gate": _last([_check_ready(w, run.health_check or "") for w in run.workloads]),
        "admitted": _last([_condition(w, "Admitted") for w in run.workloads]),
        "nodes ready": _last([_condition(n, "Ready") for n in nodes]) if pods else None,
        "agents ready": _agents_ready(run),
        "scheduled": _last([_condition(p, "PodScheduled") for p in pods]),
        "sandbox ready": _last([_condition(p, SANDBOX_READY_CONDITION) for p in pods]),
        "image pulled": _last([_pulled(p, run.events) for p in pods]),
        "initialized": _last([_condition(p, "Initialized") for p in pods]),
        "started": _last([_started(p) for p in pods]),
        "ready": _last([_condition(p, "Ready") for p in pods]),
        "first step": run.first_step,
    }
    shown = set(PHASES)
    if run.controller.get("kind") != "JobSet":
        shown -= {"admitted", "health gate"}
    if run.agents is None:
        shown.discard("agents ready")
    if run.health_check is None:
        shown.discard("health gate")
    if not run.asked_first_step:
        shown.discard("first step")
    return [Phase(name, at[name]) for name in PHASES if name in shown]


def table(run: Run) -> str:
    """One line per phase: when (UTC) and seconds since the run was submitted."""
    found = phases(run)
    submitted = found[0].at
    lines = [f"{'phase':<14}{'at (UTC)':<22}{'since submitted':>16}"]
    for phase in found:
        if phase.at is None:
            lines.append(f"{phase.name:<14}{'-':<22}{'-':>16}")
            continue
        since = f"{(phase.at - submitted).total_seconds():.0f} s" if submitted else "-"
        lines.append(f"{phase.name:<14}{phase.at.strftime('%Y-%m-%d %H:%M:%S'):<22}{since:>16}")
    pods = len(run.pods)
    lines.append(f"({pods} pod{'s' if pods != 1 else ''}; '-': not there yet, or not recorded)")
    if run.unreadable:
        lines.append(f"(not readable with your rights, so '-': {', '.join(run.unreadable)})")
    return "\n".join(lines)


def timestamped(log: str) -> Iterator[tuple[datetime, str]]:
    """The lines of `log` read with --timestamps (RFC 3339 time, a space, the line): when each
    was printed, and what."""
    for line in log.splitlines():
        stamp, _, text = line.partition(" ")
        # Nanoseconds, which datetime does not hold: to the microsecond.
        whole, dot, fraction = stamp.rstrip("Z").partition(".")
        try:
            yield datetime.fromisoformat(f"{whole}{dot}{fraction[:6]}+00:00"), text
        except ValueError:
            continue  # a line cut by --limit-bytes, or none of the kubelet's


def first_step_at(log: str, pattern: str) -> datetime | None:
    """When the first line of `log` (read with --timestamps) that `pattern` matches was
    printed."""
    finder = re.compile(pattern)
    return next((at for at, text in timestamped(log) if finder.search(text)), None)


def _pod_zero(pods: list[Object]) -> Object | None:
    """Rank 0: an indexed Job's pod of completion index 0, a StatefulSet's ordinal 0."""
    for pod in pods:
        meta = pod["metadata"]
        index = (meta.get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION)
        if index == "0" or (index is None and meta["name"].endswith("-0")):
            return pod
    return None


def _first_step(
    kube: list[str], namespace: str, pods: list[Object], pattern: str
) -> datetime | None:
    """When pod 0's training container printed the first step; None when it has not, or its
    log cannot be read (not started, gone with a restart, or a node that serves none)."""
    pod = _pod_zero(pods)
    if pod is None:
        return None
    args = (
        "logs",
        "-n",
        namespace,
        pod["metadata"]["name"],
        "-c",
        TRAINING_CONTAINER,
        "--timestamps",
        f"--limit-bytes={FIRST_STEP_LOG_BYTES}",
    )
    result = _cli(kube, args)
    return first_step_at(result.stdout, pattern) if result.returncode == 0 else None


def _readable(kube: list[str], *args: str) -> Object | None:
    """`_get`, or None when the user's rights do not reach it (kubectl's Forbidden): on a shared
    cluster a project's user may not list nodes or another namespace's pods."""
    result = _query(kube, args)
    if result.returncode != 0 and FORBIDDEN in result.stderr:
        return None
    return _parsed(result, args)


def _get(kube: list[str], *args: str) -> Object:
    return _parsed(_query(kube, args), args)


def _query(kube: list[str], args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    return _cli(kube, ("get", *args, "-o", "json"))


def _cli(kube: list[str], args: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([*kube, *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise SystemExit(f"timeline: {kube[0]} is not on PATH") from None


def _parsed(result: subprocess.CompletedProcess[str], args: tuple[str, ...]) -> Object:
    if result.returncode != 0:
        raise SystemExit(f"timeline: {' '.join(args)}: {result.stderr.strip()}")
    try:
        found: Object = json.loads(result.stdout)
    except json.JSONDecodeError as error:
        raise SystemExit(f"timeline: {' '.join(args)}: not JSON ({error})") from None
    return found


def fetch(
    kube: list[str],
    namespace: str,
    kind: str,
    name: str,
    agents: list[tuple[str, str]] | None = None,
    health_check: str | None = None,
    first_step: str | None = None,
) -> Run:
    """The run's objects, read with `kube` (the CLI and its target flags); `agents`: the node
    agents' pods as (namespace, label selector); `health_check`: the node health gate's;
    `first_step`: the pattern of the training's first-step line."""
    resource, selector = (
        ("jobsets.jobset.x-k8s.io", f"{JOBSET_NAME_LABEL}={name}")
        if kind == "jobset"
        else ("statefulsets.apps", STATEFUL_SET_PODS.format(name=name))
    )
    controller = _get(kube, "-n", namespace, resource, name)
    uid = controller["metadata"]["uid"]
    unreadable: list[str] = []

    def items(what: str, *args: str) -> list[Object]:
        found = _readable(kube, *args)
        if found is None:
            unreadable.append(what)
            return []
        listed: list[Object] = found["items"]
        return listed

    workloads = []
    if kind == "jobset":
        workloads = [
            w
            for w in items("Kueue workloads", "-n", namespace, "workloads.kueue.x-k8s.io")
            if any(o.get("uid") == uid for o in w["metadata"].get("ownerReferences") or [])
        ]
    pods = _get(kube, "-n", namespace, "pods", "-l", selector)["items"]
    node_names = {p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")}
    # One list call, not one call per node: a run may span hundreds of nodes.
    listed = items("nodes", "nodes") if node_names else []
    nodes = [n for n in listed if n["metadata"]["name"] in node_names]
    if len(nodes) < len(pods):
        nodes = []  # a pod not on a node yet: the nodes are not all ready for the run
    events = _get(kube, "-n", namespace, "events")["items"]
    agent_pods = None
    if agents:
        agent_pods = [
            pod
            for agent_namespace, selector in agents
            for pod in items(
                f"the node agents' pods in {agent_namespace}",
                "-n",
                agent_namespace,
                "pods",
                "-l",
                selector,
            )
        ]
    stepped = _first_step(kube, namespace, pods, first_step) if first_step else None
    return Run(
        controller,
        workloads,
        pods,
        nodes,
        events,
        agent_pods,
        tuple(unreadable),
        health_check,
        stepped,
        first_step is not None,
    )


def main(argv: list[str]) -> int:
    if len(argv) < 4:
        print(USAGE, file=sys.stderr)
        return 2
    cli, rest = argv[0], argv[1:]
    target: list[str] = []
    agents: list[tuple[str, str]] = []
    health_check = first_step = None
    flags = (*TARGET_FLAGS, AGENTS_FLAG, HEALTH_CHECK_FLAG, FIRST_STEP_FLAG)
    while len(rest) > 3 and rest[0] in flags:
        if rest[0] == HEALTH_CHECK_FLAG:
            health_check = rest[1]
        elif rest[0] == FIRST_STEP_FLAG:
            first_step = rest[1]
        elif rest[0] == AGENTS_FLAG:
            agent_namespace, colon, selector = rest[1].partition(":")
            if not (agent_namespace and colon and selector):
                print(f"timeline: {AGENTS_FLAG} takes NAMESPACE:SELECTOR", file=sys.stderr)
                return 2
            agents.append((agent_namespace, selector))
        else:
            target += rest[:2]
        rest = rest[2:]
    if len(rest) != 3 or rest[1] not in ("jobset", "statefulset"):
        print(USAGE, file=sys.stderr)
        return 2
    if not {"--kubeconfig", "--context"} & set(target[::2]):
        print("timeline: name the cluster with --kubeconfig or --context", file=sys.stderr)
        return 2
    namespace, kind, name = rest
    if first_step is not None:
        try:
            re.compile(first_step)
        except re.error as error:
            print(
                f"timeline: {FIRST_STEP_FLAG} is not a regular expression: {error}", file=sys.stderr
            )
            return 2
    run = fetch([cli, *target], namespace, kind, name, agents, health_check, first_step)
    print(table(run))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
