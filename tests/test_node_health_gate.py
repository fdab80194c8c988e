"""The node health gate (workload.queue.healthGate): scripts/node_health_gate.py's decisions, the
objects the stack renders for it, and what they may do. The config it refuses is in
tests/test_bad_config.py; tests/real/test_node_health_gate.py runs it against the real Kueue."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import certifi
import pytest
import yaml

from gpu_cluster.config.values import HealthCheck
from gpu_cluster.facts import health
from gpu_cluster.plan.health_gate import HEALTH_GATE_CONTROLLER, HEALTH_GATE_SCRIPT
from gpu_cluster.plan.health_runner import HEALTH_RUNNER_SCRIPT
from gpu_cluster.plan.shipped import KUBE_API_SCRIPT
from tests.conftest import GKE_RWX, ROOT, manifests, run_stack
from tests.script_modules import SCRIPTS, load_script
from tools.realtier.stacks import render

SCRIPT = ROOT / "scripts" / HEALTH_GATE_SCRIPT
GATE = "workload.queue.healthGate.enabled=true"
JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py")
GKE = ("gcp-a3", (*JOB_SET, *GKE_RWX, GATE))
OPENSHIFT = (
    "nerc-production",
    (*JOB_SET, "workload.queue.topologyLevels[0]=example.com/rack", GATE),
)
HOSTNAME = "kubernetes.io/hostname"
NOW = 1_800_000_000.0
HOUR = 3600


gate = load_script("node_health_gate")
kube_api = load_script("kube_api")


def individual(roots: list[str], prefix: str | None = None, suffix: str | None = None) -> Any:
    values: dict[str, Any] = {"roots": roots}
    if prefix is not None:
        values["prefix"] = prefix
    if suffix is not None:
        values["suffix"] = suffix
    return {"individual": values}


# kueue apis/kueue/v1beta2 workload_types.go (v0.19.2), PodSetAssignment.TopologyAssignment,
# Examples 3 and 4: six nodes, one pod each, in one slice or in two.
EXAMPLE_3 = {
    "levels": [HOSTNAME],
    "slices": [
        {
            "domainCount": 6,
            "valuesPerLevel": [
                individual(
                    ["1-node-1", "1-node-2", "1-node-3", "1-node-4", "2-node-1", "2-node-2"],
                    prefix="block-1-rack-",
                )
            ],
            "podCounts": {"universal": 1},
        }
    ],
}
EXAMPLE_4 = {
    "levels": [HOSTNAME],
    "slices": [
        {
            "domainCount": 4,
            "valuesPerLevel": [individual(["1", "2", "3", "4"], prefix="block-1-rack-1-node-")],
            "podCounts": {"universal": 1},
        },
        {
            "domainCount": 2,
            "valuesPerLevel": [individual(["1", "2"], prefix="block-1-rack-2-node-")],
            "podCounts": {"universal": 1},
        },
    ],
}
SIX_NODES = [
    f"block-1-rack-{r}-node-{n}" for r, count in ((1, 4), (2, 2)) for n in range(1, 1 + count)
]


def test_a_placement_is_read_in_kueue_s_compact_form() -> None:
    assert gate.assigned_nodes(EXAMPLE_3) == SIX_NODES
    assert gate.assigned_nodes(EXAMPLE_4) == SIX_NODES
    # All levels kept, the node's values with a suffix; a level's one value for all domains.
    full = {
        "levels": ["cloud.google.com/gce-topology-block", HOSTNAME],
        "slices": [
            {
                "domainCount": 2,
                "valuesPerLevel": [{"universal": "block-2"}, individual(["1", "2"], "gpu-", "-a")],
                "podCounts": {"individual": [1, 1]},
            }
        ],
    }
    assert gate.assigned_nodes(full) == ["gpu-1-a", "gpu-2-a"]
    # A Topology that stops above the node names none.
    assert gate.assigned_nodes({**full, "levels": ["rack", "block"]}) is None


def passed(check: str, seconds_ago: float) -> dict[str, str]:
    return {
        f"aiinfra/{check}-healthcheck-result": "pass",
        f"aiinfra/{check}-healthcheck-runtime-sec": str(int(NOW - seconds_ago)),
    }


@pytest.mark.parametrize(
    ("labels", "problems"),
    [
        ({**passed("gpu", HOUR), **passed("nccl", 23 * HOUR)}, []),
        (passed("gpu", HOUR), ["nccl: never checked"]),
        (
            {**passed("gpu", 25 * HOUR), **passed("nccl", HOUR)},
            ["gpu: passed 25.0 h ago, over 24 h"],
        ),
        (
            {
                **passed("gpu", HOUR),
                **passed("nccl", HOUR),
                "aiinfra/nccl-healthcheck-result": "fail",
            },
            ["nccl: fail"],
        ),
        (
            {"aiinfra/gpu-healthcheck-result": "pass", **passed("nccl", HOUR)},
            ["gpu: passed at an unknown time"],
        ),
        ({}, ["gpu: never checked", "nccl: never checked"]),
    ],
)
def test_a_node_passes_only_with_a_fresh_pass_of_every_check(
    labels: dict[str, str], problems: list[str]
) -> None:
    assert gate.node_problems(labels, ("gpu", "nccl"), NOW, 24 * HOUR) == problems


def workload(check_state: str = "Pending", reserved: str = "True", **podset: Any) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": reserved}],
            "admissionChecks": [{"name": "gate", "state": check_state}],
            "admission": {"podSetAssignments": [{"name": "node", **podset}]},
        }
    }


def test_only_a_placed_run_whose_check_is_pending_is_answered() -> None:
    placed = workload(topologyAssignment=EXAMPLE_4)
    assert gate.placement(placed, "gate") == gate.Placement(tuple(SIX_NODES), ())
    assert gate.placement(placed, "another-check") is None
    assert gate.placement(workload("Ready", topologyAssignment=EXAMPLE_4), "gate") is None
    assert gate.placement(workload(reserved="False", topologyAssignment=EXAMPLE_4), "gate") is None
    # Placement to come after another check (queued provisioning's delayed TAS).
    assert gate.placement(workload(delayedTopologyRequest="Pending"), "gate") is None
    # Placed without node names: answered, and never passed.
    unnamed = gate.placement(workload(), "gate")
    assert unnamed == gate.Placement((), ("node",))


def settings(**changes: Any) -> Any:
    base = {
        "check": "gate",
        "controller": HEALTH_GATE_CONTROLLER,
        "namespace": "training",
        "checks": ("gpu", "nccl"),
        "max_age": 24 * HOUR,
        "retry": 600,
        "poll": 15.0,
    }
    return gate.Gate(**{**base, **changes})


def test_the_answer_names_every_node_that_holds_the_run_and_why() -> None:
    healthy = {**passed("gpu", HOUR), **passed("nccl", HOUR)}
    where = gate.Placement(("gpu-1", "gpu-2", "gpu-3"), ())
    labels = {"gpu-1": healthy, "gpu-2": passed("gpu", HOUR), "gpu-3": None}
    assert gate.decide(where, labels, settings(), NOW) == (
        "Retry",
        "not healthy within 24 h: gpu-2 (nccl: never checked), gpu-3 (not in the cluster)",
    )
    all_healthy = dict.fromkeys(where.nodes, healthy)
    assert gate.decide(where, all_healthy, settings(), NOW) == (
        "Ready",
        "3 nodes passed gpu, nccl within 24 h",
    )
    one = gate.Placement(("gpu-1",), ())
    assert gate.decide(one, labels, settings(checks=("gpu",)), NOW) == (
        "Ready",
        "1 node passed gpu within 24 h",
    )
    assert gate.decide(gate.Placement((), ("node",)), {}, settings(), NOW) == (
        "Retry",
        "not healthy within 24 h: pod set node placed without node names",
    )


@pytest.mark.parametrize(
    ("script", "first_setting"),
    [(SCRIPT, "HEALTH_GATE_CHECK"), (SCRIPTS / HEALTH_RUNNER_SCRIPT, "HEALTH_RUNNER_NAMESPACE")],
    ids=["gate", "runner"],
)
def test_the_controller_scripts_refuse_an_incomplete_environment(
    script: Path, first_setting: str
) -> None:
    result = subprocess.run(
        [sys.executable, script], env={"PATH": "/usr/bin"}, capture_output=True, text=True
    )
    assert result.returncode == kube_api.EX_CONFIG == 78
    assert result.stderr.strip().endswith(f"bad or missing setting '{first_setting}'")


def the_deployment(stack: str, overrides: tuple[str, ...]) -> dict[str, Any]:
    run = run_stack(stack, *overrides)
    (deployment,) = manifests(run, "Deployment")
    return deployment


@pytest.mark.parametrize(("stack", "overrides"), [GKE, OPENSHIFT], ids=["gke", "openshift"])
def test_the_queue_asks_the_gate_and_the_gate_runs_the_script_with_its_settings(
    stack: str, overrides: tuple[str, ...]
) -> None:
    rendered = render(stack, overrides)
    run, s = rendered.run, rendered.settings
    (check,) = manifests(run, "AdmissionCheck")
    assert check["spec"] == {"controllerName": HEALTH_GATE_CONTROLLER}
    (queue,) = manifests(run, "ClusterQueue")
    strategy = queue["spec"]["admissionChecksStrategy"]
    assert strategy == {"admissionChecks": [{"name": check["metadata"]["name"]}]}

    deployment = the_deployment(stack, overrides)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env == {
        "HEALTH_GATE_CHECK": check["metadata"]["name"],
        "HEALTH_GATE_CONTROLLER": HEALTH_GATE_CONTROLLER,
        "HEALTH_GATE_NAMESPACE": s.namespace,
        "HEALTH_GATE_CHECKS": "gpu,nccl",
        "HEALTH_GATE_MAX_AGE_SECONDS": "86400",
        "HEALTH_GATE_RETRY_SECONDS": "600",
        "HEALTH_GATE_POLL_SECONDS": "15",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    # The script as it is in the repository, run from the ConfigMap it is mounted from.
    (mount,) = container["volumeMounts"]
    assert container["command"] == ["python3", f"{mount['mountPath']}/{HEALTH_GATE_SCRIPT}"]
    (volume,) = pod["volumes"]
    scripts = {m["metadata"]["name"]: m for m in manifests(run, "ConfigMap")}
    assert scripts[volume["configMap"]["name"]]["data"] == {
        name: (SCRIPTS / name).read_text() for name in (HEALTH_GATE_SCRIPT, KUBE_API_SCRIPT)
    }
    assert container["image"] == s.workload.queue.health_gate.image == "python:3.14-slim"
    # Restricted: the platform's UID on OpenShift, nobody elsewhere.
    assert pod["securityContext"].get("runAsUser") == (None if s.platform == "openshift" else 65534)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert "hostNetwork" not in pod


def test_the_gate_may_read_and_write_only_what_it_answers() -> None:
    run = run_stack(GKE[0], *GKE[1])
    (check,) = manifests(run, "AdmissionCheck")
    (role,) = (
        r for r in manifests(run, "Role") if r["metadata"]["name"].endswith("node-health-gate")
    )
    (cluster_role,) = manifests(run, "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list"]},
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]},
    ]
    name = [check["metadata"]["name"]]
    assert cluster_role["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["admissionchecks"],
            "resourceNames": name,
            "verbs": ["get"],
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["admissionchecks/status"],
            "resourceNames": name,
            "verbs": ["patch"],
        },
    ]
    account = the_deployment(*GKE)["spec"]["template"]["spec"]["serviceAccountName"]
    for binding in (*manifests(run, "RoleBinding"), *manifests(run, "ClusterRoleBinding")):
        if binding["roleRef"]["name"] in (
            role["metadata"]["name"],
            cluster_role["metadata"]["name"],
        ):
            assert binding["subjects"] == [
                {"kind": "ServiceAccount", "name": account, "namespace": "training"}
            ]


def test_without_the_gate_the_stack_renders_none_of_it() -> None:
    run = run_stack("gcp-a3", *JOB_SET, *GKE_RWX)
    assert manifests(run, "AdmissionCheck") == []
    assert manifests(run, "Deployment") == []
    assert manifests(run, "ClusterRole") == []
    (queue,) = manifests(run, "ClusterQueue")
    assert "admissionChecksStrategy" not in queue["spec"]


def node_terms(run: Any) -> list[dict[str, Any]]:
    (job_set,) = manifests(run, "JobSet")
    pod = job_set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    affinity = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms: list[dict[str, Any]] = affinity["nodeSelectorTerms"]
    return terms


@pytest.mark.parametrize(("stack", "overrides"), [GKE, OPENSHIFT], ids=["gke", "openshift"])
def test_the_gated_run_asks_for_nodes_whose_checks_last_passed(
    stack: str, overrides: tuple[str, ...]
) -> None:
    """So placement skips a node the health runner labelled failed without tainting it (its
    default), and the gate only judges the passes' age. The flavor stays as it was: its node
    labels cannot change once it has a Topology."""
    gated = run_stack(stack, *overrides)
    ungated = run_stack(stack, *(o for o in overrides if o != GATE))
    (term,) = node_terms(gated)
    (before,) = node_terms(ungated)
    wanted = [
        {"key": f"aiinfra/{check}-healthcheck-result", "operator": "In", "values": ["pass"]}
        for check in ("gpu", "nccl")
    ]
    assert term["matchExpressions"] == before["matchExpressions"] + wanted
    assert manifests(gated, "ResourceFlavor") == manifests(ungated, "ResourceFlavor")


SCANNER = yaml.safe_load((ROOT / "tests" / "vendor" / "cluster_health_scanner.yaml").read_text())


def test_the_gate_reads_the_labels_cluster_health_scanner_writes() -> None:
    # Every check the config offers, and no other: the scanner's three that label results.
    assert set(get_args(HealthCheck)) == set(SCANNER["checks"])
    for check, facts in SCANNER["checks"].items():
        assert gate.RESULT_LABEL.format(check) == facts["result_label"]["key"]
        assert health.RESULT_LABEL.format(check) == facts["result_label"]["key"]
        assert facts["result_label"]["pass"] == health.PASS
        assert facts["result_label"]["pass"] == gate.PASS
        assert gate.TIME_LABEL.format(check) == facts["time_label"]["key"]


@pytest.mark.parametrize(
    ("host", "base"),
    [("10.96.0.1", "https://10.96.0.1:443"), ("fd00:10:96::1", "https://[fd00:10:96::1]:443")],
)
def test_the_api_server_is_reached_where_the_kubelet_says(
    host: str, base: str, tmp_path: Path
) -> None:
    shutil.copy(certifi.where(), tmp_path / "ca.crt")  # any CA bundle: only the URL is read
    assert kube_api.Api(host, "443", tmp_path).base == base


class RecordedApi:
    """kube_api.Api answered from one Workload and its nodes, the status applies recorded (the
    API server and Kueue themselves are in tests/real/test_node_health_gate.py)."""

    def __init__(self, listed: dict[str, Any], nodes: dict[str, dict[str, str]]) -> None:
        self.listed, self.nodes = listed, nodes
        self.applied: list[tuple[str, Any]] = []

    def call(self, method: str, path: str, *_: Any, **__: Any) -> Any:
        if path.endswith("/admissionchecks/gate"):
            active = {"type": "Active", "status": "True"}
            return {
                "spec": {"controllerName": HEALTH_GATE_CONTROLLER},
                "status": {"conditions": [active]},
            }
        return {"items": [self.listed]}

    def get(self, path: str) -> Any:
        return {"metadata": {"labels": self.nodes[path.rsplit("/", 1)[1]]}}

    def apply_status(self, path: str, body: Any, manager: str) -> None:
        self.applied.append((path, body))


def test_an_answer_applies_only_to_the_workload_as_it_was_read() -> None:
    """So an answer for a placement Kueue has given up meanwhile fails (409) rather than mark
    the requeued run Retry with no quota, which Kueue never tries again."""
    placed = workload(topologyAssignment=EXAMPLE_4)
    placed["metadata"] = {"name": "run", "namespace": "training", "resourceVersion": "417"}
    healthy = {**passed("gpu", HOUR), **passed("nccl", HOUR)}
    api = RecordedApi(placed, dict.fromkeys(SIX_NODES, healthy))
    gate.reconcile(api, settings())
    ((path, body),) = api.applied
    assert path.endswith("/namespaces/training/workloads/run")
    assert body["metadata"] == {"name": "run", "namespace": "training", "resourceVersion": "417"}
    assert body["status"]["admissionChecks"][0]["state"] == "Ready"
