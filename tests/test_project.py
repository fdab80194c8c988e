"""Pulumi.yaml declares the top-level keys exactly as the schema defines them."""

from __future__ import annotations

import tomllib
from typing import Any

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

from gpu_cluster.config.schema import Settings
from tests.conftest import ROOT, schema_key_paths

PULUMI_TYPES = {int: "integer", bool: "boolean", str: "string"}


def declared() -> dict[str, Any]:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "gpu-cluster"
    assert project["runtime"]["name"] == "python"
    return dict(project["config"])


def scalar_fields() -> dict[str, Any]:
    out = {}
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        if field.is_required() or isinstance(default, (int, bool, str)):
            out[field.alias or name] = field
    return out


def test_every_scalar_key_is_declared_with_its_schema_default_and_type() -> None:
    decls = declared()
    assert set(decls) == set(scalar_fields())
    for key, field in scalar_fields().items():
        decl = decls[key]
        assert decl["description"], key
        if field.is_required():
            assert "default" not in decl, key
            continue
        default = field.get_default(call_default_factory=True)
        assert decl["default"] == default, key
        assert decl["type"] == PULUMI_TYPES[type(default)], key


def test_the_config_reference_documents_every_key() -> None:
    """The reference moved from README.md to docs/config-reference.md, which is generated
    (tests/test_config_reference.py holds it to the generator)."""
    reference = (ROOT / "docs" / "config-reference.md").read_text()
    missing = [key for key in schema_key_paths("[]") if f"`{key}`" not in reference]
    assert not missing, f"docs/config-reference.md lacks {missing}: run tools.config_reference"


def runtime_requirements() -> dict[str, Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    found = [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]
    return {r.name.lower().replace("_", "-"): r for r in found}


def test_the_wheel_with_its_gke_extra_and_pulumi_up_install_the_same_runtime() -> None:
    # requirements.txt serves every stack of this project, GKE ones too; the wheel's plain
    # install is OpenShift's, `gpu-cluster[gke]` adds pulumi-gcp, `gpu-cluster[runs]` the
    # Kubernetes client that only `gpu-cluster run` imports (pinned as the tests pin it).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    dev = [
        line
        for line in (ROOT / "requirements-dev.txt").read_text().splitlines()
        if line.startswith("kubernetes>")
    ]
    assert project["optional-dependencies"] == {"gke": ["pulumi-gcp>=9.0,<11"], "runs": dev}
    assert "kubernetes" not in {Requirement(d).name for d in project["dependencies"]}
    assert "pulumi-gcp" not in {Requirement(d).name for d in project["dependencies"]}
    wheel = [Requirement(d) for d in [*project["dependencies"], "pulumi-gcp>=9.0,<11"]]
    assert {r.name.lower(): str(r.specifier) for r in wheel} == {
        name: str(r.specifier) for name, r in runtime_requirements().items()
    }


def test_no_kubernetes_provider_that_takes_over_existing_objects_is_allowed() -> None:
    """Before pulumi-kubernetes 4.29 a create of an object that exists silently took it over
    (server-side apply); from 4.29 it fails with AlreadyExists (CHANGELOG 4.29.0, #2926), so
    adopting a namespace, NAD or claim is always the explicit import docs/migration.md describes."""
    spec = runtime_requirements()["pulumi-kubernetes"].specifier
    assert not spec.contains(Version("4.28.0"))
    assert spec.contains(Version("4.29.0"))
