"""The CrossGuard policy pack (policy/) on the program's real registrations.

Every policy runs over every resource of every shipped stack (no violation allowed), then each
policy must catch a deliberate mistake made in a deep copy of a real rendered resource. The last
tests start the pack the way `pulumi preview --policy-pack policy` does and talk to it over the
analyzer gRPC protocol.

Each resource reaches the policies as the engine sends it: an `AnalyzeRequest` with the inputs
as a protobuf Struct (so numbers arrive as floats) and the options `marshalResourceOptions` fills,
which pulumi-policy's own analyzer servicer deserializes and runs the pack on, in process here and
over gRPC in the last tests. Those options carry no retainOnDelete; the PersistentVolumeClaim rule
reads the retention mark the program puts on each claim instead. tests/real/test_policy_pack.py
runs the pack under the real engine (`pulumi preview --policy-pack policy`), which builds the
requests itself.
"""

from __future__ import annotations

import copy
import inspect
import json
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc  # type: ignore[import-untyped]  # no stubs installed
import pytest
from google.protobuf import (  # type: ignore[import-untyped]  # no stubs installed
    empty_pb2,
    json_format,
    struct_pb2,
)
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import EnforcementLevel, PolicyResourceOptions
from pulumi_policy.policy import _PolicyAnalyzerServicer
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE

from gpu_cluster.facts.gpudirect import RELEASES
from gpu_cluster.offline.engine import RecordedResource
from policy.gpu_cluster_policies import POLICIES, RETENTION_MARK
from tests.conftest import (
    A4_WITHOUT_QUEUED,
    BARCELONA_RWX,
    GKE_RWX,
    ROOT,
    STACKS,
    run_stack,
)

EXPECTED_POLICIES = {
    "no-privileged-training-pods",
    "training-capabilities-least-privilege",
    "root-only-for-a-needed-capability",
    "gpu-pods-memory-backed-dev-shm",
    "one-training-pod-per-node",
    "user-data-retained",
    "gke-a3-compact-placement",
    "gpudirect-nccl-env-complete",
}
CODE_SYNC = "codeSync.repo=https://github.com/example/train.git"
STATEFUL_SET = "kubernetes:apps/v1:StatefulSet"
JOB_SET_TYPE = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB_SET_TYPE = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
JOB_SET = ("workload.kind=jobset", "workload.command[0]=train.py")
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NODE_POOL = "gcp:container/nodePool:NodePool"
# The A3 pool of each GKE stack (the other pool is the untainted CPU system pool).
A3_POOL = {"gcp-a3": "gpu-cluster-a3mega", "a3-high": "gpu-cluster-a3high"}


# The pack as policy/__main__.py serves it to the CLI, in this process: PolicyPack serves this
# servicer (pulumi-policy v1.21.0 sdk/python/lib/pulumi_policy/policy.py, PolicyPack.__init__).
IN_PROCESS_PACK = _PolicyAnalyzerServicer(
    "gpu-cluster-policy", "0.0.1", list(POLICIES), EnforcementLevel.MANDATORY
)


@dataclass(frozen=True)
class Violation:
    policy: str
    message: str


def _seconds(duration: str) -> float:
    """A custom timeout as the program writes them ("<n>m", or "" where unset), in the seconds
    the engine sends (0 where unset)."""
    if not duration:
        return 0.0
    assert duration.endswith("m") and duration[:-1].isdigit(), duration
    return float(duration[:-1]) * 60


def engine_options(res: RecordedResource) -> analyzer_pb2.AnalyzerResourceOptions:
    """The options the engine sends with a registration: what marshalResourceOptions fills
    (pulumi/pulumi v3.259.0 pkg/resource/plugin/analyzer_plugin.go) from the registration
    (pkg/resource/deploy/step_generator.go). AnalyzerResourceOptions has no retainOnDelete
    (proto/pulumi/analyzer.proto, v3.259.0)."""
    options = res.options
    timeouts = options.get("customTimeouts", {})
    return analyzer_pb2.AnalyzerResourceOptions(
        protect=options["protect"],
        ignoreChanges=options["ignoreChanges"],
        deleteBeforeReplace=options["deleteBeforeReplace"],
        # The program only ever sets delete_before_replace=True, which the SDK sends as defined
        # (pulumi/pulumi v3.259.0 sdk/python/lib/pulumi/runtime/resource.py).
        deleteBeforeReplaceDefined=options["deleteBeforeReplace"],
        aliases=res.aliases,
        customTimeouts=analyzer_pb2.AnalyzerResourceOptions.CustomTimeouts(
            **{operation: _seconds(after) for operation, after in timeouts.items()}
        ),
        parent=res.parent,
    )


def engine_request(
    res: RecordedResource, inputs: dict[str, Any] | None = None
) -> analyzer_pb2.AnalyzeRequest:
    """The AnalyzeRequest the engine sends a policy pack for a registration: its inputs (or
    `inputs` in their place) and options, before the step (pulumi/pulumi v3.259.0
    pkg/resource/deploy/step_generator.go). It also sends the resource's provider, which no
    policy reads and which is left out here."""
    properties = struct_pb2.Struct()
    json_format.ParseDict(res.inputs if inputs is None else inputs, properties)
    return analyzer_pb2.AnalyzeRequest(
        type=res.type,
        properties=properties,
        urn=res.urn,
        name=res.name,
        options=engine_options(res),
    )


def run_pack(request: analyzer_pb2.AnalyzeRequest) -> list[Violation]:
    """The pack's diagnostics on `request`; no policy may declare itself not applicable."""
    # The gRPC method as the server calls it, with no context; pulumi-policy leaves it unannotated.
    response = IN_PROCESS_PACK.Analyze(request, None)  # type: ignore[no-untyped-call]
    assert [(n.policy_name, n.reason) for n in response.not_applicable] == []
    # The SDK reports "<description>\n<message>" (pulumi-policy v1.21.0
    # sdk/python/lib/pulumi_policy/policy.py, _create_report_violation); keep the message.
    return [
        Violation(d.policyName, d.message.removeprefix(f"{d.description}\n"))
        for d in response.diagnostics
    ]


def resource(stack: str, type_: str, *overrides: str, name: str | None = None) -> RecordedResource:
    found = [
        r
        for r in run_stack(stack, *overrides).of_type(type_)
        if name is None or r.name == name or r.inputs.get("metadata", {}).get("name") == name
    ]
    assert len(found) == 1, f"{stack}: expected one {type_} {name or ''}, found {len(found)}"
    return found[0]


def mutated(res: RecordedResource, change: Callable[[dict[str, Any]], object]) -> dict[str, Any]:
    inputs = copy.deepcopy(res.inputs)
    change(inputs)
    assert inputs != res.inputs, "the mutation changed nothing"
    return inputs


def pod_spec(inputs: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = inputs["spec"]["template"]["spec"]
    return spec


def container(inputs: dict[str, Any], name: str) -> dict[str, Any]:
    spec = pod_spec(inputs)
    for c in spec["containers"] + spec.get("initContainers", []):
        if c["name"] == name:
            found: dict[str, Any] = c
            return found
    raise AssertionError(f"no container {name}")


def only(violations: list[Violation], policy: str, *fragments: str) -> None:
    """Exactly one violation, from `policy`, whose message names every fragment."""
    assert len(violations) == 1, violations
    assert violations[0].policy == policy, violations
    for fragment in fragments:
        assert fragment in violations[0].message, violations[0].message


# --- the pack --------------------------------------------------------------------------------


def test_pack_has_every_policy_mandatory_with_a_description() -> None:
    assert {p.name for p in POLICIES} == EXPECTED_POLICIES
    assert len(POLICIES) == len(EXPECTED_POLICIES)
    for p in POLICIES:
        assert p.enforcement_level is EnforcementLevel.MANDATORY, p.name
        assert len(p.description) > 40, p.name


# --- every shipped stack passes --------------------------------------------------------------

CLEAN_CASES: list[tuple[str, tuple[str, ...]]] = [
    *((stack, ()) for stack in STACKS),
    ("barcelona", (CODE_SYNC,)),
    ("a3-high", (CODE_SYNC,)),
    ("barcelona", BARCELONA_RWX),
    ("nerc-production", ("storage.mode=per-pod",)),
    ("gcp-a3", ("gcp.provisioning=reservation", "gcp.reservation=my-reservation")),
    ("gcp-a3", ("gcp.placementMaxDistance=2",)),
    ("nerc-production", (*JOB_SET, "storage.mode=rwx")),
    ("gcp-a3", (*JOB_SET, *GKE_RWX)),
    ("barcelona", (*JOB_SET, "storage.mode=rwx", "storage.storageClass=cephfs")),
]


@pytest.mark.parametrize(
    ("stack", "overrides"),
    CLEAN_CASES,
    ids=[":".join((s, *o)) for s, o in CLEAN_CASES],
)
def test_stack_passes_every_policy(stack: str, overrides: tuple[str, ...]) -> None:
    run = run_stack(stack, *overrides)
    assert run.resources
    found = {r.urn: run_pack(engine_request(r)) for r in run.resources}
    assert {urn: v for urn, v in found.items() if v} == {}


def test_shipped_stacks_include_what_the_policies_are_about() -> None:
    """The clean runs above are meaningful: every rule has real subjects among the stacks."""
    runs = {stack: run_stack(stack) for stack in STACKS}
    assert {"barcelona", "nerc-production", "gcp-a3", "a3-high"} <= set(runs)
    for stack, run in runs.items():
        training = [
            r
            for r in (*run.of_type(STATEFUL_SET), *run.of_type(JOB_SET_TYPE))
            if r.inputs["metadata"]["labels"].get("app.kubernetes.io/component") == "training"
        ]
        assert len(training) == 1, stack
    assert run_stack("nerc-production").of_type(PVC)
    assert "volumeClaimTemplates" in resource("barcelona", STATEFUL_SET).inputs["spec"]
    for stack, pool in A3_POOL.items():
        assert resource(stack, NODE_POOL, name=pool).inputs["nodeConfig"]["machineType"] == (
            "a3-megagpu-8g" if stack == "gcp-a3" else "a3-highgpu-8g"
        )
    sidecars = {
        stack: [c["name"] for c in pod_spec(resource(stack, STATEFUL_SET).inputs)["initContainers"]]
        for stack in ("gcp-a3", "a3-high")
    }
    assert sidecars == {"gcp-a3": ["tcpxo-daemon"], "a3-high": ["tcpx-daemon"]}


def test_vendor_daemonsets_are_privileged_and_exempt() -> None:
    """The kube-system node agents need privileged/hostNetwork; the training rules skip them."""
    for stack in ("gcp-a3", "a3-high"):
        daemonsets = run_stack(stack).of_type(DAEMON_SET)
        assert daemonsets
        for ds in daemonsets:
            spec = pod_spec(ds.inputs)
            assert ds.inputs["metadata"]["namespace"] == "kube-system"
            assert spec.get("hostNetwork") is True
            assert any(
                c.get("securityContext", {}).get("privileged") is True
                for c in spec["containers"] + spec.get("initContainers", [])
            )
            assert run_pack(engine_request(ds)) == []


# --- 1. no privileged training pods ----------------------------------------------------------


def test_privileged_training_container_is_refused() -> None:
    sts = resource("barcelona", STATEFUL_SET)
    inputs = mutated(
        sts, lambda i: container(i, "training")["securityContext"].update(privileged=True)
    )
    only(
        run_pack(engine_request(sts, inputs)),
        "no-privileged-training-pods",
        "container 'training'",
        "privileged: true",
    )


def test_privileged_sidecar_is_refused() -> None:
    sts = resource("gcp-a3", STATEFUL_SET)
    inputs = mutated(
        sts, lambda i: container(i, "tcpxo-daemon")["securityContext"].update(privileged=True)
    )
    only(
        run_pack(engine_request(sts, inputs)),
        "no-privileged-training-pods",
        "initContainer 'tcpxo-daemon'",
    )


def test_name_unknown_during_preview_falls_back_to_the_pulumi_name() -> None:
    sts = resource("barcelona", STATEFUL_SET)

    def change(inputs: dict[str, Any]) -> None:
        inputs["metadata"]["name"] = UNKNOWN_STRING_VALUE
        container(inputs, "training")["securityContext"]["privileged"] = True

    only(
        run_pack(engine_request(sts, mutated(sts, change))),
        "no-privileged-training-pods",
        f"training workload '{sts.name}'",
    )


@pytest.mark.parametrize("field", ["hostNetwork", "hostPID", "hostIPC"])
def test_host_namespaces_are_refused(field: str) -> None:
    sts = resource("a3-high", STATEFUL_SET)
    inputs = mutated(sts, lambda i: pod_spec(i).update({field: True}))
    only(run_pack(engine_request(sts, inputs)), "no-privileged-training-pods", f"{field}: true")


def test_privileged_rule_covers_other_training_workloads() -> None:
    """Labelled component=training, a DaemonSet gets the same scrutiny as the StatefulSet."""
    ds = resource("gcp-a3", DAEMON_SET, name="device-injector")
    inputs = copy.deepcopy(ds.inputs)
    inputs["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] = "training"
    found = [
        v for v in run_pack(engine_request(ds, inputs)) if v.policy == "no-privileged-training-pods"
    ]
    assert {v.message.split(" of ")[0] for v in found if "privileged: true" in v.message} == {
        "container 'device-injector'"
    }
    assert any("hostNetwork: true" in v.message for v in found)
    assert any("hostPID: true" in v.message for v in found)


# --- 2. capabilities only as the mode needs --------------------------------------------------

CAPABILITY_CASES = [
    # stack, overrides, container, capability added, what the message says it may add
    ("barcelona", (), "training", "SYS_ADMIN", "only: IPC_LOCK"),
    ("barcelona", (), "detect-rdma", "NET_RAW", "only: none"),
    ("barcelona", (CODE_SYNC,), "git-sync", "NET_ADMIN", "only: none"),
    ("gcp-a3", (), "tcpxo-daemon", "SYS_ADMIN", "only: NET_ADMIN, NET_BIND_SERVICE"),
    ("gcp-a3", (), "training", "CAP_NET_ADMIN", "only: IPC_LOCK"),
    ("a3-high", (), "tcpx-daemon", "NET_BIND_SERVICE", "only: NET_ADMIN"),
]


@pytest.mark.parametrize(
    ("stack", "overrides", "name", "capability", "allowed"),
    CAPABILITY_CASES,
    ids=[f"{c[0]}:{c[2]}+{c[3]}" for c in CAPABILITY_CASES],
)
def test_extra_capability_is_refused(
    stack: str, overrides: tuple[str, ...], name: str, capability: str, allowed: str
) -> None:
    sts = resource(stack, STATEFUL_SET, *overrides)

    def add(inputs: dict[str, Any]) -> None:
        caps = container(inputs, name)["securityContext"].setdefault("capabilities", {})
        caps.setdefault("add", []).append(capability)

    only(
        run_pack(engine_request(sts, mutated(sts, add))),
        "training-capabilities-least-privilege",
        f"'{name}'",
        capability.removeprefix("CAP_"),
        allowed,
    )


@pytest.mark.parametrize(("stack", "name"), [("barcelona", "detect-rdma"), ("gcp-a3", "training")])
def test_not_dropping_all_capabilities_is_refused(stack: str, name: str) -> None:
    sts = resource(stack, STATEFUL_SET)
    inputs = mutated(
        sts, lambda i: container(i, name)["securityContext"]["capabilities"].pop("drop")
    )
    only(
        run_pack(engine_request(sts, inputs)),
        "training-capabilities-least-privilege",
        f"'{name}'",
        "drop: [ALL]",
    )


def test_rxdm_sidecar_keeps_googles_runtime_default_capabilities() -> None:
    """Google runs RxDM with its adds on top of the runtime default; only the adds are policed."""
    sts = resource("gcp-a3", STATEFUL_SET)
    daemon = container(sts.inputs, "tcpxo-daemon")["securityContext"]["capabilities"]
    assert "drop" not in daemon
    assert not run_pack(engine_request(sts))


# --- 2b. root only where a capability needs it -----------------------------------------------


def test_root_training_container_with_ipc_lock_passes_and_is_in_a_shipped_stack() -> None:
    sts = resource("barcelona", STATEFUL_SET)
    assert container(sts.inputs, "training")["securityContext"]["runAsUser"] == 0
    assert run_pack(engine_request(sts)) == []


def test_root_training_container_without_ipc_lock_is_refused() -> None:
    # memlock machineconfig: nothing to make effective, so no reason to be root.
    sts = resource("barcelona", STATEFUL_SET, "rdma.memlock=machineconfig")
    inputs = mutated(sts, lambda i: container(i, "training")["securityContext"].update(runAsUser=0))
    only(
        run_pack(engine_request(sts, inputs)),
        "root-only-for-a-needed-capability",
        "container 'training'",
        "runs as UID 0",
        "IPC_LOCK",
    )


def test_root_training_container_with_privilege_escalation_is_refused() -> None:
    sts = resource("barcelona", STATEFUL_SET)
    inputs = mutated(
        sts,
        lambda i: container(i, "training")["securityContext"].update(allowPrivilegeEscalation=True),
    )
    only(run_pack(engine_request(sts, inputs)), "root-only-for-a-needed-capability", "'training'")


def test_root_helper_container_is_refused() -> None:
    sts = resource("barcelona", STATEFUL_SET)
    inputs = mutated(
        sts, lambda i: container(i, "detect-rdma")["securityContext"].update(runAsUser=0)
    )
    only(
        run_pack(engine_request(sts, inputs)),
        "root-only-for-a-needed-capability",
        "initContainer 'detect-rdma'",
        "only the training container",
    )


# --- 3. GPU pods have a memory-backed /dev/shm -----------------------------------------------


def test_gpu_container_without_dev_shm_is_refused() -> None:
    sts = resource("nerc-production", STATEFUL_SET)

    def unmount(inputs: dict[str, Any]) -> None:
        training = container(inputs, "training")
        training["volumeMounts"] = [
            m for m in training["volumeMounts"] if m["mountPath"] != "/dev/shm"
        ]

    only(
        run_pack(engine_request(sts, mutated(sts, unmount))),
        "gpu-pods-memory-backed-dev-shm",
        "container 'training'",
        "mounts nothing at /dev/shm",
    )


def test_disk_backed_dev_shm_is_refused() -> None:
    sts = resource("gcp-a3", STATEFUL_SET)

    def on_disk(inputs: dict[str, Any]) -> None:
        for volume in pod_spec(inputs)["volumes"]:
            if volume["name"] == "dshm":
                volume["emptyDir"] = {}

    only(
        run_pack(engine_request(sts, mutated(sts, on_disk))),
        "gpu-pods-memory-backed-dev-shm",
        "mounts volume 'dshm'",
        "medium: Memory",
    )


def test_dev_shm_rule_ignores_pods_without_gpus() -> None:
    sts = resource("barcelona", STATEFUL_SET)

    def no_gpus_no_shm(inputs: dict[str, Any]) -> None:
        training = container(inputs, "training")
        for kind in ("requests", "limits"):
            training["resources"][kind].pop("nvidia.com/gpu")
        training["volumeMounts"] = [
            m for m in training["volumeMounts"] if m["mountPath"] != "/dev/shm"
        ]

    assert run_pack(engine_request(sts, mutated(sts, no_gpus_no_shm))) == []


# --- 4. one training pod per node ------------------------------------------------------------


def _drop_anti_affinity(inputs: dict[str, Any]) -> None:
    del pod_spec(inputs)["affinity"]["podAntiAffinity"]


def _zone_topology(inputs: dict[str, Any]) -> None:
    terms = pod_spec(inputs)["affinity"]["podAntiAffinity"]
    terms["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] = (
        "topology.kubernetes.io/zone"
    )


def _other_pods(inputs: dict[str, Any]) -> None:
    terms = pod_spec(inputs)["affinity"]["podAntiAffinity"]
    selector = terms["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"]
    selector["matchLabels"]["app.kubernetes.io/instance"] = "someone-else"


def _preferred_only(inputs: dict[str, Any]) -> None:
    anti = pod_spec(inputs)["affinity"]["podAntiAffinity"]
    term = anti.pop("requiredDuringSchedulingIgnoredDuringExecution")[0]
    anti["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 100, "podAffinityTerm": term}
    ]


def _other_namespace(inputs: dict[str, Any]) -> None:
    terms = pod_spec(inputs)["affinity"]["podAntiAffinity"]
    terms["requiredDuringSchedulingIgnoredDuringExecution"][0]["namespaces"] = ["elsewhere"]


ANTI_AFFINITY_BREAKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "other-namespace": _other_namespace,
    "removed": _drop_anti_affinity,
    "zone-topology": _zone_topology,
    "selects-other-pods": _other_pods,
    "preferred-only": _preferred_only,
}


@pytest.mark.parametrize("stack", ["barcelona", "gcp-a3"])
@pytest.mark.parametrize("how", sorted(ANTI_AFFINITY_BREAKS))
def test_missing_one_pod_per_node_is_refused(stack: str, how: str) -> None:
    sts = resource(stack, STATEFUL_SET)
    inputs = mutated(sts, ANTI_AFFINITY_BREAKS[how])
    only(
        run_pack(engine_request(sts, inputs)),
        "one-training-pod-per-node",
        "kubernetes.io/hostname",
        "app.kubernetes.io/component=training",
    )


def job_set_pod(inputs: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = inputs["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return pod


def test_the_rules_read_a_job_set_s_pods() -> None:
    """A JobSet's pods are held to the same rules as the StatefulSet's."""
    job_set = resource("gcp-a3", JOB_SET_TYPE, *JOB_SET, *GKE_RWX)

    def privileged(inputs: dict[str, Any]) -> None:
        (training,) = job_set_pod(inputs)["spec"]["containers"]
        training["securityContext"]["privileged"] = True

    only(
        run_pack(engine_request(job_set, mutated(job_set, privileged))),
        "no-privileged-training-pods",
        "container 'training'",
    )
    without_anti_affinity = mutated(
        job_set, lambda i: job_set_pod(i)["spec"]["affinity"].pop("podAntiAffinity")
    )
    only(
        run_pack(engine_request(job_set, without_anti_affinity)),
        "one-training-pod-per-node",
        "training JobSet 'gpu-cluster'",
    )


def test_anti_affinity_by_match_expressions_is_accepted() -> None:
    sts = resource("barcelona", STATEFUL_SET)

    def expressions(inputs: dict[str, Any]) -> None:
        terms = pod_spec(inputs)["affinity"]["podAntiAffinity"]
        term = terms["requiredDuringSchedulingIgnoredDuringExecution"][0]
        labels = term["labelSelector"].pop("matchLabels")
        term["labelSelector"]["matchExpressions"] = [
            {"key": k, "operator": "In", "values": [v]} for k, v in labels.items()
        ]

    assert run_pack(engine_request(sts, mutated(sts, expressions))) == []


# --- 5. user data retained -------------------------------------------------------------------


@pytest.mark.parametrize("field", ["whenDeleted", "whenScaled"])
def test_statefulset_deleting_claims_is_refused(field: str) -> None:
    sts = resource("barcelona", STATEFUL_SET)
    inputs = mutated(
        sts, lambda i: i["spec"]["persistentVolumeClaimRetentionPolicy"].update({field: "Delete"})
    )
    only(
        run_pack(engine_request(sts, inputs)),
        "user-data-retained",
        f"{field}: Delete",
        "storage.retainOnDelete=false",
        RETENTION_MARK,
    )


@pytest.mark.parametrize("where", ["annotations", "labels"])
def test_statefulset_opt_out_marker_is_honoured(where: str) -> None:
    sts = resource("a3-high", STATEFUL_SET)

    def delete_on_purpose(inputs: dict[str, Any]) -> None:
        inputs["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] = "Delete"
        inputs["metadata"].setdefault(where, {})[RETENTION_MARK] = "false"

    assert run_pack(engine_request(sts, mutated(sts, delete_on_purpose))) == []


def test_statefulset_without_retention_policy_keeps_claims() -> None:
    """Kubernetes' default for an absent persistentVolumeClaimRetentionPolicy is Retain."""
    sts = resource("gcp-a3", STATEFUL_SET)
    inputs = mutated(sts, lambda i: i["spec"].pop("persistentVolumeClaimRetentionPolicy"))
    assert run_pack(engine_request(sts, inputs)) == []


def test_engine_does_not_tell_policy_packs_about_retain_on_delete() -> None:
    """Why the PersistentVolumeClaim rule reads a mark rather than the option: neither the
    analyzer protocol (pulumi/pulumi v3.259.0 proto/pulumi/analyzer.proto AnalyzerResourceOptions;
    the installed SDK's analyzer_pb2 is generated from it) nor pulumi-policy's options (v1.21.0
    sdk/python/lib/pulumi_policy/policy.py PolicyResourceOptions) carry it. Should one of them
    gain it, this fails, and the rule can read the option itself."""
    assert "retainOnDelete" not in analyzer_pb2.AnalyzerResourceOptions.DESCRIPTOR.fields_by_name
    assert "retain_on_delete" not in inspect.signature(PolicyResourceOptions).parameters


# A claim of each kind: a StatefulSet's per-pod claim (barcelona), a shared one (nerc-production)
# and one of storage.volumes (gcp-a4).
CLAIM_STACKS = ["barcelona", "nerc-production", "gcp-a4"]


@pytest.mark.parametrize("overrides", [(), ("storage.retainOnDelete=false",)])
@pytest.mark.parametrize("stack", STACKS)
def test_every_claim_is_marked_as_it_is_registered(stack: str, overrides: tuple[str, ...]) -> None:
    """The mark the rule reads is the retainOnDelete the program registers the claim with."""
    claims = run_stack(stack, *overrides).of_type(PVC)
    assert claims
    for claim in claims:
        mark = claim.inputs["metadata"]["annotations"].get(RETENTION_MARK)
        assert mark == str(claim.options["retainOnDelete"]).lower(), claim.urn


UNMARKINGS: dict[str, Callable[[dict[str, Any]], None]] = {
    "removed": lambda i: i["metadata"]["annotations"].pop(RETENTION_MARK),
    "not-a-boolean": lambda i: i["metadata"]["annotations"].update({RETENTION_MARK: "yes"}),
}


@pytest.mark.parametrize("how", sorted(UNMARKINGS))
@pytest.mark.parametrize("stack", CLAIM_STACKS)
def test_claim_not_marked_as_retained_is_refused(stack: str, how: str) -> None:
    """A claim registered without the program's mark: Pulumi deletes it with the stack unless
    it was registered with retainOnDelete, which the pack cannot see."""
    for pvc in run_stack(stack).of_type(PVC):
        only(
            run_pack(engine_request(pvc, mutated(pvc, UNMARKINGS[how]))),
            "user-data-retained",
            pvc.inputs["metadata"]["name"],
            "retain_on_delete=True",
            f'{RETENTION_MARK}: "true"',
            "storage.retainOnDelete=false",
        )


@pytest.mark.parametrize("value", ["true", "false"])
def test_claim_mark_as_a_label_is_honoured(value: str) -> None:
    pvc = run_stack("nerc-production").of_type(PVC)[0]

    def relabel(inputs: dict[str, Any]) -> None:
        inputs["metadata"]["annotations"].pop(RETENTION_MARK)
        inputs["metadata"]["labels"][RETENTION_MARK] = value

    assert run_pack(engine_request(pvc, mutated(pvc, relabel))) == []


def test_claim_opt_out_marker_is_honoured() -> None:
    pvc = run_stack("nerc-production").of_type(PVC)[0]
    inputs = mutated(pvc, lambda i: i["metadata"]["annotations"].update({RETENTION_MARK: "false"}))
    assert run_pack(engine_request(pvc, inputs)) == []


@pytest.mark.parametrize("stack", CLAIM_STACKS)
def test_config_opt_out_passes_the_retention_rule(stack: str) -> None:
    """storage.retainOnDelete=false is the documented opt-out: the program marks the claims and
    the StatefulSet gpu-cluster/retain-on-delete: "false", which the rule lets through."""
    run = run_stack(stack, "storage.retainOnDelete=false")
    assert [v for r in run.resources for v in run_pack(engine_request(r))] == []


# --- 6. GKE A3 pools use compact placement ---------------------------------------------------


@pytest.mark.parametrize("stack", ["gcp-a3", "a3-high"])
def test_a3_pool_without_compact_placement_is_refused(stack: str) -> None:
    pool = resource(stack, NODE_POOL, name=A3_POOL[stack])
    inputs = mutated(pool, lambda i: i.pop("placementPolicy"))
    only(
        run_pack(engine_request(pool, inputs)),
        "gke-a3-compact-placement",
        pool.inputs["nodeConfig"]["machineType"],
        "COMPACT",
        "gcp.provisioning=reservation",
    )


def test_a3_pool_with_any_reservation_still_needs_compact_placement() -> None:
    overrides = ("gcp.provisioning=reservation", "gcp.reservation=my-reservation")
    pool = resource("gcp-a3", NODE_POOL, *overrides, name=A3_POOL["gcp-a3"])
    assert "placementPolicy" not in pool.inputs
    assert run_pack(engine_request(pool)) == []  # SPECIFIC_RESERVATION: exempt
    inputs = mutated(
        pool,
        lambda i: i["nodeConfig"]["reservationAffinity"].update(
            consumeReservationType="ANY_RESERVATION"
        ),
    )
    only(run_pack(engine_request(pool, inputs)), "gke-a3-compact-placement", "unset")


def test_a3_ultra_on_flex_start_is_placed_by_gke_but_spot_is_not() -> None:
    """A3 Ultra is sold as flex-start, a reservation or Spot: flex-start VMs get GKE's own
    best-effort compact placement and take no placement policy, as a reservation brings its
    own; Spot still needs COMPACT."""
    pool = resource(
        "gcp-a4",
        NODE_POOL,
        "gcp.machineType=a3-ultragpu-8g",
        "gcp.queuedProvisioning=false",
        name="gpu-cluster-a3ultra",
    )
    assert pool.inputs["nodeConfig"]["flexStart"] is True and "placementPolicy" not in pool.inputs
    assert run_pack(engine_request(pool)) == []
    inputs = mutated(pool, lambda i: i["nodeConfig"].pop("flexStart"))
    only(
        run_pack(engine_request(pool, inputs)),
        "gke-a3-compact-placement",
        "a3-ultragpu-8g",
        "unset",
    )
    spot = resource(
        "gcp-a4",
        NODE_POOL,
        "gcp.machineType=a3-ultragpu-8g",
        A4_WITHOUT_QUEUED,
        "gcp.provisioning=spot",
        name="gpu-cluster-a3ultra",
    )
    assert run_pack(engine_request(spot)) == []  # COMPACT
    inputs = mutated(spot, lambda i: i.pop("placementPolicy"))
    only(run_pack(engine_request(spot, inputs)), "gke-a3-compact-placement", "unset")


# --- 7. the pinned GPUDirect release's NCCL settings -----------------------------------------


def _without_env(name: str) -> Callable[[dict[str, Any]], None]:
    def change(inputs: dict[str, Any]) -> None:
        training = container(inputs, "training")
        training["env"] = [e for e in training["env"] if e["name"] != name]

    return change


@pytest.mark.parametrize(
    ("stack", "variable"),
    [
        ("gcp-a3", "NCCL_INIT_SCRIPT"),
        ("gcp-a3", "NCCL_LIB_DIR"),
        ("a3-high", "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"),
    ],
)
def test_missing_nccl_variable_is_refused(stack: str, variable: str) -> None:
    sts = resource(stack, STATEFUL_SET)
    release = {"gcp-a3": "tcpxo-v1.0.17", "a3-high": "tcpx-v3.1.12"}[stack]
    assert variable in dict(RELEASES[release].nccl_env)
    only(
        run_pack(engine_request(sts, mutated(sts, _without_env(variable)))),
        "gpudirect-nccl-env-complete",
        variable,
        release,
    )


def test_nccl_value_other_than_the_release_is_refused() -> None:
    sts = resource("gcp-a3", STATEFUL_SET)

    # The release's other profile (no LL128 nor NVLSTree), which the pinned settings are not.
    simple = "/usr/local/nvidia/lib64/nccl-env-profile-simple.sh"

    def change(inputs: dict[str, Any]) -> None:
        for e in container(inputs, "training")["env"]:
            if e["name"] == "NCCL_INIT_SCRIPT":
                e["value"] = simple

    only(
        run_pack(engine_request(sts, mutated(sts, change))),
        "gpudirect-nccl-env-complete",
        f"NCCL_INIT_SCRIPT='{simple}'",
        "'/usr/local/nvidia/lib64/nccl-env-profile.sh'",
    )


def test_unpinned_rxdm_image_is_refused() -> None:
    sts = resource("gcp-a3", STATEFUL_SET)
    image = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v9.9.9"
    inputs = mutated(sts, lambda i: container(i, "tcpxo-daemon").update(image=image))
    only(
        run_pack(engine_request(sts, inputs)),
        "gpudirect-nccl-env-complete",
        image,
        "gcp.gpudirectRelease",
    )


# --- the pack as the CLI runs it -------------------------------------------------------------


@dataclass
class RunningPack:
    stub: analyzer_pb2_grpc.AnalyzerStub


@pytest.fixture(scope="module")
def running_pack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningPack]:
    """`python -m pulumi.policy <engine> policy`, as the CLI's python analyzer plugin starts it,
    from an unrelated directory and without PYTHONPATH, so policy/__main__.py finds the project
    on its own. The pack prints its gRPC port and serves until stopped."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:0", str(ROOT / "policy")],
        cwd=tmp_path_factory.mktemp("elsewhere"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    channel: Any = None
    try:
        assert proc.stdout is not None and proc.stderr is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        port = proc.stdout.readline().decode().strip() if ready else ""
        if not port.isdigit():
            proc.kill()
            raise AssertionError(f"policy pack did not start: {proc.stderr.read().decode()}")
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        yield RunningPack(analyzer_pb2_grpc.AnalyzerStub(channel))
    finally:
        if channel is not None:
            channel.close()
        proc.terminate()
        proc.wait(timeout=30)


def analyze(pack: RunningPack, res: RecordedResource, inputs: dict[str, Any] | None = None) -> Any:
    return pack.stub.Analyze(engine_request(res, inputs))


def test_running_pack_describes_itself(running_pack: RunningPack) -> None:
    info = running_pack.stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == "gpu-cluster-policy"
    assert {p.name for p in info.policies} == EXPECTED_POLICIES
    assert {p.enforcementLevel for p in info.policies} == {analyzer_pb2.MANDATORY}


def test_running_pack_passes_every_stack(running_pack: RunningPack) -> None:
    for stack in STACKS:
        for res in run_stack(stack).resources:
            response = analyze(running_pack, res)
            assert [(d.policyName, d.message) for d in response.diagnostics] == [], (
                f"{stack} {res.urn}"
            )
            assert [n.policy_name for n in response.not_applicable] == [], f"{stack} {res.urn}"


def test_running_pack_blocks_a_privileged_training_pod(running_pack: RunningPack) -> None:
    sts = resource("gcp-a3", STATEFUL_SET)
    inputs = mutated(
        sts, lambda i: container(i, "training")["securityContext"].update(privileged=True)
    )
    response = analyze(running_pack, sts, inputs)
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [
        ("no-privileged-training-pods", analyzer_pb2.MANDATORY)
    ]
    assert "container 'training'" in response.diagnostics[0].message


def test_running_pack_refuses_a_claim_not_marked_as_retained(running_pack: RunningPack) -> None:
    """What `pulumi preview --policy-pack policy` sends for a claim the stack would delete."""
    pvc = run_stack("nerc-production").of_type(PVC)[0]
    inputs = mutated(pvc, lambda i: i["metadata"]["annotations"].pop(RETENTION_MARK))
    response = analyze(running_pack, pvc, inputs)
    assert [(d.policyName, d.enforcementLevel) for d in response.diagnostics] == [
        ("user-data-retained", analyzer_pb2.MANDATORY)
    ]
    assert pvc.inputs["metadata"]["name"] in response.diagnostics[0].message


def test_entry_point_builds_the_pack_from_any_directory(tmp_path: Path) -> None:
    """policy/__main__.py as runpy runs it, with PolicyPack captured instead of served."""
    probe = (
        "import json, runpy, sys, pulumi_policy\n"
        "seen = {}\n"
        "pulumi_policy.PolicyPack = lambda **kw: seen.update(kw)\n"
        "runpy.run_path(sys.argv[1], run_name='__main__')\n"
        "print(json.dumps({'name': seen['name'], 'level': seen['enforcement_level'].value,"
        " 'policies': [p.name for p in seen['policies']]}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT / "policy")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    pack = json.loads(out.stdout)
    assert pack == {
        "name": "gpu-cluster-policy",
        "level": "mandatory",
        "policies": [p.name for p in POLICIES],
    }
