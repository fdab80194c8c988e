"""Pulumi.yaml declares the top-level keys exactly as the schema defines them."""

from __future__ import annotations

from typing import Any

import yaml

from gpu_cluster.config.settings import Settings
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


def test_readme_documents_every_key() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [key for key in schema_key_paths("[]") if f"`{key}`" not in readme]
    assert not missing, f"README.md's config reference lacks {missing}"
