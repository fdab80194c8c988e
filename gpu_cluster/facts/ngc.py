"""NVIDIA's NGC PyTorch container (nvcr.io/nvidia/pytorch): the default training image and what
its releases change for the NCCL plugins a GKE stack's nodes provide.

NGC tags a monthly release YY.MM (`25.12-py3`, release notes at docs.nvidia.com/deeplearning/
frameworks/pytorch-release-notes/rel-YY-MM.html).
"""

from __future__ import annotations

import re

NGC_PYTORCH = "nvcr.io/nvidia/pytorch"

# The default training image: 26.04, the newest release NVIDIA's own training repositories pin
# that leaves NCCL_NET_PLUGIN unset (NVIDIA/Megatron-LM docker/Dockerfile.ci.nemo and
# Dockerfile.linting at d98e8a6, 2026-08-22, and docker/.ngc_version.dev from 5fe3f06 to
# 64bee49; NVIDIA-NeMo/Megatron-Bridge examples/model_verification_cards/*/card.yaml
# base_container at 067f987). A CUDA 13 image (Megatron-LM installs its cu13 packages on it,
# docker/Dockerfile.ci.dev at 1bb5ff5; rel-25-12: "Release 25.12 is based on CUDA 13.1.0"), so
# the node driver must be R580 or newer (docs.nvidia.com/deploy/cuda-compatibility/
# minor-version-compatibility.html, table 1: CUDA 13.x, ">= 580", consulted 2026-11-28).
DEFAULT_TRAINING_IMAGE = f"{NGC_PYTORCH}:26.04-py3"

# From 26.06 the image sets NCCL_NET_PLUGIN=spcx (HPC-X Spectrum-X) and ships HPC-X's
# libnccl-net.so on the ldconfig path, so NCCL loads that plugin and not the one the pod's
# LD_LIBRARY_PATH offers (NVIDIA-NeMo/Megatron-Bridge scripts/performance/utils/csp_plugins.py
# and docker/common/install_aws_ofi_nccl.sh at 067f987: "NVIDIA PyTorch >= 26.06 base images
# drop aws-ofi-nccl and default NCCL_NET_PLUGIN=spcx").
NET_PLUGIN_SPCX_FROM = (26, 6)

_RELEASE_TAG = re.compile(
    re.escape(NGC_PYTORCH) + r":(?P<year>[0-9]{2})\.(?P<month>[0-9]{2})(?:\.[0-9]+)?-py3(?:@.*)?$"
)


def ngc_pytorch_release(image: str) -> tuple[int, int] | None:
    """'nvcr.io/nvidia/pytorch:26.06-py3' -> (26, 6); None for any other image (another
    repository, a digest without a tag, a tag that is not a monthly release)."""
    match = _RELEASE_TAG.match(image)
    return (int(match["year"]), int(match["month"])) if match else None


def sets_net_plugin_spcx(image: str) -> bool:
    """Whether `image` is an NGC PyTorch release whose environment selects HPC-X's NCCL net
    plugin (NET_PLUGIN_SPCX_FROM and later)."""
    release = ngc_pytorch_release(image)
    return release is not None and release >= NET_PLUGIN_SPCX_FROM
