"""The value types of stack config (gpu_cluster/config/values.py) against the rules they stand
for: each accepts what Kubernetes (or the tool that reads the value) accepts and refuses the
rest, or refuses with a message saying why the program needs more. The real API server judges
the same generated values in tests/real/test_value_contract.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_cluster.config.loading import load_settings
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.rules import CHECK_MIN_BYTES
from gpu_cluster.facts.kubernetes import (
    CPU_QUANTITY_MAX,
    GIT_SYNC_MIN_PERIOD_NS,
    KUBERNETES_NAMESPACE_PREFIXES,
    PLATFORM_NAMESPACES,
    QUANTITY_MAX,
    QUANTITY_MIN_STEP,
    SYSTEM_NAMESPACES,
    parse_go_duration,
    parse_quantity,
    resource_quantity,
    round_up,
)
from gpu_cluster.plan.verify import check_args
from tests import value_grammar as grammar
from tests.fake_sysfs import HCAS
from tests.test_allreduce_check import ac as allreduce_check
from tests.test_preflight import healthy_node, passes, preflight
from tests.test_scripts import detect
from tests.test_settings import NIC


def openshift(**extra: Any) -> dict[str, Any]:
    return {"platform": "openshift", **extra}


def rdma_nic(**changes: Any) -> dict[str, Any]:
    return openshift(networkMode="rdma", rdma={"nics": [{**NIC, **changes}]})


# One stack per value type, with the value at `{}`.
WITH_VALUE = {
    "name": lambda v: openshift(name=v),
    "namespace": lambda v: openshift(namespace=v),
    "storageClass": lambda v: openshift(storage={"storageClass": v}),
    "nodeName": lambda v: openshift(nodes=1, openshift={"nodeNames": [v]}),
    "secretEnv": lambda v: openshift(secretEnv=[v]),
    "labelKey": lambda v: openshift(openshift={"gpuNodeLabel": v}),
    "image": lambda v: openshift(image=v),
    "resource": lambda v: rdma_nic(resource=v),
    "network": lambda v: rdma_nic(network=v),
    "quantity": lambda v: openshift(pod={"cpuRequest": v}),
    "size": lambda v: openshift(storage={"workspaceSize": v}),
    "priorityClass": lambda v: openshift(
        workload={
            "kind": "jobset",
            "command": ["t.py"],
            "queue": {"priorityClasses": [{"name": v, "value": 1}]},
        }
    ),
}
VALID = {
    "name": "gpu",
    "namespace": "team",
    "storageClass": "ceph.rbd",
    "nodeName": "gpu-1",
    "secretEnv": "HF_TOKEN",
    "labelKey": "nvidia.com/gpu.present",
    "image": "nvcr.io/nvidia/pytorch:25.01-py3",
    "resource": "openshift.io/eno5np0rdma",
    "network": "eno5np0-network",
    "quantity": "32",
    "size": "100Gi",
    "priorityClass": "high",
}


def refusal(raw: dict[str, Any]) -> str | None:
    try:
        load_settings(raw)
    except ConfigError as error:
        return str(error)
    return None


@pytest.mark.parametrize("kind", sorted(WITH_VALUE))
def test_a_final_newline_is_refused_as_the_api_server_refuses_it(kind: str) -> None:
    """Go's `$` ends at the end of the text; Python's `re.match` with `$` let "team\\n" through."""
    assert refusal(WITH_VALUE[kind](VALID[kind])) is None
    assert refusal(WITH_VALUE[kind](VALID[kind] + "\n")) is not None


# --- quantities ------------------------------------------------------------------------------


def quantity_refusal(case: grammar.Quantity) -> str | None:
    """Why the program refuses the quantity (None: it takes it), from how the case was built."""
    if case.mantissa is None:
        return "must be a Kubernetes quantity"
    if not case.digits:
        return "has no digits"
    written = case.written
    if written != 0 and (written is None or not QUANTITY_MIN_STEP <= abs(written) <= QUANTITY_MAX):
        return "outside what Kubernetes holds"
    if written is not None and written < 0:
        return "must not be negative"
    return None


@pytest.mark.parametrize("case", grammar.quantities(), ids=lambda c: repr(c.text))
def test_quantities_read_as_kubernetes_reads_them(case: grammar.Quantity) -> None:
    """Every form ParseQuantity reads is read to the same value (rounded up to 1n), or refused
    saying why: no digits (Kubernetes reads 0), beyond what it holds, negative."""
    for raw, field in (
        (openshift(pod={"cpuRequest": case.text, "cpuLimit": None}), "pod.cpuRequest"),
        (openshift(pod={"shmSize": case.text}), "pod.shmSize"),
    ):
        expected = quantity_refusal(case)
        if (
            field == "pod.cpuRequest"
            and expected is None
            and (case.written or 0) > CPU_QUANTITY_MAX
        ):
            expected = "Kubernetes reads CPU in millicores"  # a quantity, but not a CPU's
        message = refusal(raw)
        if expected is None:
            assert message is None, message
            written = case.written
            assert written is not None
            assert parse_quantity(case.text.strip(" ")) == round_up(written, QUANTITY_MIN_STEP)
        else:
            assert message is not None and f"gpu-cluster:{field}" in message, message
            assert expected in message, message
    expected = quantity_refusal(case)
    size_message = refusal(openshift(storage={"workspaceSize": case.text}))
    if expected is None and case.written == 0:
        assert size_message is not None and "greater than zero" in size_message
    else:
        assert (size_message is None) == (expected is None), size_message


def test_the_quantity_table_covers_the_grammar() -> None:
    verdicts = [quantity_refusal(c) for c in grammar.quantities()]
    assert verdicts.count(None) >= 100
    for reason in ("must be a Kubernetes quantity", "has no digits", "outside", "negative"):
        assert sum(1 for v in verdicts if v and reason in v) >= 10


@pytest.mark.parametrize(("request_", "limit"), grammar.REQUEST_LIMIT_PAIRS)
def test_requests_and_limits_compare_in_milli_units_as_the_api_server_does(
    request_: str, limit: str
) -> None:
    # Memory: the same comparison as CPU, without CPU's own millicore ceiling.
    over = resource_quantity(request_) > resource_quantity(limit)
    message = refusal(openshift(pod={"memoryRequest": request_, "memoryLimit": limit}))
    assert (message is not None) == over, message
    if over:
        assert message is not None and f"memoryRequest {request_} is above memoryLimit" in message


# --- the fabric check's largest size ---------------------------------------------------------


def max_bytes_refusal(text: str) -> str | None:
    return refusal(openshift(verify={"maxBytes": text}))


def test_max_bytes_is_what_the_check_script_reads() -> None:
    """verify.maxBytes reaches allreduce_check.py --max-bytes as written: every size the script
    reads is taken (from 8 bytes, where the sweep starts) and reaches it as the same number."""
    for text, size in grammar.sweep_sizes():
        message = max_bytes_refusal(text)
        if size is None:
            assert message is not None and "a size the fabric check reads" in message, text
        elif size < CHECK_MIN_BYTES:
            assert message is not None and "the sweep starts at 8 bytes" in message, text
        else:
            assert message is None, message
            args = check_args(load_settings(openshift(verify={"maxBytes": text})))
            assert allreduce_check.build_parser().parse_args(args).max_bytes == size


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(text=st.text(alphabet="0123456789\u0663kKmMgGtTpbBiI .+-\t\n", max_size=8))
def test_max_bytes_agrees_with_the_check_script_on_any_text(text: str) -> None:
    try:
        size: int | None = allreduce_check.parse_size(text)
    except ValueError:
        size = None
    message = max_bytes_refusal(text)
    assert (message is None) == (size is not None and size >= CHECK_MIN_BYTES), message


def test_a_plain_integer_is_a_size_in_bytes() -> None:
    assert load_settings(openshift(verify={"maxBytes": 1 << 30})).verify.max_bytes == "1073741824"


# --- names -----------------------------------------------------------------------------------

# Each name type's generated table, and the key its values go to.
NAMES = {
    "resource": (grammar.resource_names, "gpu-cluster:rdma.nics[0].resource"),
    "labelKey": (grammar.label_keys, "gpu-cluster:openshift.gpuNodeLabel"),
    "name": (grammar.stack_names, "gpu-cluster:name"),
    "namespace": (grammar.namespaces, "gpu-cluster:namespace"),
    "storageClass": (grammar.storage_classes, "gpu-cluster:storage.storageClass"),
    "network": (grammar.subdomains, "gpu-cluster:rdma.nics[0].network"),
    "nodeName": (grammar.node_names, "gpu-cluster:openshift.nodeNames"),
    "secretEnv": (grammar.secret_env_names, "gpu-cluster:secretEnv"),
    "priorityClass": (
        grammar.priority_class_names,
        "gpu-cluster:workload.queue.priorityClasses[0].name",
    ),
}


def name_cases() -> list[tuple[str, grammar.Name]]:
    return [(kind, case) for kind, (table, _) in NAMES.items() for case in table()]


@pytest.mark.parametrize(
    ("kind", "case"), name_cases(), ids=lambda x: repr(x.value[:40]) if hasattr(x, "value") else x
)
def test_names_are_taken_as_kubernetes_takes_them(kind: str, case: grammar.Name) -> None:
    """What the API server takes, the program takes, or refuses saying why it needs more."""
    message = refusal(WITH_VALUE[kind](case.value))
    if case.kubernetes and not case.needs_more:
        assert message is None, message
    else:
        assert message is not None and NAMES[kind][1] in message, message
        assert case.needs_more in message, message


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_each_name_table_holds_both_sides_of_its_rules(kind: str) -> None:
    cases = NAMES[kind][0]()
    assert sum(c.kubernetes for c in cases) >= 5
    assert sum(not c.kubernetes for c in cases) >= 5
    assert len({c.value for c in cases}) == len(cases)


# --- namespaces the stack must not create ----------------------------------------------------

GKE = {
    "platform": "gke",
    "networkMode": "tcpxo",
    "kubernetesVersion": "1.35",
    "gcp": {
        "project": "my-gpu-project",
        "region": "us-central1",
        "zone": "us-central1-a",
        "authorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "operators"}],
    },
    "storage": {"mode": "per-pod"},  # GKE's default class has no shared claims
}
PLATFORMS = {"openshift": openshift(), "gke": GKE}


def kept_namespaces(platform: str) -> list[str]:
    """Every namespace Kubernetes or `platform` creates or keeps, and names under their prefixes."""
    names, prefixes = PLATFORM_NAMESPACES[platform]
    under = [f"{p}team" for p in (*KUBERNETES_NAMESPACE_PREFIXES, *prefixes)]
    return [*SYSTEM_NAMESPACES, *names, *under]


@pytest.mark.parametrize(
    ("platform", "namespace"),
    [(p, n) for p in sorted(PLATFORMS) for n in kept_namespaces(p)],
)
def test_a_namespace_every_cluster_has_or_the_platform_keeps_is_not_created(
    platform: str, namespace: str
) -> None:
    message = refusal({**PLATFORMS[platform], "namespace": namespace})
    assert message is not None and f"gpu-cluster:namespace = {namespace!r}" in message, message
    assert "namespaceMode: reference" in message and "adopt" in message, message
    for mode in ("reference", "adopt"):
        raw = {**PLATFORMS[platform], "namespace": namespace, "namespaceMode": mode}
        assert refusal(raw) is None


def test_another_platforms_namespaces_may_be_created() -> None:
    assert refusal({**GKE, "namespace": "openshift-team"}) is None
    assert refusal(openshift(namespace="gke-team")) is None
    assert refusal(openshift(namespace="kubeflow")) is None  # "kube-" is the prefix, not "kube"


# --- images ----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", grammar.images(), ids=lambda c: repr(c.value[:50]))
def test_images_are_taken_as_the_kubelet_parses_them(case: grammar.Image) -> None:
    """Every reference the kubelet can pull is taken if pinned (a digest, or a tag other than
    latest); refused saying it moves if not; and every other one refused saying why."""
    for raw, key in (
        (openshift(image=case.value), "gpu-cluster:image"),
        (openshift(codeSync={"repo": "https://x/r.git", "image": case.value}), "codeSync.image"),
    ):
        message = refusal(raw)
        if case.pullable and case.pinned:
            assert message is None, message
        else:
            assert message is not None and key in message, message
            reason = "kubelet can pull" if not case.pullable else "latest"
            assert reason in message, message


# --- interface names -------------------------------------------------------------------------


@pytest.mark.parametrize("case", grammar.interface_names(), ids=lambda c: repr(c.value))
def test_interface_names_are_taken_as_the_kernel_and_the_pod_scripts_take_them(
    case: grammar.Name,
) -> None:
    """A node's interface (macvlan's master) may have any name the kernel allows; an interface
    in the pod only one the pod's scripts read as well, or the program says so."""
    host = refusal(rdma_nic(flavour="macvlan", master=case.value))
    assert (host is None) == case.kubernetes, host
    other_nic = {**NIC, "interface": "roce9"}
    bootstrap = openshift(
        networkMode="rdma", rdma={"nics": [other_nic], "bootstrapInterface": case.value}
    )
    for raw in (rdma_nic(interface=case.value), bootstrap):
        message = refusal(raw)
        if case.kubernetes and not case.needs_more:
            assert message is None, message
        else:
            assert message is not None and (case.needs_more or "interface name") in message


def test_the_pod_scripts_read_every_interface_name_the_program_takes(tmp_path: Path) -> None:
    """The accepted names reach detect-rdma.sh and preflight.sh (RDMA_INTERFACES): each finds
    its interface on a node whose SR-IOV VFs carry those names."""
    taken = [c.value for c in grammar.interface_names() if c.kubernetes and not c.needs_more]
    for start in range(0, len(taken), len(HCAS)):
        names = tuple(taken[start : start + len(HCAS)])
        node = healthy_node(tmp_path / f"node{start}", names)
        result = detect(node.sys, tmp_path / f"env{start}/nccl.env", ifaces=",".join(names))
        assert result.returncode == 0, result.stderr
        for iface, hca in zip(names, HCAS, strict=False):
            assert f"{iface} -> {hca}:1 gid index 3" in result.stdout
        passes(preflight(node.env()))


# --- codeSync.period -------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "nanoseconds"), grammar.go_durations())
def test_sync_periods_are_the_go_durations_git_sync_takes(
    text: str, nanoseconds: int | None
) -> None:
    """git-sync reads GITSYNC_PERIOD with time.ParseDuration and stops below 10ms."""
    message = refusal(openshift(codeSync={"repo": "https://x/r.git", "period": text}))
    if nanoseconds is None:
        assert message is not None and "must be a Go duration" in message, message
    elif nanoseconds < GIT_SYNC_MIN_PERIOD_NS:
        assert message is not None and "at least 10ms" in message, message
    else:
        assert message is None, message
        assert parse_go_duration(text) == nanoseconds
