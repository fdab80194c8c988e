"""What scripts/node_health_runner.py sees of a cluster in the offline tests: kube_api.Api's
`call` answered from canned nodes, Jobs, pods and PodTemplates, every write recorded (the API
server itself is in tests/real/test_node_health_runner.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tests.script_modules import load_script

runner = load_script("node_health_runner")
# Its decisions and its metrics, the modules it imports from beside it.
check_jobs = load_script("health_check_jobs")
health_metrics = load_script("health_metrics")
NAMESPACE = "training"
JOBS_PATH = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
NOW = 1_800_000_000.0


class RecordedApi:
    """The cluster as `nodes`, `jobs`, `pods` (of the Jobs, by the Job controller's label) and
    `templates` (by name)."""

    def __init__(
        self,
        nodes: list[Any],
        jobs: list[Any],
        templates: dict[str, Any],
        pods: Sequence[Any] = (),
    ) -> None:
        self.nodes, self.jobs, self.templates, self.pods = nodes, jobs, templates, list(pods)
        self.writes: list[tuple[str, str, Any]] = []

    def call(self, method: str, path: str, body: Any = None, query: Any = None, **_: Any) -> Any:
        if method != "GET":
            self.writes.append((method, path, body))
            return {}
        if path == "/api/v1/nodes":
            return {"items": self.nodes}
        if path == JOBS_PATH:
            return {"items": self.jobs}
        if path == f"/api/v1/namespaces/{NAMESPACE}/pods":
            assert not query, "the runner reads the namespace's pods whole, once a pass"
            return {"items": self.pods}
        return self.templates[path.rsplit("/", 1)[1]]

    def patched(self) -> dict[str, dict[str, str]]:
        """Node -> the labels written on it."""
        return {
            path.rsplit("/", 1)[1]: body["metadata"]["labels"]
            for method, path, body in self.writes
            if method == "PATCH"
        }

    def started(self) -> list[tuple[str, ...]]:
        """The nodes of each Job created, in order."""
        return [
            tuple(body["metadata"]["annotations"][runner.NODES_ANNOTATION].split(","))
            for method, _, body in self.writes
            if method == "POST"
        ]


def gpu_node(name: str, labels: dict[str, str], taints: Sequence[Any] = ()) -> dict[str, Any]:
    spec = {"taints": list(taints)} if taints else {}
    return {"metadata": {"name": name, "resourceVersion": "1", "labels": labels}, "spec": spec}


def finished(job: dict[str, Any], result: str | None) -> dict[str, Any]:
    """`job` as the Job controller leaves it: Complete (pass), Failed (fail) or running (None)."""
    kind = {"pass": "Complete", "fail": "Failed", None: None}[result]
    conditions = [{"type": kind, "status": "True"}] if kind else []
    return {**job, "status": {"conditions": conditions}}


def check_pod(
    job: dict[str, Any],
    node: str,
    exit_code: int | None,
    message: str = "",
    ran: tuple[str, str] = ("08:00:00", "08:05:00"),
) -> dict[str, Any]:
    """A pod of `job` on `node` whose check ran to `exit_code` (None: it never started), from
    and to the times `ran` (of one day)."""
    state: dict[str, Any] = {"waiting": {"reason": "ContainerCreating"}}
    if exit_code is not None:
        state = {
            "terminated": {
                "exitCode": exit_code,
                "startedAt": f"2027-01-15T{ran[0]}Z",
                "finishedAt": f"2027-01-15T{ran[1]}Z",
                "message": message,
            }
        }
    return {
        "metadata": {
            "labels": {
                runner.JOB_NAME_LABEL: job["metadata"]["name"],
                runner.CHECK_LABEL: job["metadata"]["labels"][runner.CHECK_LABEL],
            }
        },
        "spec": {"nodeName": node},
        "status": {"containerStatuses": [{"name": "check", "state": state}]},
    }


def ran(check: str, seconds_ago: float, result: str | None = None) -> dict[str, str]:
    """A node's labels after `check` ran `seconds_ago` (with `result`, when given)."""
    labels = {check_jobs.TIME_LABEL.format(check): str(int(NOW - seconds_ago))}
    if result is not None:
        labels[check_jobs.RESULT_LABEL.format(check)] = result
    return labels


def training_pod(node: str, phase: str = "Running") -> dict[str, Any]:
    """A training pod of the namespace on `node`, holding its GPUs."""
    gpus = {"nvidia.com/gpu": "8"}
    return {
        "metadata": {"labels": {"app.kubernetes.io/component": "training"}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "training", "resources": {"requests": gpus, "limits": gpus}}],
        },
        "status": {"phase": phase},
    }
