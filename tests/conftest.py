"""Shared fixtures: every test that needs a stack's desired state runs the real program."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpu_cluster.config import dates
from gpu_cluster.config.messages import nested_model
from gpu_cluster.config.schema import Settings
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.replacements import Key, Row, Step, index, plan
from gpu_cluster.offline.stack_files import engine_config
from tests.as_of import AS_OF
from tests.edits import edited_config
from tests.installed import install_wheel

ROOT = Path(__file__).resolve().parent.parent
# Needs a GPU, which CI's machines lack: run on one with `python3 -m pytest --noconftest
# tests/gpu` (its docstring says so), never skipped here.
collect_ignore = ["gpu"]
# Barcelona references the seed's NADs; a stack that adopts or creates them gives their ranges
# (the seed's k8s/network-attachments/, as Pulumi.barcelona.yaml's comment lists them).
BARCELONA_NAD_RANGES = tuple(
    assignment
    for i, (subnet, route) in enumerate(
        (
            ("10.0.103.0/24", "192.168.77.0/24"),
            ("10.0.104.0/24", "192.168.78.0/24"),
            ("10.0.105.0/24", "192.168.79.0/24"),
            ("10.0.106.0/24", "192.168.80.0/24"),
        )
    )
    for assignment in (f"rdma.nics[{i}].subnet={subnet}", f"rdma.nics[{i}].routes[0]={route}")
)
BARCELONA_CREATES_NADS = ("rdma.networkAttachments=create", *BARCELONA_NAD_RANGES)
BARCELONA_ADOPTS_NADS = ("rdma.networkAttachments=adopt", *BARCELONA_NAD_RANGES)
STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in ROOT.glob("Pulumi.*.yaml"))
# Shared claims on GKE: a ReadWriteMany class the cluster has (Filestore's), used by name; the
# stacks' Persistent Disk classes provision no ReadWriteMany claim (config/storage_rules.py
# refuses them).
GKE_RWX = (
    "storage.mode=rwx",
    "storage.storageClass=standard-rwx",
    "storage.storageClassMode=reference",
)
# Shared claims on barcelona: the same Ceph cluster's CephFS class; its Ceph RBD class
# provisions no ReadWriteMany file system (config/storage_rules.py refuses it).
BARCELONA_RWX = ("storage.mode=rwx", "storage.storageClass=ocs-external-storagecluster-cephfs")

# gcp-a4 on another capacity type: queuedProvisioning is read with flex-start only.
A4_WITHOUT_QUEUED = "!gcp.queuedProvisioning"

# The warnings every shipped GKE stack draws for the placeholders its file holds (the project,
# a documentation range as the authorized network: README, "Stacks"); tests of other warnings
# leave these out (other_warnings).
GKE_PLACEHOLDER_WARNINGS = (
    "gpu-cluster:gcp.project = 'my-gpu-project' is the shipped files' placeholder",
    "gpu-cluster:gcp.authorizedNetworks[0].cidrBlock = '203.0.113.0/24' is a documentation range",
)


def other_warnings(warnings: list[str]) -> list[str]:
    """`warnings` less the shipped GKE files' placeholder warnings."""
    return [w for w in warnings if not w.startswith(GKE_PLACEHOLDER_WARNINGS)]


@pytest.fixture(autouse=True, scope="session")
def _secret_digest_key_of_the_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The key secret values are digested under (offline/secret_digest.py) kept in a directory
    of the session's own, not the user's; the CLI runs the tests start inherit it."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
        yield


@pytest.fixture
def beside_a_training_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The working directory of a test whose launchers start `train.py`: a directory of its own
    below tmp_path holding an empty one (the launchers refuse a script that is not there)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text("")
    monkeypatch.chdir(project)
    return project / "train.py"


@pytest.fixture(scope="session")
def installed_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtualenv with the package installed from its wheel (built once a session)."""
    return install_wheel(tmp_path_factory.mktemp("installed"))


@pytest.fixture(autouse=True, scope="session")
def _checked_as_of_the_pinned_date() -> Iterator[None]:
    """Renders that take today's date (render(), run_program() without `as_of`) get AS_OF's
    instead, as if run that day: no test depends on the day it runs (tests/cli.py passes the
    CLI --as-of)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(dates, "today", lambda: AS_OF.day)
        yield


# One run per distinct config, kept pickled: each caller unpickles a copy of its own (so a test
# that edits what it got cannot change what another sees), 1-2 ms against a run's 150-500 ms.
_RUNS: dict[str, bytes] = {}


def run_stack(stack: str, *overrides: str) -> ProgramRun:
    """The program's registrations for `stack` with overrides (see edited_config): one run per
    config, keyed by its content, so overrides that make the same config share it."""
    config, secret_keys = edited_config(stack, overrides)
    key = json.dumps([stack, config, secret_keys], sort_keys=True)
    if key not in _RUNS:
        _RUNS[key] = pickle.dumps(run_program(config, secret_keys, stack))
    run: ProgramRun = pickle.loads(_RUNS[key])
    return run


def manifests(run: ProgramRun, kind: str) -> list[dict[str, Any]]:
    return [m for m in run.manifests() if m["kind"] == kind]


def kueue_scrape_objects(run: ProgramRun) -> list[dict[str, Any]]:
    """The objects with which a GKE stack has the Kueue it installs scraped (its
    KueueMetricsScrape component)."""
    return [
        r.inputs
        for r in run.kubernetes_objects()
        if "gpu-cluster:monitoring:KueueMetricsScrape" in r.urn
    ]


def one(run: ProgramRun, kind: str) -> dict[str, Any]:
    found = manifests(run, kind)
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def scripts_data(run: ProgramRun) -> dict[str, str]:
    """The files of the scripts ConfigMap (<name>-scripts) the training pods mount."""
    (scripts,) = (
        m for m in manifests(run, "ConfigMap") if m["metadata"]["name"].endswith("-scripts")
    )
    data: dict[str, str] = scripts["data"]
    return data


def pod_template(run: ProgramRun) -> dict[str, Any]:
    """The training pods' template: the StatefulSet's, or the JobSet's one replicated Job's."""
    (workload,) = manifests(run, "StatefulSet") + manifests(run, "JobSet")
    if workload["kind"] == "JobSet":
        (replicated,) = workload["spec"]["replicatedJobs"]
        workload = replicated["template"]
    template: dict[str, Any] = workload["spec"]["template"]
    return template


def pod_spec(run: ProgramRun) -> dict[str, Any]:
    spec: dict[str, Any] = pod_template(run)["spec"]
    return spec


def container(run: ProgramRun, name: str = "training") -> dict[str, Any]:
    spec = pod_spec(run)
    for c in spec["containers"] + spec.get("initContainers", []):
        if c["name"] == name:
            return dict(c)
    raise AssertionError(f"no container {name}")


def env_of(c: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}


def schema_leaves(
    list_item: str, model: type[BaseModel] = Settings, prefix: str = ""
) -> dict[str, FieldInfo]:
    """Every leaf key of the stack-config schema as a user writes it, with its field; a list
    of sections spelled with `list_item` (`[0]` for a --set path, `[]` as docs/ writes it)."""
    leaves: dict[str, FieldInfo] = {}
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        nested = nested_model(field.annotation)
        if nested is None:
            leaves[key] = field
        else:
            item = list_item if "tuple" in str(field.annotation) else ""
            leaves.update(schema_leaves(list_item, nested, f"{key}{item}."))
    return leaves


def schema_key_paths(list_item: str) -> list[str]:
    """schema_leaves' keys."""
    return list(schema_leaves(list_item))


# nerc-production (OpenShift) moved to GKE: the overrides that make its config a valid GKE one.
# Every resource then moves under another component type, a new URN for the engine.
TO_GKE = (
    "platform=gke",
    "gcp.project=my-project",
    "gcp.region=us-central1",
    "gcp.zone=us-central1-a",
    "gcp.authorizedNetworks[0].cidrBlock=203.0.113.0/24",
    "gcp.authorizedNetworks[0].displayName=vpn",
    "gcp.machineType=a3-highgpu-8g",
    "kubernetesVersion=1.35",
    "gcp.minMasterVersion=1.35",
    # A class every stack can use there, shared (ReadWriteMany) claims too: Filestore's.
    "storage.storageClass=standard-rwx",
    "storage.storageClassMode=reference",
    # OpenShift's provider setting: the GKE program would refuse it (it reads only gcp: ones).
    "!kubernetes:context",
)


@pytest.fixture(params=STACKS)
def stack(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def plan_of(stack: str, *overrides: str) -> list[Step]:
    """What the engine would do to `stack` when `overrides` are applied to its stack file."""
    return plan(rows(run_stack(stack)), rows(run_stack(stack, *overrides)))


def plan_from(stack: str, deployed: tuple[str, ...], edit: tuple[str, ...]) -> list[Step]:
    """What the engine would do to `stack` deployed with `deployed` overrides (the state the
    last `pulumi up` wrote) when `edit` is applied on top of them. The edited config is
    rendered with one override per key (the last one wins, as with --set), so equal configs
    share one cached render whatever order they were written in."""
    edited = dict(o.split("=", 1) for o in (*deployed, *edit) if "=" in o)
    removed = tuple(o for o in (*deployed, *edit) if "=" not in o)
    after = (*(f"{key}={value}" for key, value in edited.items()), *removed)
    return plan(rows(run_stack(stack, *deployed)), rows(run_stack(stack, *after)))


def rows(run: ProgramRun) -> dict[Key, Row]:
    """A run's registrations as `resources.json` rows, keyed as
    gpu_cluster.offline.replacements keys them."""
    return index(
        {
            "type": r.type,
            "name": r.name,
            "urn": r.urn,
            "aliases": list(r.aliases),
            "inputs": r.inputs,
            "options": r.options,
        }
        for r in run.resources
    )


def stack_context(stack: str) -> str:
    """The kube context the stack deploys to: its kubernetes:context on OpenShift, the one
    `gcloud container clusters get-credentials` writes on GKE."""
    config, _ = engine_config(stack)
    if "kubernetes:context" in config:
        return config["kubernetes:context"]
    gcp = json.loads(config["gpu-cluster:gcp"])
    name = config.get("gpu-cluster:name", "gpu-cluster")
    return f"gke_{gcp['project']}_{gcp['zone']}_{name}"
