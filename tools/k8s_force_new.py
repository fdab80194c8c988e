"""Write tests/vendor/k8s_force_new.json: pulumi-kubernetes' replacement rules, read from the
provider's source.

    python -m tools.k8s_force_new SOURCE          # rewrite the file
    python -m tools.k8s_force_new SOURCE --check  # exit 1 if the committed file differs

SOURCE is the provider module at the version `SOURCE` below names (the folder holding
`pkg/provider/diff.go`): the one the real tier builds, which `go` keeps in its module cache
(`~/go/pkg/mod/github.com/pulumi/pulumi-kubernetes/provider/v4@<version>`), or `provider/` of a
pulumi/pulumi-kubernetes checkout. tools/k8sforcenew (Go, go/ast) reads the method
`forceNewProperties` and the table `forceNew` it looks kinds up in; this writes them per Pulumi
type (`kubernetes:<group>/<version>:<Kind>`, the core group as `core`) with the paths as
gpu_cluster/offline/replacements.py writes them (`spec.selector`: a change at or below it
replaces, as the provider's jsonpath match on the merge patch does).

The Secret and ConfigMap rule is a branch of the method, not the table: unless the provider's
`enableSecretMutable` (`enableConfigMapMutable`) is true and the object does not set
`immutable: true`, their data replaces them ("whenImmutable"). The Secret branch comes before
the table lookup, so it replaces the table's Secret entry; the ConfigMap branch comes after it,
so it applies to ConfigMaps only while the table has no ConfigMap entry (checked here). A
condition this tool does not know stops it: a new provider rule needs reading, not guessing.
tests/test_k8s_force_new.py holds K8S_IDENTITY and K8S_REPLACE_ON to the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tools.force_new_file import ROOT, go_reader, run_main

TARGET = ROOT / "tests" / "vendor" / "k8s_force_new.json"

# The provider module tools/realtier/build.py builds (PROVIDER_MODULE_VERSION): pulumi-kubernetes
# v4.25.0's commit. diff.go's rules are the same at 94977969 (v4.32.0-27-g94977969, 2026-07-01,
# the newest commit to be had here): `git diff f47bc2d6 94977969 -- provider/pkg/provider/diff.go`
# changes the import order and writes both conditions' negations out (De Morgan), both spellings
# known below.
SOURCE = {
    "repository": "pulumi/pulumi-kubernetes",
    "path": "provider/pkg/provider/diff.go",
    "module": "github.com/pulumi/pulumi-kubernetes/provider/v4@v4.0.0-20260115033456-f47bc2d6f199",
    "tag": "v4.25.0",
    "commit": "f47bc2d6f1996444d11c12b4ef083b82585f7c07",
    "sameRulesAt": "94977969d64112b04e19945818a7d5d5f38f631d",
}

# The branch conditions of forceNewProperties, as written at the commits above -> (kind, the
# provider option that makes the kind's data mutable).
IMMUTABLE_DATA_CONDITIONS = {
    "clients.IsSecret(obj) && !(k.enableSecretMutable && !clients.IsImmutable(obj))": (
        "Secret",
        "enableSecretMutable",
    ),
    "clients.IsSecret(obj) && (!k.enableSecretMutable || clients.IsImmutable(obj))": (
        "Secret",
        "enableSecretMutable",
    ),
    "clients.IsConfigMap(obj) && !(k.enableConfigMapMutable && !clients.IsImmutable(obj))": (
        "ConfigMap",
        "enableConfigMapMutable",
    ),
    "clients.IsConfigMap(obj) && (!k.enableConfigMapMutable || clients.IsImmutable(obj))": (
        "ConfigMap",
        "enableConfigMapMutable",
    ),
}
TABLE_BRANCH = "kindExists"


def _paths(found: list[dict[str, Any]]) -> dict[str, str]:
    """{".spec.csi", diff.go:92} -> {"spec.csi": "provider/pkg/provider/diff.go:92"}."""
    folder = SOURCE["path"].rsplit("/", 1)[0]
    return {p["path"].removeprefix("."): f"{folder}/{p['file']}:{p['line']}" for p in found}


def _pulumi_type(group: str, version: str, kind: str) -> str:
    return f"kubernetes:{group}/{version}:{kind}"


def rules(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The file's content from tools/k8sforcenew's output."""
    always = [_paths(r["paths"]) for r in lines if r["rule"] == "always"]
    if len(always) != 1:
        raise SystemExit(f"expected one `props :=` in forceNewProperties, found {len(always)}")
    table = [r for r in lines if r["rule"] == "table"]
    # The core group is listed under "core" and "" (the legacy name), one table for both.
    by_group = {
        (r["group"], r["version"], r["kind"]): _paths(r["paths"]) for r in table if r.get("group")
    }
    legacy = {
        ("core", r["version"], r["kind"]): _paths(r["paths"]) for r in table if not r.get("group")
    }
    if any(by_group.get(key) != paths for key, paths in legacy.items()):
        raise SystemExit('the "" and "core" groups of forceNew differ')
    kinds = {_pulumi_type(*key): paths for key, paths in sorted(by_group.items())}
    immutable: dict[str, Any] = {}
    after_table = False
    for branch in (r for r in lines if r["rule"] == "branch"):
        if branch["condition"] == TABLE_BRANCH and branch.get("table"):
            after_table = True
            continue
        if branch["condition"] not in IMMUTABLE_DATA_CONDITIONS:
            raise SystemExit(f"unknown forceNewProperties branch: {branch['condition']}")
        kind, option = IMMUTABLE_DATA_CONDITIONS[branch["condition"]]
        type_ = _pulumi_type("core", "v1", kind)
        if after_table and type_ in kinds:
            continue  # the table's entry wins; this branch never runs for the kind
        immutable[type_] = {"unlessMutableBy": option, "forceNew": _paths(branch["paths"])}
    if not after_table:
        raise SystemExit("forceNewProperties has no branch that reads the table")
    return {"source": SOURCE, "always": always[0], "kinds": kinds, "whenImmutable": immutable}


def extract(source: Path) -> dict[str, Any]:
    package = source / "pkg" / "provider"
    with go_reader("k8sforcenew") as tool:
        out = subprocess.run(
            [str(tool), str(package)], check=True, capture_output=True, text=True
        ).stdout
    return rules([json.loads(line) for line in out.splitlines()])


def main() -> int:
    description = (__doc__ or "").splitlines()[0]
    return run_main(description, "the pulumi-kubernetes provider module", TARGET, extract)


if __name__ == "__main__":
    sys.exit(main())
