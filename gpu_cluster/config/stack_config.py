"""Read this project's stack config from the Pulumi runtime (the one place that does)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pulumi
import pulumi.runtime
import pulumi.runtime.config

from gpu_cluster.config.settings import (
    CODE_SYNC_KEY,
    PROJECT,
    SECRET_ENV_KEY,
    Settings,
    check_namespaces,
    decode_config,
    load_settings,
)
from gpu_cluster.plan.codesync import SECRET_SOURCE_KEYS


def engine_config_map() -> tuple[dict[str, str], list[str]]:
    """Every config key the engine handed the program (fully qualified), and the secret ones.

    Read whole, every namespace (not key by key), so that a misspelt key or namespace is
    reported instead of ignored."""
    merged = {**pulumi.runtime.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    secret = sorted(k for k in merged if pulumi.runtime.is_config_secret(k))
    return merged, secret


def settings_from(
    config: Mapping[str, str], secret_keys: Collection[str]
) -> tuple[Settings, list[str]]:
    """Validated settings and warnings from an engine-style config map (fully qualified keys,
    every namespace); raises ConfigError."""
    warnings = check_namespaces(config)
    prefix = PROJECT + ":"
    own = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    return load_settings(decode_config(own, secret_keys), secret_keys), warnings


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
