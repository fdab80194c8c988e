"""Keys outside the project's namespace that the stack would silently lose: provider settings
the platform's program never reads, misspelt provider settings, and keys written beside
`config:` in a stack file instead of under it."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

# The provider whose default instance each platform's program uses: on OpenShift every
# Kubernetes object goes through the default `kubernetes` provider (kubernetes:context picks the
# cluster); on GKE every GCP resource through the default `gcp` provider, while the Kubernetes
# objects go through an explicit provider built from the new cluster's kubeconfig, which reads
# no `kubernetes:` key.
DEFAULT_PROVIDER = {"openshift": "kubernetes", "gke": "gcp"}
# Top-level keys of a stack file: pulumi/pulumi sdk/go/common/workspace/project.go ProjectStack
# (v3.259.0). The CLI drops any other key when it rewrites the file and never passes it on.
STACK_FILE_KEYS = ("secretsprovider", "encryptedkey", "encryptionsalt", "config", "environment")
# A key this close to a provider setting is taken for a misspelling of it.
_TYPO_DISTANCE = 2


def provider_key_problems(
    keys: Iterable[str], platform: object, known: Mapping[str, Collection[str]]
) -> list[str]:
    """Refusals for keys of a provider namespace (fully qualified) the platform does not read,
    and for near misses of a setting in `known` (provider -> its setting names). The platform's
    provider's names are looked up first, whatever the keys: where `known` reads them from an
    SDK that is not installed, its refusal comes before any other (components/gcp_sdk.py)."""
    used = DEFAULT_PROVIDER.get(str(platform))
    settings = known.get(used, ()) if used is not None else ()
    out: list[str] = []
    for key in sorted(keys):
        namespace, _, name = key.partition(":")
        if namespace not in DEFAULT_PROVIDER.values() or used is None:
            continue
        if namespace != used:
            reader = [p for p, n in DEFAULT_PROVIDER.items() if n == namespace]
            out.append(
                f"{key} is only read on platform {reader[0]!r}; this stack is {platform!r}, "
                f"whose program reads only {used}: provider settings; remove it"
            )
            continue
        near = [s for s in settings if edit_distance(name.lower(), s.lower()) <= _TYPO_DISTANCE]
        if name not in settings and near:
            meant = min(near, key=lambda s: edit_distance(name, s))
            out.append(
                f"{key} is not a setting of the {namespace} provider (a typo of "
                f"{namespace}:{meant}?); it would be ignored"
            )
    return out


def misplaced_stack_file_keys(file_name: str, top_level: Iterable[object]) -> list[str]:
    """Refusals for top-level keys of a stack file that are not Pulumi's: a config key written
    beside `config:` instead of under it reaches nobody."""
    return [
        f"{file_name}: {key} is beside `config:`, not under it; the Pulumi CLI ignores it (and "
        f"drops it when it rewrites the file): indent it under `config:`"
        if isinstance(key, str) and ":" in key
        else f"{file_name}: top-level key {key!r} is not part of a stack file (allowed: "
        f"{', '.join(STACK_FILE_KEYS)})"
        for key in top_level
        if key not in STACK_FILE_KEYS
    ]


def edit_distance(a: str, b: str) -> int:
    """Optimal-string-alignment distance: insertions, deletions, substitutions, swaps."""
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cost = min(cost, rows[-2][j - 2] + 1)
            row.append(cost)
        rows.append(row)
    return rows[-1][-1]
