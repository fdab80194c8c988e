"""Read this project's stack config from the Pulumi runtime (the one place that does)."""

from __future__ import annotations

import pulumi
import pulumi.runtime
import pulumi.runtime.config

from gpu_cluster.config.loading import (
    CODE_SYNC_KEY,
    SECRET_ENV_KEY,
    settings_from,
)
from gpu_cluster.config.schema import PROJECT, Settings
from gpu_cluster.plan.codesync import SECRET_SOURCE_KEYS


def engine_config_map() -> tuple[dict[str, str], list[str]]:
    """Every config key the engine handed the program (fully qualified), and the secret ones.

    Read whole, every namespace (not key by key), so that a misspelt key or namespace is
    reported instead of ignored."""
    merged = {**pulumi.runtime.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    secret = sorted(k for k in merged if pulumi.runtime.is_config_secret(k))
    return merged, secret


def read_settings() -> Settings:
    settings, warnings = settings_from(*engine_config_map())
    for warning in warnings:
        pulumi.log.warn(warning)
    return settings


def secret_env_values(settings: Settings) -> pulumi.Output[dict[str, str]] | None:
    """The `secretEnv` tokens, as a Pulumi secret (never a plain value)."""
    if not settings.secret_env:
        return None
    values: pulumi.Output[dict[str, str]] = pulumi.Config(PROJECT).require_secret_object(
        SECRET_ENV_KEY
    )
    return values


def code_sync_secret(settings: Settings) -> pulumi.Output[dict[str, str]] | None:
    """A secret `codeSync`'s repository, ref and period as one Pulumi secret for a Secret's
    data; None when codeSync is plain (or unset)."""
    cs = settings.code_sync
    if cs is None or not settings.is_secret(CODE_SYNC_KEY):
        return None
    return pulumi.Output.secret({key: getattr(cs, key) for _, key in SECRET_SOURCE_KEYS})
