"""Pulumi.yaml declares the top-level keys exactly as the schema defines them."""

from __future__ import annotations

from typing import Any

import yaml
from pydantic import BaseModel

from gpu_cluster.config.settings import Settings
from tests.conftest import ROOT

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


def schema_keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    """Every stack-config key path, as a user writes it (lists as `[]`)."""
    keys = []
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        nested = _nested_model(field.annotation)
        if nested is None:
            keys.append(key)
        else:
            is_list = "tuple" in str(field.annotation)
            keys.extend(schema_keys(nested, key + ("[]." if is_list else ".")))
    return keys


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _nested_model(arg)
        if found is not None:
            return found
    return None


def test_readme_documents_every_key() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [key for key in schema_keys() if f"`{key}`" not in readme]
    assert not missing, f"README.md's config reference lacks {missing}"
