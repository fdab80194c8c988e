"""docs/config-reference.md is generated from the schema (tools/config_reference.py) and
committed; it must be what the generator writes today, and it must document every key."""

from __future__ import annotations

from tests.conftest import ROOT, schema_key_paths, schema_leaves
from tools import config_reference

REFERENCE = ROOT / "docs" / "config-reference.md"


def test_the_committed_reference_is_the_generated_one() -> None:
    committed = REFERENCE.read_text(encoding="utf-8")
    assert committed == config_reference.render(), (
        "docs/config-reference.md is stale: run `python -m tools.config_reference` and commit it"
    )


def test_the_reference_documents_every_key_with_its_description() -> None:
    text = config_reference.render()
    missing = [key for key in schema_key_paths("[]") if f"| `{key}` |" not in text]
    assert not missing, f"docs/config-reference.md lacks {missing}"
    undescribed = [key for key, field in schema_leaves("[]").items() if not field.description]
    assert not undescribed, f"give these schema fields a docstring: {undescribed}"


def test_every_value_type_the_schema_uses_is_explained() -> None:
    unexplained = config_reference.used_value_types() - set(config_reference.VALUE_TYPES)
    assert not unexplained, f"add {unexplained} to VALUE_TYPES in tools/config_reference.py"


def test_when_a_key_is_read_comes_from_its_read_when() -> None:
    text = config_reference.render()
    row = next(line for line in text.splitlines() if line.startswith("| `verify.requireGdr` |"))
    assert "verify.enabled is true and networkMode is not 'tcp'" in row
    row = next(line for line in text.splitlines() if line.startswith("| `nodes` |"))
    assert "| always |" in row and "| `2` |" in row and ">= 1, <= 4096" in row
