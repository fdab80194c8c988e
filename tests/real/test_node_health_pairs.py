"""The node health runner's pairwise NCCL check (workload.queue.healthGate.runner, `nccl` in
checks; issue #19) on the real API server, Job controller, scheduler and EndpointSlice
controller, beside the gate and Kueue: scripts/node_health_runner.py with its ServiceAccount's
token alone.

gcp-a3 as a JobSet stack behind the gate with the runner and the `nccl` check only, its GPU node
copied into four nodes in three GCE topology blocks, only block-2 with two (gpu-1, gpu-2). No
node was ever checked. The runner pairs them in name order; the scheduler puts each pair's two
pods (the training pod's shape) on its two nodes, named <job>-0 and <job>-1 in the check's
headless Service, where pod 1 meets pod 0. The test, as the kubelet, ends them as the fabric
check would: gpu-0 with gpu-1 passes, gpu-2 with gpu-3 fails. Neither of the second pair is
blamed: each is checked again with a node that passed, and only gpu-2 fails again; it is labelled
and tainted, gpu-3 passes. The run, which needs two nodes of one block, waits unplaced; an admin
asks for gpu-2 to be checked again, it passes beside a node that passed, and the run is
admitted onto gpu-1 and gpu-2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_cluster.plan.health_runner import CHECK_LABEL
from tests.real.conftest import Cluster
from tests.real.health_checks import (
    GatedStack,
    check_pods,
    end_check,
    gated_stack,
    keys,
    labels,
    taints,
)
from tests.real.prometheus import lint_findings, query, running_prometheus
from tests.real.test_api_contract import admitted
from tests.real.test_jobset_stack import OVERRIDES
from tests.script_modules import load_script
from tests.test_dashboard import cloud_queries
from tests.test_run_metrics import scrape
from tools.realtier.build import Tools
from tools.realtier.kube import Kube, Object, wait_for
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

runner_script = load_script("node_health_runner")
RUNNER = (
    "workload.queue.healthGate.enabled=true",
    "workload.queue.healthGate.retrySeconds=10",
    "workload.queue.healthGate.checks[0]=nccl",
    "workload.queue.healthGate.runner.enabled=true",
)
GPU_NODES = ("gpu-0", "gpu-1", "gpu-2", "gpu-3")
BAD = "gpu-2"
# What the fabric check's first rank says of a slow pair (allreduce_check.py's verdict line).
# What the fabric check's rank 0 leaves as its termination message (scripts/fabric_verdict.py
# summary), for a pair that passes and for one that fails.
WINDOW = "over 2147483648..8589934592 B"
FAST = f"busbw 180.000 GB/s {WINDOW}: PASS: data check ok; avg busbw 180.00 GB/s {WINDOW} >= 150"
SLOW = f"busbw 41.200 GB/s {WINDOW}: FAIL: avg busbw 41.20 GB/s {WINDOW} is below the expected 150"


def pairs_of(kube: Kube, namespace: str) -> dict[tuple[str, ...], list[Object]]:
    """Each pair Job's nodes -> its running pods, in the order of its nodes."""
    pods = check_pods(kube, namespace, "nccl")
    jobs = kube.list("batch/v1", "Job", namespace, label_selector=f"{CHECK_LABEL}=nccl")
    found = {}
    for job in jobs:
        nodes = tuple(job["metadata"]["annotations"][runner_script.NODES_ANNOTATION].split(","))
        found[nodes] = [pods[n] for n in nodes if n in pods]
    return found


def pairs_running(kube: Kube, namespace: str) -> dict[tuple[str, ...], list[Object]] | None:
    """pairs_of, once every GPU node runs a pod of a pair."""
    found = pairs_of(kube, namespace)
    placed = sorted(p["spec"]["nodeName"] for pods in found.values() for p in pods)
    return found if placed == list(GPU_NODES) else None


def dashboard_shows_the_checks(gated: GatedStack, tools: Tools, workdir: Path) -> None:
    """The stack's dashboard (GKE's) on a real Prometheus scraping the runner as the stack's
    scrape object does (its namespace the target's): the nodes by result, and each pair's bus
    bandwidth both ways, as the check pods' termination messages gave them."""
    namespace = gated.settings.namespace
    target = {
        "job_name": "node-health-runner",
        "static_configs": [{"targets": [gated.metrics], "labels": {"namespace": namespace}}],
    }
    results, busbw = cloud_queries(gated.stack.run)["Node health"]
    with running_prometheus(tools, workdir / "prometheus", [target]) as prometheus:
        counted = wait_for(
            "Prometheus holding the nodes' results",
            lambda: (
                {
                    (s["metric"]["check"], s["metric"]["result"]): float(s["value"][1])
                    for s in query(prometheus, results)
                }
                or None
            ),
        )
        assert counted == {("nccl", "pass"): 3, ("nccl", "fail"): 1}
        measured = {
            (s["metric"]["node"], s["metric"]["peer"]): float(s["value"][1])
            for s in query(prometheus, busbw)
        }
    # What the runner serves (in the text format's content type) passes Prometheus' linter.
    served = scrape(int(gated.metrics.rsplit(":", 1)[1]))
    assert served is not None
    assert lint_findings(tools, served) == ""
    fast, slow = 180e9, 41.2e9
    assert measured == {
        ("gpu-0", "gpu-1"): fast,
        ("gpu-1", "gpu-0"): fast,
        ("gpu-2", "gpu-3"): slow,
        ("gpu-3", "gpu-2"): slow,
        ("gpu-2", "gpu-0"): slow,
        ("gpu-0", "gpu-2"): slow,
        ("gpu-3", "gpu-1"): fast,
        ("gpu-1", "gpu-3"): fast,
    }


def test_the_nccl_check_pairs_nodes_and_blames_only_the_node_that_fails_beside_a_good_one(
    queued_cluster: Cluster, tmp_path: Path
) -> None:
    cluster, kube = queued_cluster, queued_cluster.kube
    result, ran, taint = keys("nccl")
    with gated_stack(cluster, RUNNER, tmp_path) as gated:
        s, log, explained = gated.settings, gated.log, gated.explained
        namespace, name = s.namespace, s.name
        service = f"{name}-nccl-check"
        first = wait_for(
            "a pair check pod running on each GPU node",
            lambda: pairs_running(kube, namespace),
            explain=explained,
        )
        assert sorted(first) == [("gpu-0", "gpu-1"), ("gpu-2", "gpu-3")]
        for nodes, pods in first.items():
            job = pods[0]["metadata"]["labels"][runner_script.JOB_NAME_LABEL]
            # The scheduler put one pod on each node; each is <job>-<index> in the Service,
            # and every pod's rendezvous host is pod 0's name there.
            assert [p["spec"]["nodeName"] for p in pods] == list(nodes)
            assert sorted(p["spec"]["hostname"] for p in pods) == [f"{job}-0", f"{job}-1"]
            for pod in pods:
                assert pod["spec"]["subdomain"] == service
                (container,) = pod["spec"]["containers"]
                env = {e["name"]: e.get("value") for e in container["env"]}
                assert env["MASTER_ADDR"] == f"{job}-0.{service}"
        # The EndpointSlice controller publishes both pods of each pair under their hostnames
        # (not yet ready: the Service publishes not-ready addresses, as rendezvous needs).
        published = wait_for(
            "the check pods published in the Service",
            lambda: (
                hosts
                if len(
                    hosts := {
                        e.get("hostname")
                        for sl in kube.list(
                            "discovery.k8s.io/v1",
                            "EndpointSlice",
                            namespace,
                            label_selector=f"kubernetes.io/service-name={service}",
                        )
                        for e in sl.get("endpoints") or []
                    }
                )
                == len(GPU_NODES)
                else None
            ),
            explain=explained,
        )
        assert published == {p["spec"]["hostname"] for ps in first.values() for p in ps}

        for pod in first[("gpu-0", "gpu-1")]:
            end_check(kube, pod, "passed", FAST)
        for pod in first[("gpu-2", "gpu-3")]:
            end_check(kube, pod, "failed", SLOW)
        wait_for(
            "gpu-0 and gpu-1 passed, the others suspected",
            lambda: (
                all(labels(kube, n).get(result) == "pass" for n in ("gpu-0", "gpu-1"))
                and "gpu-2, gpu-3: nccl: failed together" in log.read_text()
            ),
            explain=explained,
        )
        assert all(result not in labels(kube, n) for n in ("gpu-2", "gpu-3"))

        # Each suspect is checked again beside a node that passed.
        second = wait_for(
            "each suspect checked with a node that passed",
            lambda: pairs_running(kube, namespace),
            explain=explained,
        )
        assert sorted(second) == [("gpu-2", "gpu-0"), ("gpu-3", "gpu-1")]
        for pod in second[("gpu-2", "gpu-0")]:
            end_check(kube, pod, "failed", SLOW)
        for pod in second[("gpu-3", "gpu-1")]:
            end_check(kube, pod, "passed", FAST)
        bad_taint = {"key": taint, "value": "failed", "effect": "NoSchedule"}
        wait_for(
            "gpu-2 failed and tainted, gpu-3 passed",
            lambda: (
                labels(kube, BAD).get(result) == "fail"
                and labels(kube, "gpu-3").get(result) == "pass"
            ),
            explain=explained,
        )
        assert bad_taint in taints(kube, BAD)
        assert all(bad_taint not in taints(kube, n) for n in GPU_NODES if n != BAD)
        # The reference's own pass stands: it is not blamed for its partner.
        assert labels(kube, "gpu-0").get(result) == "pass"
        assert f"{BAD}: nccl: fail ({SLOW}); tainted {taint}" in log.read_text()
        dashboard_shows_the_checks(gated, cluster.tools, tmp_path)
        wait_for(
            "the check Jobs deleted",
            lambda: (
                not kube.list("batch/v1", "Job", namespace, label_selector=f"{CHECK_LABEL}=nccl")
            ),
            explain=explained,
        )
        # Block-2 has one healthy node: the run waits, unplaced.
        gated.wait_unplaced(kube)

        # An admin asks for gpu-2 to be checked again; beside a node that passed, it passes.
        kube.merge_patch("v1", "Node", BAD, None, {"metadata": {"labels": {ran: None}}})
        (again,) = wait_for(
            "gpu-2 checked again",
            lambda: (
                [
                    pods
                    for nodes, pods in pairs_of(kube, namespace).items()
                    if nodes[0] == BAD and len(pods) == 2
                ]
                or None
            ),
            explain=explained,
        )
        for pod in again:
            end_check(kube, pod, "passed")
        assert gated.wait_running(kube, BAD, "nccl") == ["gpu-1", "gpu-2"]


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("gcp-a3", (*OVERRIDES, "workload.queue.healthGate.enabled=true", *RUNNER[-1:])),
        (
            "nerc-production",
            (
                *OVERRIDES,
                "workload.queue.topologyLevels[0]=example.com/rack",
                "workload.queue.healthGate.enabled=true",
                *RUNNER[-1:],
            ),
        ),
    ],
    ids=["gke", "openshift"],
)
def test_the_jobs_the_runner_makes_from_each_check_s_template_are_admitted(
    api: Kube, stack: str, overrides: tuple[str, ...]
) -> None:
    """The Job of each check as the runner writes it from the rendered PodTemplate (a GPU check
    on one node, an NCCL check on two, with a reference), created on the real API server (dry
    run): a Job the API server refuses would leave every node unchecked."""
    rendered = render(stack, overrides)
    s = rendered.settings
    (deployment,) = (
        d
        for d in rendered.of_kind("Deployment")
        if d["metadata"]["name"] == f"{s.name}-node-health-runner"
    )
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    settings = runner_script.runner_from_env(env)
    templates = {t["metadata"]["name"]: t for t in rendered.of_kind("PodTemplate")}
    jobs = []
    for check in settings.checks:
        nodes = ["gpu-a", "gpu-b"] if check.paired else ["gpu-a"]
        reference = "gpu-b" if check.paired else None
        template = templates[check.template]
        jobs.append(runner_script.check_job(template, nodes, check, settings, reference))
    assert [c.name for c in settings.checks] == ["gpu", "nccl"]
    assert admitted(api, jobs) == []
