"""Read this project's stack config from the Pulumi runtime (the one place that does)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pulumi
import pulumi.runtime
import pulumi.runtime.config

from components.settings import (
    PROJECT,
    SECRET_ENV_KEY,
    Settings,
    decode_config,
    load_settings,
)


def project_config() -> tuple[dict[str, str], list[str]]:
    """Every `gpu-cluster:<key>` the engine handed the program (keys without the prefix), and
    the fully qualified keys that are secret.

    Read whole (not key by key) so that a misspelled key is reported instead of ignored.
    """
    merged = {**pulumi.runtime.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    prefix = PROJECT + ":"
    config = {k[len(prefix) :]: v for k, v in merged.items() if k.startswith(prefix)}
    secret = [f"{prefix}{k}" for k in config if pulumi.runtime.is_config_secret(f"{prefix}{k}")]
    return config, secret


def settings_from(config: Mapping[str, str], secret_keys: Collection[str]) -> Settings:
    """Validated settings from an engine-style config map (keys without the prefix)."""
    return load_settings(decode_config(config, secret_keys))


def read_settings() -> Settings:
    return settings_from(*project_config())


def secret_env_values(settings: Settings) -> pulumi.Output[dict[str, str]] | None:
    """The `secretEnv` tokens, as a Pulumi secret (never a plain value)."""
    if not settings.secret_env:
        return None
    values: pulumi.Output[dict[str, str]] = pulumi.Config(PROJECT).require_secret_object(
        SECRET_ENV_KEY
    )
    return values
