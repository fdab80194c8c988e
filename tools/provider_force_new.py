"""Write tests/vendor/gcp_force_new.json: the ForceNew fields of the Google Cloud resources the
program registers, read from the Terraform provider's source that pulumi-gcp bridges.

    python -m tools.provider_force_new SOURCE          # rewrite the file
    python -m tools.provider_force_new SOURCE --check  # exit 1 if the committed file differs

SOURCE is a checkout of hashicorp/terraform-provider-google-beta at the commit `SOURCE` below
names (the folder holding `google-beta/`). The module proxy serves neither that module nor
pulumi-gcp's provider module ("This module version is not available"), so the source is read
from a checkout. tools/forcenew (Go, go/ast) finds each resource where the provider registers
it and prints its `ForceNew: true` fields; this names them as the Pulumi bridge does
(pulumi-terraform-bridge pkg/tfbridge/internal/naming: camelCase, lists and sets without
MaxItems 1 in the plural) and checks each name against the installed pulumi_gcp.
tests/test_gcp_force_new.py holds gpu_cluster/offline/replacements.py GCP_REPLACE_ON to it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi_gcp

from tools.force_new_file import ROOT, go_reader, run_main

TARGET = ROOT / "tests" / "vendor" / "gcp_force_new.json"

# pulumi/pulumi-gcp at 14da5bc83e (2026-08-21, "Upgrade terraform-provider-google-beta to
# v7.45.0"), the newest pulumi-gcp source to be had here, pins its `upstream` submodule there;
# the installed pulumi_gcp 10.2.0 is newer, and its source is not to be had (no tag in the
# snapshot, module proxy 403).
SOURCE = {
    "repository": "hashicorp/terraform-provider-google-beta",
    "tag": "v7.45.0",
    "commit": "3dc173a397749158369ea839a2890d89f8c9c370",
    "bridgedBy": "pulumi/pulumi-gcp 14da5bc83e provider/go.mod (replace => ../upstream)",
}
PACKAGES = (
    "services/compute",
    "services/container",
    "services/lustre",
    "services/monitoring",
    "services/resourcemanager",
    "services/servicenetworking",
    "services/storage",
    "tpgiamresource",
    "tpgresource",
)
# Pulumi type -> Terraform resource (pulumi-gcp provider/resources.go at 14da5bc83e).
RESOURCES = {
    "gcp:compute/firewall:Firewall": "google_compute_firewall",
    "gcp:compute/globalAddress:GlobalAddress": "google_compute_global_address",
    "gcp:compute/network:Network": "google_compute_network",
    "gcp:compute/resourcePolicy:ResourcePolicy": "google_compute_resource_policy",
    "gcp:compute/router:Router": "google_compute_router",
    "gcp:compute/routerNat:RouterNat": "google_compute_router_nat",
    "gcp:compute/subnetwork:Subnetwork": "google_compute_subnetwork",
    "gcp:container/cluster:Cluster": "google_container_cluster",
    "gcp:container/nodePool:NodePool": "google_container_node_pool",
    "gcp:lustre/instance:Instance": "google_lustre_instance",
    "gcp:monitoring/dashboard:Dashboard": "google_monitoring_dashboard",
    "gcp:projects/iAMMember:IAMMember": "google_project_iam_member",
    "gcp:serviceaccount/account:Account": "google_service_account",
    "gcp:servicenetworking/connection:Connection": "google_service_networking_connection",
    "gcp:storage/bucket:Bucket": "google_storage_bucket",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "google_storage_bucket_iam_member",
}


def _plural(name: str) -> str:
    """gedex/inflector Pluralize, for the names the provider uses (checked against the SDK)."""
    if name.endswith("s") and not name.endswith("ss"):
        return name
    if name.endswith(("ss", "sh", "ch", "x")):
        return name + "es"
    if re.search(r"[^aeiou]y$", name):
        return name[:-1] + "ies"
    return name + "s"


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def pulumi_path(path: list[str], many: list[bool]) -> str:
    """A Terraform field path as gpu_cluster.offline.replacements writes input paths:
    `nodeConfig.guestAccelerators[*].type`."""
    out = ""
    for i, (name, is_many) in enumerate(zip(path, many, strict=True)):
        out += ("." if i else "") + _camel(_plural(name) if is_many else name)
        if is_many and i < len(path) - 1:
            out += "[*]"
    return out


def _sdk_names(module: str) -> set[str]:
    """Every property name the installed pulumi_gcp module declares (its getters)."""
    names: set[str] = set()
    for path in (Path(pulumi_gcp.__file__).parent / module).glob("*.py"):
        text = path.read_text()
        names.update(re.findall(r'@pulumi\.getter\(name="(\w+)"\)', text))
        names.update(re.findall(r"@pulumi\.getter\n    def (\w+)\(self\)", text))
    return names


def extract(source: Path) -> dict[str, Any]:
    """The file's content: the source, and per Pulumi type its ForceNew fields -> file:line."""
    dirs = [str(source / "google-beta" / p) for p in PACKAGES]
    resources: dict[str, Any] = {}
    with go_reader("forcenew") as tool:
        for type_, tf_name in sorted(RESOURCES.items()):
            out = subprocess.run(
                [str(tool), *dirs, "--", tf_name], check=True, capture_output=True, text=True
            ).stdout
            known = _sdk_names(type_.split(":")[1].split("/")[0])
            fields, blocks = {}, []
            for line in out.splitlines():
                f = json.loads(line)
                path = pulumi_path(f["path"], f["many"])
                missing = [p for p in re.split(r"\.|\[\*\]\.?", path) if p and p not in known]
                if missing:
                    raise SystemExit(f"{type_}: {path}: {missing} not in pulumi_gcp")
                fields[path] = f"{f['file']}:{f['line']}"
                if f["block"]:
                    blocks.append(path)
            resources[type_] = {"terraform": tf_name, "forceNew": fields, "blocks": blocks}
    return {"source": SOURCE, "resources": resources}


def main() -> int:
    description = (__doc__ or "").splitlines()[0]
    return run_main(description, "terraform-provider-google-beta checkout", TARGET, extract)


if __name__ == "__main__":
    sys.exit(main())
