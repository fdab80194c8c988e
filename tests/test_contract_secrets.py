"""Contract, class 4: secrets stay secret.

A value set as a secret (`pulumi config set --secret`, `--set-secret` offline) never appears in
a message, a warning, the render or the outputs: whatever its shape (text, a number, a
boolean, a list, nested objects, text long enough to be clipped) and whatever key it is under
(every key of the schema, keys of the providers' namespaces, a misspelt namespace, a key the
schema does not have). Messages never format a secret's input at all, so no secret can change
them either: a short one ("1", "a", a word of the message itself) leaves the message exactly as
it is for any other value. The members are generated for every key of the schema.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.facts.kubernetes import parse_go_duration
from gpu_cluster.offline.cli import offline_main as main
from gpu_cluster.offline.render import FILES
from gpu_cluster.offline.stack_files import engine_config
from tests.as_of import AS_OF
from tests.conftest import schema_key_paths
from tests.contract import set_key

MARKER = "zqmarker7731"
NUMBER = 77317731
# Each shape carries MARKER or NUMBER, which nothing else in a message or render contains.
SHAPES: dict[str, Any] = {
    "text": MARKER,
    "digits": str(NUMBER),  # text pydantic would coerce to the number
    "number": NUMBER,
    "boolean": True,
    "list": [MARKER, NUMBER],
    "nested": {"a": {"b": [MARKER]}, "c": NUMBER},
    "long-text": MARKER * 40,  # clipped where values are shown
}


def leaked(text: str) -> bool:
    return MARKER in text or str(NUMBER) in text


@functools.cache
def _engine_config(stack: str) -> tuple[dict[str, str], list[str]]:
    return engine_config(stack)


def stack_for(key: str) -> str:
    return "gcp-a3" if key.startswith("gcp.") else "barcelona"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("key", schema_key_paths("[0]"))
def test_a_secret_under_any_key_of_the_schema_never_shows(
    key: str, shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    top = "gpu-cluster:" + re.split(r"[.\[]", key)[0]
    config, secret_keys = _engine_config(stack_for(key))
    config = dict(config)
    set_key(config, key, SHAPES[shape])
    # Under the engine: the program's own reading of the config map.
    try:
        settings_from(config, [*secret_keys, top], PROVIDER_SETTINGS, as_of=AS_OF)
    except ConfigError as exc:
        assert not leaked(str(exc)), exc
        assert top in str(exc)
    # Offline: the secret top-level value as `--set-secret` sets it (text).
    value = config[top]
    out = tmp_path / "out"
    code = main(["--stack", stack_for(key), "--set-secret", f"{top}={value}", "--out", str(out)])
    captured = capsys.readouterr()
    assert not leaked(captured.out + captured.err), captured.err
    if code == 2:
        assert top in captured.err
        return
    assert code == 0, captured.err
    for name in FILES:
        assert not leaked((out / name).read_text()), name


# Keys outside the schema: the providers' namespaces (passed to them), a namespace nothing reads
# (warned about), misspelt namespaces and keys the schema does not have (refused).
OTHER_KEYS = [
    "kubernetes:context",
    # The commands name these too (outputs.kube_target): held as secrets when either is one.
    "kubernetes:kubeconfig",
    "kubernetes:cluster",
    "gcp:project",
    "pulumi:tags",
    "aws:region",
    "gpu_cluster:nodes",
    "kubernets:context",
    "gpu-cluster:nodez",
    "gpu-cluster:pod.cpuRequests",
    "gpu-cluster:codeSync.token",
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("key", OTHER_KEYS)
def test_a_secret_under_any_other_key_never_shows(
    key: str, shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = SHAPES[shape]
    text = value if isinstance(value, str) else json.dumps(value)
    out = tmp_path / "out"
    code = main(["--stack", "barcelona", "--set-secret", f"{key}={text}", "--out", str(out)])
    captured = capsys.readouterr()
    assert code in (0, 2)
    assert not leaked(captured.out + captured.err), captured.err
    for name in FILES if code == 0 else ():
        assert not leaked((out / name).read_text()), name


# --- a secret changes no message ----------------------------------------------------------------

REPO = "https://git.example.com/team/train.git"
# Wrong besides the secret: each refusal formats its own value and what is allowed.
OTHER_MISTAKES = ("platform=kubernetes", "nodes=0", "launcher.kind=mpirun", "nccl.debug=LOUD")


def refusal(secrets: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The message OTHER_MISTAKES get with `secrets` set by --set-secret."""
    args = ["--stack", "barcelona", "--out", "/nonexistent/never-written"]
    for mistake in OTHER_MISTAKES:
        args += ["--set", mistake]
    for secret in secrets:
        args += ["--set-secret", secret]
    assert main(args) == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    "secret_key", ["codeSync.ref", "codeSync.period", "codeSync.repo", "secretEnv.HF_TOKEN"]
)
def test_a_secret_equal_to_any_part_of_the_message_leaves_the_message_as_it_is(
    secret_key: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every value tried is taken or refused alike for its key (any text is a ref or a token,
    none of them a period or a repository URL), so the message must be the same."""
    repo = (
        [] if secret_key.startswith(("codeSync.repo", "secretEnv")) else [f"codeSync.repo={REPO}"]
    )
    baseline = refusal([*repo, f"{secret_key}=neutral-value-zq"], capsys)
    parts = {*re.findall(r"[\w:.'-]+", baseline), *baseline} - {"\n"}
    if secret_key == "codeSync.period":  # a part that is a Go duration is a period after all
        parts = {p for p in parts if not _is_go_duration(p)}
    for value in sorted(parts):
        assert refusal([*repo, f"{secret_key}={value}"], capsys) == baseline, value


def _is_go_duration(text: str) -> bool:
    try:
        parse_go_duration(text)
    except ValueError:
        return False
    return True
