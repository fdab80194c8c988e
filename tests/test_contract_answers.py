"""Contract, class 3: answers, not tracebacks.

Whatever a stack file, a `--set` or the engine's config map holds under any key of the schema
(a list or object nested 10,000 deep, also as a `--set` path 10,000 parts long; an integer of
5,000 digits; 1e400; a fraction where an integer goes; YAML aliases that expand a billion
times), and whatever shape a secret `secretEnv` or `codeSync` has, the program answers: it
runs, or it stops with one `error:` message naming the key, with the file and line when the
key is written in a stack file (exit 2 offline; under the engine a ConfigError from
settings_from, which components/stack_config.py calls, and the program stops before any
resource). Never a traceback, never exit 1. The members are generated for every key of the
schema (tests/conftest.py schema_leaves).
"""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path
from typing import Any

import pulumi
import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import SECRET_CAPABLE_KEYS, settings_from
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.offline.cli import offline_main as main
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.stack_files import checked_config, engine_config
from tests.as_of import AS_OF
from tests.cli import ROOT, by_case, cli, one_error, program_copy, refused_stack_file
from tests.conftest import schema_key_paths
from tests.contract import DEEP, DEEP_LIST, DEEP_OBJECT, HUGE_INT, RawJson, set_key

KEYS = schema_key_paths("[0]")
MARKER = "zqmarker7731"


def top(key: str) -> str:
    return key.split(".")[0].split("[")[0]


def stack_for(key: str) -> str:
    return "gcp-a3" if key.startswith("gcp.") else "barcelona"


@functools.cache
def _engine_config(stack: str) -> tuple[dict[str, str], list[str]]:
    return engine_config(stack)


def answered(config: dict[str, str], secret_keys: list[str], key: str) -> str | None:
    """The ConfigError message settings_from answers `config` with, naming `key`'s top-level
    key; None when it takes it, and the program then runs."""
    try:
        settings_from(config, secret_keys, PROVIDER_SETTINGS, as_of=AS_OF)
    except ConfigError as exc:
        assert f"gpu-cluster:{top(key)}" in str(exc), str(exc)
        return str(exc)
    run_program(config, secret_keys, "engine")  # accepted: the program runs on it too
    return None


# --- the engine's config map (`pulumi up`) ---------------------------------------------------

ENGINE_MEMBERS: dict[str, Any] = {
    "deep-list": DEEP_LIST,
    "deep-object": DEEP_OBJECT,
    "5000-digits": HUGE_INT,
    "1e400": RawJson("1e400"),
    "beyond-2^53": 2**53 + 1,
    "fraction": 2.5,
}


@pytest.mark.parametrize("member", ENGINE_MEMBERS)
@pytest.mark.parametrize("key", KEYS)
def test_any_value_under_any_key_of_the_engine_config_is_answered(key: str, member: str) -> None:
    config, secret_keys = _engine_config(stack_for(key))
    config = dict(config)
    set_key(config, key, ENGINE_MEMBERS[member])
    answered(config, secret_keys, key)


def test_under_the_engine_the_program_stops_with_the_message_before_any_resource() -> None:
    config, secret_keys = _engine_config("barcelona")
    config = {**config, "gpu-cluster:rdma": DEEP_LIST.text}
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, secret_keys, "engine", record_into=run)
    assert "gpu-cluster:rdma: nested more than 32 levels deep" in str(info.value)
    assert run.resources == []


# --- `--set` (pulumi config set [--path]) -----------------------------------------------------

SET_MEMBERS = {
    "deep-json": lambda key: f"{key}={DEEP_LIST.text}",
    "5000-digits": lambda key: f"{key}={HUGE_INT.text}",
    "1e400": lambda key: f"{key}=1e400",
    "fraction": lambda key: f"{key}=2.5",
    "deep-index-path": lambda key: f"{key}{'[0]' * DEEP}=1",
    "deep-key-path": lambda key: f"{key}{'.a' * DEEP}=1",
}


@pytest.mark.parametrize("member", SET_MEMBERS)
@pytest.mark.parametrize("key", KEYS)
def test_any_set_under_any_key_is_answered(
    key: str, member: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["--stack", stack_for(key), "--set", SET_MEMBERS[member](key), "--out", str(out)])
    err = capsys.readouterr().err
    if code == 0:
        assert out.is_dir()
        return
    assert code == 2
    assert top(key) in one_error(err)
    assert not out.exists()


# --- stack files -------------------------------------------------------------------------------

_LAUGHS = (
    "["
    + ", ".join(
        [f"&l0 [{', '.join(['x'] * 10)}]"]
        + [f"&l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 9)]
    )
    + "]"
)
FILE_MEMBERS = {
    "deep-flow": "[" * DEEP + "]" * DEEP,
    "5000-digits": "9" * 5000,
    "1e400": "1e400",
    "beyond-2^53": "1e21",
    "fraction": "2.5",
    "billion-laughs": _LAUGHS,
}


def flow_yaml(key: str, value: str) -> str:
    """`value` where `key` puts it, below its top-level key, as flow YAML."""
    parts = key.replace("[0]", ".[0]").split(".")[1:]
    for part in reversed(parts):
        value = f"[{value}]" if part == "[0]" else f"{{{part}: {value}}}"
    return value


@pytest.mark.parametrize("member", FILE_MEMBERS)
@pytest.mark.parametrize("key", KEYS)
def test_any_value_under_any_key_of_a_stack_file_is_answered_with_its_line(
    key: str, member: str, tmp_path: Path
) -> None:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    value = flow_yaml(key, FILE_MEMBERS[member])
    platform = "gke" if key.startswith("gcp.") else "openshift"
    lines = [f"gpu-cluster:platform: {platform}", f"gpu-cluster:{top(key)}: {value}"]
    if top(key) == "platform":
        lines = lines[1:]
    (tmp_path / "Pulumi.given.yaml").write_text("config:\n" + "".join(f"  {x}\n" for x in lines))
    try:
        config, secret_keys = checked_config("given", project_dir=tmp_path)
    except ConfigError as exc:
        assert f"Pulumi.given.yaml:{len(lines) + 1}: gpu-cluster:{top(key)}" in str(exc), exc
        return
    run_program(config, secret_keys, "given")


# --- secrets of a shape their key does not take -------------------------------------------------

SECRET_SHAPES: dict[str, Any] = {
    "text": MARKER,
    "number": 77317731,
    "boolean": True,
    "null": None,
    "list": [MARKER],
    "list-of-objects": [{"HF_TOKEN": MARKER}],
    "object-of-lists": {"HF_TOKEN": [MARKER], "repo": [MARKER]},
    "object-of-objects": {"HF_TOKEN": {"a": MARKER}, "repo": {"a": MARKER}},
    "object-of-numbers": {"HF_TOKEN": 77317731, "repo": 77317731},
    "deep": DEEP_LIST,
}


@pytest.mark.parametrize("shape", SECRET_SHAPES)
@pytest.mark.parametrize("key", SECRET_CAPABLE_KEYS)
def test_a_secret_of_a_shape_its_key_does_not_take_is_answered_without_showing_it(
    key: str, shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = SECRET_SHAPES[shape]
    text = value.text if isinstance(value, RawJson) else json.dumps(value)
    config, secret_keys = _engine_config("barcelona")
    config = {**config, f"gpu-cluster:{key}": text}
    message = answered(config, [*secret_keys, f"gpu-cluster:{key}"], key)
    assert message is not None
    assert MARKER not in message and "77317731" not in message
    out = tmp_path / "out"
    assert main(["--stack", "barcelona", "--set-secret", f"{key}={text}", "--out", str(out)]) == 2
    err = one_error(capsys.readouterr().err)
    assert f"gpu-cluster:{key}" in err
    assert MARKER not in err and "77317731" not in err


# --- the CLI itself: exit 2, one message, nothing written ----------------------------------------

# (case, --set or --set-secret arguments, what the message must say)
CLI_SETS = [
    ("deep-json", ["--set", f"rdma={DEEP_LIST.text}"], "gpu-cluster:rdma: nested more than 32"),
    ("deep-path", ["--set", f"launcher.x{'[0]' * DEEP}=1"], "--set launcher.x[0][0]"),
    (
        "deep-json-then-path",
        ["--set", f"pod={DEEP_OBJECT.text}", "--set", "pod.cpuRequest=1"],
        "--set pod.cpuRequest: gpu-cluster:pod is nested more than 32",
    ),
    ("huge-json", ["--set", f'verify={{"iters": {HUGE_INT.text}}}'], "verify.iters: number too"),
    (
        "quantity-beyond-a-double",
        ["--set", f"pod.shmSize={HUGE_INT.text[:400]}Gi"],
        "gpu-cluster:pod.shmSize = '999",
    ),
    (
        "secret-env-as-text",
        ["--set-secret", f"secretEnv={MARKER}"],
        "gpu-cluster:secretEnv must be an object of NAME: token pairs, not text",
    ),
    (
        "secret-env-nested",
        ["--set-secret", f"secretEnv.HF_TOKEN.part={MARKER}"],
        "gpu-cluster:secretEnv.HF_TOKEN: a token must be text, not an object",
    ),
]


@by_case("args, says", CLI_SETS)
def test_the_cli_answers_with_one_message_and_writes_nothing(
    tmp_path: Path, args: list[str], says: str
) -> None:
    result = cli("--stack", "barcelona", *args, "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    message = one_error(result.stderr)
    assert says in message and MARKER not in message
    assert len(message) < 1000  # long keys and values are clipped
    assert list(tmp_path.iterdir()) == []


GOOD = "config:\n  gpu-cluster:platform: openshift\n"
# (case, stack file, what the message must say)
CLI_FILES = [
    ("deep-flow", f"{GOOD}  gpu-cluster:nodes: {FILE_MEMBERS['deep-flow']}\n", "yaml:3: gpu-clu"),
    (
        "deep-block",
        GOOD + "  gpu-cluster:pod:\n" + "".join(" " * (4 + i) + "a:\n" for i in range(3000)),
        "Pulumi.given.yaml:34: gpu-cluster:pod: nested more than 32 levels deep",
    ),
    (
        "deep-through-aliases",
        GOOD
        + "  gpu-cluster:x:\n    a0: &a0 1\n"
        + "".join(f"    a{i}: &a{i} [[[[[[[[[[ *a{i - 1} ]]]]]]]]]]\n" for i in range(1, 9)),
        "gpu-cluster:x.a4[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]",
    ),
    (
        "billion-laughs",
        f"{GOOD}  gpu-cluster:x: {_LAUGHS}\n",
        "Pulumi.given.yaml:3: gpu-cluster:x: its YAML aliases expand to more than the Pulumi CLI",
    ),
    (
        "5000-digits",
        f"{GOOD}  gpu-cluster:nodes: {HUGE_INT.text}\n",
        "Pulumi.given.yaml:3: gpu-cluster:nodes = '999",
    ),
    ("1e400", f"{GOOD}  gpu-cluster:nodes: 1e400\n", "Pulumi.given.yaml:3: gpu-cluster:nodes"),
]


@by_case("text, says", CLI_FILES)
def test_the_cli_answers_a_stack_file_with_its_line(tmp_path: Path, text: str, says: str) -> None:
    message = refused_stack_file(tmp_path, text)
    assert says in message
    assert len(message) < 1000


def test_a_key_a_set_changed_has_no_line_and_the_files_other_keys_keep_theirs(
    tmp_path: Path,
) -> None:
    text = (ROOT / "Pulumi.barcelona.yaml").read_text()
    text = text.replace("resource: openshift.io/eno5np0rdma", "resource: not-a-resource")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "not-a-resource" in row)
    project = program_copy(tmp_path / "project", {"given": text})
    result = cli(
        "--stack", "given", "--set", "rdma.mtu=1", "--out", str(tmp_path / "out"), cwd=project
    )
    assert result.returncode == 2
    message = one_error(result.stderr)
    assert (
        f"\n  Pulumi.given.yaml:{line}: gpu-cluster:rdma.nics[0].resource = 'not-a-resource'"
        in message
    )
    assert "\n  gpu-cluster:rdma.mtu = 1:" in message
