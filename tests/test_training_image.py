"""The default training image (#44 item 13) and the warning for an NGC PyTorch release whose
environment selects HPC-X's NCCL plugin on a GKE stack that needs Google's."""

from __future__ import annotations

import pytest

from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.facts.ngc import ngc_pytorch_release
from gpu_cluster.offline.stack_files import engine_config
from tests.as_of import AS_OF
from tests.conftest import STACKS, other_warnings

# NGC PyTorch 26.04: the newest release NVIDIA's training repositories pin before 26.06 selects
# HPC-X's NCCL plugin (NVIDIA/Megatron-LM docker/Dockerfile.ci.nemo at d98e8a6, 2026-08-22).
DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:26.04-py3"


def warnings_of(stack: str, *overrides: str) -> list[str]:
    config = engine_config(stack, overrides)
    return other_warnings(settings_from(*config, PROVIDER_SETTINGS, as_of=AS_OF)[1])


def spcx_warnings(warnings: list[str]) -> list[str]:
    return [w for w in warnings if "NCCL_NET_PLUGIN=spcx" in w]


@pytest.mark.parametrize("stack", STACKS)
def test_every_shipped_stack_runs_the_default_image(stack: str) -> None:
    config = engine_config(stack, ())
    assert settings_from(*config, PROVIDER_SETTINGS, as_of=AS_OF)[0].image == DEFAULT_IMAGE


@pytest.mark.parametrize(
    ("image", "release"),
    [
        ("nvcr.io/nvidia/pytorch:26.06-py3", (26, 6)),
        ("nvcr.io/nvidia/pytorch:25.01-py3", (25, 1)),
        ("nvcr.io/nvidia/pytorch:26.04.01-py3", (26, 4)),
        ("nvcr.io/nvidia/pytorch:26.06-py3@sha256:" + "a" * 64, (26, 6)),
        ("nvcr.io/nvidia/pytorch@sha256:" + "a" * 64, None),
        ("nvcr.io/nvidia/nemo:26.06", None),
        ("us-central1-docker.pkg.dev/p/r/pytorch:26.06-py3", None),
        ("nvcr.io/nvidia/pytorch:26.06-py3-igpu", None),
    ],
)
def test_ngc_pytorch_release_reads_only_nvidias_monthly_tags(
    image: str, release: tuple[int, int] | None
) -> None:
    assert ngc_pytorch_release(image) == release


@pytest.mark.parametrize(
    ("stack", "mode"), [("gcp-a3", "tcpxo"), ("a3-high", "tcpx"), ("gcp-a4", "rdma")]
)
def test_a_release_that_selects_hpcx_plugin_warns_on_gpudirect_modes(stack: str, mode: str) -> None:
    assert spcx_warnings(warnings_of(stack, "image=nvcr.io/nvidia/pytorch:26.06-py3")) == [
        "gpu-cluster:image = 'nvcr.io/nvidia/pytorch:26.06-py3' sets NCCL_NET_PLUGIN=spcx (NGC "
        "PyTorch 26.06 and newer), so NCCL loads HPC-X's net plugin and not Google's, which "
        f"networkMode '{mode}' needs; use an nvcr.io/nvidia/pytorch release up to 26.05 (the "
        f"default is {DEFAULT_IMAGE}) or an image built from it that unsets NCCL_NET_PLUGIN"
    ]
    assert spcx_warnings(warnings_of(stack, "image=nvcr.io/nvidia/pytorch:26.05-py3")) == []


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("gcp-a3", ("networkMode=tcp",)),  # NCCL over sockets: no plugin of Google's to miss
        ("barcelona", ()),  # OpenShift: no Google plugin
        ("nerc-production", ()),
    ],
)
def test_no_warning_where_no_google_plugin_is_needed(
    stack: str, overrides: tuple[str, ...]
) -> None:
    image = "image=nvcr.io/nvidia/pytorch:26.09-py3"
    assert spcx_warnings(warnings_of(stack, image, *overrides)) == []
