"""The node health runner's pairwise NCCL check (workload.queue.healthGate.runner with `nccl` in
checks): how scripts/node_health_runner.py pairs nodes, whom it blames for a failed pair, and the
check pods the stack renders, which are the training pods running the fabric check.
tests/real/test_node_health_runner.py runs it on the real API server, Job controller and
scheduler."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from gpu_cluster.facts import health
from gpu_cluster.plan.health_runner import CHECK_LABEL, PAIR
from gpu_cluster.plan.verify import CHECK_MODULES, GKE_CHECK_MAX_BYTES
from tests.conftest import GKE_RWX, ROOT, manifests
from tests.runner_api import (
    JOBS_PATH,
    NOW,
    RecordedApi,
    check_jobs,
    check_pod,
    finished,
    gpu_node,
    health_metrics,
    ran,
    runner,
    training_pod,
)
from tools.realtier.stacks import render

NCCL = runner.Check("nccl", "gpu-cluster-nccl-check")
GPU = runner.Check("gpu", "gpu-cluster-gpu-check")
SETTINGS = runner.Runner(
    namespace="training",
    nodes="pool=gpu",
    checks=(GPU, NCCL),
    recheck=12 * 3600,
    poll=15,
    retry=600,
)
NCCL_ONLY = runner.Runner(
    namespace="training", nodes="pool=gpu", checks=(NCCL,), recheck=12 * 3600, poll=15, retry=600
)
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "aiinfra/nccl-healthcheck", "operator": "Exists", "effect": "NoSchedule"},
]
TEMPLATE: dict[str, Any] = {
    "template": {
        "metadata": {"labels": {"app": "nccl-check"}},
        "spec": {
            "subdomain": "gpu-cluster-nccl-check",
            "activeDeadlineSeconds": 1800,
            "tolerations": TOLERATIONS,
            "affinity": {"podAntiAffinity": {"x": 1}},
            "containers": [
                {
                    "name": "training",
                    "env": [
                        {"name": "NNODES", "value": "2"},
                        {"name": "MASTER_PORT", "value": "29500"},
                    ],
                }
            ],
        },
    }
}
TEMPLATES = {NCCL.template: TEMPLATE, GPU.template: TEMPLATE}
PASSED = ran("nccl", 3600, "pass")
GPU_TAINT = {"key": "aiinfra/gpu-healthcheck", "value": "failed", "effect": "NoSchedule"}
NCCL_TAINT = {"key": "aiinfra/nccl-healthcheck", "value": "failed", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("due", "good", "suspects", "expected"),
    [
        # A cold pool: two by two, in name order; the odd one waits.
        (["d", "b", "a", "c", "e"], [], set(), [("a", "b"), ("c", "d")]),
        # A node that passed is the reference of a due one; the rest pair up.
        (["a", "b", "c"], ["z"], set(), [("a", "z"), ("b", "c")]),
        # Suspects are only ever checked with a node that passed.
        (["s", "t", "u"], ["z"], {"s", "t"}, [("s", "z")]),
        ([], ["y", "z"], set(), []),
    ],
    ids=["cold", "reference-first", "suspects", "none-due"],
)
def test_due_nodes_are_paired_with_nodes_that_passed_first_then_with_each_other(
    due: list[str], good: list[str], suspects: set[str], expected: list[tuple[str, str]]
) -> None:
    found = runner.pairs(due, good, suspects)
    assert found == expected
    flat = [n for pair in found for n in pair]
    assert len(flat) == len(set(flat))  # a node in one pair at most


@pytest.mark.parametrize(
    ("taints", "cordoned", "placeable"),
    [
        ([], False, True),
        ([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], False, True),
        ([NCCL_TAINT], False, True),  # its own failure: checked again
        ([GPU_TAINT], False, False),  # another check failed it
        ([{"key": "example.com/maintenance", "effect": "PreferNoSchedule"}], False, True),
        ([], True, False),
    ],
    ids=["bare", "gpu-taint", "own-taint", "gpu-failed", "prefer", "cordoned"],
)
def test_a_check_starts_only_on_nodes_its_pod_may_be_placed_on(
    taints: list[dict[str, str]], cordoned: bool, placeable: bool
) -> None:
    node = gpu_node("gpu-1", {}, taints)
    if cordoned:
        node["spec"]["unschedulable"] = True
    assert runner.tolerates(TOLERATIONS, node) is placeable
    anything = [{"operator": "Exists"}]
    assert runner.tolerates(anything, node) is not cordoned


def test_a_pair_s_pods_are_indexed_and_meet_at_the_first_one() -> None:
    job = runner.check_job(TEMPLATE, ["gpu-1", "gpu-2"], NCCL, SETTINGS, reference="gpu-2")
    name = job["metadata"]["name"]
    assert name == check_jobs.job_name(NCCL.template, ["gpu-1", "gpu-2"])
    assert job["metadata"]["annotations"] == {
        runner.NODES_ANNOTATION: "gpu-1,gpu-2",
        runner.REFERENCE_ANNOTATION: "gpu-2",
    }
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["completionMode"]) == (2, 2, "Indexed")
    # Neither pod's failure ends the other's (both statuses are the result); the Job ends once
    # the pods' deadline and the time to start them have passed.
    assert spec["backoffLimitPerIndex"] == 0 and "backoffLimit" not in spec
    assert spec["activeDeadlineSeconds"] == 1800 + check_jobs.PAIR_START_SECONDS
    pod = spec["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    # Either node, by name: a term each, as a node field selector takes one value.
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        for node in ("gpu-1", "gpu-2")
    ]
    # One pod a node: the template's anti-affinity is kept.
    assert pod["affinity"]["podAntiAffinity"] == {"x": 1}
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    # Pod 0's DNS name: <job>-0 in the template's headless Service (the Indexed Job's hostname).
    assert env == {
        "NNODES": "2",
        "MASTER_PORT": "29500",
        "MASTER_ADDR": f"{name}-0.gpu-cluster-nccl-check",
        "RDZV_ID": name,
    }
    assert "MASTER_ADDR" not in str(TEMPLATE)  # the template itself is not changed


def pair_job(nodes: list[str], result: str | None, reference: str | None = None) -> Any:
    return finished(runner.check_job(TEMPLATE, nodes, NCCL, SETTINGS, reference), result)


def nccl_results(api: RecordedApi) -> dict[str, str]:
    result = check_jobs.RESULT_LABEL.format("nccl")
    return {n: labels[result] for n, labels in api.patched().items()}


def test_a_cold_pool_is_checked_two_by_two(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [gpu_node(n, ran("gpu", 60, "pass")) for n in ("gpu-0", "gpu-1", "gpu-2", "gpu-3")]
    api = RecordedApi(nodes, [], TEMPLATES)
    runner.reconcile(api, NCCL_ONLY, NOW, set(), health_metrics.HealthMetrics())
    assert api.started() == [("gpu-0", "gpu-1"), ("gpu-2", "gpu-3")]
    assert capsys.readouterr().out.splitlines() == [
        "gpu-0, gpu-1: nccl: checking",
        "gpu-2, gpu-3: nccl: checking",
    ]


def test_no_check_starts_on_a_node_whose_gpus_a_training_pod_holds() -> None:
    """gpu-1 runs a training pod: a pair with it would hold gpu-0's GPUs while its own pod
    waited. gpu-3's training pod has ended."""
    nodes = [gpu_node(n, {}) for n in ("gpu-0", "gpu-1", "gpu-2", "gpu-3")]
    pods = [training_pod("gpu-1"), training_pod("gpu-3", "Succeeded")]
    api = RecordedApi(nodes, [], TEMPLATES, pods)
    runner.reconcile(api, SETTINGS, NOW, set(), health_metrics.HealthMetrics())
    assert api.started() == [("gpu-0",), ("gpu-2",), ("gpu-3",)]  # gpu; nccl waits for them
    api = RecordedApi(nodes, [], TEMPLATES, pods)
    runner.reconcile(api, NCCL_ONLY, NOW, set(), health_metrics.HealthMetrics())
    assert api.started() == [("gpu-0", "gpu-2")]


def test_a_pair_that_passed_passes_both_nodes() -> None:
    job = pair_job(["gpu-0", "gpu-1"], "pass")
    pods = [check_pod(job, "gpu-0", 0), check_pod(job, "gpu-1", 0)]
    nodes = [gpu_node("gpu-0", {}), gpu_node("gpu-1", {}, [NCCL_TAINT])]
    api = RecordedApi(nodes, [job], TEMPLATES, pods)
    runner.reconcile(api, NCCL_ONLY, NOW, set(), health_metrics.HealthMetrics())
    assert nccl_results(api) == {"gpu-0": "pass", "gpu-1": "pass"}
    gpu_1 = next(b for m, p, b in api.writes if p.endswith("/gpu-1"))
    assert gpu_1["spec"] == {"taints": None}  # a repaired node loses its taint
    assert ("DELETE", f"{JOBS_PATH}/{job['metadata']['name']}") in [w[:2] for w in api.writes]


def test_a_pair_that_failed_beside_a_node_that_passed_is_checked_again_one_by_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Two untested nodes failed together: neither is blamed yet. Each is paired next with a
    node that passed (cluster-health-scanner's second pass), and only the one that fails
    again, beside a good partner, is labelled and tainted."""
    first = pair_job(["gpu-0", "gpu-1"], "fail")
    pods = [check_pod(first, "gpu-0", 1, "FAIL: busbw 12.0 < 150"), check_pod(first, "gpu-1", 1)]
    nodes = [gpu_node("gpu-0", {}), gpu_node("gpu-1", {}), *(gpu_node(n, PASSED) for n in "yz")]
    suspects: set[str] = set()
    api = RecordedApi(nodes, [first], TEMPLATES, pods)
    runner.reconcile(api, NCCL_ONLY, NOW, suspects, health_metrics.HealthMetrics())
    assert api.patched() == {}
    assert suspects == {"gpu-0", "gpu-1"}
    said = capsys.readouterr().out.splitlines()
    assert said[0] == (
        "gpu-0, gpu-1: nccl: failed together (FAIL: busbw 12.0 < 150); each is checked again "
        "with a node that passed"
    )
    # The suspects are busy this pass (their Job was just read); the next pass pairs them.
    api = RecordedApi(nodes, [], TEMPLATES)
    runner.reconcile(api, NCCL_ONLY, NOW, suspects, health_metrics.HealthMetrics())
    assert api.started() == [("gpu-0", "y"), ("gpu-1", "z")]
    assert capsys.readouterr().out.splitlines() == [
        "gpu-0, y: nccl: checking with y, which passed",
        "gpu-1, z: nccl: checking with z, which passed",
    ]
    # gpu-0 fails beside y, gpu-1 passes beside z.
    bad, good = pair_job(["gpu-0", "y"], "fail", "y"), pair_job(["gpu-1", "z"], "pass", "z")
    pods = [
        check_pod(bad, "gpu-0", 1, "FAIL: busbw 12.0 < 150"),
        check_pod(bad, "y", 1),
        check_pod(good, "gpu-1", 0),
        check_pod(good, "z", 0),
    ]
    api = RecordedApi(nodes, [bad, good], TEMPLATES, pods)
    runner.reconcile(api, NCCL_ONLY, NOW, suspects, health_metrics.HealthMetrics())
    assert nccl_results(api) == {"gpu-0": "fail", "gpu-1": "pass", "z": "pass"}
    tainted = next(b for m, p, b in api.writes if p.endswith("/gpu-0"))
    assert tainted["spec"]["taints"] == [NCCL_TAINT]
    assert suspects == set()
    assert "gpu-0: nccl: fail (FAIL: busbw 12.0 < 150); tainted aiinfra/nccl-healthcheck" in (
        capsys.readouterr().out
    )


def test_a_pair_that_passed_in_the_same_pass_is_a_node_to_compare_with() -> None:
    """A cold pool's two pairs ended together: the pass that records gpu-0 and gpu-1's pass
    knows them as references when it reads the failed pair after them."""
    good, bad = pair_job(["gpu-0", "gpu-1"], "pass"), pair_job(["gpu-2", "gpu-3"], "fail")
    pods = [
        *(check_pod(good, n, 0) for n in ("gpu-0", "gpu-1")),
        *(check_pod(bad, n, 1, "FAIL: busbw") for n in ("gpu-2", "gpu-3")),
    ]
    nodes = [gpu_node(n, {}) for n in ("gpu-0", "gpu-1", "gpu-2", "gpu-3")]
    suspects: set[str] = set()
    api = RecordedApi(nodes, [good, bad], TEMPLATES, pods)
    runner.reconcile(api, NCCL_ONLY, NOW, suspects, health_metrics.HealthMetrics())
    assert nccl_results(api) == {"gpu-0": "pass", "gpu-1": "pass"}
    assert suspects == {"gpu-2", "gpu-3"}


def test_a_pair_that_failed_with_no_node_to_compare_with_fails_both() -> None:
    """As cluster-health-scanner labels its suspects when no node passed the first pass."""
    job = pair_job(["gpu-0", "gpu-1"], "fail")
    pods = [check_pod(job, "gpu-0", 1), check_pod(job, "gpu-1", 1)]
    stale = gpu_node("gpu-2", ran("nccl", 13 * 3600, "pass"))  # passed, but too long ago
    api = RecordedApi([gpu_node("gpu-0", {}), gpu_node("gpu-1", {}), stale], [job], TEMPLATES, pods)
    suspects: set[str] = set()
    runner.reconcile(api, NCCL_ONLY, NOW, suspects, health_metrics.HealthMetrics())
    assert nccl_results(api) == {"gpu-0": "fail", "gpu-1": "fail"}
    assert suspects == set()


@pytest.mark.parametrize(
    "partner",
    [
        {"exit_code": None},
        # It started once gpu-0's had given up on the rendezvous, and gave up in turn.
        {"exit_code": 1, "ran": ("08:12:00", "08:22:00")},
    ],
    ids=["never-started", "started-too-late"],
)
def test_a_pair_whose_pods_did_not_run_together_is_no_result(
    partner: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """gpu-1's GPUs were busy: its pod waited, gpu-0's gave up on the rendezvous. That says
    nothing about either node."""
    job = pair_job(["gpu-0", "gpu-1"], "fail")
    pods = [
        check_pod(job, "gpu-0", 1, ran=("08:00:00", "08:10:00")),
        check_pod(job, "gpu-1", **partner),
    ]
    api = RecordedApi([gpu_node("gpu-0", {}), gpu_node("gpu-1", {})], [job], TEMPLATES, pods)
    suspects: set[str] = set()
    runner.reconcile(api, NCCL_ONLY, NOW, suspects, health_metrics.HealthMetrics())
    assert api.patched() == {} and suspects == set()
    assert [w[:2] for w in api.writes] == [("DELETE", f"{JOBS_PATH}/{job['metadata']['name']}")]
    missing = "gpu-1" if partner["exit_code"] is None else "gpu-0, gpu-1"
    assert capsys.readouterr().out.startswith(
        f"gpu-0, gpu-1: nccl: not checked ({missing}: the check did not run there, or not "
        "while its partner's did"
    )


def test_a_node_is_written_once_a_pass_and_held_by_one_check_at_a_time() -> None:
    """gpu-0's GPU and NCCL checks ended in the same pass: one result now, the other at the
    next pass (each patch is made at the node's version as read). No new check starts on a
    node a check Job holds, nor a check whose pod may not go there."""
    gpu_job = finished(runner.check_job(TEMPLATE, ["gpu-0"], GPU, SETTINGS), "pass")
    nccl_job = pair_job(["gpu-0", "gpu-1"], "pass")
    pods = [
        check_pod(gpu_job, "gpu-0", 0),
        check_pod(nccl_job, "gpu-0", 0),
        check_pod(nccl_job, "gpu-1", 0),
    ]
    nodes = [
        gpu_node("gpu-0", {}),
        gpu_node("gpu-1", {}),
        gpu_node("gpu-2", {}, [GPU_TAINT]),
        gpu_node("gpu-3", {}),
    ]
    api = RecordedApi(nodes, [gpu_job, nccl_job], TEMPLATES, pods)
    runner.reconcile(api, SETTINGS, NOW, set(), health_metrics.HealthMetrics())
    assert list(api.patched()) == ["gpu-0"]
    deleted = [p for m, p, _ in api.writes if m == "DELETE"]
    assert deleted == [f"{JOBS_PATH}/{gpu_job['metadata']['name']}"]
    # gpu-2 and gpu-3 get their GPU check (the template here tolerates no GPU failure, so
    # gpu-2 is skipped); nccl: gpu-3 alone has no partner.
    assert api.started() == [("gpu-3",)]


def test_the_nccl_check_is_the_scanner_s() -> None:
    scanner = yaml.safe_load(
        (ROOT / "tests" / "vendor" / "cluster_health_scanner.yaml").read_text()
    )
    facts = scanner["checks"]["nccl"]
    assert check_jobs.RESULT_LABEL.format("nccl") == facts["result_label"]["key"]
    assert check_jobs.TIME_LABEL.format("nccl") == facts["time_label"]["key"]
    assert {"key": runner.TAINT_KEY.format("nccl"), **check_jobs.TAINT} == facts["taint"]
    assert health.PAIR_CHECK == "nccl" and {"nccl"} == check_jobs.PAIRED
    check = scanner["nccl_check"]
    assert int(check["nhosts"]) == PAIR
    assert check["end_message_size"] == GKE_CHECK_MAX_BYTES


JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py")
RUNNER = ("workload.queue.healthGate.enabled=true", "workload.queue.healthGate.runner.enabled=true")
STACKS = {
    "gke": ("gcp-a3", (*JOB_SET, *GKE_RWX, *RUNNER)),
    "openshift": (
        "nerc-production",
        (*JOB_SET, "workload.queue.topologyLevels[0]=example.com/rack", *RUNNER),
    ),
}


def named(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = (o for o in objects if o["metadata"]["name"] == name)
    return found


@pytest.mark.parametrize("platform", sorted(STACKS))
def test_the_nccl_check_pods_are_the_training_pods_running_the_fabric_check(
    platform: str,
) -> None:
    stack, overrides = STACKS[platform]
    rendered = render(stack, overrides)
    run, s = rendered.run, rendered.settings
    name = f"{s.name}-nccl-check"
    template = named(manifests(run, "PodTemplate"), name)
    check = template["template"]
    (job_set,) = manifests(run, "JobSet")
    training = job_set["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod, train_pod = check["spec"], training["spec"]
    # The same image, NICs, devices, sidecars, grants and security as a training pod.
    for key in ("serviceAccountName", "initContainers", "securityContext", "restartPolicy"):
        assert pod.get(key) == train_pod.get(key), key
    (container,) = pod["containers"]
    (train,) = train_pod["containers"]
    for key in ("image", "resources", "securityContext", "volumeMounts", "workingDir"):
        assert container[key] == train[key], key
    # The network mode's annotations (not Kueue's placement: the runner places the check).
    network = {
        k: v
        for k, v in training["metadata"]["annotations"].items()
        if "scripts" not in k and not k.startswith("kueue.x-k8s.io/")
    }
    assert network.items() <= check["metadata"]["annotations"].items()
    assert "kueue" not in str(check["metadata"])
    # Placed as the training pods were before the gate's requirement of passed checks.
    training_terms = train_pod["affinity"]["nodeAffinity"]
    check_terms = pod["affinity"]["nodeAffinity"]
    assert "healthcheck" not in str(check_terms) and "healthcheck" in str(training_terms)
    assert pod["tolerations"] == [
        *train_pod["tolerations"],
        {"key": "aiinfra/nccl-healthcheck", "operator": "Exists", "effect": "NoSchedule"},
    ]
    # None of the user's data: the workspace and datasets are empty directories.
    claims = {v["name"] for v in train_pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims and all(v.get("emptyDir") == {} for v in pod["volumes"] if v["name"] in claims)
    assert not [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
    # The check the run's fabric gate runs (its thresholds), on two nodes.
    gate = train["command"]
    check_args = gate[gate.index("/opt/gpu-cluster/fabric-gate.sh") + 1 : gate.index("--")]
    assert container["command"] == ["/opt/gpu-cluster/fabric-gate.sh", *check_args, "--"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert (env["NNODES"], env["TORCHRUN_NNODES"]) == ("2", "2")
    assert env["WORLD_SIZE"] == str(2 * s.gpus_per_node)
    assert "MASTER_ADDR" not in env  # the runner names each pair's first pod
    assert pod["restartPolicy"] == "Never" and pod["activeDeadlineSeconds"] == 30 * 60
    # Named in their own headless Service, reachable only from each other.
    assert pod["subdomain"] == name
    labels = check["metadata"]["labels"]
    assert labels[CHECK_LABEL] == "nccl"
    service = named(manifests(run, "Service"), name)
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["selector"] == labels
    policy = named(manifests(run, "NetworkPolicy"), f"{name}-peers-only")
    assert policy["spec"]["podSelector"]["matchLabels"] == labels
    assert policy["spec"]["ingress"] == [{"from": [{"podSelector": {"matchLabels": labels}}]}]
    scripts = named(manifests(run, "ConfigMap"), f"{name}-scripts")["data"]
    for script in ("fabric-gate.sh", "launch-torchrun.sh", "allreduce_check.py", *CHECK_MODULES):
        assert scripts[script] == (ROOT / "scripts" / script).read_text()


def test_the_runner_runs_both_checks_and_may_write_only_their_labels_and_taints() -> None:
    rendered = render(*STACKS["gke"])
    run, s = rendered.run, rendered.settings
    deployment = named(manifests(run, "Deployment"), f"{s.name}-node-health-runner")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["HEALTH_RUNNER_CHECKS"] == (f"gpu={s.name}-gpu-check nccl={s.name}-nccl-check")
    role = named(manifests(run, "Role"), f"{s.name}-node-health-runner")
    templates = next(r for r in role["rules"] if r["resources"] == ["podtemplates"])
    assert templates["resourceNames"] == [f"{s.name}-gpu-check", f"{s.name}-nccl-check"]
    (policy,) = manifests(run, "ValidatingAdmissionPolicy")
    variables = {v["name"]: v["expression"] for v in policy["spec"]["variables"]}
    written = json.loads(variables["written"])
    assert written == [
        health.RESULT_LABEL.format("gpu"),
        health.TIME_LABEL.format("gpu"),
        health.RESULT_LABEL.format("nccl"),
        health.TIME_LABEL.format("nccl"),
    ]
    assert (
        '!(t.key in ["aiinfra/gpu-healthcheck", "aiinfra/nccl-healthcheck"])'
        in (variables["taints"])
    )


def exported(metrics: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The runner's metrics as Prometheus' own parser reads them: (name, labels) -> value."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.exposition())
        for sample in family.samples
    }


def test_the_runner_exports_each_pair_s_bus_bandwidth_and_each_node_s_result() -> None:
    """The bandwidth a pair measured, from its rank 0's termination message (the fabric check's
    summary), both ways, whether the pair passed or failed together; each node's last result;
    a node gone from the pool takes its pairs with it."""
    good, slow = pair_job(["gpu-0", "gpu-1"], "pass"), pair_job(["gpu-2", "gpu-3"], "fail")
    summary = "busbw {} GB/s over 2147483648..8589934592 B: {}"
    pods = [
        check_pod(good, "gpu-0", 0, summary.format("91.250", "PASS: data check ok")),
        check_pod(good, "gpu-1", 0),
        check_pod(slow, "gpu-2", 1, summary.format("12.000", "FAIL: avg busbw 12.00 GB/s ...")),
        check_pod(slow, "gpu-3", 1),
    ]
    nodes = [gpu_node(n, {}) for n in ("gpu-0", "gpu-1", "gpu-2", "gpu-3")] + [
        gpu_node("z", PASSED)
    ]
    metrics = health_metrics.HealthMetrics()
    runner.reconcile(
        api := RecordedApi(nodes, [good, slow], TEMPLATES, pods), NCCL_ONLY, NOW, set(), metrics
    )
    assert nccl_results(api) == {"gpu-0": "pass", "gpu-1": "pass"}  # gpu-2, 3: suspects
    busbw = "gpu_cluster_fabric_bus_bandwidth_bytes_per_second"
    seen = exported(metrics)
    assert {k[1]: v for k, v in seen.items() if k[0] == busbw} == {
        (("node", "gpu-0"), ("peer", "gpu-1")): 91.25e9,
        (("node", "gpu-1"), ("peer", "gpu-0")): 91.25e9,
        (("node", "gpu-2"), ("peer", "gpu-3")): 12e9,
        (("node", "gpu-3"), ("peer", "gpu-2")): 12e9,
    }
    result = "gpu_cluster_node_health_result"
    assert sorted(dict(k[1])["node"] for k in seen if k[0] == result) == ["gpu-0", "gpu-1", "z"]
    assert all(dict(k[1])["result"] == "pass" for k in seen if k[0] == result)
    # gpu-3 leaves the pool.
    runner.reconcile(
        RecordedApi(nodes[:3] + nodes[4:], [], TEMPLATES), NCCL_ONLY, NOW, set(), metrics
    )
    pairs = {dict(k[1])["node"] for k in exported(metrics) if k[0] == busbw}
    assert pairs == {"gpu-0", "gpu-1"}
