"""Read this project's stack config from the Pulumi runtime (the one place that does)."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType

import pulumi
import pulumi.runtime
import pulumi.runtime.config
import pulumi_kubernetes
import yaml
from pydantic.alias_generators import to_camel

from gpu_cluster.components.gcp_sdk import gcp_sdk
from gpu_cluster.config.dates import AsOf, live
from gpu_cluster.config.loading import (
    CODE_SYNC_KEY,
    SECRET_ENV_KEY,
    settings_from,
)
from gpu_cluster.config.messages import ConfigError
from gpu_cluster.config.providers import misplaced_stack_file_keys
from gpu_cluster.config.schema import PROJECT, Settings
from gpu_cluster.plan.codesync import SECRET_SOURCE_KEYS
from gpu_cluster.plan.outputs import KUBECONFIG_KEY, TARGET_FLAGS, is_kubeconfig_file, kube_target


def engine_config_map() -> tuple[dict[str, str], list[str]]:
    """Every config key the engine handed the program (fully qualified), and the secret ones.

    Read whole, every namespace (not key by key), so that a misspelt key or namespace is
    reported instead of ignored."""
    merged = {**pulumi.runtime.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    secret = sorted(k for k in merged if pulumi.runtime.is_config_secret(k))
    return merged, secret


def stack_kube_target() -> tuple[tuple[str, ...], bool]:
    """The oc flags naming the cluster the default kubernetes provider deploys to, which an
    OpenShift stack's commands carry (outputs.kube_target), and whether the stack holds any of
    them as a secret. A kubeconfig file is named by its absolute path, `~` expanded as the
    provider expands it: the commands are pasted in other directories and quoted shells."""
    config, secret = engine_config_map()
    named = {key: config[key] for key, _ in TARGET_FLAGS if config.get(key)}
    kubeconfig = named.get(KUBECONFIG_KEY)
    if kubeconfig is not None and is_kubeconfig_file(kubeconfig):
        named[KUBECONFIG_KEY] = os.path.abspath(os.path.expanduser(kubeconfig))
    return kube_target(named), bool(set(named) & set(secret))


def _setting_names(provider_args: type) -> frozenset[str]:
    """A provider's config keys: its Provider's arguments, camelCase as the stack file spells
    them (the default provider reads `<provider>:<argument>`)."""
    names = inspect.signature(provider_args).parameters
    return frozenset(to_camel(n) for n in names if n not in ("self", "__self__"))


# Each default provider's SDK: pulumi-gcp is optional (gcp_sdk.py), so it is imported only when
# the gcp provider's settings are asked for.
_PROVIDER_SDKS: dict[str, Callable[[], ModuleType]] = {
    "kubernetes": lambda: pulumi_kubernetes,
    "gcp": gcp_sdk,
}


@functools.cache
def _provider_setting_names(provider: str) -> frozenset[str]:
    return _setting_names(_PROVIDER_SDKS[provider]().ProviderArgs)


class _ProviderSettings(Mapping[str, frozenset[str]]):
    """Each default provider's setting names, read from its SDK when first asked for. Asking
    for gcp's where pulumi-gcp is not installed raises GcpSdkMissingError (a ConfigError naming the
    install command): settings_from asks for the stack's platform's provider first thing."""

    def __getitem__(self, provider: str) -> frozenset[str]:
        return _provider_setting_names(provider)

    def __iter__(self) -> Iterator[str]:
        return iter(_PROVIDER_SDKS)

    def __len__(self) -> int:
        return len(_PROVIDER_SDKS)


PROVIDER_SETTINGS = _ProviderSettings()


def stack_file_problems(project_dir: Path, stack: str) -> list[str]:
    """Keys of the stack's file that are not Pulumi's (the engine never passes them on, so only
    the file shows them); none when the file is elsewhere (stackConfigDir, Pulumi Cloud)."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        return []
    try:
        # Only its top-level keys are looked at: libyaml's parser where PyYAML has it (the same
        # mapping, a tenth of the pure-Python parser's time, which every program run pays).
        data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, yaml.YAMLError):
        return []  # the CLI read it; how it reads YAML is offline/stack_yaml.py's concern
    return misplaced_stack_file_keys(path.name, data) if isinstance(data, dict) else []


# The date read_settings checks against, when whoever runs the program pinned one (the
# offline render runs it in-process with its --as-of); unset under `pulumi up`: today's.
_PINNED: ContextVar[AsOf | None] = ContextVar("gpu_cluster_as_of", default=None)


@contextlib.contextmanager
def checked_as_of(as_of: AsOf) -> Iterator[None]:
    """The program run inside checks its config as of `as_of`."""
    token = _PINNED.set(as_of)
    try:
        yield
    finally:
        _PINNED.reset(token)


def read_settings() -> Settings:
    problems = stack_file_problems(Path.cwd(), pulumi.get_stack())
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    as_of = _PINNED.get() or live()
    settings, warnings = settings_from(
        *engine_config_map(), PROVIDER_SETTINGS, as_of=as_of, project=pulumi.get_project()
    )
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
