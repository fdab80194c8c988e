"""The run metrics' scrape objects against their owners' published examples, field by field
(tests/vendor/scrape_objects.yaml says where each is from, and why a field differs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import kueue_scrape_objects, manifests, run_stack

DATA = yaml.safe_load((Path(__file__).parent / "vendor" / "scrape_objects.yaml").read_text())
METRICS = ("monitoring.runMetrics.enabled=true",)


def fields(value: Any, path: str = "") -> dict[str, Any]:
    """Every leaf of `value` by its path (`a.b[0].c`)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(fields(item, f"{path}.{key}" if path else key))
        return out
    if isinstance(value, list):
        out = {}
        for i, item in enumerate(value):
            out.update(fields(item, f"{path}[{i}]"))
        return out
    return {path: value}


def covered(path: str, prefixes: dict[str, str]) -> bool:
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in prefixes)


@pytest.mark.parametrize("vendor", DATA["objects"], ids=lambda v: v["platform"])
def test_the_scrape_object_is_the_vendors_but_where_it_says_why(vendor: dict[str, Any]) -> None:
    run = run_stack(vendor["stack"], *METRICS)
    # The training pods' (a GKE stack that installs Kueue scrapes it too: test_kueue_metrics).
    (ours,) = (m for m in manifests(run, vendor["kind"]) if m not in kueue_scrape_objects(run))
    upstream, mine = fields(vendor["upstream"]), fields(ours)
    deviations, added = vendor["deviations"], vendor["added"]
    for path, value in upstream.items():
        if not covered(path, deviations):
            assert mine.get(path) == value, f"{path}: ours {mine.get(path)!r}, theirs {value!r}"
    unexplained = [
        p for p in mine if p not in upstream and not covered(p, deviations) and p not in added
    ]
    assert unexplained == []
    # Every reason names a field the object has (a deviation: one the example has too).
    for field in [*deviations, *added]:
        assert any(covered(p, {field: ""}) for p in mine), field
    for field in deviations:
        assert any(covered(p, {field: ""}) for p in upstream), field
