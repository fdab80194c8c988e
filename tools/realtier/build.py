"""Build the real tier's tools, pinned, from the Go module proxy; cached by their inputs.

Each family is one Go module under tools/realtier/go/<family>/ (its go.mod pins the upstream
release and, for k8s.io/kubernetes, maps every staging module to its published version), built
with `-mod=readonly` so the committed go.sum is the only source of truth. A family's binaries land
in `<cache>/<family>-<version>-<key>/bin`, where the key hashes the Go version, the module files
and the build flags: a warm run finds them and builds nothing; a changed pin builds anew.

Kueue's module and its scheduler-library dependency are exempt from the checksum database
(GONOSUMDB, set for that family only): the proxy serves sigs.k8s.io/kueue@v0.19.2 and
sigs.k8s.io/scheduler-library@v0.1.0-alpha1 but the checksum database answers 404 for them
(checked 2026-11-24), so `go` refuses them wherever no go.sum lists them. Their hashes are still
pinned: tools/realtier/go/kueue/go.sum (made with `GONOSUMDB=sigs.k8s.io/kueue,
sigs.k8s.io/scheduler-library go mod tidy`) holds them, and the build and the download of Kueue's
data files run in that module, so the zips are checked against the committed go.sum.

The Kubernetes provider plugin is built from the one version of its module the proxy serves
(pulumi-kubernetes v4.25.0, below) with a main package of the tier's own
(go/provider/cmd/pulumi-resource-kubernetes/main.go says why); its embedded schema is written into
a copy of that module before the build (`Family.generate`).

Not buildable here (the module proxy answers 403 "This module version is not available" for every
version of its module path, checked 2026-11-24): the Python language host
(github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3). The Automation API runs the
program instead (tools/realtier/engine.py); docs/real-tier.md says what that changes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

GO_MODULES = Path(__file__).resolve().parent / "go"

# github.com/pulumi/pulumi pkg/v3.259.0: the newest pkg/v3 the module proxy serves (2026-11-23).
PULUMI_VERSION = "v3.259.0"
# k8s.io/kubernetes v1.35.4: the minor the shipped GKE stacks run (docs/operations.md).
KUBERNETES_VERSION = "v1.35.4"
# go.etcd.io/etcd v3.6.14: etcd's 3.6 line is the one Kubernetes 1.35 builds its client against.
ETCD_VERSION = "v3.6.14"
# sigs.k8s.io/kwok v0.8.0 (2026-06-23): newest kwok release the module proxy serves.
KWOK_VERSION = "v0.8.0"
# sigs.k8s.io/jobset v0.12.0 (2026-05-08): the newest JobSet release. cluster-toolkit v1.95.0
# still installs v0.10.1 (modules/management/kubectl-apply), tested here through 1758bf2.
JOBSET_VERSION = "v0.12.0"
# sigs.k8s.io/kueue v0.19.2 (2026-08-20): the newest Kueue release. Kueue maintains the two
# minors before the one in development (kueue RELEASE.md "Patch releases": N-1 and N-2), so 0.18
# and 0.19 today; cluster-toolkit v1.95.0 and xpk still install v0.17.1, tested here through
# 1758bf2.
KUEUE_VERSION = "v0.19.2"
# github.com/prometheus/prometheus v0.309.1: Prometheus 3.9.1 (its VERSION file), tagged v0.3y.z
# for release 3.y.z (README.md "Using Prometheus as a Go Library"); the newest release the module
# proxy serves (2026-11-29). Its promtool lints what the run metrics' exporter serves.
PROMETHEUS_VERSION = "v0.309.1"
# helm.sh/helm/v3 v3.20.2: the Helm library pulumi-kubernetes renders a helm.v4.Chart with
# (pulumi/pulumi-kubernetes provider/go.mod at 9497796, 2026-07-01).
HELM_VERSION = "v3.20.2"
# pulumi-kubernetes v4.25.0 (2026-01-16): its tag's commit f47bc2d6 is provider/v4
# v4.0.0-20260115033456-f47bc2d6f199, the only version of the provider module the module proxy
# serves (checked 2026-11-24; pulumi-kubernetes has no provider/v4.x tags, so Go sees only
# pseudo-versions). Older than the >=4.29 the program requires: docs/real-tier.md lists what
# changed since and what the tier therefore cannot show.
PROVIDER_VERSION = "v4.25.0"
PROVIDER_MODULE = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PROVIDER_MODULE_VERSION = "v4.0.0-20260115033456-f47bc2d6f199"
# github.com/containernetworking/plugins v1.10.0: the newest CNI plugins release the proxy serves.
CNI_PLUGINS_VERSION = "v1.10.0"
# github.com/coredns/coredns v1.15.0: the newest CoreDNS release the module proxy serves.
COREDNS_VERSION = "v1.15.0"
# gopkg.in/k8snetworkplumbingwg/multus-cni.v4 v4.3.0 (2026-05-29): the newest Multus release the
# module proxy serves (v4.3.1 and the github.com path: 403, checked 2026-11-29).
MULTUS_VERSION = "v4.3.0"
# github.com/k8snetworkplumbingwg/whereabouts v0.9.2 (2025-07-21): the newest whereabouts release
# the proxy serves; the IPAM the stack's NetworkAttachmentDefinitions name.
WHEREABOUTS_VERSION = "v0.9.2"


def _kubernetes_version_flags() -> tuple[str, ...]:
    """Module zips keep `gitVersion=v0.0.0-master`; clients (pulumi-kubernetes too) read the
    server's version, so it is stamped as upstream's build stamps it (hack/lib/version.sh)."""
    major, minor = KUBERNETES_VERSION.lstrip("v").split(".")[:2]
    flags: list[str] = []
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={KUBERNETES_VERSION}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
            f"-X {package}.buildDate=1970-01-01T00:00:00Z",
        ]
    return tuple(flags)


@dataclass(frozen=True)
class Family:
    """One Go module and the binaries built from it with the same flags."""

    name: str
    version: str
    packages: tuple[str, ...]
    tags: str = ""
    ldflags: tuple[str, ...] = ()
    # Binaries go names after their package but upstream ships under another name.
    renames: tuple[tuple[str, str], ...] = ()
    # Module paths fetched without the checksum database (GONOSUMDB); go.sum still pins them.
    nosumdb: tuple[str, ...] = ()
    # Writes files the build needs (and git does not hold) into a copy of the family's module.
    generate: Callable[[Path], None] | None = None

    @property
    def module_dir(self) -> Path:
        return GO_MODULES / self.name

    def binaries(self) -> tuple[str, ...]:
        renamed = dict(self.renames)
        return tuple(renamed.get(n, n) for n in map(_go_binary_name, self.packages))


def _go_binary_name(package: str) -> str:
    """What `go build -o dir/` names a main package: its last path element, or the one before a
    major-version suffix (go.etcd.io/etcd/server/v3 -> server)."""
    parts = package.split("/")
    return parts[-2] if re.fullmatch(r"v[0-9]+", parts[-1]) else parts[-1]


_PROVIDER_MAIN = "cmd/pulumi-resource-kubernetes"


def _write_provider_embeds(source: Path) -> None:
    """What pulumi-kubernetes' `go generate` writes (provider/cmd/pulumi-resource-kubernetes/
    generate.go): the module's schema.json with the release's version set, and its
    terraform-mapping.json, both re-serialised compactly, beside the tier's main package."""
    upstream = _download(PROVIDER_MODULE, PROVIDER_MODULE_VERSION) / _PROVIDER_MAIN
    schema = json.loads((upstream / "schema.json").read_text(encoding="utf-8"))
    schema["version"] = PROVIDER_VERSION.lstrip("v")
    mapping = json.loads((upstream / "terraform-mapping.json").read_text(encoding="utf-8"))
    for name, content in (("schema-embed.json", schema), ("terraform-mapping-embed.json", mapping)):
        (source / _PROVIDER_MAIN / name).write_text(json.dumps(content, separators=(",", ":")))


FAMILIES: tuple[Family, ...] = (
    # Longest build first: `build` runs them two at a time in this order (cold build times in
    # docs/real-tier.md).
    Family(
        "kubernetes",
        KUBERNETES_VERSION,
        (
            "k8s.io/kubernetes/cmd/kube-apiserver",
            "k8s.io/kubernetes/cmd/kube-controller-manager",
            "k8s.io/kubernetes/cmd/kube-scheduler",
            # The exported commands run for real against the control plane.
            "k8s.io/kubernetes/cmd/kubectl",
            # The real nodes' node agent and Service proxy (realnodes.py).
            "k8s.io/kubernetes/cmd/kubelet",
            "k8s.io/kubernetes/cmd/kube-proxy",
        ),
        ldflags=_kubernetes_version_flags(),
    ),
    # Tags and version stamp as pulumi/pulumi .goreleaser.yml builds the CLI; without the stamp
    # `pulumi version` is empty and the Automation API cannot parse it.
    Family(
        "pulumi",
        PULUMI_VERSION,
        ("github.com/pulumi/pulumi/pkg/v3/cmd/pulumi",),
        tags="osusergo,grpcnotrace",
        ldflags=(f"-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version={PULUMI_VERSION}",),
    ),
    # Stamped as pulumi-kubernetes' Makefile stamps a release (`-X .../pkg/version.Version`).
    Family(
        "provider",
        PROVIDER_VERSION,
        (f"gpu-cluster/realtier/provider/{_PROVIDER_MAIN}",),
        ldflags=(f"-X {PROVIDER_MODULE}/pkg/version.Version={PROVIDER_VERSION.lstrip('v')}",),
        generate=_write_provider_embeds,
    ),
    # The managers as each Makefile builds them (`go build -ldflags "-X <module>/pkg/version...`):
    # jobset's main package is its module root (go names it `jobset`), kueue's is cmd/kueue.
    Family(
        "kueue",
        KUEUE_VERSION,
        ("sigs.k8s.io/kueue/cmd/kueue",),
        ldflags=(f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={KUEUE_VERSION}",),
        nosumdb=("sigs.k8s.io/kueue", "sigs.k8s.io/scheduler-library"),
    ),
    Family(
        "jobset",
        JOBSET_VERSION,
        ("sigs.k8s.io/jobset",),
        ldflags=(f"-X sigs.k8s.io/jobset/pkg/version.GitVersion={JOBSET_VERSION}",),
    ),
    Family("kwok", KWOK_VERSION, ("sigs.k8s.io/kwok/cmd/kwok",)),
    # Without the web UI's assets (the builtinassets tag needs its npm build): the API and the
    # scrapes are all the tests use. Stamped as the release is (prometheus/common version).
    Family(
        "prometheus",
        PROMETHEUS_VERSION,
        (
            "github.com/prometheus/prometheus/cmd/prometheus",
            "github.com/prometheus/prometheus/cmd/promtool",
        ),
        ldflags=("-X github.com/prometheus/common/version.Version=3.9.1",),
    ),
    # The version stamp of Helm's Makefile; the tier names the Kubernetes version it renders
    # for itself (`helm template --kube-version`), as pulumi-kubernetes asks the cluster.
    Family(
        "helm",
        HELM_VERSION,
        ("helm.sh/helm/v3/cmd/helm",),
        ldflags=(
            f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
            "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
        ),
    ),
    # The real nodes' pod network: the plugins the bridge network runs, each stamped as upstream's
    # release stamps it (pkg/utils/buildversion).
    Family(
        "cni",
        CNI_PLUGINS_VERSION,
        tuple(
            f"github.com/containernetworking/plugins/plugins/{p}"
            for p in (
                "main/bridge",
                "main/loopback",
                "ipam/host-local",
                "meta/portmap",
                # The stack's macvlan NetworkAttachmentDefinitions, Multus's delegates.
                "main/macvlan",
            )
        ),
        ldflags=(
            "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion="
            + CNI_PLUGINS_VERSION,
        ),
    ),
    # The thin Multus plugin (as hack/build-go.sh stamps it), which
    # attaches a pod's NetworkAttachmentDefinitions on the real nodes, and the IPAM they name.
    Family(
        "multus",
        MULTUS_VERSION,
        ("gopkg.in/k8snetworkplumbingwg/multus-cni.v4/cmd/multus",),
        ldflags=(
            f"-X gopkg.in/k8snetworkplumbingwg/multus-cni.v4/pkg/multus.version={MULTUS_VERSION}",
        ),
    ),
    # whereabouts' main package is its cmd directory (go names it `cmd`).
    Family(
        "whereabouts",
        WHEREABOUTS_VERSION,
        ("github.com/k8snetworkplumbingwg/whereabouts/cmd",),
        renames=(("cmd", "whereabouts"),),
    ),
    # The real nodes' cluster DNS, with the tier's main (go/coredns/cmd/coredns/main.go says why).
    Family("coredns", COREDNS_VERSION, ("gpu-cluster/realtier/coredns/cmd/coredns",)),
    # etcd's main package is the server module's root: go names the binary `server`.
    Family("etcd", ETCD_VERSION, ("go.etcd.io/etcd/server/v3",), renames=(("server", "etcd"),)),
)


@dataclass(frozen=True)
class UpstreamFile:
    """A data file of an upstream module at a pinned version (the version names the commit)."""

    module: str
    version: str
    path: str

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[1]


_OPENSHIFT_API = ("github.com/openshift/api", "v0.0.0-20260318185450-1f2fa3f09f4e")
_GKE_NETWORKING_API = ("github.com/GoogleCloudPlatform/gke-networking-api", "v0.2.11")
_NAD_CLIENT = ("github.com/k8snetworkplumbingwg/network-attachment-definition-client", "v1.7.7")
# The run metrics' scrape objects' APIs: prometheus-operator's PodMonitor (OpenShift's monitoring
# for user-defined projects) and Managed Service for Prometheus' PodMonitoring (GKE).
_PROMETHEUS_OPERATOR = ("github.com/prometheus-operator/prometheus-operator", "v0.85.0")
_PROMETHEUS_ENGINE = ("github.com/GoogleCloudPlatform/prometheus-engine", "v0.17.2")
_KWOK = ("sigs.k8s.io/kwok", KWOK_VERSION)
_MULTUS = ("gopkg.in/k8snetworkplumbingwg/multus-cni.v4", MULTUS_VERSION)
_WHEREABOUTS = ("github.com/k8snetworkplumbingwg/whereabouts", WHEREABOUTS_VERSION)
_KUEUE = ("sigs.k8s.io/kueue", KUEUE_VERSION)
_JOBSET = ("sigs.k8s.io/jobset", JOBSET_VERSION)
# The cluster autoscaler's API module at the version Kueue's go.mod requires (kueue v0.19.2).
_AUTOSCALER_APIS = (
    "k8s.io/autoscaler/cluster-autoscaler/apis",
    "v0.0.0-20240830133931-adfbe7e45277",
)

# The CRDs of every custom resource a stack renders, as their owners publish them.
CRDS: tuple[UpstreamFile, ...] = (
    UpstreamFile(
        *_OPENSHIFT_API,
        "security/v1/zz_generated.crd-manifests/"
        "0000_03_config-operator_01_securitycontextconstraints.crd.yaml",
    ),
    UpstreamFile(
        *_OPENSHIFT_API,
        "machineconfiguration/v1/zz_generated.crd-manifests/"
        "0000_80_machine-config_01_machineconfigs.crd.yaml",
    ),
    UpstreamFile(*_NAD_CLIENT, "artifacts/networks-crd.yaml"),
    UpstreamFile(*_GKE_NETWORKING_API, "config/crds/networking.gke.io_networks.yaml"),
    UpstreamFile(*_GKE_NETWORKING_API, "config/crds/networking.gke.io_gkenetworkparamsets.yaml"),
    UpstreamFile(
        *_PROMETHEUS_OPERATOR,
        "example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml",
    ),
    UpstreamFile(
        *_PROMETHEUS_ENGINE, "charts/operator/crds/monitoring.googleapis.com_podmonitorings.yaml"
    ),
)

# kwok's "fast" stage set (kustomize/stage/fast/kustomization.yaml) plus pod-complete, so Job pods
# finish: nodes become Ready at once and keep a lease, pods become Ready, deleted pods go away.
KWOK_STAGES: tuple[UpstreamFile, ...] = tuple(
    UpstreamFile(*_KWOK, f"kustomize/stage/{path}")
    for path in (
        "node/fast/node-initialize.yaml",
        "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
        "pod/fast/pod-ready.yaml",
        "pod/fast/pod-complete.yaml",
        "pod/fast/pod-delete.yaml",
    )
)


# What Multus and whereabouts need on the API server, as their own install manifests give it: the
# ClusterRoles of their node agents (multus, whereabouts-cni) and whereabouts' CRDs (the NAD CRD
# is among CRDS). The real nodes bind the roles to their own users (nodemultus.py).
MULTUS_DATA: tuple[UpstreamFile, ...] = (
    UpstreamFile(*_MULTUS, "deployments/multus-daemonset.yml"),
    UpstreamFile(*_WHEREABOUTS, "doc/crds/daemonset-install.yaml"),
    UpstreamFile(*_WHEREABOUTS, "doc/crds/whereabouts.cni.cncf.io_ippools.yaml"),
    UpstreamFile(
        *_WHEREABOUTS, "doc/crds/whereabouts.cni.cncf.io_overlappingrangeipreservations.yaml"
    ),
)

# The cluster autoscaler's ProvisioningRequest CRD, which GKE serves and Kueue's provisioning
# admission check needs served when it starts (kueue cmd/kueue/main.go
# ServerSupportsProvisioningRequest). Kueue's and JobSet's own CRDs come with their charts.
AUTOSCALER_CRDS: tuple[UpstreamFile, ...] = (
    UpstreamFile(*_AUTOSCALER_APIS, "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"),
)
# The controllers' Helm charts, each a directory of its module at the release built: what the
# stack installs (workload.controllers), rendered by the tier with the built helm (charts.py).
CHARTS: dict[str, UpstreamFile] = {
    "kueue": UpstreamFile(*_KUEUE, "charts/kueue"),
    "jobset": UpstreamFile(*_JOBSET, "charts/jobset"),
}


@dataclass(frozen=True)
class Tools:
    """Where the built tools and the upstream data files are."""

    bin_dirs: tuple[Path, ...]
    data_dir: Path

    def binary(self, name: str) -> Path:
        for directory in self.bin_dirs:
            if (directory / name).is_file():
                return directory / name
        raise FileNotFoundError(
            f"{name} is not among the built tools: run python -m tools.realtier build"
        )

    @property
    def crds(self) -> list[Path]:
        return _data_paths(self.data_dir, "crds")

    @property
    def kwok_stages(self) -> list[Path]:
        return _data_paths(self.data_dir, "kwok-stages")

    def data(self, subdir: str) -> dict[str, Path]:
        """One set of upstream data files (a key of `_DATA`) by file name, in their order."""
        return {path.name: path for path in _data_paths(self.data_dir, subdir)}

    def chart(self, name: str) -> Path:
        """The directory of a controller's chart (a key of `CHARTS`)."""
        return _chart_dir(self.data_dir, name)


# Where each set of upstream data files lands below the data directory.
_DATA = {
    "crds": CRDS,
    "kwok-stages": KWOK_STAGES,
    "autoscaler-crds": AUTOSCALER_CRDS,
    "multus": MULTUS_DATA,
}


def _data_paths(directory: Path, subdir: str) -> list[Path]:
    return [directory / subdir / f.name for f in _DATA[subdir]]


def _chart_dir(directory: Path, name: str) -> Path:
    return directory / "charts" / name


def _data_present(directory: Path) -> bool:
    files = all(p.is_file() for subdir in _DATA for p in _data_paths(directory, subdir))
    return files and all((_chart_dir(directory, n) / "Chart.yaml").is_file() for n in CHARTS)


def cache_root() -> Path:
    configured = os.environ.get("GPU_CLUSTER_REALTIER_CACHE")
    if configured:
        return Path(configured)
    return Path.home() / ".cache" / "gpu-cluster-realtier"


def _go_env(nosumdb: tuple[str, ...] = ()) -> dict[str, str]:
    # The toolchain on the machine (no toolchain download), static binaries as upstream ships them.
    env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
    if nosumdb:
        env["GONOSUMDB"] = ",".join(nosumdb)
    return env


def _go_version() -> str:
    return subprocess.run(
        ["go", "env", "GOVERSION"], check=True, capture_output=True, text=True, env=_go_env()
    ).stdout.strip()


def _digest(parts: Iterable[str | bytes]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode() if isinstance(part, str) else part)
        digest.update(b"\0")
    return digest.hexdigest()[:12]


def family_dir(family: Family, go_version: str) -> Path:
    key = _digest(
        [
            go_version,
            (family.module_dir / "go.mod").read_bytes(),
            (family.module_dir / "go.sum").read_bytes(),
            *(p.read_bytes() for p in sorted(family.module_dir.rglob("*.go"))),
            family.tags,
            *family.packages,
            *family.ldflags,
            *(f"{go_name}>{name}" for go_name, name in family.renames),
        ]
    )
    return cache_root() / f"{family.name}-{family.version}-{key}"


def data_dir() -> Path:
    files = [*(f for files in _DATA.values() for f in files), *CHARTS.values()]
    return cache_root() / f"data-{_digest(f'{f.module}@{f.version}/{f.path}' for f in files)}"


def locate(go_version: str | None = None, families: Iterable[str] | None = None) -> Tools | None:
    """The built tools (of `families` only, when named), or None when any is missing or no Go is
    on PATH to say which build is this one's (never builds: tests must not)."""
    if go_version is None and shutil.which("go") is None:
        return None
    version = go_version or _go_version()
    wanted = FAMILIES if families is None else [f for f in FAMILIES if f.name in set(families)]
    if not (all(_built(f, version) for f in wanted) and _data_present(data_dir())):
        return None
    return Tools(tuple(family_dir(f, version) / "bin" for f in wanted), data_dir())


def _built(family: Family, go_version: str) -> bool:
    return all((family_dir(family, go_version) / "bin" / b).is_file() for b in family.binaries())


Log = Callable[[str], None]


def _build_family(family: Family, go_version: str, log: Log) -> None:
    target = family_dir(family, go_version)
    if _built(family, go_version):
        log(f"{family.name} {family.version}: cached in {target}")
        return
    started = time.monotonic()
    log(f"{family.name} {family.version}: building {', '.join(family.binaries())}")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{family.name}-", dir=target.parent))
    command = ["go", "build", "-trimpath", "-ldflags", " ".join(("-s", "-w", *family.ldflags))]
    if family.tags:
        command += ["-tags", family.tags]
    command += ["-o", str(staging / "bin") + "/", *family.packages]
    source = family.module_dir
    if family.generate is not None:
        source = staging / "src"
        shutil.copytree(family.module_dir, source)
        family.generate(source)
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(60):
            log(f"{family.name}: still building ({(time.monotonic() - started) / 60:.0f} min)")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        result = subprocess.run(
            command,
            cwd=source,
            env=_go_env(family.nosumdb),
            capture_output=True,
            text=True,
        )
    finally:
        done.set()
    if result.returncode != 0:
        shutil.rmtree(staging, ignore_errors=True)
        raise RuntimeError(f"building {family.name} failed:\n{result.stderr[-4000:]}")
    for go_name, name in family.renames:
        (staging / "bin" / go_name).rename(staging / "bin" / name)
    shutil.rmtree(staging / "src", ignore_errors=True)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    log(f"{family.name}: built in {time.monotonic() - started:.0f} s")


def _requires(family: Family, module: str, version: str) -> bool:
    go_mod = (family.module_dir / "go.mod").read_text(encoding="utf-8")
    pattern = rf"^\s*(require\s+)?{re.escape(module)} {re.escape(version)}\b"
    return re.search(pattern, go_mod, re.M) is not None


@functools.cache  # several files come from one module
def _download(module: str, version: str) -> Path:
    """The module's directory; downloaded in the family that requires it (its go.sum checks the
    zip) when there is one, else outside any module (the checksum database checks it)."""
    owner = next((f for f in FAMILIES if _requires(f, module, version)), None)
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        env=_go_env(owner.nosumdb) if owner else {**_go_env(), "GOFLAGS": "-mod=mod"},
        cwd=owner.module_dir if owner else tempfile.gettempdir(),
    )
    info = json.loads(result.stdout or "{}")
    if result.returncode != 0 or "Dir" not in info:
        raise RuntimeError(
            f"go mod download {module}@{version}: {info.get('Error', result.stderr)}"
        )
    return Path(info["Dir"])


def _fetch_data(log: Log) -> None:
    target = data_dir()
    if _data_present(target):
        log(f"upstream data: cached in {target}")
        return
    staging = Path(tempfile.mkdtemp(prefix=".data-", dir=cache_root()))
    for sub, files in _DATA.items():
        (staging / sub).mkdir()
        for upstream in files:
            source = _download(upstream.module, upstream.version) / upstream.path
            shutil.copyfile(source, staging / sub / upstream.name)
    for name, upstream in CHARTS.items():
        chart = _download(upstream.module, upstream.version) / upstream.path
        copy = _chart_dir(staging, name)
        shutil.copytree(chart, copy, copy_function=shutil.copyfile)
        # The module cache's directories are read-only and copytree copies their modes: make
        # the copies removable.
        for directory in (copy, *(p for p in copy.rglob("*") if p.is_dir())):
            directory.chmod(0o755)
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)
    counts = ", ".join(f"{len(files)} {sub}" for sub, files in _DATA.items())
    log(f"upstream data: {counts}, charts {', '.join(CHARTS)} in {target}")


def build(log: Log) -> Tools:
    """Build every family (two at a time: each link is single-threaded) and fetch the data files."""
    started = time.monotonic()
    go_version = _go_version()
    log(f"go {go_version}; cache {cache_root()}")
    cache_root().mkdir(parents=True, exist_ok=True)
    _fetch_data(log)
    with ThreadPoolExecutor(max_workers=2) as pool:
        for future in [pool.submit(_build_family, f, go_version, log) for f in FAMILIES]:
            future.result()
    tools = locate(go_version)
    if tools is None:
        raise RuntimeError("the build finished but some tool is missing")
    log(f"all tools ready in {time.monotonic() - started:.0f} s")
    return tools


def log_to_stderr(message: str) -> None:
    print(f"[realtier {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
