"""Malformed input is answered, never a traceback: a stack file that is not YAML or not shaped
like one, a --set path that does not fit the config, a number the engine cannot carry, an --out
that cannot be written. Each exits 2 with one message naming the file (and line) or key, and
writes nothing (the render goes to a temporary directory and is moved into place whole).

The --out contract, tested for every place below, not one example: any existing directory the
user may write to takes the render, whatever its parent and file system (a plain directory, a
symlink to one, one in a read-only directory, on /dev/shm, a symlink from /tmp to /dev/shm, a
mount point of its own): afterwards it holds the render's files, as `render()` makes them, in
place of an earlier render's, and the user's other files, nothing else; a new --out below any
of them is created with its missing parents, holding the render and nothing else. Refused (exit
2, one message naming the path, nothing written anywhere): an empty path, a file, a path under a
file, a name too long, a symlink to nothing, a render file's name taken by a directory, a
directory that cannot be written, a new directory that cannot be created (a read-only parent).
Where file modes do not bind root, root runs the CLI in a user namespace of its own."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.config_path import apply_override
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.render import render
from gpu_cluster.offline.stack_files import engine_config
from tests.as_of import AS_OF
from tests.cli import (
    ROOT,
    as_a_user,
    as_root_of_a_mount_namespace,
    by_case,
    cli,
    one_error,
    program_copy,
    refused_stack_file,
    tree,
)
from tests.prerequisites import unavailable
from tests.stack_scalars import SCALARS, SET_VALUES, Expected, Refused, Same, stack_file

GOOD = "config:\n  gpu-cluster:platform: openshift\n"
HUGE = "9" * 5000  # beyond Python's int-from-text limit (4300 digits)
DEEPSPEED = "config:\n  gpu-cluster:platform: openshift\n  gpu-cluster:launcher:\n    deepspeed:\n"

# (case, stack file text, what the message must say)
STACK_FILES: list[tuple[str, str, str]] = [
    (
        "yaml-syntax-error",
        "config:\n  gpu-cluster:platform: openshift\n  gpu-cluster:nodes: 2: 3\n",
        "Pulumi.given.yaml:3: mapping values are not allowed",
    ),
    ("document-is-a-list", "- gpu-cluster:platform\n", "Pulumi.given.yaml: must be a YAML mapping"),
    ("document-is-a-string", "gpu-cluster:platform=gke\n", "Pulumi.given.yaml: must be a YAML"),
    ("two-documents", "config: {}\n---\nconfig: {}\n", "Pulumi.given.yaml:2:"),
    (
        "config-is-a-list",
        "# one cluster\nconfig:\n  - gpu-cluster:platform\n",
        "Pulumi.given.yaml:2: `config:` must be a mapping",
    ),
    (
        "config-is-a-string",
        "config: openshift\n",
        "Pulumi.given.yaml:1: `config:` must be a mapping",
    ),
    ("unhashable-key", f"{GOOD}  gpu-cluster:pod: {{? [a] : 1}}\n", "Pulumi.given.yaml:3: found"),
    ("binary-value", f"{GOOD}  gpu-cluster:pod: !!binary aGVsbG8=\n", "gpu-cluster:pod is a bytes"),
    ("alias-loop", f"{GOOD}  gpu-cluster:pod: &p [*p]\n", "gpu-cluster:pod[0] contains itself"),
    (
        "date",
        f"{GOOD}  gpu-cluster:pod:\n    cpuRequest: 2026-11-22\n",
        "Pulumi.given.yaml:4: gpu-cluster:pod.cpuRequest: 2026-11-22 is a YAML timestamp, which "
        "the Pulumi CLI hands the program as Go prints a time",
    ),
    (
        "date-in-a-list",
        f"{GOOD}  gpu-cluster:x:\n    - 2026-1-2 3:04:05\n",
        "yaml:4: gpu-cluster:x[0]:",
    ),
    (
        "date-as-a-key",
        f"{GOOD}  gpu-cluster:x: {{2026-01-01: a}}\n",
        "yaml:3: the key 2026-01-01 is",
    ),
    (
        "infinity",
        f"{GOOD}  gpu-cluster:nodes: .inf\n",
        "Pulumi.given.yaml:3: gpu-cluster:nodes: .inf is not a finite number; the Pulumi CLI "
        "refuses the stack file (json: unsupported value: +Inf)",
    ),
    ("nan-nested", f"{DEEPSPEED}      microBatchSize: .NaN\n", "yaml:5: gpu-cluster:launcher.dee"),
    ("tag-mismatch", f"{GOOD}  gpu-cluster:nodes: !!int 1.5\n", "yaml:3: cannot decode !!float"),
    ("key-without-namespace", "config:\n  platform: openshift\n", "'platform' has no namespace"),
    # Beyond 64 bits and a float's range: text, as to the CLI (which the schema then refuses).
    ("int-beyond-the-parser", f"{GOOD}  gpu-cluster:nodes: {HUGE}\n", "gpu-cluster:nodes = '999"),
    (
        "int-overflow",
        f"{DEEPSPEED}      microBatchSize: 1{'0' * 30}\n",
        "gpu-cluster:launcher.deepspeed.microBatchSize: number too large",
    ),
    (
        "float-overflow",
        f"{DEEPSPEED}      microBatchSize: 1.0e+400\n",
        "gpu-cluster:launcher.deepspeed.microBatchSize = '1.0e+400': Input should be a valid int",
    ),
]


@by_case("text, says", STACK_FILES)
def test_malformed_stack_files_are_named_with_their_line(
    tmp_path: Path, text: str, says: str
) -> None:
    assert says in refused_stack_file(tmp_path, text)


@by_case("scalar, expected", SCALARS)
def test_stack_file_scalars_read_as_the_pulumi_cli_reads_them(
    tmp_path: Path, scalar: str, expected: Expected
) -> None:
    """go-yaml v3's rules, not YAML 1.1's, and values written as the CLI writes them; what the
    CLI refuses, or would hand the program rewritten, is refused naming the line and key."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "Pulumi.given.yaml").write_text(stack_file(scalar), encoding="utf-8")
    if isinstance(expected, Same):
        config, _ = engine_config("given", project_dir=tmp_path)
        assert config["gpu-cluster:top"] == expected.top
        assert config["gpu-cluster:inMap"] == '{"k":' + expected.nested + "}"
        assert config["gpu-cluster:inList"] == "[" + expected.nested + "]"
        return
    with pytest.raises(ConfigError) as info:
        engine_config("given", project_dir=tmp_path)
    message = str(info.value)
    assert message.startswith("Pulumi.given.yaml:2: "), message
    assert expected.says in message
    # What the CLI would rewrite is refused with what to write instead.
    assert isinstance(expected, Refused) or message.endswith(("; quote it", "rename the key"))


@by_case("value, stored", SET_VALUES)
def test_set_values_are_stored_as_pulumi_config_set_path_stores_them(
    value: str, stored: object
) -> None:
    config: dict[str, Any] = {}
    assert apply_override(config, f"launcher.x={value}") == "gpu-cluster:launcher"
    assert config["gpu-cluster:launcher"] == {"x": stored}
    assert type(config["gpu-cluster:launcher"]["x"]) is type(stored)  # 1 is not True


def test_set_secret_values_stay_text() -> None:
    """`pulumi config set --secret --path` stores the ciphertext of the text: no coercion."""
    config, secret = engine_config(
        "barcelona", secret_overrides=("launcher.x=5", "launcher.y=true")
    )
    assert "gpu-cluster:launcher" in secret
    launcher = json.loads(config["gpu-cluster:launcher"])
    assert (launcher["x"], launcher["y"]) == ("5", "true")


# (case, --set argument, what the message must say)
SET_PATHS: list[tuple[str, str, str]] = [
    ("index-into-a-number", "nodes[0]=3", "--set nodes[0]: nodes is a plain value"),
    ("key-into-a-string", "platform.kind=gke", "--set platform.kind: gpu-cluster:platform holds"),
    (
        "key-into-a-nested-string",
        "rdma.nics[0].interface.name=net1",
        "rdma.nics[0].interface is a plain value",
    ),
    ("key-into-a-list", "rdma.nics.mtu=9000", "--set rdma.nics.mtu: rdma.nics is a list"),
    ("index-into-an-object", "rdma[0]=1", "--set rdma[0]: rdma is an object"),
    ("empty-part", "rdma..mtu=9000", "--set rdma..mtu: not a config path"),
    ("trailing-dot", "rdma.=9000", "--set rdma.: not a config path"),
    ("empty-namespace", ":nodes=3", "--set :nodes: not a config path"),
    ("empty-key", "=3", "--set takes KEY=VALUE"),
    ("no-value", "nodes", "--set takes KEY=VALUE"),
    ("index-far-out", "rdma.nics[99999999999].hca=mlx5_0", "index [99999999999] is out of range"),
    ("int-overflow", f"launcher.maxNodes={'9' * 30}", "--set launcher.maxNodes: number too large"),
    ("int-beyond-the-parser", f"launcher.maxNodes={HUGE}", "--set launcher.maxNodes: number too"),
    ("top-level-int-beyond-the-parser", f"nodes={HUGE}", "gpu-cluster:nodes = '999"),
]


@by_case("arg, says", SET_PATHS)
def test_set_paths_that_do_not_fit_the_config_are_named(
    tmp_path: Path, arg: str, says: str
) -> None:
    result = cli("--stack", "barcelona", "--set", arg, "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    message = one_error(result.stderr)
    assert says in message
    assert len(message) < 1000  # a 5000-digit value is clipped, not echoed
    assert list(tmp_path.iterdir()) == []


def _file(tmp: Path) -> Path:
    (tmp / "notes.txt").write_text("mine\n")
    return tmp / "notes.txt"


def _dir_where_a_file_goes(tmp: Path) -> Path:
    # outputs.json is written last: a writer that goes file by file leaves a partial render.
    (tmp / "out" / "outputs.json").mkdir(parents=True)
    return tmp / "out"


def _read_only(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o555)
    return directory


def _dangling_symlink(tmp: Path) -> Path:
    (tmp / "link").symlink_to(tmp / "missing")
    return tmp / "link"


# (case, makes the --out path in tmp, what the message must say, whether the case needs file
# modes to bind the CLI: root runs it in a user namespace, see tests.cli.as_a_user)
OUT_PATHS = [
    ("out-is-a-file", _file, "exists and is not a directory", False),
    (
        "parent-is-a-file",
        lambda tmp: _file(tmp) / "render",
        "cannot write it (Not a directory",
        False,
    ),
    (
        "directory-where-a-file-goes",
        _dir_where_a_file_goes,
        "outputs.json exists and is not a file",
        False,
    ),
    # A path component past the file system's NAME_MAX (255 on Linux): `Path.exists()` raises
    # ENAMETOOLONG instead of answering False.
    ("name-too-long", lambda tmp: tmp / ("x" * 300), "cannot write it (File name too long", False),
    ("dangling-symlink", _dangling_symlink, "a symbolic link to ", False),
    ("read-only-directory", lambda tmp: _read_only(tmp / "out"), "(Permission denied", True),
    (
        "new-in-a-read-only-directory",
        lambda tmp: _read_only(tmp / "ro") / "render",
        "cannot write it (Permission denied",
        True,
    ),
]


@by_case("make, says, modes_bind", OUT_PATHS)
def test_out_paths_that_cannot_be_written_leave_everything_as_it_was(
    tmp_path: Path, make: Callable[[Path], Path], says: str, modes_bind: bool
) -> None:
    prefix = as_a_user() if modes_bind else ()
    out = make(tmp_path)
    before = tree(tmp_path)
    result = cli("--stack", "barcelona", "--out", str(out), prefix=prefix)
    assert result.returncode == 2
    message = one_error(result.stderr)
    assert says in message and str(out) in message
    assert tree(tmp_path) == before


@functools.cache
def _barcelona() -> dict[str, str]:
    return render("barcelona")


@pytest.fixture
def shm() -> Iterator[Callable[[], Path]]:
    """Makes a directory of this test's own on /dev/shm (tmpfs; on most machines not /tmp's file
    system, so a move between the two crosses devices); skips the test on a machine without."""
    made: list[Path] = []

    def make() -> Path:
        if not os.access("/dev/shm", os.W_OK):
            unavailable("this machine has no writable /dev/shm")
        made.append(Path(tempfile.mkdtemp(prefix="gpu-cluster-test.", dir="/dev/shm")))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path)


def _directory(tmp: Path, shm: Callable[[], Path]) -> tuple[Path, tuple[str, ...]]:
    (tmp / "out").mkdir()
    return tmp / "out", ()


def _symlink(tmp: Path, shm: Callable[[], Path]) -> tuple[Path, tuple[str, ...]]:
    (tmp / "real").mkdir()
    (tmp / "link").symlink_to(tmp / "real")
    return tmp / "link", ()


def _in_a_read_only_directory(tmp: Path, shm: Callable[[], Path]) -> tuple[Path, tuple[str, ...]]:
    (tmp / "ro" / "out").mkdir(parents=True)
    _read_only(tmp / "ro")
    return tmp / "ro" / "out", as_a_user()


def _on_dev_shm(tmp: Path, shm: Callable[[], Path]) -> tuple[Path, tuple[str, ...]]:
    return shm(), ()


def _symlink_to_dev_shm(tmp: Path, shm: Callable[[], Path]) -> tuple[Path, tuple[str, ...]]:
    (tmp / "link").symlink_to(shm())
    return tmp / "link", ()


# (case, makes an existing directory one may write to: (its path, the prefix the CLI runs under))
PLACES = [
    ("directory", _directory),
    ("symlink-to-a-directory", _symlink),
    ("in-a-read-only-directory", _in_a_read_only_directory),
    ("on-dev-shm", _on_dev_shm),
    ("symlink-to-dev-shm", _symlink_to_dev_shm),
]


@pytest.mark.parametrize("new", [False, True], ids=["is-out", "holds-a-new-out"])
@pytest.mark.parametrize("place", [place for _, place in PLACES], ids=[c for c, _ in PLACES])
def test_any_directory_one_may_write_to_takes_the_render(
    tmp_path: Path,
    shm: Callable[[], Path],
    place: Callable[[Path, Callable[[], Path]], tuple[Path, tuple[str, ...]]],
    new: bool,
) -> None:
    """As --out, the directory keeps its other files and gets the render's, replacing an
    earlier render; a new --out two levels below it is created whole. Nothing else is left."""
    where, prefix = place(tmp_path, shm)
    kept: dict[str, str] = {}
    if new:
        out = where / "a" / "render"
    else:
        out = where
        (out / "kubernetes.yaml").write_text("an earlier render\n")
        kept = {"notes.txt": "mine\n"}
        (out / "notes.txt").write_text(kept["notes.txt"])
    result = cli("--stack", "barcelona", "--out", str(out), prefix=prefix)
    assert result.returncode == 0, result.stderr
    assert {p.name: p.read_text() for p in out.iterdir()} == {**_barcelona(), **kept}
    if new:
        assert [p.name for p in where.iterdir()] == ["a"]
        assert [p.name for p in (where / "a").iterdir()] == ["render"]
        # The mode mkdir gives its missing parent (the umask's), not a temporary directory's.
        assert out.stat().st_mode == (where / "a").stat().st_mode


def test_a_mount_point_takes_the_render(tmp_path: Path) -> None:
    """--out a file system of its own (a tmpfs mounted on it, in a mount namespace of the test's
    own), with an earlier render and a file of the user's in it."""
    (tmp_path / "mnt").mkdir()
    (tmp_path / "seen").mkdir()
    script = """
        mount -t tmpfs tmpfs "$1" || exit 77
        test "$(stat -c %d "$1")" != "$(stat -c %d "$1/..")" || { echo "not mounted" >&2; exit 1; }
        echo "an earlier render" > "$1/kubernetes.yaml"
        echo mine > "$1/notes.txt"
        "$2" -m gpu_cluster.offline --as-of "$4" --stack barcelona --out "$1" || exit
        cp -R "$1/." "$3"  # what the mount holds, before it goes with the namespace
    """
    result = subprocess.run(
        [
            *as_root_of_a_mount_namespace(),
            *("sh", "-c", script, "sh", str(tmp_path / "mnt"), sys.executable),
            str(tmp_path / "seen"),
            str(AS_OF.day),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == 77:
        unavailable(f"no tmpfs mount in a user namespace here: {result.stderr}")
    assert result.returncode == 0, result.stderr
    seen = {p.name: p.read_text() for p in (tmp_path / "seen").iterdir()}
    assert seen == {**_barcelona(), "notes.txt": "mine\n"}


# Config as the engine hands it to the program under `pulumi up`: numbers it cannot carry.
ENGINE_NUMBERS = [
    ('{"deepspeed": {"microBatchSize": 1e30}}', "launcher.deepspeed.microBatchSize: number"),
    ('{"deepspeed": {"microBatchSize": 1' + "0" * 30 + "}}", "microBatchSize: number too large"),
    ('{"maxNodes": Infinity}', "gpu-cluster:launcher.maxNodes: not a finite number"),
    ('{"maxNodes": NaN}', "gpu-cluster:launcher.maxNodes: not a finite number"),
]


@pytest.mark.parametrize(("launcher", "says"), ENGINE_NUMBERS)
def test_numbers_the_engine_cannot_carry_stop_the_program(launcher: str, says: str) -> None:
    config = {"gpu-cluster:platform": "openshift", "gpu-cluster:launcher": launcher}
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, [], "engine", record_into=run)
    assert run.resources == []
    assert says in str(info.value)


def test_render_all_into_a_blocked_directory_says_so(tmp_path: Path) -> None:
    blocked = _file(tmp_path) / "renders"
    result = subprocess.run(
        [sys.executable, "-m", "tools.render_all", str(blocked)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert f"{blocked}: cannot write it (Not a directory" in one_error(result.stderr)


@pytest.mark.parametrize("flag", ["--out", "--diff"])
def test_an_empty_path_is_refused_not_read_as_the_current_directory(
    tmp_path: Path, flag: str
) -> None:
    # Path("") is Path("."): `--out ""` (an unset shell variable) would render into the program.
    program = program_copy(tmp_path, {"barcelona": (ROOT / "Pulumi.barcelona.yaml").read_text()})
    before = tree(program)
    result = cli("--stack", "barcelona", flag, "", cwd=program)
    assert result.returncode == 2
    assert f"{flag}: an empty path" in one_error(result.stderr)
    assert tree(program) == before


def test_a_diff_path_it_cannot_look_up_is_answered(tmp_path: Path) -> None:
    result = cli("--stack", "barcelona", "--diff", str(tmp_path / ("x" * 300)))
    assert result.returncode == 2
    assert "File name too long" in one_error(result.stderr)
