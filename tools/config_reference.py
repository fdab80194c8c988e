"""Write docs/config-reference.md from the stack-config schema, so the reference cannot go stale.

    python -m tools.config_reference          # rewrite docs/config-reference.md
    python -m tools.config_reference --check  # exit 1 if the committed file differs

Every key of `gpu_cluster/config/schema.py` (and the sections it takes from `sections/` and
`storage.py`) gets its type (as the schema spells it), its default, the values it allows (Literal
members, numeric bounds, patterns, length limits), when the stack reads it (the field's `ReadWhen`,
gpu_cluster/config/reads.py) and its description (the field's docstring).
tests/test_config_reference.py holds the committed file to this output.
"""

from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from gpu_cluster.config import schema, storage
from gpu_cluster.config.netmodes import mode_names
from gpu_cluster.config.reads import read_rule
from gpu_cluster.config.sections import checks, compute, gcp, monitoring, network, runs, workload
from gpu_cluster.facts.machines import MACHINES

# The section modules below the root (config/sections/).
SECTION_MODULES = (compute, workload, runs, network, checks, monitoring, gcp)
ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "config-reference.md"
COMMAND = "python -m tools.config_reference"

# The value types of gpu_cluster/config/values.py the schema uses, in words (their rules are
# the validators there and in config/quantities.py; tests/test_values.py generates each type's
# members from its grammar).
# tests/test_config_reference.py fails when the schema uses a value type missing here.
VALUE_TYPES: dict[str, str] = {
    "Quantity": "a Kubernetes quantity, every form `resource.ParseQuantity` reads (`1.5Gi`, "
    "`+5Gi`, `5e3`, `.5Ti`, a plain number), not negative, at most 2^63-1",
    "CpuQuantity": "a Quantity of CPU, at most (2^63 - 1) / 1000 cores (read in millicores)",
    "Size": "a Quantity greater than zero (a claim's size)",
    "DnsLabel": "a DNS-1035 label (lower-case letters, digits, `-`, starting with a letter), at "
    "most 52 characters as `name` (GKE: 40)",
    "Namespace": "a DNS-1123 label; to create: not one every cluster has (`default`, "
    "`kube-system`, `kube-public`, `kube-node-lease`) nor `kube-*` or the platform's own "
    "(`openshift`, `openshift-*`, `kubernetes-*`; GKE's `gke-*`, `gmp-system`, `gmp-public`)",
    "Subdomain": "a DNS-1123 subdomain (dots allowed), at most 253 characters",
    "HostName": "a host name or IPv4 address: a DNS-1123 subdomain whose every `.`-separated "
    "part is at most 63 characters (RFC 1035)",
    "RbacSecurityGroup": "`gke-security-groups@` and a lower-case domain name (GKE's name for "
    "the Google Groups for RBAC group)",
    "StorageClassName": 'a DNS-1123 subdomain, or `""`: no class (pre-provisioned volumes)',
    "NodeName": "a node name (DNS-1123 subdomain) of at most 63 characters (the pods' "
    "`kubernetes.io/hostname` affinity values)",
    "LabelKey": "a label key (a qualified name with an optional DNS prefix)",
    "PriorityClassName": "a DNS-1123 subdomain of at most 63 characters (a Kueue "
    "WorkloadPriorityClass's name, and a run's `kueue.x-k8s.io/priority-class` label value)",
    "TopologyLevel": "a LabelKey of at most 316 characters (a Kueue Topology level's `nodeLabel`)",
    "Image": "an image reference the kubelet parses (registries with ports, IPv6 or upper case, "
    "`repo:tag@sha256:...`, sha384 and sha512 digests), with a tag or a digest; `:latest` "
    "without a digest is refused",
    "SyncPeriod": "a Go duration of at least 10ms (`60s`, `1m30s`, `500ms`)",
    "HealthCheck": "`gpu`, `nccl` or `neper`: a cluster-health-scanner check that labels nodes "
    "with its result and time",
    "LogPattern": "a Python regular expression of at most 200 characters that does not match an "
    "empty line",
    "SweepSize": "a size the check script reads (`64M`, `1G`, `2t`, `512MiB`, a number of "
    "bytes; binary units), 8 to 2^63 - 1 bytes",
    "ResourceName": "an extended resource `<domain>/<name>` a device plugin can register (not "
    "`kubernetes.io/...`, `requests.*` or `cpu`; prefix <= 244, name <= 63 characters)",
    "Cidr": "an IPv4 CIDR",
    "PrivateCidr": "an IPv4 CIDR inside the private ranges (10/8, 172.16/12, 192.168/16, "
    "100.64/10)",
    "Interface": "an interface name in the pod: 1..15 letters, digits, `_`, `.`, `-`",
    "HostInterface": "a host interface name (any name the kernel allows)",
    "EnvName": "an environment variable name that can also key a Secret (letters, digits, "
    "`-`, `_`, `.`)",
    "MemlockStrategy": "`root-ipc-lock` \\| `machineconfig` \\| `preconfigured`",
    "ExistingObject": "`create` \\| `adopt` \\| `reference`",
    "StorageClassMode": "`create` \\| `reference`",
    "Provisioning": "`on-demand` \\| `spot` \\| `reservation` \\| `flex-start`",
    "MachineType": " \\| ".join(f"`{name}`" for name in MACHINES)
    + ": a GPU machine type with a record in gpu_cluster/facts/machines.py",
    "Platform": "`openshift` \\| `gke`",
    "NetworkMode": " \\| ".join(f"`{name}`" for name in mode_names())
    + ": a network mode with a plug-in in gpu_cluster/config/netmodes/",
    "VolumeUse": "`data` \\| `checkpoints`",
    "BucketName": "a Cloud Storage bucket name: 3-63 lower-case letters, digits, `-`, `_`, "
    "starting and ending with a letter or digit, without `google` or a leading `goog`",
    "MountPath": "an absolute path in normal form (no empty, `.` or `..` parts, no trailing "
    "`/`), not `/`, each part at most 255 bytes (Linux NAME_MAX)",
    "KueueVersion": "a Kueue release, `MAJOR.MINOR.PATCH` without `v`, 0.15.0 or later",
    "JobSetVersion": "a JobSet release, `MAJOR.MINOR.PATCH` without `v`, 0.10.1 or later",
}

PREAMBLE = """\
# Stack config reference

<!-- Generated by `{command}` from gpu_cluster/config (schema.py, sections/, storage.py): do
     not edit. Edit the field's docstring in the schema and run the command again. -->

Every key a stack file (`Pulumi.<stack>.yaml`) may set, generated from the schema
(`gpu_cluster/config/schema.py`, `sections/`, `storage.py`: type, default, allowed values,
description) and its `ReadWhen` annotations (`gpu_cluster/config/reads.py`: when the stack reads a
key). All keys live under the `gpu-cluster:` namespace. Scalars are set with `pulumi config set
nodes 4`; nested keys with `pulumi config set --path storage.mode rwx`. Unknown keys are errors,
and so is a key set where the stack does not read it ("read when" below), but for a network mode's
own section under another mode (`tcp`; `rdma` on OpenShift): kept for switching back, unread, with
a warning (docs/contract.md). `[]` marks a list of sections: `rdma.nics[0].interface` in a
`--path`.

Provider keys (`kubernetes:context` on OpenShift, `gcp:` settings on GKE) are the providers'
own; see docs/contract.md.

## Contents

"""


@dataclass(frozen=True)
class Row:
    key: str
    type: str
    default: str
    allowed: str
    read_when: str
    description: str


def _source_annotations() -> dict[tuple[str, str], str]:
    """(class, field) -> the annotation as the schema's modules spell it, without its ReadWhen."""
    out: dict[tuple[str, str], str] = {}
    for module in (schema, storage, *SECTION_MODULES):
        tree = ast.parse(Path(inspect.getfile(module)).read_text(encoding="utf-8"))
        out.update(_module_annotations(tree))
    return out


def _module_annotations(tree: ast.Module) -> dict[tuple[str, str], str]:
    out: dict[tuple[str, str], str] = {}
    for node in tree.body:
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                annotation = stmt.annotation
                if (
                    isinstance(annotation, ast.Subscript)
                    and isinstance(annotation.value, ast.Name)
                    and annotation.value.id == "Annotated"
                    and isinstance(annotation.slice, ast.Tuple)
                ):
                    annotation = annotation.slice.elts[0]
                out[(node.name, stmt.target.id)] = ast.unparse(annotation)
    return out


def _nested(annotation: Any) -> type[BaseModel] | None:
    """The section model inside a field's type (`X`, `X | None`, `tuple[X, ...]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _nested(arg)
        if found is not None:
            return found
    return None


def _literals(annotation: Any) -> list[Any]:
    if typing.get_origin(annotation) is Literal:
        return list(typing.get_args(annotation))
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [v for arg in typing.get_args(annotation) for v in _literals(arg)]
    if typing.get_origin(annotation) is typing.Annotated:
        return _literals(typing.get_args(annotation)[0])
    return []


def _bounds(annotation: Any, metadata: list[Any]) -> list[str]:
    """Numeric bounds, lengths and patterns of the field and of an int inside its type."""
    found: list[str] = []
    items = list(metadata)
    for arg in typing.get_args(annotation):
        if typing.get_origin(arg) is typing.Annotated:
            items += list(arg.__metadata__)
    items = [n for m in items for n in (m.metadata if isinstance(m, FieldInfo) else [m])]
    for m in items:
        for attr, word in (
            ("ge", ">="),
            ("gt", ">"),
            ("le", "<="),
            ("lt", "<"),
            ("min_length", "length >="),
            ("max_length", "length <="),
        ):
            value = getattr(m, attr, None)
            if value is not None:
                found.append(f"{word} {value}")
        pattern = getattr(m, "pattern", None)
        if pattern is not None:
            found.append(f"matches `{pattern}`")
    return found


def _code(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(_code(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"' if value == "" else value
    return str(value)


def _cell(text: str) -> str:
    """Markdown table cell: one line, pipes escaped (also inside code spans, as GFM wants)."""
    return " ".join(text.split()).replace("|", "\\|").replace("\\\\|", "\\|")


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(section)"
    if value is None:
        return "unset"
    return f"`{_code(value)}`"


def _rows(
    model: type[BaseModel], prefix: str, annotations: dict[tuple[str, str], str]
) -> Iterator[tuple[str, list[Row]]]:
    """(section, its rows) for `model` and then each section below it, in schema order."""
    rows: list[Row] = []
    below: list[tuple[str, type[BaseModel]]] = []
    for name, field in model.model_fields.items():
        key = prefix + (field.alias or name)
        nested = _nested(field.annotation)
        list_of = nested is not None and "tuple" in str(field.annotation)
        shown = key + ("[]" if list_of else "")
        rule = read_rule(field)
        allowed = [f"`{_code(v)}`" for v in _literals(field.annotation)]
        allowed += _bounds(field.annotation, field.metadata)
        type_text = annotations[(model.__name__, name)]
        allowed += [
            f"[{alias}](#value-types)"
            for alias in VALUE_TYPES
            if re.search(rf"\b{alias}\b", type_text)
        ]
        rows.append(
            Row(
                key=shown,
                type=type_text,
                default=_default(field),
                allowed=", ".join(allowed),
                read_when=rule.when if rule else "always",
                description=" ".join((field.description or "").split()),
            )
        )
        if nested is not None:
            below.append((shown + ".", nested))
    yield prefix.rstrip(".") or "top level", rows
    for section_prefix, nested_model in below:
        yield from _rows(nested_model, section_prefix, annotations)


def used_value_types() -> set[str]:
    """The value-type names the schema's annotations use (tests check VALUE_TYPES covers them)."""
    from gpu_cluster.config import values

    names = {n for n in dir(values) if typing.get_origin(getattr(values, n)) is typing.Annotated}
    names |= {"MemlockStrategy", "ExistingObject", "StorageClassMode", "Provisioning"}
    names |= {"Platform", "VolumeUse"}
    used: set[str] = set()
    for text in _source_annotations().values():
        used |= {n for n in names if re.search(rf"\b{n}\b", text)}
    return used


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")


def render() -> str:
    annotations = _source_annotations()
    sections = list(_rows(schema.Settings, "", annotations))
    titles = [f"`{name}`" if name != "top level" else "Top-level keys" for name, _ in sections]
    out = [PREAMBLE.format(command=COMMAND)]
    out += [f"- [{t}](#{_anchor(t)})\n" for t in titles]
    out.append("- [Value types](#value-types)\n")
    for title, (_, rows) in zip(titles, sections, strict=True):
        out.append(f"\n## {title}\n\n")
        out.append("| key | type | default | allowed | read when | description |\n")
        out.append("|---|---|---|---|---|---|\n")
        for r in rows:
            cells = (
                f"`{r.key}`",
                f"`{r.type}`",
                r.default,
                r.allowed or "-",
                r.read_when,
                r.description or "-",
            )
            out.append("| " + " | ".join(_cell(c) for c in cells) + " |\n")
    out.append("\n## Value types\n\n")
    out.append(
        "The named types in the tables above (`gpu_cluster/config/values.py` and "
        "`gpu_cluster/config/schema.py`; `tests/test_values.py` holds the program to each "
        "type's grammar):\n\n"
    )
    out.append("| type | accepts |\n|---|---|\n")
    for name in sorted(used_value_types()):
        out.append(f"| `{name}` | {_cell(VALUE_TYPES[name])} |\n")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the file is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = TARGET.read_text(encoding="utf-8") if TARGET.exists() else ""
        if current != text:
            print(f"{TARGET.relative_to(ROOT)} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    TARGET.parent.mkdir(exist_ok=True)
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
