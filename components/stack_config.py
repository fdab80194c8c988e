"""Read this project's stack config from the Pulumi runtime (the one place that does)."""

from __future__ import annotations

import pulumi.runtime
import pulumi.runtime.config

from components.settings import PROJECT, Settings, decode_config, load_settings


def project_config() -> dict[str, str]:
    """Every `gpu-cluster:<key>` the engine handed the program, keys without the prefix.

    Read whole (not key by key) so that a misspelled key is reported instead of ignored.
    """
    merged = {**pulumi.runtime.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    prefix = PROJECT + ":"
    return {k[len(prefix) :]: v for k, v in merged.items() if k.startswith(prefix)}


def read_settings() -> Settings:
    return load_settings(decode_config(project_config()))
