"""The real tier's pins agree with themselves: each family's go.mod requires the upstream release
build.py stamps into its binaries, and Kubernetes' staging modules are replaced by the published
versions of the same release (v1.N.P <-> v0.N.P), and the controllers' charts it runs are the
ones a stack installs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import GKE_RWX
from tools.realtier.build import (
    _DATA,
    AUTOSCALER_CRDS,
    CHARTS,
    FAMILIES,
    KUBERNETES_VERSION,
    MULTUS_DATA,
    PROVIDER_MODULE,
    PROVIDER_MODULE_VERSION,
    _go_binary_name,
    locate,
)
from tools.realtier.charts import NAMESPACES
from tools.realtier.stacks import render

UPSTREAM_MODULE = {
    "kubernetes": "k8s.io/kubernetes",
    "pulumi": "github.com/pulumi/pulumi/pkg/v3",
    "etcd": "go.etcd.io/etcd/server/v3",
    "kwok": "sigs.k8s.io/kwok",
    "jobset": "sigs.k8s.io/jobset",
    "kueue": "sigs.k8s.io/kueue",
    "helm": "helm.sh/helm/v3",
    "provider": PROVIDER_MODULE,
    "cni": "github.com/containernetworking/plugins",
    "coredns": "github.com/coredns/coredns",
    "multus": "gopkg.in/k8snetworkplumbingwg/multus-cni.v4",
    "whereabouts": "github.com/k8snetworkplumbingwg/whereabouts",
    "prometheus": "github.com/prometheus/prometheus",
}
# Families whose module has no tag of the release: the pseudo-version of the release's commit.
MODULE_VERSION = {"provider": PROVIDER_MODULE_VERSION}


def test_each_go_mod_requires_the_release_its_binaries_are_stamped_with() -> None:
    for family in FAMILIES:
        go_mod = (family.module_dir / "go.mod").read_text()
        module = re.escape(UPSTREAM_MODULE[family.name])
        version = re.escape(MODULE_VERSION.get(family.name, family.version))
        assert re.search(rf"^\s*(require\s+)?{module} {version}\b", go_mod, re.M), family.name


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


def test_modules_outside_the_checksum_database_are_pinned_by_go_sum() -> None:
    """GONOSUMDB only lifts the database lookup: the committed go.sum must hold the hashes."""
    exempt = [(f, m) for f in FAMILIES for m in f.nosumdb]
    assert [(f.name, m) for f, m in exempt] == [
        ("kueue", "sigs.k8s.io/kueue"),
        ("kueue", "sigs.k8s.io/scheduler-library"),
    ]
    for family, module in exempt:
        go_mod = (family.module_dir / "go.mod").read_text()
        required = re.search(rf"^\s*{re.escape(module)} (v\S+)", go_mod, re.M)
        assert required, (family.name, module)
        go_sum = (family.module_dir / "go.sum").read_text()
        for suffix in ("", "/go.mod"):
            assert re.search(
                rf"^{re.escape(module)} {re.escape(required[1])}{suffix} h1:\S+=$", go_sum, re.M
            ), (family.name, module, suffix)


def test_controller_data_comes_from_the_built_releases() -> None:
    """The charts installed for Kueue and JobSet, and Multus' and whereabouts' roles and CRDs,
    are those of the releases built; another module's data (the cluster autoscaler's
    ProvisioningRequest CRD) is at the version the built Kueue requires."""
    versions = {UPSTREAM_MODULE[f.name]: f.version for f in FAMILIES}
    for upstream in (*CHARTS.values(), *MULTUS_DATA):
        assert versions[upstream.module] == upstream.version, upstream
    kueue = next(f for f in FAMILIES if f.name == "kueue")
    requires = (kueue.module_dir / "go.mod").read_text()
    for upstream in AUTOSCALER_CRDS:
        pinned = rf"^\s+{re.escape(upstream.module)} {re.escape(upstream.version)}\b"
        assert re.search(pinned, requires, re.M), upstream


def test_the_tier_installs_the_charts_a_stack_installs() -> None:
    """A GKE JobSet stack's charts, with their default versions, release names and namespaces,
    are the ones the tier renders and runs (tools/realtier/charts.py)."""
    stack = render("gcp-a3", ("workload.kind=jobset", "workload.command[0]=t", *GKE_RWX))
    installed = [
        (c["name"], c["namespace"], c["version"], c["chart"].rsplit("/", 1)[1])
        for c in stack.charts()
    ]
    versions = {f.name: f.version.removeprefix("v") for f in FAMILIES}
    assert installed == [
        (release, NAMESPACES[release], versions[release], Path(CHARTS[release].path).name)
        for release in ("jobset", "kueue")
    ]


def test_data_files_have_distinct_names_in_their_directory() -> None:
    """Each set lands in one directory under its files' own names: none may overwrite another."""
    for subdir, files in _DATA.items():
        names = [f.name for f in files]
        assert len(names) == len(set(names)), subdir


def test_without_go_the_tools_are_not_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without Go the real tier's tests skip (or fail in CI) as for unbuilt tools, not error."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert locate() is None
