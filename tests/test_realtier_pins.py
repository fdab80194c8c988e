"""The real tier's pins agree with themselves: each family's go.mod requires the upstream release
build.py stamps into its binaries, and Kubernetes' staging modules are replaced by the published
versions of the same release (v1.N.P <-> v0.N.P)."""

from __future__ import annotations

import re

from tools.realtier.build import FAMILIES, KUBERNETES_VERSION, _go_binary_name

UPSTREAM_MODULE = {
    "kubernetes": "k8s.io/kubernetes",
    "pulumi": "github.com/pulumi/pulumi/pkg/v3",
    "etcd": "go.etcd.io/etcd/server/v3",
    "kwok": "sigs.k8s.io/kwok",
}


def test_each_go_mod_requires_the_release_its_binaries_are_stamped_with() -> None:
    for family in FAMILIES:
        go_mod = (family.module_dir / "go.mod").read_text()
        module = re.escape(UPSTREAM_MODULE[family.name])
        assert re.search(
            rf"^\s*(require\s+)?{module} {re.escape(family.version)}\b", go_mod, re.M
        ), family.name


def test_kubernetes_staging_modules_are_the_same_release() -> None:
    (family,) = [f for f in FAMILIES if f.name == "kubernetes"]
    go_mod = (family.module_dir / "go.mod").read_text()
    replaced = re.findall(r"^\s*(k8s\.io/[\w.-]+) => \1 (v\S+)$", go_mod, re.M)
    assert len(replaced) > 30
    staging = "v0." + KUBERNETES_VERSION.removeprefix("v1.")
    assert {version for _, version in replaced} == {staging}


def test_binaries_are_named_as_go_names_them() -> None:
    assert _go_binary_name("k8s.io/kubernetes/cmd/kube-apiserver") == "kube-apiserver"
    assert _go_binary_name("go.etcd.io/etcd/server/v3") == "server"
    assert [f.binaries() for f in FAMILIES if f.name == "etcd"] == [("etcd",)]
