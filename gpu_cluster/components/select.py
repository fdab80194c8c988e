"""Pick the platform component the stack asks for. Only this module imports both platforms, and
neither imports it back (the arguments they share: shared_args.py)."""

from __future__ import annotations

from typing import Protocol

from gpu_cluster.components.gcp_sdk import gcp_sdk
from gpu_cluster.components.stack_config import secret_env_values, stack_kube_target
from gpu_cluster.config.schema import Settings


class Platform(Protocol):
    outputs: dict[str, object]


def build_platform(settings: Settings) -> Platform:
    secret_env = secret_env_values(settings)
    # Imported here so a stack only loads the SDK modules its platform uses.
    if settings.platform == "openshift":
        from gpu_cluster.components.openshift import OpenShiftPlatform

        return OpenShiftPlatform("gpu-cluster", settings, secret_env, *stack_kube_target())
    gcp_sdk()  # refused with the install command, not a ModuleNotFoundError from deep inside
    from gpu_cluster.components.gke import GkePlatform

    return GkePlatform("gpu-cluster", settings, secret_env)
