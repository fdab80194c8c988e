"""Pick the platform component the stack asks for."""

from __future__ import annotations

from typing import Protocol

from components.settings import Settings


class Platform(Protocol):
    outputs: dict[str, object]


def build_platform(settings: Settings) -> Platform:
    # Imported here so a stack only loads the SDK modules its platform uses.
    if settings.platform == "openshift":
        from components.openshift import OpenShiftPlatform

        return OpenShiftPlatform("gpu-cluster", settings)
    from components.gke import GkePlatform

    return GkePlatform("gpu-cluster", settings)
