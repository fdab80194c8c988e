"""The package as others use it: the reusable components composed without the platforms
(examples/a3-mega-pool), and the wheel, installed into a fresh virtualenv, bringing the
components and the in-pod scripts they ship."""

from __future__ import annotations

import ast
import json
import re
import shutil
import tomllib
from pathlib import Path

import pytest
from pydantic import ValidationError

import gpu_cluster.api
from gpu_cluster.offline.engine import ProgramRun
from gpu_cluster.offline.project import read_project
from gpu_cluster.offline.render import program_run
from tests.conftest import ROOT, STACKS, one, run_stack
from tests.installed import run

EXAMPLE = ROOT / "examples" / "a3-mega-pool"
COMPONENT_TYPE = "gpu-cluster:"


def render_example() -> ProgramRun:
    """The example's stack `dev` as `gpu-cluster render` runs it in the example's folder."""
    return program_run("dev", project=read_project(EXAMPLE))


def test_the_example_adds_a_gpudirect_pool_and_workload_to_an_existing_cluster() -> None:
    run = render_example()
    # The cluster and its VPCs exist already: nothing of them is created.
    assert run.of_type("gcp:container/cluster:Cluster") == []
    assert run.of_type("gcp:compute/network:Network") == []
    [pool] = run.of_type("gcp:container/nodePool:NodePool")
    assert pool.inputs["cluster"] == "research"
    assert pool.inputs["nodeConfig"]["machineType"] == "a3-megagpu-8g"
    nics = pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert [n["network"] for n in nics] == [f"research-gpu{i}" for i in range(1, 9)]
    kinds = sorted(m["kind"] for m in run.manifests())
    assert kinds.count("GKENetworkParamSet") == kinds.count("Network") == 8
    agents = {m["metadata"]["name"] for m in run.manifests() if m["kind"] == "DaemonSet"}
    assert agents == {"nccl-tcpxo-installer", "device-injector"}
    stateful_set = one(run, "StatefulSet")
    assert stateful_set["spec"]["replicas"] == 2
    assert stateful_set["metadata"]["namespace"] == "training"
    spec = stateful_set["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "a3mega-training"
    assert "tcpxo-daemon" in {c["name"] for c in spec.get("initContainers", [])}
    assert run.outputs == {"nodePoolName": "a3mega", "statefulSetName": "a3mega"}


def _components_and_children(run: ProgramRun) -> list[tuple[str, str]]:
    """(component name, child name) for every child of one of our components."""
    components = {r.urn: r.name for r in run.resources if r.type.startswith(COMPONENT_TYPE)}
    return [(components[r.parent], r.name) for r in run.resources if r.parent in components]


@pytest.mark.parametrize("stack", [*STACKS, "example"])
def test_children_are_named_after_their_component(stack: str) -> None:
    run = render_example() if stack == "example" else run_stack(stack)
    pairs = _components_and_children(run)
    assert pairs, "no component with children"
    assert [(c, n) for c, n in pairs if not n.startswith(c)] == []


def test_the_wheel_installs_into_a_fresh_virtualenv_and_runs_the_example(
    tmp_path: Path, installed_venv: Path
) -> None:
    python = str(installed_venv / "bin" / "python")
    example = shutil.copytree(EXAMPLE, tmp_path / "a3-mega-pool")
    # Copied out of the repository, its requirements name the installed package, not a path
    # into the checkout (pulumi up runs this install; --no-index: nothing may be downloaded).
    run(
        "-m",
        "pip",
        "install",
        "--no-index",
        "-q",
        "-r",
        "requirements.txt",
        cwd=example,
        python=python,
    )
    probe = f"""
import json, gpu_cluster
from gpu_cluster.offline.project import read_project
from gpu_cluster.offline.render import program_run
from gpu_cluster.plan.shipped import SCRIPTS_PATH
from pathlib import Path
program = program_run("dev", project=read_project(Path({str(example)!r})))
scripts = [m["data"] for m in program.manifests() if m["kind"] == "ConfigMap"]
print(json.dumps({{"package": gpu_cluster.__file__, "scripts_path": str(SCRIPTS_PATH),
    "types": sorted({{r.type for r in program.resources}}), "scripts": scripts}}))
"""
    found = json.loads(run("-c", probe, cwd=tmp_path, python=python))
    installed = str(installed_venv / "lib")
    assert found["package"].startswith(installed)
    # PEP 561: type checkers read the installed package's hints.
    assert (Path(found["package"]).parent / "py.typed").is_file()
    assert found["scripts_path"].startswith(installed)
    assert set(found["types"]) == {r.type for r in render_example().resources}
    [shipped] = found["scripts"]
    for name in ("launch-torchrun.sh", "preflight.sh", "launch-stop.sh"):
        assert shipped[name] == (ROOT / "scripts" / name).read_text()


def test_the_wheel_declares_its_license_and_ships_its_text(installed_venv: Path) -> None:
    python = str(installed_venv / "bin" / "python")
    probe = """
import json
from importlib.metadata import distribution
d = distribution("gpu-cluster")
print(json.dumps({"license": d.metadata["License-Expression"],
    "texts": [f.read_text() for f in d.files or () if f.name == "LICENSE"]}))
"""
    found = json.loads(run("-c", probe, cwd=installed_venv, python=python))
    assert found["license"] == "Apache-2.0"
    [text] = found["texts"]
    assert text.lstrip().startswith("Apache License\n")
    assert "Version 2.0, January 2004" in text


def test_the_example_imports_the_public_api_alone() -> None:
    tree = ast.parse((EXAMPLE / "__main__.py").read_text())
    from_package = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpu_cluster")
    }
    plain = [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("gpu_cluster")
    ]
    assert (from_package, plain) == ({"gpu_cluster.api"}, [])


def test_docs_api_names_every_public_name_and_no_other() -> None:
    # The first cell of each table row names the public names it describes.
    rows = (ROOT / "docs" / "api.md").read_text().splitlines()
    documented = {
        name
        for line in rows
        if line.startswith("| `")
        for name in re.findall(r"`(\w+)`", line.split(" | ")[0])
    }
    assert documented == set(gpu_cluster.api.__all__)
    assert all(hasattr(gpu_cluster.api, name) for name in documented)


def test_settings_built_in_code_are_held_to_the_rules_across_keys() -> None:
    # Every key is fine alone; together they are a GKE stack without its `gcp` section. The
    # schema only declares the keys; validate_settings (what the example calls) runs the rules,
    # and refuses as the schema's own validator did: one error without a location.
    values = {"platform": "gke", "networkMode": "tcp"}
    assert gpu_cluster.api.Settings.model_validate(values).gcp is None
    with pytest.raises(ValidationError) as refused:
        gpu_cluster.api.validate_settings(values)
    assert refused.value.errors(include_url=False, include_context=False) == [
        {
            "type": "value_error",
            "loc": (),
            "msg": "Value error, gpu-cluster:gcp is required when platform is 'gke' "
            "(project, region, zone)",
            "input": values,
        }
    ]


def test_the_package_version_has_its_changelog_section() -> None:
    """A release names its version in pyproject.toml and describes it in CHANGELOG.md."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    headings = re.findall(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings[0] == "Unreleased"
    assert headings[1] == version, headings
