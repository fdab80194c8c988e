"""Tokens from Pulumi secret config reach pods only through a Secret, never in plain sight."""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any

import pulumi
import pytest
from pydantic import BaseModel

from gpu_cluster.config.messages import ConfigError, nested_model
from gpu_cluster.config.schema import Settings
from gpu_cluster.offline.engine import ProgramRun, run_program
from gpu_cluster.offline.render import FILES, main, render
from gpu_cluster.offline.stack_files import engine_config
from tests.conftest import container

TOKEN = "hf_DoNotLeakThis123"
WANDB = "wandb-DoNotLeakThat456"


def test_secret_env_goes_through_a_secret_and_never_into_the_render() -> None:
    files = render(
        "nerc-production",
        secret_overrides=(f"secretEnv.HF_TOKEN={TOKEN}", f"secretEnv.WANDB_API_KEY={WANDB}"),
    )
    for name, content in files.items():
        assert TOKEN not in content and WANDB not in content, name
    yaml_text = files["kubernetes.yaml"]
    assert "stringData:\n  HF_TOKEN: '[secret]'\n  WANDB_API_KEY: '[secret]'\n" in yaml_text
    assert "- name: HF_TOKEN\n          valueFrom:\n            secretKeyRef:\n" in yaml_text


def test_plain_text_tokens_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError, match="--secret"):
        render("nerc-production", (f"secretEnv.HF_TOKEN={TOKEN}",))
    assert (
        main(
            [
                "--stack",
                "nerc-production",
                "--set",
                f"secretEnv.HF_TOKEN={TOKEN}",
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "gpu-cluster:secretEnv holds tokens in plain text" in err
    assert TOKEN not in err
    assert not (tmp_path / "x").exists()


def test_secret_env_names_are_validated_without_echoing_values() -> None:
    with pytest.raises(ConfigError) as info:
        render("nerc-production", secret_overrides=(f"secretEnv.hf token={TOKEN}",))
    assert "gpu-cluster:secretEnv[0] = 'hf token'" in str(info.value)
    assert TOKEN not in str(info.value)


# --- any key set with `pulumi config set --secret` -------------------------------------------

MARKER = "zqmarker7731"
REPO = "https://git.example.com/team/train.git"
# Values that are valid for keys that may be secret, each carrying the marker.
SECRET_VALUES = {
    "codeSync.repo": f"https://oauth2:{MARKER}@git.example.com/team/train.git",
    "codeSync.period": "7731s",
}


def _is_list(annotation: Any) -> bool:
    return typing.get_origin(annotation) is tuple or any(
        _is_list(a) for a in typing.get_args(annotation)
    )


def settable_scalar_keys(model: type[BaseModel] = Settings, prefix: str = "") -> list[str]:
    """Every scalar key path the schema accepts (a list's first element standing for all)."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        path = prefix + (field.alias or name) + ("[0]" if _is_list(field.annotation) else "")
        sub = nested_model(field.annotation)
        keys += settable_scalar_keys(sub, path + ".") if sub else [path]
    return keys


KEYS = settable_scalar_keys()


def test_the_key_list_covers_the_schema() -> None:
    assert len(KEYS) > 70
    for key in ("nodes", "rdma.nics[0].subnet", "gcp.project", "codeSync.repo", "secretEnv[0]"):
        assert key in KEYS


@pytest.mark.parametrize("key", KEYS)
def test_every_key_set_as_secret_is_kept_secret_or_refused_by_name(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = "gcp-a3" if key.startswith("gcp.") else "barcelona"
    value = SECRET_VALUES.get(key, MARKER)
    marker = value.split("@")[0].split(":")[-1] if "@" in value else value
    args = ["--stack", stack, "--out", str(tmp_path / "out")]
    if key == "secretEnv[0]":
        args += ["--set-secret", f"secretEnv.HF_TOKEN={value}"]
    else:
        if key.startswith("codeSync.") and key != "codeSync.repo":
            args += ["--set", f"codeSync.repo={REPO}"]
        args += ["--set-secret", f"{key}={value}"]
    code = main(args)
    captured = capsys.readouterr()
    assert marker not in captured.err + captured.out
    if code == 2:
        top = key.split(".")[0].split("[")[0]
        assert f"gpu-cluster:{top}" in captured.err
        assert "cannot be secret" in captured.err or "is set as a secret" in captured.err
        assert not (tmp_path / "out").exists()
        return
    assert code == 0, captured.err
    assert key in KEPT_SECRET, f"{key} rendered although the policy refuses it"
    for name in FILES:
        assert marker not in (tmp_path / "out" / name).read_text(), name


# The keys whose secret values the program carries (through Kubernetes Secrets); README says so.
KEPT_SECRET = {"secretEnv[0]", "codeSync.repo", "codeSync.ref", "codeSync.period"}


def test_keys_that_cannot_be_secret_stop_the_program_under_the_engine() -> None:
    config, _ = engine_config("barcelona")
    run = ProgramRun()
    with pytest.raises(pulumi.RunError) as info:
        run_program(config, ["gpu-cluster:namespace"], "barcelona", record_into=run)
    assert run.resources == []
    assert "gpu-cluster:namespace is set as a secret" in str(info.value)
    assert "nccl-test" not in str(info.value)


@pytest.mark.parametrize(
    "url",
    [
        f"https://oauth2:{MARKER}@git.example.com/team/train.git",
        f"https://{MARKER}@github.com/team/train.git",
        f"ssh://git:{MARKER}@git.example.com/team/train.git",
    ],
)
def test_credentials_in_a_plain_repository_url_are_refused(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--stack", "barcelona", "--set", f"codeSync.repo={url}", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "gpu-cluster:codeSync.repo holds credentials in plain text" in err
    assert "--secret" in err and MARKER not in err


def test_an_ssh_user_is_no_credential() -> None:
    render("barcelona", ("codeSync.repo=git@github.com:team/train.git",))


def test_a_secret_repository_reaches_git_sync_only_through_a_secret() -> None:
    url = SECRET_VALUES["codeSync.repo"]
    config, secret_keys = engine_config("barcelona", secret_overrides=(f"codeSync.repo={url}",))
    run = run_program(config, secret_keys, "barcelona")
    (secret,) = [m for m in run.manifests() if m["metadata"]["name"] == "ml-dev-env-code-sync"]
    assert secret["kind"] == "Secret"
    assert secret["stringData"] == {"period": "[secret]", "ref": "[secret]", "repo": "[secret]"}
    sidecar = container(run, "git-sync")
    env = {e["name"]: e for e in sidecar["env"]}
    for var, key in (
        ("GITSYNC_REPO", "repo"),
        ("GITSYNC_REF", "ref"),
        ("GITSYNC_PERIOD", "period"),
    ):
        assert "value" not in env[var]
        assert env[var]["valueFrom"]["secretKeyRef"] == {
            "name": secret["metadata"]["name"],
            "key": key,
        }
    (stateful_set,) = run.of_type("kubernetes:apps/v1:StatefulSet")
    (secret_resource,) = [r for r in run.resources if r.name.endswith("-code-sync")]
    assert secret_resource.urn in stateful_set.options["dependsOn"]


@pytest.mark.parametrize(
    "assignment", [f"codeSync.repo=ftp://{MARKER}", f"codeSync.period={MARKER}"]
)
def test_a_bad_secret_value_is_named_but_not_shown(assignment: str) -> None:
    with pytest.raises(ConfigError) as info:
        render("barcelona", ("codeSync.ref=main",), (assignment,))
    message = str(info.value)
    assert f"gpu-cluster:{assignment.split('=')[0]} = [secret]" in message
    assert MARKER not in message


@pytest.mark.parametrize(
    "part", ["image=registry.k8s.io/git-sync/git-sync:v4.5.0", "credentialsSecret=git"]
)
def test_parts_of_a_secret_code_sync_that_cannot_be_secret_are_refused(part: str) -> None:
    with pytest.raises(
        ConfigError, match=f"gpu-cluster:codeSync.{part.split('=')[0]} cannot be secret"
    ):
        render("barcelona", (f"codeSync.{part}",), (f"codeSync.repo={REPO}",))


@pytest.mark.parametrize(
    ("stack", "key"),
    [("barcelona", "kubernetes:context"), ("gcp-a3", "gcp:project"), ("barcelona", "aws:region")],
)
def test_secret_keys_of_other_namespaces_never_show(
    stack: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--stack", stack, "--set-secret", f"{key}={MARKER}", "--out", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert MARKER not in captured.out + captured.err
    for name in FILES:
        assert MARKER not in (tmp_path / name).read_text(), name
