"""The offline render CLI: deterministic output, --diff, and bad config writing nothing."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path

import pulumi
import pytest
import yaml

from gpu_cluster.offline.engine import run_program
from gpu_cluster.offline.render import FILES, diff, main, read_render, render
from gpu_cluster.offline.stack_files import engine_config
from tests.cli import by_case, cli, one_error
from tests.conftest import BARCELONA_CREATES_NADS, STACKS


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


# (case, makes the --diff path in tmp, what the message must say)
BAD_DIFF_DIRS = [
    ("missing", lambda tmp: tmp / "typo", "no such directory"),
    ("a-file", _a_file, "not a directory"),
    ("empty", _no_render, "not a render (no kubernetes.yaml, resources.json, outputs.json)"),
    ("partial", _partial_render, "not a render (no resources.json, outputs.json)"),
    ("invalid-file", _broken_render, "resources.json: not a valid render file"),
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
