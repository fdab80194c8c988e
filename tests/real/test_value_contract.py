"""The real API server judges the stack's value types: values generated from each grammar
(tests/value_grammar.py) are put where the stack puts them and created as a dry run, and the
program and the API server must agree both ways. What the program accepts is admitted (and read
to the same value); what the API server admits the program accepts, or refuses with a message
naming why the program needs more (the `NEEDS_MORE` reasons). The generator's own labels are
checked too: a text built to leave a grammar is one the API server cannot decode."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_cluster.facts.kubernetes import (
    DNS_1035_LABEL,
    DNS_1123_LABEL,
    DNS_SUBDOMAIN,
    QUALIFIED_NAME,
    SYSTEM_NAMESPACES,
    parse_quantity,
    resource_quantity,
)
from gpu_cluster.offline.engine import run_program
from gpu_cluster.offline.stack_files import engine_config
from tests import value_grammar as grammar
from tests.contract import set_key
from tests.real.test_api_contract import admitted
from tests.test_values import NAMES, WITH_VALUE, openshift, refusal
from tools.realtier.kube import CreateError, Kube

pytestmark = pytest.mark.real
Object = dict[str, Any]
NAMESPACE = "default"


@dataclass(frozen=True)
class Verdict:
    """The API server's answer to a dry-run create: the object as it would be stored, or the
    refusal's HTTP status and message."""

    stored: Object | None
    status: int = 0
    message: str = ""


def verdict(kube: Kube, obj: Object) -> Verdict:
    try:
        return Verdict(kube.create(obj, dry_run=True))
    except CreateError as error:
        return Verdict(None, error.status, error.body)


def pod(**spec: Any) -> Object:
    container = {"name": "c", "image": "registry.example/c:1", **spec.pop("container", {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": NAMESPACE},
        "spec": {"containers": [container], **spec},
    }


def claim(size: str) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "c", "namespace": NAMESPACE},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def disagreement(
    value: str, api: Verdict, program: str | None, needs_more: tuple[str, ...]
) -> str | None:
    """Why the API server's and the program's verdicts on `value` disagree (None: they agree)."""
    if program is None and api.stored is None:
        return f"{value!r}: the program takes it, the API server refuses it: {api.message}"
    if (
        program is not None
        and api.stored is not None
        and not any(reason in program for reason in needs_more)
    ):
        return f"{value!r}: the API server admits it, the program refuses it: {program}"
    return None


# --- quantities ------------------------------------------------------------------------------

# Quantities the API server admits and the program refuses, saying so.
QUANTITY_NEEDS_MORE = (
    "has no digits",
    "outside what Kubernetes holds",
    "Kubernetes reads CPU in millicores",  # a quantity the scheduler would read wrongly as CPU
)


@dataclass(frozen=True)
class QuantityUse:
    """Where the stack puts a quantity: the object, where the API server stores it, the stack
    config that sets it and how the API server reads it for validation."""

    manifest: Callable[[str], Object]
    stored: Callable[[Object], str]
    config: Callable[[str], dict[str, Any]]
    value: Callable[[str], Fraction]


QUANTITY_USES = {
    "claim size": QuantityUse(
        claim,
        lambda o: o["spec"]["resources"]["requests"]["storage"],
        lambda v: openshift(storage={"workspaceSize": v}),
        resource_quantity,
    ),
    "cpu request": QuantityUse(
        lambda v: pod(container={"resources": {"requests": {"cpu": v}}}),
        lambda o: o["spec"]["containers"][0]["resources"]["requests"]["cpu"],
        lambda v: openshift(pod={"cpuRequest": v, "cpuLimit": None}),
        resource_quantity,
    ),
    "/dev/shm size": QuantityUse(
        lambda v: pod(volumes=[{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": v}}]),
        lambda o: o["spec"]["volumes"][0]["emptyDir"]["sizeLimit"],
        lambda v: openshift(pod={"shmSize": v}),
        parse_quantity,
    ),
}


@pytest.mark.parametrize("use", sorted(QUANTITY_USES))
def test_quantities_agree_with_the_api_server(api: Kube, use: str) -> None:
    where = QUANTITY_USES[use]
    problems = []
    for case in grammar.quantities():
        answer = verdict(api, where.manifest(case.text))
        program = refusal(where.config(case.text))
        if (case.mantissa is None) != (answer.status == 400):
            problems.append(
                f"{case.text!r}: built as a quantity={case.mantissa is not None}, "
                f"the API server answers {answer.status or 'admitted'}"
            )
        problem = disagreement(case.text, answer, program, QUANTITY_NEEDS_MORE)
        if problem:
            problems.append(problem)
        elif program is None and answer.stored is not None:
            stored = where.stored(answer.stored)
            if parse_quantity(stored) != where.value(case.text.strip(" ")):
                problems.append(f"{case.text!r}: stored as {stored!r}, read differently here")
    assert problems == []


def test_requests_and_limits_compare_as_the_api_server_compares_them(api: Kube) -> None:
    problems = []
    for request, limit in grammar.REQUEST_LIMIT_PAIRS:
        # Memory: the same comparison as CPU, without CPU's own millicore ceiling.
        resources = {"requests": {"memory": request}, "limits": {"memory": limit}}
        answer = verdict(api, pod(container={"resources": resources}))
        program = refusal(openshift(pod={"memoryRequest": request, "memoryLimit": limit}))
        if (answer.stored is None) != (program is not None):
            problems.append(
                f"{request} <= {limit}: API {answer.status or 'admits'}, "
                f"program {program or 'takes it'}"
            )
    assert problems == []


# --- names -----------------------------------------------------------------------------------


# How many of the values the program takes are rendered into the whole stack and created: an
# even spread (a render takes a third of a second; every value is created in the small object).
RENDERED = 12


def spread(values: list[str], count: int = RENDERED) -> list[str]:
    return values[:: max(1, -(-len(values) // count))]


def rendered_refusals(kube: Kube, stack: str, key: str, value: Any) -> list[str]:
    """The shipped stack with `key` set to the text `value`, rendered and created as a dry run."""
    config, secret_keys = engine_config(stack)
    set_key(config, key, value)
    return admitted(kube, run_program(config, secret_keys, stack).manifests())


@dataclass(frozen=True)
class NameUse:
    """Where the stack puts a name (the smallest object that carries it as the stack does), and
    the shipped stack and how to set the name in its config, to render the whole stack with it."""

    manifest: Callable[[str], Object]
    stack: str
    key: str
    # The config value for the name (a list for nodeNames).
    setting: Callable[[str], Any] = lambda v: v


def node_affinity(key: str, values: tuple[str, ...] = ("true",)) -> Object:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}
    required = {"nodeSelectorTerms": [term]}
    return pod(
        affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    )


def named(api_version: str, kind: str, name: str, **fields: Any) -> Object:
    namespace = {} if kind == "Namespace" else {"namespace": NAMESPACE}
    metadata = {"name": name, **namespace}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


NAME_USES = {
    "resource": NameUse(
        lambda v: pod(container={"resources": {"requests": {v: "1"}, "limits": {v: "1"}}}),
        "barcelona",
        "rdma.nics[0].resource",
    ),
    "labelKey": NameUse(node_affinity, "nerc-production", "openshift.gpuNodeLabel"),
    "name": NameUse(
        lambda v: named("v1", "Service", v, spec={"clusterIP": "None", "ports": [{"port": 1}]}),
        "nerc-production",
        "name",
    ),
    "namespace": NameUse(lambda v: named("v1", "Namespace", v), "gcp-a3", "namespace"),
    "storageClass": NameUse(
        lambda v: {**claim("1Gi"), "spec": {**claim("1Gi")["spec"], "storageClassName": v}},
        "barcelona",
        "storage.storageClass",
    ),
    "network": NameUse(
        lambda v: named("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition", v, spec={}),
        "barcelona",
        "rdma.nics[0].network",
    ),
    "nodeName": NameUse(
        lambda v: node_affinity("kubernetes.io/hostname", (v,)),
        "barcelona",
        "openshift.nodeNames",
        lambda v: [v, "another-node"],
    ),
}


@pytest.mark.parametrize("kind", sorted(NAME_USES))
def test_names_agree_with_the_api_server(api: Kube, kind: str) -> None:
    use, (table, _) = NAME_USES[kind], NAMES[kind]
    problems, taken = [], []
    for case in table():
        answer = verdict(api, use.manifest(case.value))
        program = refusal(WITH_VALUE[kind](case.value))
        if case.kubernetes != (answer.stored is not None):
            problems.append(
                f"{case.value!r}: built as taken={case.kubernetes}, the API server answers "
                f"{answer.status or 'admitted'} {answer.message[:300]}"
            )
        needs_more = (case.needs_more,) if case.needs_more else ()
        problem = disagreement(case.value, answer, program, needs_more)
        if problem:
            problems.append(problem)
        elif program is None:
            taken.append(case.value)
    for value in spread(taken):
        problems += rendered_refusals(api, use.stack, use.key, use.setting(value))
    assert problems == []


# Names the API server takes that the program refuses, per kind: the reasons its messages give.
NAMES_NEED_MORE = {
    "resource": (grammar.NATIVE_RESOURCE,),
    "name": (grammar.REVISION_LABEL,),
    "nodeName": (grammar.NODE_NAME,),
    "namespace": ("keeps",),  # kube-* and the platform's own (rules.namespace_problems)
}
# Random names: shaped by each rule's own pattern, or any text from the characters the rules
# mention (and some they do not).
_SHAPES = {
    "resource": f"({DNS_SUBDOMAIN.pattern})/({QUALIFIED_NAME.pattern})",
    "labelKey": f"(({DNS_SUBDOMAIN.pattern})/)?({QUALIFIED_NAME.pattern})",
    "name": DNS_1035_LABEL.pattern,
    "namespace": DNS_1123_LABEL.pattern,
    "storageClass": f"({DNS_SUBDOMAIN.pattern})?",
    "network": DNS_SUBDOMAIN.pattern,
    "nodeName": DNS_SUBDOMAIN.pattern,
}
_CHARACTERS = "abz019-._/AZ \u00e9"


@pytest.mark.parametrize("kind", sorted(NAME_USES))
@settings(max_examples=80, derandomize=True, database=None, deadline=None)
@given(data=st.data())
def test_random_names_agree_with_the_api_server(api: Kube, kind: str, data: st.DataObject) -> None:
    value = data.draw(
        st.from_regex(_SHAPES[kind], fullmatch=True) | st.text(_CHARACTERS, max_size=70)
    )
    answer = verdict(api, NAME_USES[kind].manifest(value))
    program = refusal(WITH_VALUE[kind](value))
    assert disagreement(value, answer, program, NAMES_NEED_MORE.get(kind, ())) is None


def test_the_namespaces_every_cluster_has_exist_on_the_api_server(api: Kube) -> None:
    """The program refuses to create SYSTEM_NAMESPACES because the API server made them: a
    create of each is refused as AlreadyExists, and of no other name the program refuses."""
    for namespace in SYSTEM_NAMESPACES:
        assert verdict(api, named("v1", "Namespace", namespace)).status == 409, namespace
    assert verdict(api, named("v1", "Namespace", "kube-team")).stored is not None


# --- images ----------------------------------------------------------------------------------

# The API server takes any image without surrounding whitespace; the program asks for what the
# kubelet can parse (tests/test_values.py holds it to distribution/reference's grammar) and pins.
IMAGE_NEEDS_MORE = ("the kubelet can pull", "latest")


def test_images_agree_with_the_api_server(api: Kube) -> None:
    problems, taken = [], []
    for case in grammar.images():
        answer = verdict(api, pod(container={"image": case.value}))
        program = refusal(openshift(image=case.value))
        problem = disagreement(case.value, answer, program, IMAGE_NEEDS_MORE)
        if problem:
            problems.append(problem)
        elif program is None:
            taken.append(case.value)
    for value in spread(taken):
        problems += rendered_refusals(api, "barcelona", "image", value)
    assert problems == []


# --- secretEnv names -------------------------------------------------------------------------


def secret_env_objects(name: str) -> list[Object]:
    """What the stack makes of a secretEnv name: a Secret keyed by it, and the variable reading
    that key."""
    source = {"secretKeyRef": {"name": "env", "key": name}}
    return [
        named("v1", "Secret", "env", stringData={name: "token"}),
        pod(container={"env": [{"name": name, "valueFrom": source}]}),
    ]


def test_secret_env_names_agree_with_the_api_server(api: Kube) -> None:
    """The API server takes any printable-ASCII variable name but '='; the stack keys its
    Secret by the name too, so the program takes what both admit and says why of the rest."""
    problems, taken = [], []
    for case in grammar.secret_env_names():
        variable = verdict(api, pod(container={"env": [{"name": case.value, "value": "x"}]}))
        stack = all(verdict(api, o).stored is not None for o in secret_env_objects(case.value))
        program = refusal(WITH_VALUE["secretEnv"](case.value))
        if case.kubernetes != (variable.stored is not None) or stack != (
            case.kubernetes and not case.needs_more
        ):
            problems.append(f"{case.value!r}: built otherwise than the API server answers")
        if (program is None) != stack:
            problems.append(f"{case.value!r}: the stack's objects admitted={stack}, {program}")
        elif (
            program is not None
            and variable.stored is not None
            and grammar.SECRET_KEY not in program
        ):
            problems.append(f"{case.value!r}: refused without saying why: {program}")
        elif program is None:
            taken.append(case.value)
    for value in spread(taken):
        config, secret_keys = engine_config("nerc-production")
        config["gpu-cluster:secretEnv"] = json.dumps({value: "token"})
        run = run_program(config, [*secret_keys, "gpu-cluster:secretEnv"], "nerc-production")
        problems += admitted(api, run.manifests())
    assert problems == []
