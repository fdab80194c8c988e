"""The offline render CLI: deterministic output, --diff, and bad config writing nothing.

The --diff contract for what it compares with: a directory holding the three render files,
each of them what the render writes (render.SHAPES: kubernetes.yaml documents that are
Kubernetes objects with apiVersion, kind and metadata.name; resources.json a list of rows with
type, name, urn, parent (strings), aliases (a list of strings), inputs and options (objects);
outputs.json an object). Every shipped stack's render is read back; any file of another
shape is refused with exit 2 and one message naming the directory, the file and the place in
it, never shown as everything added. The refused files are generated from a real render: each
part SHAPES fixes, replaced by a value of every other JSON kind, and each required field left
out, not hand-picked examples; and SHAPES fixes exactly the fields every shipped render has.
"""

from __future__ import annotations

import gc
import json
import re
import shutil
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, is_typeddict

import pulumi
import pytest
import yaml

from gpu_cluster.offline.cli import offline_main as main
from gpu_cluster.offline.engine import run_program
from gpu_cluster.offline.render import (
    FILES,
    SHAPES,
    KubernetesObject,
    OutputError,
    ResourceRow,
    diff,
    parse,
    read_render,
    render,
)
from gpu_cluster.offline.stack_files import engine_config
from tests.cli import by_case, cli, one_error
from tests.conftest import BARCELONA_CREATES_NADS, ROOT, STACKS


def test_every_stack_renders_through_the_cli(tmp_path: Path) -> None:
    for stack in STACKS:
        result = cli("--stack", stack, "--out", str(tmp_path / stack))
        assert result.returncode == 0, result.stderr
        assert sorted(p.name for p in (tmp_path / stack).iterdir()) == sorted(FILES)
        docs = list(yaml.safe_load_all((tmp_path / stack / "kubernetes.yaml").read_text()))
        assert docs and all({"apiVersion", "kind", "metadata"} <= set(d) for d in docs)
        resources = json.loads((tmp_path / stack / "resources.json").read_text())
        assert {"type", "name", "parent", "inputs", "options"} <= set(resources[0])


def test_render_is_byte_for_byte_deterministic_across_processes(tmp_path: Path) -> None:
    for run in ("a", "b"):
        assert cli("--stack", "gcp-a3", "--out", str(tmp_path / run)).returncode == 0
    for name in FILES:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert render("gcp-a3") == render("gcp-a3")


def test_cli_diff_prints_the_whole_diff_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI ends with os._exit: a short diff, still in stdout's buffer then (a pipe is
    block-buffered unless PYTHONUNBUFFERED is set), must reach the pipe."""
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    assert cli("--stack", "barcelona", "--out", str(tmp_path)).returncode == 0
    outputs = tmp_path / "outputs.json"
    outputs.write_text(outputs.read_text().replace('"worldSize": 8', '"worldSize": 7'))
    result = cli("--stack", "barcelona", "--diff", str(tmp_path))
    assert result.returncode == 1, result.stderr
    assert result.stdout == diff(read_render(tmp_path), render("barcelona", ()), str(tmp_path))
    assert '-  "worldSize": 7\n+  "worldSize": 8\n' in result.stdout


def test_namespaces_and_prerequisites_come_first() -> None:
    created = ("namespaceMode=create", *BARCELONA_CREATES_NADS)
    kinds = [d["kind"] for d in yaml.safe_load_all(render("barcelona", created)["kubernetes.yaml"])]
    assert kinds[0] == "Namespace"
    assert kinds.index("SecurityContextConstraints") < kinds.index("RoleBinding")
    assert kinds.index("NetworkAttachmentDefinition") < kinds.index("StatefulSet")
    assert kinds.index("ConfigMap") < kinds.index("StatefulSet")
    assert kinds[-1] == "StatefulSet"


def test_diff_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--stack", "barcelona", "--out", str(tmp_path)]) == 0
    assert main(["--stack", "barcelona", "--diff", str(tmp_path)]) == 0
    assert capsys.readouterr().out == ""
    assert main(["--stack", "barcelona", "--set", "nodes=3", "--diff", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "-  replicas: 2\n+  replicas: 3\n" in out
    assert "+    ml-dev-env-2.ml-dev-env-headless.nccl-test.svc.cluster.local slots=4" in out


def test_bad_config_exits_2_names_the_key_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "never"
    result = cli("--stack", "barcelona", "--set", "storage.mode=nfs", "--out", str(out))
    assert result.returncode == 2
    assert "gpu-cluster:storage.mode = 'nfs'" in result.stderr
    assert "'rwx' or 'per-pod'" in result.stderr
    assert not out.exists()


def test_unknown_stack_lists_the_known_ones() -> None:
    result = cli("--stack", "nope", "--out", "/nonexistent/never")
    assert result.returncode == 2
    assert "barcelona" in result.stderr


def test_set_accepts_pulumi_path_syntax() -> None:
    files = render("barcelona", ("rdma.nics[2].network=eno9np0-network", "gpu-cluster:nodes=3"))
    assert (
        '{"name":"eno9np0-network","namespace":"nccl-test","interface":"net3"}'
        in (files["kubernetes.yaml"])
    )
    assert json.loads(files["outputs.json"])["worldSize"] == 12


def test_the_program_run_leaves_the_garbage_collector_as_it_found_it() -> None:
    """run_program pauses the collector (see _collector_paused); it must come back on after a
    run, also a failed one, and stay off for a caller that had turned it off."""
    render("barcelona", ())
    assert gc.isenabled()
    bad_config, secret_keys = engine_config("barcelona", ("nodes=0",))
    with pytest.raises(pulumi.RunError):
        run_program(bad_config, secret_keys, "barcelona")
    assert gc.isenabled()
    gc.disable()
    try:
        render("barcelona", ())
        assert not gc.isenabled()
    finally:
        gc.enable()


def _no_render(tmp: Path) -> Path:
    (tmp / "old").mkdir()
    return tmp / "old"


def _partial_render(tmp: Path) -> Path:
    (tmp / "old").mkdir()
    (tmp / "old" / "kubernetes.yaml").write_text("kind: Namespace\n")
    return tmp / "old"


def _broken_render(tmp: Path) -> Path:
    assert main(["--stack", "barcelona", "--out", str(tmp / "old")]) == 0
    (tmp / "old" / "resources.json").write_text('[{"type": ')
    return tmp / "old"


def _a_file(tmp: Path) -> Path:
    (tmp / "old").write_text("")
    return tmp / "old"


def _render_with(tmp: Path, name: str, text: str) -> Path:
    assert main(["--stack", "barcelona", "--out", str(tmp / "old")]) == 0
    (tmp / "old" / name).write_text(text)
    return tmp / "old"


# (case, makes the --diff path in tmp, what the message must say)
BAD_DIFF_DIRS = [
    ("missing", lambda tmp: tmp / "typo", "no such directory"),
    ("a-file", _a_file, "not a directory"),
    ("empty", _no_render, "not a render (no kubernetes.yaml, resources.json, outputs.json)"),
    ("partial", _partial_render, "not a render (no resources.json, outputs.json)"),
    ("invalid-file", _broken_render, "resources.json: not a valid render file (not JSON)"),
    (
        "list-for-an-object",
        lambda tmp: _render_with(tmp, "outputs.json", "[]\n"),
        "outputs.json: not a valid render file (the file is a list, not an object)",
    ),
    (
        "rows-without-their-fields",
        lambda tmp: _render_with(tmp, "resources.json", '[{"type": "x"}]\n'),
        "resources.json: not a valid render file ([0] has no 'aliases')",
    ),
]


@by_case("make, says", BAD_DIFF_DIRS)
def test_diff_against_a_missing_or_invalid_directory_says_so(
    tmp_path: Path, make: Callable[[Path], Path], says: str
) -> None:
    old = make(tmp_path)
    result = cli("--stack", "barcelona", "--diff", str(old), "--out", str(tmp_path / "new"))
    assert result.returncode == 2
    assert f"--diff {old}: {says}" in one_error(result.stderr)
    assert result.stdout == ""
    assert not (tmp_path / "new").exists()


def test_diff_and_out_on_one_directory_compare_before_overwriting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", "barcelona", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    args = ["--stack", "barcelona", "--set", "nodes=3", "--diff", str(tmp_path)]
    assert main([*args, "--out", str(tmp_path)]) == 1
    assert "-  replicas: 2\n+  replicas: 3\n" in capsys.readouterr().out
    assert "replicas: 3\n" in (tmp_path / "kubernetes.yaml").read_text()
    assert main(args) == 0  # the directory now holds the new render


# --- --diff reads back only what the render writes --------------------------------------------

SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
# A value of each JSON kind, and what a message calls it.
SAMPLES: tuple[tuple[Any, str], ...] = (
    (None, "null"),
    (True, "true or false"),
    (0, "a number"),
    ("text", "a string"),
    ([], "a list"),
    ({}, "an object"),
)


def _kind(value: Any) -> type:
    return bool if isinstance(value, bool) else type(value)


def _broken(value: Any, shape: Any, where: str) -> Iterator[tuple[str, str, Any]]:
    """(where, what is wrong there as the message says it, `value` with that one thing wrong):
    each part of `value` that `shape` fixes replaced by a value of every other JSON kind, and
    each required field of an object left out."""
    if shape is Any:
        return
    for other, called in SAMPLES:
        if _kind(other) is not _kind(value):
            yield where, f"is {called}, not ", other
    origin = typing.get_origin(shape) or shape
    if is_typeddict(origin):
        for key in sorted(origin.__required_keys__):
            yield where, f"has no {key!r}", {k: v for k, v in value.items() if k != key}
        for key, hint in typing.get_type_hints(origin).items():
            inner = f"{where}.{key}" if where else key
            for at, wrong, broken in _broken(value[key], hint, inner):
                yield at, wrong, {**value, key: broken}
    elif origin is list:
        for i, item in enumerate(value):
            for at, wrong, broken in _broken(item, typing.get_args(shape)[0], f"{where}[{i}]"):
                yield at, wrong, [*value[:i], broken, *value[i + 1 :]]


def _yaml_text(documents: list[Any]) -> str:
    """A YAML stream of `documents`, by libyaml's emitter where PyYAML has it: a hundred
    renders are written, and the pure-Python emitter takes a third of a second for each."""
    return yaml.dump_all(documents, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))


def _wrong_shapes() -> list[tuple[str, str, Any, str]]:
    """(case, file name, its content, what the message must say): barcelona's render with one
    thing wrong, once per place SHAPES fixes (in the first row or document that has it, for
    every row alike) and kind of wrong. The content is written out by the case's test, not
    here: at collection, every pytest process would write all of them."""
    cases: dict[str, tuple[str, str, Any, str]] = {}
    for name in FILES:
        content = parse(name, (SNAPSHOTS / "barcelona" / name).read_text())
        for where, wrong, broken in _broken(content, SHAPES[name], ""):
            if name.endswith(".yaml") and not isinstance(broken, list):
                continue  # a YAML stream is a list of documents, whatever they are
            case = f"{name}:{re.sub(r'[0-9]+', '*', where) or 'file'} {wrong}".removesuffix(
                ", not "
            )
            if case not in cases:
                cases[case] = (case, name, broken, f"{where or 'the file'} {wrong}")
    return list(cases.values())


WRONG_SHAPES = _wrong_shapes()


def test_the_wrong_shapes_cover_every_part_of_every_file() -> None:
    cases = {case for case, *_ in WRONG_SHAPES}
    for expected in (
        "outputs.json:file is a list",
        "resources.json:[*] has no 'urn'",
        "resources.json:[*].aliases[*] is a number",
        "resources.json:[*].options is null",
        "kubernetes.yaml:[*].metadata has no 'name'",
        "kubernetes.yaml:[*].metadata.name is an object",
    ):
        assert expected in cases
    assert len(cases) > 80


@by_case("name, content, says", WRONG_SHAPES)
def test_a_render_file_of_another_shape_is_refused(
    tmp_path: Path, name: str, content: Any, says: str
) -> None:
    for each in FILES:
        shutil.copy(SNAPSHOTS / "barcelona" / each, tmp_path / each)
    text = json.dumps(content) if name.endswith(".json") else _yaml_text(content)
    (tmp_path / name).write_text(text)
    with pytest.raises(OutputError) as info:
        read_render(tmp_path)
    assert str(info.value).startswith(f"--diff {tmp_path}: {name}: not a valid render file (")
    assert says in str(info.value)


def test_every_shipped_render_reads_back(stack: str) -> None:
    assert read_render(SNAPSHOTS / stack) == {n: (SNAPSHOTS / stack / n).read_text() for n in FILES}


def _objects(value: Any, shape: Any, found: dict[Any, list[dict[str, Any]]]) -> None:
    """Every object in `value` that `shape` declares as a TypedDict, by TypedDict."""
    origin = typing.get_origin(shape) or shape
    if is_typeddict(origin):
        found.setdefault(origin, []).append(value)
        for key, hint in typing.get_type_hints(origin).items():
            _objects(value[key], hint, found)
    elif origin is list:
        for item in value:
            _objects(item, typing.get_args(shape)[0], found)


def test_shapes_require_exactly_the_fields_every_render_has() -> None:
    """SHAPES is what the render writes: each declared object's required fields are the ones
    every such object in every shipped stack's render has (so no field the render always
    writes goes unchecked, and none it may leave out is required)."""
    found: dict[Any, list[dict[str, Any]]] = {}
    for stack in STACKS:
        for name in FILES:
            _objects(parse(name, (SNAPSHOTS / stack / name).read_text()), SHAPES[name], found)
    assert {ResourceRow, KubernetesObject} <= set(found)
    for declared, objects in found.items():
        always = set.intersection(*(set(o) for o in objects))
        assert always == declared.__required_keys__, declared.__name__


def test_out_dash_writes_kubernetes_yaml_to_stdout_for_kubectl() -> None:
    """`--out -`: the objects alone on stdout (`... --out - | kubectl apply -f -`), nothing on
    disk; with a diff, whose output is stdout's, it is refused."""
    result = cli("--stack", "nerc-production", "--out", "-")
    assert result.returncode == 0, result.stderr
    assert result.stdout == (SNAPSHOTS / "nerc-production" / "kubernetes.yaml").read_text()
    assert not (ROOT / "-").exists()
    both = cli(
        "--stack", "nerc-production", "--diff", str(SNAPSHOTS / "nerc-production"), "--out", "-"
    )
    assert both.returncode == 2
    assert one_error(both.stderr) == ("error: --out -: the diff goes to stdout; give a directory\n")
