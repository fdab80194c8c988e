"""Tokens from Pulumi secret config reach pods only through a Secret, never in plain sight."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.render import main, render
from components.settings import ConfigError

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
        render("nerc-production", secret_overrides=(f"secretEnv.hf-token={TOKEN}",))
    assert "gpu-cluster:secretEnv[0] = 'hf-token'" in str(info.value)
    assert TOKEN not in str(info.value)
