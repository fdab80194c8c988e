"""K8S_IDENTITY and K8S_REPLACE_ON (gpu_cluster/offline/replacements.py) against pulumi-kubernetes'
own replacement rules.

tests/vendor/k8s_force_new.json holds the rules of provider/pkg/provider/diff.go at the commit it
names (the provider module the real tier builds), written by `python -m tools.k8s_force_new
SOURCE`: the paths every object replaces on ("always"), the per-kind table ("kinds") and the
Secret and ConfigMap data rule ("whenImmutable": it applies unless the provider's option makes
the data mutable and the object does not set `immutable: true`). The provider replaces an object
when its merge patch has a change at or below one of those paths; the program's table writes a
path that replaces on any change at or below it. Held against the inputs of every Kubernetes
object of the renders the edit matrix reads, under the provider options each render sets:

- the identity paths are the provider's;
- every path of the table is a forceNew path of its kind in the provider;
- every forceNew path the program sets is at or below a path of the table.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.replacements import K8S_IDENTITY, K8S_REPLACE_ON, Key, Row, replace_on
from gpu_cluster.offline.stack_files import engine_config
from tests.conftest import STACKS, rows, run_stack
from tests.edits import edited_config
from tests.test_gcp_force_new import at_or_below, leaves, variants

VENDOR = json.loads((Path(__file__).parent / "vendor" / "k8s_force_new.json").read_text())
PROVIDER = "pulumi:providers:kubernetes"
# The provider options that make Secret and ConfigMap data mutable (pulumi-kubernetes
# provider/pkg/provider/provider.go, kubernetes:config:enableSecretMutable / ...ConfigMapMutable).
MUTABLE_OPTIONS = ("enableSecretMutable", "enableConfigMapMutable")
# The matrices render no Secret: secretEnv makes one (Opaque, stringData), on either platform.
SECRET_ENV = (
    ("nerc-production", "secretEnv.HF_TOKEN=hf_example"),
    ("gcp-a4", "secretEnv.HF_TOKEN=hf_example"),
)


def _mutable_options(config: dict[str, str], found: dict[Key, Row]) -> frozenset[str]:
    """The options set to true: the explicit provider's inputs (GKE), else the stack config's
    `kubernetes:` keys, which the default provider reads (OpenShift)."""
    providers = [row["inputs"] or {} for (type_, _), row in found.items() if type_ == PROVIDER]
    stack_keys = {k.split(":", 1)[1]: v for k, v in config.items() if k.startswith("kubernetes:")}
    settings = providers or [stack_keys]
    return frozenset(
        o for o in MUTABLE_OPTIONS for s in settings if str(s.get(o, "")).lower() == "true"
    )


def _runs() -> Iterator[tuple[dict[str, str], ProgramRun]]:
    every = (*((s, ()) for s in STACKS), *variants())
    for stack, overrides in dict.fromkeys(every):
        yield edited_config(stack, overrides)[0], run_stack(stack, *overrides)
    for stack, secret in SECRET_ENV:
        config, secret_keys = engine_config(stack, (), (secret,))
        yield config, run_program(config, secret_keys, stack)


@cache
def renders() -> dict[Key, list[tuple[Row, frozenset[str]]]]:
    """Every Kubernetes object's rows, one per render it appears in, with the render's mutable
    options."""
    out: dict[Key, list[tuple[Row, frozenset[str]]]] = defaultdict(list)
    for config, run in _runs():
        found = rows(run)
        mutable = _mutable_options(config, found)
        for key, row in found.items():
            if key[0].startswith("kubernetes:"):
                out[key].append((row, mutable))
    return out


def provider_force_new(type_: str, row: Row, mutable: frozenset[str]) -> dict[str, str]:
    """The paths pulumi-kubernetes replaces this object on (diff.go forceNewProperties)."""
    paths: dict[str, str] = dict(VENDOR["always"])
    data_rule = VENDOR["whenImmutable"].get(type_)
    immutable = (row.get("inputs") or {}).get("immutable") is True
    if data_rule and (data_rule["unlessMutableBy"] not in mutable or immutable):
        return {**paths, **data_rule["forceNew"]}
    return {**paths, **VENDOR["kinds"].get(type_, {})}


def _each_object() -> Iterator[tuple[str, Row, frozenset[str]]]:
    for (type_, _), versions in renders().items():
        for row, mutable in versions:
            yield type_, row, mutable


def test_the_identity_paths_are_the_providers() -> None:
    assert set(K8S_IDENTITY) == set(VENDOR["always"]) == {"metadata.name", "metadata.namespace"}


def test_every_table_kind_is_rendered() -> None:
    assert set(K8S_REPLACE_ON) <= {type_ for type_, _ in renders()}


def test_every_table_path_is_force_new_in_the_provider_source() -> None:
    wrong = {
        (type_, path)
        for type_, row, mutable in _each_object()
        for path in K8S_REPLACE_ON.get(type_, ())
        if path not in provider_force_new(type_, row, mutable)
    }
    assert sorted(wrong) == []


def test_every_force_new_path_the_program_sets_is_in_the_table() -> None:
    missing = set()
    for type_, row, mutable in _each_object():
        listed = replace_on(type_)
        set_paths = {p for p, _ in leaves(row.get("inputs") or {})}
        for field, line in provider_force_new(type_, row, mutable).items():
            is_set = any(at_or_below(p, field) for p in set_paths)
            if is_set and not any(at_or_below(field, top) for top in listed):
                missing.add((type_, field, line))
    assert sorted(missing) == []


def test_configmap_and_secret_data_replace_unless_made_mutable() -> None:
    """The provider's branch, as the vendor file reads it: data replaces a ConfigMap unless
    enableConfigMapMutable is set and the ConfigMap is not `immutable`."""
    configmap = "kubernetes:core/v1:ConfigMap"
    mutable = frozenset({"enableConfigMapMutable"})
    plain: Row = {"type": configmap, "inputs": {"data": {"a": "1"}}}
    frozen: Row = {"type": configmap, "inputs": {"data": {"a": "1"}, "immutable": True}}
    assert "data" in provider_force_new(configmap, plain, frozenset())
    assert "data" not in provider_force_new(configmap, plain, mutable)
    assert "data" in provider_force_new(configmap, frozen, mutable)
    secret = "kubernetes:core/v1:Secret"
    assert set(provider_force_new(secret, plain, frozenset({"enableSecretMutable"}))) == {
        "metadata.name",
        "metadata.namespace",
        "type",
    }
