"""openshift.prePull: the training image pulled onto the training pods' nodes before the
workload starts or changes (barcelona ships it on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_cluster.offline.graph import Graph
from gpu_cluster.offline.render import resources_json
from gpu_cluster.plan.security import REQUIRED_SCC_ANNOTATION
from tests.conftest import BARCELONA_RWX, manifests, one, plan_of, pod_spec, run_stack

VENDOR = Path(__file__).resolve().parent / "vendor"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py", *BARCELONA_RWX)


def pre_pull(stack: str, *overrides: str) -> dict[str, Any]:
    return one(run_stack(stack, *overrides), "DaemonSet")


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_pre_pull_pods_go_where_the_training_pods_may_go_with_their_image() -> None:
    run = run_stack("barcelona")
    ds, training = pre_pull("barcelona"), pod_spec(run)
    spec = ds["spec"]["template"]["spec"]
    assert spec["affinity"]["nodeAffinity"] == training["affinity"]["nodeAffinity"]
    assert spec["tolerations"] == training["tolerations"]
    # The five listed hosts, not every GPU node of the cluster.
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    hosts = [e for e in term["matchExpressions"] if e["key"] == "kubernetes.io/hostname"]
    assert len(hosts[0]["values"]) == 5
    (image,) = {c["image"] for c in spec["containers"]}
    (train,) = training["containers"]
    assert image == train["image"]
    assert "imagePullPolicy" not in train and "imagePullPolicy" not in spec["containers"][0]
    # The training account: the same pull credentials (OpenShift links its pull secrets).
    assert spec["serviceAccountName"] == training["serviceAccountName"]


def test_pre_pull_pods_are_neither_training_peers_nor_reachable() -> None:
    run = run_stack("barcelona")
    ds = pre_pull("barcelona")
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    training = one(run, "StatefulSet")["spec"]["template"]
    # One training pod per node: its anti-affinity must not count a pre-pull pod.
    (term,) = training["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]
    assert not selects(term["labelSelector"]["matchLabels"], pod_labels)
    assert selects(term["labelSelector"]["matchLabels"], training["metadata"]["labels"])
    policies = manifests(run, "NetworkPolicy")
    covering = [p for p in policies if selects(p["spec"]["podSelector"]["matchLabels"], pod_labels)]
    assert len(covering) == 1, covering
    (isolated,) = covering
    assert isolated["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert not isolated["spec"].get("ingress") and not isolated["spec"].get("egress")
    assert not selects(
        isolated["spec"]["podSelector"]["matchLabels"], training["metadata"]["labels"]
    )


def test_pre_pull_pods_are_admitted_by_restricted_v2_and_ask_for_it() -> None:
    restricted = yaml.safe_load((VENDOR / "scc-restricted-v2.yaml").read_text())
    template = pre_pull("barcelona")["spec"]["template"]
    assert (
        template["metadata"]["annotations"][REQUIRED_SCC_ANNOTATION]
        == restricted["metadata"]["name"]
    )
    spec = template["spec"]
    assert not any(spec.get(f"host{k}") for k in ("Network", "PID", "IPC"))
    assert "volumes" not in spec and spec["automountServiceAccountToken"] is False
    # runAsUser MustRunAsRange: the SCC picks the user; the pod sets none.
    assert restricted["runAsUser"]["type"] == "MustRunAsRange"
    assert "runAsUser" not in spec["securityContext"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "runtime/default" in restricted["seccompProfiles"]
    (c,) = spec["containers"]
    context = c["securityContext"]
    assert context["capabilities"] == {"drop": restricted["requiredDropCapabilities"]}
    assert restricted["allowPrivilegeEscalation"] is False
    assert context["allowPrivilegeEscalation"] is False and context["privileged"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert c["resources"]["limits"] == c["resources"]["requests"]


def test_a_new_image_is_pulled_beside_the_old_one_on_every_node_at_once() -> None:
    strategy = pre_pull("barcelona")["spec"]["updateStrategy"]
    assert strategy == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0},
    }


@pytest.mark.parametrize("overrides", [(), JOB_SET], ids=["statefulset", "jobset"])
def test_the_workload_waits_for_the_image_on_its_nodes(overrides: tuple[str, ...]) -> None:
    run = run_stack("barcelona", *overrides)
    g = Graph(json.loads(resources_json(run)))
    (ds,) = [u for u, r in g.rows.items() if r["type"] == DAEMON_SET]
    (workload,) = [
        u
        for u, r in g.rows.items()
        if r["type"].startswith("kubernetes:")
        and r["inputs"].get("kind") in ("StatefulSet", "JobSet")
    ]
    assert ds in g.waits_for(workload)
    # The pull is awaited as long as the training pods' start is (a whole image per node).
    (recorded,) = run.of_type(DAEMON_SET)
    timeouts = recorded.options["customTimeouts"]
    assert timeouts["create"] == timeouts["update"] == "30m"


def test_pulumi_up_awaits_the_pulls_and_the_pods_as_long_as_the_stack_says() -> None:
    awaited = (DAEMON_SET, "kubernetes:apps/v1:StatefulSet")
    for overrides, minutes in (((), 30), (("workload.startTimeoutMinutes=90",), 90)):
        run = run_stack("barcelona", *overrides)
        timeouts = [r.options["customTimeouts"] for t in awaited for r in run.of_type(t)]
        assert timeouts == [{"create": f"{minutes}m", "update": f"{minutes}m", "delete": ""}] * 2


def test_off_by_default() -> None:
    for stack in ("nerc-production", "barcelona"):
        overrides = ("openshift.prePull=false",) if stack == "barcelona" else ()
        kinds = {m["kind"] for m in run_stack(stack, *overrides).manifests()}
        assert "DaemonSet" not in kinds
    policies = [
        m["metadata"]["name"] for m in manifests(run_stack("nerc-production"), "NetworkPolicy")
    ]
    assert policies == ["ml-dev-env-peers-only"]


def test_an_image_edit_updates_the_pre_pull_and_the_workload_in_place() -> None:
    steps = plan_of("barcelona", "image=nvcr.io/nvidia/pytorch:25.02-py3")
    ops = {s.type.rsplit(":", 1)[-1]: s.op for s in steps}
    assert ops == {"DaemonSet": "update", "StatefulSet": "update"}
