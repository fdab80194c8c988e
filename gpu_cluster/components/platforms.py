"""Pick the platform component the stack asks for."""

from __future__ import annotations

from typing import Protocol

from gpu_cluster.config.settings import Settings
from gpu_cluster.config.stack_config import secret_env_values


class Platform(Protocol):
    outputs: dict[str, object]


def build_platform(settings: Settings) -> Platform:
    secret_env = secret_env_values(settings)
    # Imported here so a stack only loads the SDK modules its platform uses.
    if settings.platform == "openshift":
        from gpu_cluster.components.openshift import OpenShiftPlatform

        return OpenShiftPlatform("gpu-cluster", settings, secret_env)
    from gpu_cluster.components.gke import GkePlatform

    return GkePlatform("gpu-cluster", settings, secret_env)
