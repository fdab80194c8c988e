"""`workload.kind: jobset` in the render: the same pods as the StatefulSet's but for what the
kind decides, one indexed Job under a JobSet in the stack's Kueue queue, the queue objects on
each platform, the commands, and Kubernetes' pod requests as Kueue counts them.

The real managers admitting, placing and restarting it: tests/real/test_jobset_stack.py."""

from __future__ import annotations

import copy
import os
import shlex
import subprocess
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.components.workload.kind import JOB_SET_TYPE, STATEFUL_SET_TYPE
from gpu_cluster.facts.kueue import (
    GKE_TOPOLOGY_LEVELS,
    JOB_COMPLETION_INDEX_ANNOTATION,
    MAX_RUN_DURATION_ANNOTATION,
    OPENSHIFT_MANAGED_NAMESPACE_LABEL,
    PODSET_LABEL,
    QUEUE_LABEL,
    REQUIRED_TOPOLOGY_ANNOTATION,
)
from gpu_cluster.plan.launch import CONFIG_ERROR_EXIT_CODES
from gpu_cluster.plan.podspec import Container
from gpu_cluster.plan.queue import pod_requests
from gpu_cluster.plan.runs import JOBSET_RESOURCE
from tests.conftest import (
    GKE_RWX,
    ROOT,
    manifests,
    one,
    other_warnings,
    plan_from,
    run_stack,
    scripts_data,
)
from tests.edits import A4_STATEFULSET

JOBSET = ("workload.kind=jobset", "workload.command[0]=/workspace/train.py")
COMMAND = "workload.command[1]=--epochs=3"
# (stack, overrides that make it a JobSet stack with shared claims)
STACKS = [
    ("nerc-production", (*JOBSET, COMMAND)),
    ("gcp-a3", (*JOBSET, COMMAND, *GKE_RWX)),
    # Without queued provisioning (the shipped gcp-a4 has it): the pods as on any pool.
    ("gcp-a4", (*JOBSET, COMMAND, *GKE_RWX, "gcp.queuedProvisioning=false")),
]


def job_of(job_set: dict[str, Any]) -> dict[str, Any]:
    (replicated,) = job_set["spec"]["replicatedJobs"]
    assert replicated["replicas"] == 1
    job: dict[str, Any] = replicated["template"]["spec"]
    return job


def without_kind(template: dict[str, Any]) -> dict[str, Any]:
    """A pod template less what the workload kind decides (PodRole)."""
    t = copy.deepcopy(template)
    t["metadata"]["annotations"].pop(REQUIRED_TOPOLOGY_ANNOTATION, None)
    # The scripts differ too: the DeepSpeed hostfile names the JobSet's hostnames, and the
    # fabric check (run in the StatefulSet's pods) is not shipped.
    del t["metadata"]["annotations"]["gpu-cluster/scripts-sha256"]
    t["spec"].pop("restartPolicy", None)
    (training,) = [c for c in t["spec"]["containers"] if c["name"] == "training"]
    del training["command"]
    kind_env = ("NODE_RANK", "MASTER_ADDR", "KUEUE_PODSET", "POD_NAMESPACE")
    training["env"] = [e for e in training["env"] if e["name"] not in kind_env]
    return t


@pytest.mark.parametrize(("stack", "overrides"), STACKS, ids=[s for s, _ in STACKS])
def test_the_pods_are_the_stateful_set_s_but_for_what_the_kind_decides(
    stack: str, overrides: tuple[str, ...]
) -> None:
    shared = tuple(o for o in overrides if o.startswith("storage."))
    # gcp-a4 ships as a JobSet: the StatefulSet it shipped as before, with the same claims.
    as_shipped_before = A4_STATEFULSET if stack == "gcp-a4" else ()
    stateful = one(run_stack(stack, *as_shipped_before, *shared), "StatefulSet")["spec"]["template"]
    queued = job_of(one(run_stack(stack, *overrides), "JobSet"))["template"]
    assert without_kind(queued) == without_kind(stateful)

    assert queued["spec"]["restartPolicy"] == "Never"
    (training,) = [c for c in queued["spec"]["containers"] if c["name"] == "training"]
    # Only once Kueue admitted the run: the storage check of its data volumes (gcp-a4 has
    # two), then the fabric check, on the run's own pods (verify.enabled), then the launcher.
    admission, *command = training["command"]
    assert admission == "/opt/gpu-cluster/admitted.sh"
    assert (command[0] == "/opt/gpu-cluster/storage_check.py") == (stack == "gcp-a4")
    if stack == "gcp-a4":
        command = command[command.index("--") + 1 :]
    gate, *check, separator, launcher, script, epochs = command
    assert gate == "/opt/gpu-cluster/fabric-gate.sh" and separator == "--"
    assert check[check.index("--expected-busbw-gbps") + 1]
    assert launcher == "/opt/gpu-cluster/launch-torchrun.sh"
    assert [script, epochs] == ["/workspace/train.py", "--epochs=3"]
    from_fields = {
        e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"]
        for e in training["env"]
        if "valueFrom" in e and "fieldRef" in e["valueFrom"]
    }
    assert from_fields == {
        "NODE_RANK": f"metadata.annotations['{JOB_COMPLETION_INDEX_ANNOTATION}']",
        "KUEUE_PODSET": f"metadata.labels['{PODSET_LABEL}']",
        "POD_NAMESPACE": "metadata.namespace",
    }


def test_without_the_fabric_check_the_pods_start_the_launcher_and_ship_no_gate() -> None:
    run = run_stack("nerc-production", *STACKS[0][1], "verify.enabled=false")
    training = job_of(one(run, "JobSet"))["template"]["spec"]["containers"][0]
    assert training["command"] == [
        "/opt/gpu-cluster/admitted.sh",
        "/opt/gpu-cluster/launch-torchrun.sh",
        "/workspace/train.py",
        "--epochs=3",
    ]
    scripts = scripts_data(run)
    assert "fabric-gate.sh" not in scripts and "allreduce_check.py" not in scripts
    assert scripts["admitted.sh"] == (ROOT / "scripts" / "admitted.sh").read_text()
    shipped = scripts_data(run_stack("nerc-production", *STACKS[0][1]))
    assert shipped["fabric-gate.sh"] == (ROOT / "scripts" / "fabric-gate.sh").read_text()
    assert "admitted.sh" not in scripts_data(run_stack("nerc-production"))


@pytest.mark.parametrize(("stack", "overrides"), STACKS, ids=[s for s, _ in STACKS])
def test_one_indexed_job_of_every_node_fails_fast_on_configuration_errors(
    stack: str, overrides: tuple[str, ...]
) -> None:
    run = run_stack(stack, *overrides, "workload.maxRestarts=5")
    job_set = one(run, "JobSet")
    assert manifests(run, "StatefulSet") == []
    job = job_of(job_set)
    count = len(run.outputs["podDnsNames"])
    assert (job["parallelism"], job["completions"]) == (count, count)
    assert job["completionMode"] == "Indexed" and job["backoffLimit"] == 0
    (rule,) = job["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailJob"
    assert rule["onExitCodes"] == {
        "containerName": "training",
        "operator": "In",
        "values": list(CONFIG_ERROR_EXIT_CODES),
    }
    policy = job_set["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == 5
    (fail_fast,) = policy["rules"]
    assert fail_fast["action"] == "FailJobSet"
    assert fail_fast["onJobFailureReasons"] == ["PodFailurePolicy"]
    service = one(run, "Service")
    assert job_set["spec"]["network"] == {
        "enableDNSHostnames": True,
        "subdomain": service["metadata"]["name"],
    }
    name = job_set["metadata"]["name"]
    domain = f"{service['metadata']['name']}.{job_set['metadata']['namespace']}.svc.cluster.local"
    assert run.outputs["podDnsNames"] == [f"{name}-node-0-{i}.{domain}" for i in range(count)]


def test_a_gke_stack_queues_in_its_own_cluster_queue_placed_within_one_block() -> None:
    run = run_stack("gcp-a3", *STACKS[1][1])
    job_set = one(run, "JobSet")
    local = one(run, "LocalQueue")
    cluster_queue, flavor, topology = (
        one(run, k) for k in ("ClusterQueue", "ResourceFlavor", "Topology")
    )
    assert job_set["metadata"]["labels"][QUEUE_LABEL] == local["metadata"]["name"]
    assert local["metadata"]["namespace"] == job_set["metadata"]["namespace"]
    assert local["spec"]["clusterQueue"] == cluster_queue["metadata"]["name"]
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == list(GKE_TOPOLOGY_LEVELS)
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    # The flavor's nodes are the stack's GPU pool, the pods' own node affinity.
    pod = job_of(job_set)["template"]
    terms = pod["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    (expression,) = terms[0]["matchExpressions"]
    assert flavor["spec"]["nodeLabels"] == {expression["key"]: expression["values"][0]}
    assert pod["metadata"]["annotations"][REQUIRED_TOPOLOGY_ANNOTATION] == GKE_TOPOLOGY_LEVELS[0]
    # Only the stack's namespace may use the queue.
    selector = cluster_queue["spec"]["namespaceSelector"]["matchLabels"]
    assert selector == {"kubernetes.io/metadata.name": local["metadata"]["namespace"]}
    (group,) = cluster_queue["spec"]["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", "nvidia.com/gpu"]
    (flavor_quota,) = group["flavors"]
    gpus = {r["name"]: r["nominalQuota"] for r in flavor_quota["resources"]}["nvidia.com/gpu"]
    assert gpus == str(run.outputs["worldSize"])


def test_a_flex_start_pool_gets_no_topology_its_nodes_come_only_for_admitted_pods() -> None:
    run = run_stack("gcp-a4", *STACKS[2][1])
    assert manifests(run, "Topology") == []
    pod = job_of(one(run, "JobSet"))["template"]
    assert REQUIRED_TOPOLOGY_ANNOTATION not in pod["metadata"]["annotations"]


def test_openshift_places_by_the_levels_the_stack_names_or_not_at_all() -> None:
    plain = run_stack("nerc-production", *STACKS[0][1])
    assert manifests(plain, "Topology") == []
    assert "topologyName" not in one(plain, "ResourceFlavor")["spec"]
    pod = job_of(one(plain, "JobSet"))["template"]
    assert REQUIRED_TOPOLOGY_ANNOTATION not in pod["metadata"]["annotations"]

    racks = run_stack(
        "nerc-production",
        *STACKS[0][1],
        "workload.queue.topologyLevels[0]=example.com/switch",
        "workload.queue.topologyLevels[1]=example.com/rack",
    )
    levels = one(racks, "Topology")["spec"]["levels"]
    assert [level["nodeLabel"] for level in levels] == [
        "example.com/switch",
        "example.com/rack",
        "kubernetes.io/hostname",
    ]
    pod = job_of(one(racks, "JobSet"))["template"]
    assert pod["metadata"]["annotations"][REQUIRED_TOPOLOGY_ANNOTATION] == "example.com/switch"
    nodes = one(racks, "ResourceFlavor")["spec"]["nodeLabels"]
    assert nodes == {"nvidia.com/gpu.present": "true"}


def test_other_levels_make_a_new_topology_and_flavor_that_the_queue_moves_to() -> None:
    """Kueue's Topology levels are immutable, so is a flavor's topologyName (their CRDs), and
    Kueue keeps either while it is in use: a level edit makes a Topology and a flavor of new
    names, updates the ClusterQueue to the new flavor, and leaves the old ones to be deleted
    after (a replacement's default order). Any other edit keeps both names."""
    racks = (*STACKS[0][1], "workload.queue.topologyLevels[0]=example.com/rack")
    blocks = ("workload.queue.topologyLevels[0]=example.com/block",)
    steps = plan_from("nerc-production", racks, blocks)
    kueue = {(s.type.rsplit(":", 1)[1], s.op) for s in steps if "kueue.x-k8s.io" in s.type}
    assert kueue == {
        ("Topology", "replace"),
        ("ResourceFlavor", "replace"),
        ("ClusterQueue", "update"),
    }

    def names(run: Any) -> dict[str, str]:
        return {k: one(run, k)["metadata"]["name"] for k in ("Topology", "ResourceFlavor")}

    before = run_stack("nerc-production", *racks)
    after = run_stack("nerc-production", *racks, *blocks)
    assert all(names(before)[k] != names(after)[k] for k in names(before))
    assert one(after, "ResourceFlavor")["spec"]["topologyName"] == names(after)["Topology"]
    (group,) = one(after, "ClusterQueue")["spec"]["resourceGroups"]
    assert [f["name"] for f in group["flavors"]] == [names(after)["ResourceFlavor"]]
    assert names(run_stack("nerc-production", *racks, "nodes=3")) == names(before)


def test_a_referenced_queue_is_named_and_nothing_of_kueue_is_created() -> None:
    run = run_stack(
        "nerc-production", *STACKS[0][1], "workload.queue.mode=reference", "workload.queue.name=ml"
    )
    for kind in ("Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue"):
        assert manifests(run, kind) == []
    job_set = one(run, "JobSet")
    assert job_set["metadata"]["labels"][QUEUE_LABEL] == "ml"
    pod = job_of(job_set)["template"]
    assert REQUIRED_TOPOLOGY_ANNOTATION not in pod["metadata"]["annotations"]


def test_the_commands_watch_and_stop_the_run_on_the_stack_s_cluster() -> None:
    run = run_stack("gcp-a3", *STACKS[1][1])
    out = run.outputs
    for absent in ("shellCommand", "launchCommand", "syncCommand", "verifyCommand"):
        assert absent not in out
    context = ["--context", "gke_my-gpu-project_us-central1-a_gpu-cluster"]
    for key in ("statusCommand", "logsCommand", "stopCommand"):
        for part in out[key].split(" && "):
            argv = shlex.split(part)
            assert argv[:3] == ["kubectl", *context], key
    assert shlex.split(out["stopCommand"])[3:] == [
        "delete",
        "-n",
        "training",
        JOBSET_RESOURCE,
        "gpu-cluster",
    ]
    submit = shlex.split(out["submitCommand"])
    (job_set,) = [r for r in run.resources if r.type.endswith(":JobSet")]
    assert submit == ["pulumi", "up", "--stack", "gcp-a3", "--target-replace", job_set.urn, "--yes"]


def test_runs_command_lists_the_stack_s_named_runs_on_its_context(tmp_path: Path) -> None:
    """The exported runsCommand, run as a user runs it from the project directory: `gpu-cluster
    run list` of the stack, on the context the stack names (here none is configured, so it
    stops there and says which)."""
    command = str(run_stack("gcp-a4").outputs["runsCommand"])
    (tmp_path / "home").mkdir()
    result = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.startswith(
        "error: kube context gke_my-gpu-project_us-central1-b_gpu-cluster of stack 'gcp-a4' "
        f"cannot be used from {tmp_path}/home/.kube/config"
    ), result.stderr


def test_ledger_command_is_the_stack_s_own_run_s_status_where_its_steps_are_known() -> None:
    """`gpu-cluster run status` of the stack's own JobSet, its goodput ledger last, as
    runsCommand is run; only with a step pattern, which the ledger reads steps by (runsCommand's
    test runs the command's CLI)."""
    pattern = r"launcher.firstStepPattern=^step \d+"
    outputs = run_stack("gcp-a4", pattern).outputs
    (job_set,) = [m for m in run_stack("gcp-a4", pattern).manifests() if m["kind"] == "JobSet"]
    assert shlex.split(str(outputs["ledgerCommand"])) == [
        "python3", "-m", "gpu_cluster", "run", "status", job_set["metadata"]["name"],
        "--stack", "gcp-a4",
    ]  # fmt: skip
    assert "ledgerCommand" not in run_stack("gcp-a4").outputs


def test_submitters_named_by_group_on_gke_warn_unless_the_cluster_passes_groups() -> None:
    """GKE gives RBAC a user's Google groups only with Google Groups for RBAC, which the stack's
    cluster turns on only with gcp.rbacSecurityGroup: without it the groups' members could not
    submit (users can)."""

    def warned(*sets: str) -> list[str]:
        return [w for w in run_stack("gcp-a4", *sets).warnings if "submitters.groups" in w]

    group = "workload.runs.submitters.groups[0]=ml@example.com"
    (warning,) = warned(group)
    assert "Google Groups for RBAC (authenticatorGroupsConfig)" in warning
    assert "set gcp.rbacSecurityGroup" in warning
    assert warned("workload.runs.submitters.users[0]=ml@example.com") == []
    assert warned(group, "gcp.rbacSecurityGroup=gke-security-groups@example.com") == []


CPU = "cpu"


def requests(cpu: str) -> dict[str, Fraction]:
    return {CPU: Fraction(cpu)}


def step(name: str, cpu: str, sidecar: bool = False) -> Container:
    return Container(
        name,
        "image",
        ("true",),
        cpu_request=cpu,
        memory_request="0",
        restart_policy="Always" if sidecar else None,
    )


@pytest.mark.parametrize(
    ("inits", "cpu"),
    [
        # No init steps: the training container.
        ((), "4"),
        # A sidecar runs beside the training container: both count.
        ((step("daemon", "1", sidecar=True),), "5"),
        # An init step runs before it: the larger of the two.
        ((step("detect", "6"),), "6"),
        ((step("detect", "2"),), "4"),
        # An init step after a sidecar runs beside it: max(4 + 2, 3 + 2), max(4 + 2, 5 + 2).
        ((step("daemon", "2", sidecar=True), step("detect", "3")), "6"),
        ((step("daemon", "2", sidecar=True), step("detect", "5")), "7"),
        # An init step before the sidecar runs alone: max(4 + 2, 5).
        ((step("detect", "5"), step("daemon", "2", sidecar=True)), "6"),
    ],
)
def test_pod_requests_are_kubernetes_effective_requests(
    inits: tuple[Container, ...], cpu: str
) -> None:
    # kubernetes component-helpers resource.PodRequests: max(containers + sidecars, each init
    # step + the sidecars started before it).
    assert pod_requests(requests("4"), inits)[CPU] == Fraction(cpu)


def test_queued_provisioning_asks_gke_for_a_run_s_nodes_before_admitting_it() -> None:
    run = run_stack("gcp-a4", *STACKS[2][1], "gcp.queuedProvisioning=true")
    check, config = one(run, "AdmissionCheck"), one(run, "ProvisioningRequestConfig")
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/provisioning-request"
    assert check["spec"]["parameters"]["name"] == config["metadata"]["name"]
    assert config["spec"] == {
        "provisioningClassName": "queued-provisioning.gke.io",
        "managedResources": ["nvidia.com/gpu"],
    }
    strategy = one(run, "ClusterQueue")["spec"]["admissionChecksStrategy"]
    assert strategy == {"admissionChecks": [{"name": check["metadata"]["name"]}]}
    job_set = one(run, "JobSet")
    assert job_set["metadata"]["annotations"][MAX_RUN_DURATION_ANNOTATION] == str(7 * 24 * 3600)
    tolerations = job_of(job_set)["template"]["spec"]["tolerations"]
    assert {"key": "cloud.google.com/gke-queued", "operator": "Exists", "effect": "NoSchedule"} in (
        tolerations
    )
    (pool,) = [r for r in run.of_type("gcp:container/nodePool:NodePool") if "a4" in r.name]
    assert pool.inputs["queuedProvisioning"] == {"enabled": True}
    assert pool.inputs["management"] == {"autoRepair": False, "autoUpgrade": False}

    # Without it: no check, no toleration, the pool repairs and upgrades as before.
    plain = run_stack("gcp-a4", *STACKS[2][1])
    assert manifests(plain, "AdmissionCheck") == []
    assert "admissionChecksStrategy" not in one(plain, "ClusterQueue")["spec"]
    plain_pod = job_of(one(plain, "JobSet"))["template"]["spec"]
    assert all(t["key"] != "cloud.google.com/gke-queued" for t in plain_pod["tolerations"])


def test_the_run_time_gke_keeps_the_nodes_is_the_stack_s() -> None:
    run = run_stack(
        "gcp-a4", *STACKS[2][1], "gcp.queuedProvisioning=true", "gcp.maxRunDurationSeconds=86400"
    )
    assert one(run, "JobSet")["metadata"]["annotations"][MAX_RUN_DURATION_ANNOTATION] == "86400"


def test_an_openshift_jobset_stack_opts_its_namespace_into_red_hat_s_kueue() -> None:
    """Red Hat's build of Kueue manages jobs only in namespaces labelled
    kueue.openshift.io/managed=true: a namespace the stack creates carries it; not on GKE (the
    upstream chart has no such opt-in) and not for a StatefulSet."""

    def namespace_labels(stack: str, *overrides: str) -> dict[str, str]:
        labels: dict[str, str] = one(run_stack(stack, *overrides), "Namespace")["metadata"][
            "labels"
        ]
        return labels

    created = "namespaceMode=create"
    assert (
        namespace_labels("nerc-production", *STACKS[0][1], created)[
            OPENSHIFT_MANAGED_NAMESPACE_LABEL
        ]
        == "true"
    )
    assert OPENSHIFT_MANAGED_NAMESPACE_LABEL not in namespace_labels("nerc-production", created)
    gke = [
        m["metadata"].get("labels", {})
        for m in manifests(run_stack("gcp-a3", *STACKS[1][1]), "Namespace")
    ]
    assert gke and all(OPENSHIFT_MANAGED_NAMESPACE_LABEL not in labels for labels in gke)


def test_a_namespace_the_stack_does_not_create_draws_a_warning_naming_the_label() -> None:
    """Red Hat's Kueue needs the label the stack sets only on a namespace it creates: an
    OpenShift JobSet stack in a referenced (or adopted) one is warned at `pulumi up`, with the
    command that labels it; one that creates its namespace, a StatefulSet or GKE are not."""
    (warning,) = run_stack("nerc-production", *STACKS[0][1]).warnings
    assert "gpu-cluster:namespaceMode = 'reference'" in warning
    assert "oc label namespace coops-767192 kueue.openshift.io/managed=true" in warning
    for stack, overrides in [
        ("nerc-production", (*STACKS[0][1], "namespaceMode=create")),
        ("nerc-production", ()),
        ("gcp-a3", STACKS[1][1]),
    ]:
        assert other_warnings(run_stack(stack, *overrides).warnings) == [], (stack, overrides)


def test_a_switch_of_kind_replaces_the_workload_old_object_first() -> None:
    """The StatefulSet and the JobSet answer to each other's URN and are replaced, the old one
    deleted first, when the kind changes (components/workload/kind.py says why): the plan of a
    switch either way is that one resource replaced, not a delete beside a create."""
    rwx = GKE_RWX
    for deployed, edit in ((rwx, JOBSET), ((*rwx, *JOBSET), ("!workload",))):
        steps = plan_from("gcp-a3", deployed, edit)
        workload = {(s.type, s.op, "kind" in s.fields) for s in steps if "Set" in s.type}
        assert workload == {
            (JOB_SET_TYPE, "replace", True),
            (STATEFUL_SET_TYPE, "replace", True),
        }, (deployed, edit)
    statefulset = run_stack("nerc-production").of_type(STATEFUL_SET_TYPE)
    job_set = run_stack("nerc-production", *JOBSET).of_type(JOB_SET_TYPE)
    for (own,), (other,) in ((statefulset, job_set), (job_set, statefulset)):
        assert other.urn in own.aliases
        assert "kind" in own.options["replaceOnChanges"]
        assert own.options["deleteBeforeReplace"] is True
