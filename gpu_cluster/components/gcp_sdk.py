"""pulumi-gcp, the GCP provider's Python SDK, is an optional dependency: the package's `gke`
extra (pyproject.toml). It is most of an install (292 MB of a 456 MB virtualenv, measured
2026-11-28), and only GKE stacks use it, so only they import it. A GKE stack, or a GKE
component, where it is missing is refused with the command that installs it."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from gpu_cluster.config.messages import ConfigError

GCP_SDK_MODULE = "pulumi_gcp"
INSTALL_GKE_EXTRA = "pip install 'gpu-cluster[gke]'"


class GcpSdkMissingError(ConfigError, ImportError):
    """pulumi-gcp is not installed. A ConfigError to the CLI and the program (the stack cannot
    be deployed from this environment: exit 2, no traceback); an ImportError to a program of
    your own that imports a GKE component."""


def gcp_sdk() -> ModuleType:
    """The pulumi_gcp module; GcpSdkMissingError, with the install command, where it is missing."""
    try:
        return importlib.import_module(GCP_SDK_MODULE)
    except ModuleNotFoundError as missing:
        if missing.name != GCP_SDK_MODULE:
            raise  # pulumi-gcp is there but broken: its own error says more
        raise GcpSdkMissingError(
            f"GKE (gpu-cluster:platform gke, and the GKE components) needs pulumi-gcp, the GCP "
            f"provider's Python SDK, which is not installed in this environment "
            f"({sys.executable}): install the package "
            f"with its gke extra, {INSTALL_GKE_EXTRA}; in a checkout of this project, "
            f"pip install -r requirements.txt"
        ) from None
