"""The render against Google's published GKE A3 setup, field by field (tests/vendor/).

Every field Google sets on an object the program mirrors must hold Google's value in the render,
unless the data lists it as a deviation with its reason; then it must hold exactly `ours`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_cluster.offline.engine import ProgramRun
from tests.conftest import ROOT, manifests, pod_spec, pod_template, run_stack

# Read at import (its objects parametrize the tests), so by libyaml where PyYAML has it: the same
# data, a seventh of the pure-Python loader's time.
DATA = yaml.load(
    (Path(__file__).parent / "vendor" / "gke_gpudirect.yaml").read_text(),
    Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader),
)
OBJECTS: list[dict[str, Any]] = DATA["objects"]
ABSENT = object()
_SEGMENT = re.compile(r"^([^\[]+)(?:\[([^\]]+)\])?$")


def _container_view(spec: dict[str, Any], name: str) -> dict[str, Any]:
    """A container with `env` as name -> value and `mounts` as path -> its volume's host path,
    `emptyDir` or `emptyDir(Memory)`."""
    (c,) = [c for c in spec["containers"] + spec.get("initContainers", []) if c["name"] == name]
    volumes = {
        v["name"]: v["hostPath"]["path"]
        if "hostPath" in v
        else "emptyDir(Memory)"
        if v["emptyDir"].get("medium") == "Memory"
        else "emptyDir"
        for v in spec["volumes"]
        if "hostPath" in v or "emptyDir" in v
    }
    view = dict(c)
    view["env"] = {e["name"]: e.get("value") for e in c.get("env", [])}
    view["mounts"] = {m["mountPath"]: volumes.get(m["name"]) for m in c.get("volumeMounts", [])}
    return view


def rendered(run: ProgramRun, render: dict[str, Any]) -> dict[str, Any]:
    select = render["select"]
    if select == "container":
        return _container_view(pod_spec(run), render["container"])
    if select == "pod":
        return pod_spec(run)
    if select == "pod-annotations":
        out = dict(pod_template(run)["metadata"]["annotations"])
        for key, value in out.items():
            if key == "networking.gke.io/interfaces":
                out[key] = json.loads(value)
            elif key.startswith("devices.gke.io/container."):
                out[key] = [line.removeprefix("- path: ") for line in value.splitlines()]
        return out
    if select == "manifest":
        (found,) = [
            m for m in manifests(run, render["kind"]) if m["metadata"]["name"] == render["name"]
        ]
        return found
    if select == "daemonset":
        (ds,) = [
            d for d in manifests(run, "DaemonSet") if d["metadata"]["name"] == render["daemonset"]
        ]
        return {"metadata": ds["metadata"], "spec": ds["spec"]["template"]["spec"]}
    (res,) = [r for r in run.of_type(render["type"]) if r.name == render["name"]]
    return dict(res.inputs)


def lookup(obj: Any, path: str) -> Any:
    """Follow a dotted path; a flat key containing dots (annotations, env names) is tried first."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    head, _, rest = path.partition(".")
    for cut in range(len(path), 0, -1):  # the longest key present wins (keys may hold dots)
        if path[cut : cut + 1] in (".", "") and isinstance(obj, dict):
            key = path[:cut]
            match = _SEGMENT.match(key)
            if match and match.group(1) in obj:
                head, rest = key, path[cut + 1 :]
                break
    name, selector = _SEGMENT.match(head).groups()  # type: ignore[union-attr]
    value = obj.get(name, ABSENT) if isinstance(obj, dict) else ABSENT
    if selector is not None and value is not ABSENT:
        items = value if isinstance(value, list) else []
        if selector.isdigit():
            value = items[int(selector)] if int(selector) < len(items) else ABSENT
        else:
            value = next((i for i in items if i.get("name") == selector), ABSENT)
    if value is ABSENT or not rest:
        return value
    return lookup(value, rest)


CASES = [(o["name"], field) for o in OBJECTS for field in o["fields"]]


@pytest.mark.parametrize(("name", "field"), CASES, ids=[f"{n}: {f}" for n, f in CASES])
def test_render_matches_google_or_a_listed_deviation(name: str, field: str) -> None:
    obj = next(o for o in OBJECTS if o["name"] == name)
    deviation = obj.get("deviations", {}).get(field)
    expected = deviation["ours"] if deviation else obj["fields"][field]
    render = obj["render"]
    run = run_stack(render["stack"], *render.get("overrides", ()))
    actual = lookup(rendered(run, render), field)
    if expected is None:
        assert actual is ABSENT, f"{field}: Google sets none, render has {actual!r}"
    else:
        assert actual == expected, f"{field} (Google: {obj['fields'][field]!r})"


@pytest.mark.parametrize("obj", OBJECTS, ids=[o["name"] for o in OBJECTS])
def test_every_fact_has_a_source_and_every_deviation_a_reason(obj: dict[str, Any]) -> None:
    source = obj["source"]
    assert source["repository"].count("/") == 1 and source["path"]
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]) and source["date"]
    for field, deviation in obj.get("deviations", {}).items():
        assert field in obj["fields"], f"deviation {field} is not one of Google's fields"
        assert deviation["ours"] != obj["fields"][field], f"{field} is not a deviation"
        assert len(deviation["reason"]) > 20


# The fact sheets beside the repository (shared/reference/*.md, ml-dev-env/), which a reader
# of this repository does not have; upstream paths such as docs/reference/rest stay allowed.
OUTSIDE_CITATION = re.compile(
    r"(?<![\w/])(shared/)?reference/([\w-]+\.md|ml-dev-env)|shared/reference"
)


def test_no_source_comment_cites_files_outside_the_repository() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for pattern in ("gpu_cluster/**/*.py", "policy/*.py", "tests/*.py", "scripts/*", "*.md")
        for path in ROOT.glob(pattern)
        if path.is_file() and path.name != Path(__file__).name
        for n, line in enumerate(path.read_text().splitlines(), start=1)
        if OUTSIDE_CITATION.search(line)
    ]
    assert offenders == []
