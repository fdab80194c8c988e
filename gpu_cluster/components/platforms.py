"""Pick the platform component the stack asks for."""

from __future__ import annotations

from typing import Protocol

from gpu_cluster.components.namespace import TrainingNamespaceArgs
from gpu_cluster.components.workload import labels, retention_annotations
from gpu_cluster.config.settings import Settings
from gpu_cluster.config.stack_config import secret_env_values


class Platform(Protocol):
    outputs: dict[str, object]


def namespace_args(s: Settings) -> TrainingNamespaceArgs | None:
    """The stack's namespace, unless it is only referenced (namespaceMode: reference)."""
    if s.namespace_mode == "reference":
        return None
    return TrainingNamespaceArgs(
        namespace=s.namespace,
        mode="adopt" if s.namespace_mode == "adopt" else "create",
        labels=labels(s),
        annotations=retention_annotations(s),
        retain_on_delete=s.storage.retain_on_delete,
    )


def build_platform(settings: Settings) -> Platform:
    secret_env = secret_env_values(settings)
    # Imported here so a stack only loads the SDK modules its platform uses.
    if settings.platform == "openshift":
        from gpu_cluster.components.openshift import OpenShiftPlatform

        return OpenShiftPlatform("gpu-cluster", settings, secret_env)
    from gpu_cluster.components.gke import GkePlatform

    return GkePlatform("gpu-cluster", settings, secret_env)
