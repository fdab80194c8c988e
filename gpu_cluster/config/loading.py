"""From the engine's config map to validated Settings: decoding, namespaces, secrets."""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Collection, Iterable, Mapping
from decimal import Decimal
from typing import Any, NoReturn

from pydantic import ValidationError
from pydantic_core import InitErrorDetails

from gpu_cluster.config.capacity import flex_start_gang_warnings
from gpu_cluster.config.dates import AsOf
from gpu_cluster.config.gdr import gdr_warnings
from gpu_cluster.config.gke import (
    cluster_problems,
    image_streaming_warnings,
    net_plugin_warnings,
    placeholder_warnings,
    submitter_group_warnings,
    support_window,
)
from gpu_cluster.config.messages import ConfigError, clipped, format_errors
from gpu_cluster.config.monitoring_rules import run_metrics_warnings
from gpu_cluster.config.openshift_warnings import rdma_warnings
from gpu_cluster.config.providers import edit_distance, provider_key_problems
from gpu_cluster.config.reads import dormant_sections, read_rule
from gpu_cluster.config.rules import cross_field_problems
from gpu_cluster.config.schema import PROJECT, Settings
from gpu_cluster.config.workload import kind_warnings, opt_in_warnings, runner_warnings

SECRET_ENV_KEY = "secretEnv"
# Top-level keys a later version replaced, each with the refusal that names its successor.
RENAMED_KEYS = {
    "createNamespace": "gpu-cluster:createNamespace was replaced by namespaceMode: use "
    "namespaceMode: create (was true) or reference (was false), or adopt to import an existing "
    "namespace"
}
CODE_SYNC_KEY = "codeSync"
# Namespaces a stack may hold besides the project's: the providers the program uses, and the
# engine's own (`pulumi:tags`, `pulumi:disable-default-providers`).
PROVIDER_NAMESPACES = ("kubernetes", "gcp", "pulumi")
# How far a namespace may be from the project's own (or `kubernetes`) to be refused as a typo
# of it; shorter names such as `gcp` have too many legitimate neighbours to guess.
_TYPO_DISTANCE = 3
_PROVIDER_TYPO_DISTANCE = {"kubernetes": 2}
# The engine carries numbers as IEEE doubles: larger integers would change on the way.
MAX_EXACT_INT = 2**53 - 1
# How deep a config value may nest lists and objects. The schema's deepest key,
# rdma.nics[0].routes[0], is 4 levels down; json, PyYAML, pydantic and the checks here recurse
# once per level, so a value nested thousands deep would end in a RecursionError.
MAX_DEPTH = 32
TOO_DEEP = f"nested more than {MAX_DEPTH} levels deep (config keys nest at most 4)"
# Top-level keys whose values may be Pulumi secrets: each reaches the cluster only through a
# Kubernetes Secret (components/workload/shared_objects.py). Every other key becomes names, specs
# or outputs in plain text.
SECRET_CAPABLE_KEYS = (SECRET_ENV_KEY, CODE_SYNC_KEY)
# Parts of a secret `codeSync` that cannot stay secret: the sidecar's image, and the name of a
# Secret the pod refers to; a secret codeSync leaves them at their defaults.
_CODE_SYNC_PLAIN_ONLY = ("image", "credentialsSecret")


def check_namespaces(keys: Iterable[str], project: str = PROJECT) -> list[str]:
    """Warnings for config namespaces nothing reads; ConfigError for a key under a misspelt
    namespace of the package, the project or its providers (the program would silently never
    see it). `project`: the Pulumi project's name, the namespace of a program's own keys; the
    package's settings are `gpu-cluster:` keys in any project, as a provider's are."""
    problems: list[str] = []
    ignored: dict[str, list[str]] = {}
    read = tuple(dict.fromkeys((PROJECT, project, *PROVIDER_NAMESPACES)))
    near = {PROJECT: _TYPO_DISTANCE, project: _TYPO_DISTANCE, **_PROVIDER_TYPO_DISTANCE}
    for key in sorted(keys):
        namespace = key.partition(":")[0]
        if namespace in read:
            continue
        folded = re.sub(r"[-_.\s]", "", namespace.lower())
        meant = next(
            (
                known
                for known, limit in near.items()
                if folded == known.replace("-", "")
                or edit_distance(namespace.lower(), known) <= limit
            ),
            None,
        )
        if meant is not None:
            problems.append(
                f"{key}: namespace {namespace!r} is not {meant!r} (a typo?); "
                f"this key would be ignored, write it as {meant}:{key.partition(':')[2]}"
            )
        else:
            ignored.setdefault(namespace, []).append(key)
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    return [
        f"{', '.join(found)}: namespace {namespace!r} is not read by this program or its "
        f"providers ({', '.join(read)}); ignored"
        for namespace, found in ignored.items()
    ]


def _settings_under_project(config: Iterable[str], project: str) -> list[str]:
    """Keys of another project's namespace named as this package's settings are
    (`myproject:nodes`): the settings' own namespace is `gpu-cluster` in every project."""
    if project == PROJECT:
        return []
    names = {f.alias or n for n, f in Settings.model_fields.items()}
    prefix = project + ":"
    return sorted(
        k
        for k in config
        if k.startswith(prefix) and re.split(r"[.\[]", k[len(prefix) :])[0] in names
    )


def number_problems(value: Any, path: str) -> list[str]:
    """A problem for each number in `value` the engine cannot carry exactly."""
    if isinstance(value, bool):
        return []
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{PROJECT}:{path}: not a finite number"]
    if isinstance(value, (int, float, Decimal)) and not -MAX_EXACT_INT <= value <= MAX_EXACT_INT:
        return [f"{PROJECT}:{path}: number too large (at most 2^53 - 1, the engine's exact range)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in number_problems(v, f"{path}.{k}")]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in number_problems(v, f"{path}[{i}]")]
    return []


def _secret_problems(config: Mapping[str, Any], secret: Collection[str]) -> list[str]:
    """Secret keys the program cannot keep secret, and credentials in plain config."""
    out: list[str] = []
    for key in sorted(secret):
        if key not in config:
            continue
        if key not in SECRET_CAPABLE_KEYS:
            out.append(
                f"{PROJECT}:{key} is set as a secret, but its value becomes resource names, "
                f"specs or outputs in plain text; set it without --secret (keys that may be "
                f"secret: {', '.join(SECRET_CAPABLE_KEYS)})"
            )
        elif key == SECRET_ENV_KEY:
            out.extend(_secret_env_shape_problems(config[key]))
        elif key == CODE_SYNC_KEY and isinstance(config[key], dict):
            out.extend(
                f"{PROJECT}:{CODE_SYNC_KEY}.{part} cannot be secret (it names an image or a "
                f"Secret the pod refers to); leave it out of a secret {CODE_SYNC_KEY}"
                for part in _CODE_SYNC_PLAIN_ONLY
                if part in config[key]
            )
    code_sync = config.get(CODE_SYNC_KEY)
    if CODE_SYNC_KEY not in secret and isinstance(code_sync, dict):
        repo = code_sync.get("repo")
        if isinstance(repo, str) and _url_credentials(repo):
            out.append(
                f"{PROJECT}:{CODE_SYNC_KEY}.repo holds credentials in plain text (value not "
                f"shown); set it with `pulumi config set --secret --path {CODE_SYNC_KEY}.repo URL`"
                f" or use {CODE_SYNC_KEY}.credentialsSecret"
            )
    if SECRET_ENV_KEY in config and SECRET_ENV_KEY not in secret:
        out.append(
            f"{PROJECT}:{SECRET_ENV_KEY} holds tokens in plain text; "
            f"set each with `pulumi config set --secret --path {SECRET_ENV_KEY}.NAME`"
        )
    return out


def _secret_env_shape_problems(value: Any) -> list[str]:
    """A secret `secretEnv` must map names to tokens (text). Neither the value nor its part
    is shown: a token is the secret, and so is anything written where names belong."""
    usage = f"set each token with `pulumi config set --secret --path {SECRET_ENV_KEY}.NAME TOKEN`"
    if not isinstance(value, dict):
        return [
            f"{PROJECT}:{SECRET_ENV_KEY} must be an object of NAME: token pairs, not "
            f"{_json_type(value)} (value not shown); {usage}"
        ]
    return [
        f"{PROJECT}:{SECRET_ENV_KEY}.{clipped(name)}: a token must be text, not "
        f"{_json_type(token)} (value not shown); {usage}"
        for name, token in value.items()
        if not isinstance(token, str)
    ]


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float, Decimal)):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "text" if isinstance(value, str) else "null"


def _url_credentials(url: str) -> bool:
    """Whether a repository URL carries a password or token (`https://user:token@host/...`,
    `https://token@host/...`); ssh's `git@host` names a user, not a credential."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return False
    userinfo, at, _ = rest.partition("/")[0].rpartition("@")
    return bool(at) and (scheme != "ssh" or ":" in userinfo)


# Strings (whose brackets do not nest anything) and brackets.
_JSON_NESTING = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')


def nesting_depth(text: str) -> int:
    """How deep JSON text nests arrays and objects, read without parsing it (json.loads
    recurses once per level)."""
    depth = deepest = 0
    for token in _JSON_NESTING.findall(text):
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def _json_int(digits: str) -> int | Decimal:
    # Python refuses to convert more than 4300 digits to an int (ValueError); an integer that
    # long is far beyond MAX_EXACT_INT, and a Decimal lets number_problems say so.
    return int(digits) if len(digits) <= 20 else Decimal(digits)


def parse_json(text: str) -> Any:
    """Structured config text (an object or a list) as the engine hands it; ValueError when it
    is not JSON. Callers check nesting_depth first: json.loads recurses once per level."""
    return json.loads(text, parse_int=_json_int)


def decode_config(raw: Mapping[str, Any], secret_keys: Collection[str] = ()) -> dict[str, Any]:
    """Turn Pulumi's config map (strings, objects as JSON text) into plain values.

    `raw` maps keys without the project prefix to what the engine hands the program: every
    value is a string and structured values are JSON text; `secret_keys` are fully qualified.
    Refuses values nested deeper than MAX_DEPTH, secret keys the program would show in plain
    text, secrets of a shape their key does not take, credentials outside secrets and numbers
    the engine cannot carry. `secretEnv` keeps only its names (so no error message can ever
    echo a token).
    """
    out: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        if isinstance(value, str) and value[:1] in ("{", "["):
            if nesting_depth(value) > MAX_DEPTH:
                problems.append(f"{PROJECT}:{key}: {TOO_DEEP}")
                continue
            # Not JSON: stays text, and the schema says what the key takes.
            with contextlib.suppress(ValueError):
                value = parse_json(value)
        out[key] = value
    secret = _secret_top_keys(secret_keys)
    problems += _secret_problems(out, secret)
    problems += [p for key, value in out.items() for p in number_problems(value, key)]
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    if SECRET_ENV_KEY in out:
        names = out[SECRET_ENV_KEY]
        out[SECRET_ENV_KEY] = sorted(names) if isinstance(names, dict) else names
    return out


def _secret_top_keys(secret_keys: Collection[str]) -> frozenset[str]:
    prefix = PROJECT + ":"
    return frozenset(k[len(prefix) :] for k in secret_keys if k.startswith(prefix))


def validate_settings(values: Mapping[str, Any]) -> Settings:
    """Settings from config values (the stack file's keys without `gpu-cluster:`), held to the
    schema, each key alone (a replaced key refused first), and then to the rules across keys
    (rules.py). Raises pydantic's
    ValidationError naming the keys; the rules' problems are one error without a location, one
    line each, as a model validator's would be."""
    renamed = [refusal for key, refusal in RENAMED_KEYS.items() if key in values]
    if renamed:
        _refuse(values, renamed)
    settings = Settings.model_validate(values)
    problems = cross_field_problems(settings)
    if problems:
        _refuse(values, problems)
    return settings


def _refuse(values: Mapping[str, Any], problems: list[str]) -> NoReturn:
    """Problems of the whole config: one error without a location, one line each."""
    error = ValueError("\n".join(problems))
    details = InitErrorDetails(type="value_error", loc=(), input=values, ctx={"error": error})
    raise ValidationError.from_exception_data(Settings.__name__, [details])


def load_settings(raw: Mapping[str, Any], secret_keys: Collection[str] = ()) -> Settings:
    """Validate decoded stack config; raise ConfigError naming every bad key. Values of
    `secret_keys` (fully qualified) never appear in a message: format_errors never formats
    what is under them."""
    secret = _secret_top_keys(secret_keys)
    # decode_config left only secretEnv's names, which are not secret.
    masked = secret - {SECRET_ENV_KEY}
    try:
        settings = validate_settings(dict(raw))
    except ValidationError as exc:
        unread = _unread_sections(raw, exc)
        if unread:
            raise ConfigError("invalid stack config:\n  " + "\n  ".join(unread)) from None
        raise ConfigError(format_errors(exc, masked)) from None
    problems = cluster_problems(settings)
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    settings._secret_keys = secret  # set once, right after validation
    return settings


def _unread_sections(raw: Mapping[str, Any], exc: ValidationError) -> list[str]:
    """When every top-level key that fails validation is one the rest of the config does not
    read (`rdma.mtu` set on a GKE stack), that is the answer: completing it would only lead to
    "not read". A dormant section is kept for the way back, so its own problems are."""
    failing = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
    try:
        settings = validate_settings({k: v for k, v in raw.items() if k not in failing})
    except ValidationError:
        return []
    fields = {f.alias or n: f for n, f in Settings.model_fields.items()}
    out = []
    for key in sorted(failing):
        rule = read_rule(fields.get(key))
        if rule is None or rule.applies(settings) or rule.dormant_in(settings) is not None:
            return []
        out.append(rule.refusal(key))
    return out


def settings_from(
    config: Mapping[str, str],
    secret_keys: Collection[str],
    provider_settings: Mapping[str, Collection[str]],
    *,
    as_of: AsOf,
    project: str = PROJECT,
) -> tuple[Settings, list[str]]:
    """Validated settings and warnings from an engine-style config map (fully qualified keys,
    every namespace); raises ConfigError. `provider_settings`: each provider's setting names;
    `as_of`: the date of the date-dependent checks, and whether a support window that has
    ended by then is refused (pinned) or warned about (today's); `project`: the Pulumi
    project the program runs in (its own keys are the program's, not these settings)."""
    warnings = check_namespaces(config, project)
    misplaced = _settings_under_project(config, project)
    if misplaced and f"{PROJECT}:platform" not in config:
        raise ConfigError(
            f"invalid stack config:\n  {', '.join(misplaced)}: the gpu-cluster settings are "
            f"read as {PROJECT}:<key> in any project, not under the project's name "
            f"{project!r}; write them as {PROJECT}:{misplaced[0].partition(':')[2]} and so on"
        )
    platform = config.get(f"{PROJECT}:platform")
    problems = provider_key_problems(config, platform, provider_settings)
    if problems:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(problems))
    prefix = PROJECT + ":"
    own = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    settings = load_settings(decode_config(own, secret_keys), secret_keys)
    ended, ending = support_window(settings, as_of.day)
    if ended and as_of.pinned:
        raise ConfigError("invalid stack config:\n  " + "\n  ".join(ended))
    return settings, [
        *warnings,
        *dormant_sections(settings),
        *ended,
        *ending,
        *image_streaming_warnings(settings),
        *flex_start_gang_warnings(settings),
        *net_plugin_warnings(settings),
        *placeholder_warnings(settings),
        *submitter_group_warnings(settings),
        *opt_in_warnings(settings),
        *runner_warnings(settings),
        *run_metrics_warnings(settings),
        *gdr_warnings(settings),
        *kind_warnings(settings),
        *rdma_warnings(settings),
    ]
