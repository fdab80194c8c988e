"""Which input changes replace or delete which resource (pure: no Pulumi imports).

Given two renders of a stack (each resource's type, name, inputs and options, as
`gpu_cluster.offline.engine` records them and `resources.json` stores them), `plan` tells what
the engine would do to each resource: create, delete, replace (and which input forces it) or
update. The rules are the providers' own:

- A resource whose Pulumi name (URN) disappears is deleted, a new one is created; rows that
  carry their URNs (`resources.json`) are the same resource only under the same URN or an
  alias of it, so a resource that moves under another component type (a platform change) is
  deleted and created even though its type and name stay.
- An `import` option naming another object than the one in the state replaces the resource:
  the object is imported, and the old one deleted without the engine checking its `protect`.
- Kubernetes (pulumi/pulumi-kubernetes provider/pkg/provider/diff.go at 94977969, `forceNew`):
  `metadata.name` and `metadata.namespace` of every object, plus per kind below;
  tests/test_k8s_force_new.py holds the table, for every Kubernetes object the program renders,
  to diff.go's rules in the provider module the real tier builds (v4.25.0, f47bc2d6; the rules
  are the same at 94977969), tests/vendor/k8s_force_new.json, written by tools/k8s_force_new.py.
- Google Cloud (hashicorp/terraform-provider-google at e03b7622, the schema's `ForceNew` fields
  of google/services/container/resource_container_cluster.go, resource_container_node_pool.go,
  node_config.go, google/services/compute/resource_compute_*.go and the IAM resources named
  below), for the fields this program sets; tests/test_gcp_force_new.py holds the table to
  the ForceNew fields of terraform-provider-google-beta v7.45.0, the provider pulumi-gcp
  bridges (tests/vendor/gcp_force_new.json, written by tools/provider_force_new.py).
- The resource's own options: `ignoreChanges` keeps the old value, `replaceOnChanges` adds
  fields that replace.
"""

from __future__ import annotations

import copy
import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Key = tuple[str, str]  # (type, name)
Row = Mapping[str, Any]  # {"type", "name", "inputs", "options", ...}
Op = Literal["create", "delete", "replace", "update"]

K8S_IDENTITY = ("metadata.name", "metadata.namespace")
_LABEL_SELECTOR = ("spec.selector",)

# Kubernetes kinds: fields that force a replacement (besides name and namespace).
K8S_REPLACE_ON: dict[str, tuple[str, ...]] = {
    "kubernetes:apps/v1:StatefulSet": (
        "spec.podManagementPolicy",
        "spec.revisionHistoryLimit",
        *_LABEL_SELECTOR,
        "spec.serviceName",
        "spec.volumeClaimTemplates",
    ),
    "kubernetes:apps/v1:DaemonSet": _LABEL_SELECTOR,
    "kubernetes:apps/v1:Deployment": _LABEL_SELECTOR,
    # A volume's source (.spec.csi and every other volume source) is forceNew.
    "kubernetes:core/v1:PersistentVolume": ("spec.csi",),
    "kubernetes:core/v1:PersistentVolumeClaim": (
        "spec.accessModes",
        "spec.selector",
        "spec.storageClassName",
        "spec.volumeName",
    ),
    # ConfigMaps and Secrets are replaced on any data change unless the provider's
    # enableConfigMapMutable / enableSecretMutable is set (it is not here) and the object does
    # not set `immutable: true` (diff.go forceNewProperties, a branch beside the table).
    "kubernetes:core/v1:ConfigMap": ("binaryData", "data"),
    "kubernetes:core/v1:Secret": ("type", "stringData", "data"),
    "kubernetes:core/v1:Service": ("spec.clusterIP",),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": ("roleRef",),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": ("roleRef",),
    # Same forceNew table, storage.k8s.io/v1 (unchanged at 00302beb).
    "kubernetes:storage.k8s.io/v1:StorageClass": ("parameters", "provisioner"),
}

# Google Cloud resources: ForceNew fields among those the program sets.
GCP_REPLACE_ON: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (
        "name",
        "location",
        "project",
        "network",
        "subnetwork",
        "networkingMode",
        "ipAllocationPolicy",
        "datapathProvider",
        "initialNodeCount",
        "privateClusterConfig.masterIpv4CidrBlock",
    ),
    "gcp:container/nodePool:NodePool": (
        "name",
        "project",
        "location",
        "cluster",
        "initialNodeCount",
        "placementPolicy",
        "networkConfig.additionalNodeNetworkConfigs",
        "nodeConfig.guestAccelerators",
        "nodeConfig.spot",
        # ForceNew in hashicorp/terraform-provider-google node_config.go schemaNodeConfig.
        "nodeConfig.flexStart",
        "nodeConfig.maxRunDuration",
        "nodeConfig.reservationAffinity",
        "nodeConfig.hostMaintenancePolicy",
        "nodeConfig.oauthScopes",
        "nodeConfig.serviceAccount",
        "nodeConfig.shieldedInstanceConfig",
        "nodeConfig.ephemeralStorageLocalSsdConfig",
        "nodeConfig.secondaryBootDisks",
        # ForceNew in hashicorp/terraform-provider-google-beta resource_container_node_pool.go
        # (queued_provisioning; tests/vendor/gcp_force_new.json).
        "queuedProvisioning",
        # Not nodeConfig.gcfsConfig (image streaming): updated in place since
        # GoogleCloudPlatform/magic-modules#11717 (node_config.go nodePoolNodeConfigUpdate).
    ),
    # networkProfile: "can be set only at resource creation time" (pulumi_gcp compute.Network).
    "gcp:compute/network:Network": ("name", "project", "autoCreateSubnetworks", "networkProfile"),
    # ipCidrRange: only a range that does not contain the old one (ForceNewIfChange
    # IsShrinkageIpCidr); see _CONDITIONAL.
    "gcp:compute/subnetwork:Subnetwork": ("name", "project", "region", "network"),
    "gcp:compute/firewall:Firewall": ("name", "project", "direction"),
    "gcp:compute/router:Router": ("name", "project", "region", "network"),
    "gcp:compute/routerNat:RouterNat": ("name", "project", "region", "router"),
    "gcp:compute/resourcePolicy:ResourcePolicy": ("project", "region"),
    # google/services/resourcemanager/resource_google_service_account.go; the IAM member's
    # role, member (google/tpgiamresource/resource_iam_member.go) and project
    # (resourcemanager/iam_project.go IamProjectSchema).
    "gcp:serviceaccount/account:Account": ("accountId", "project"),
    "gcp:projects/iAMMember:IAMMember": ("project", "role", "member"),
    # google/services/storage/resource_storage_bucket.go (name, location, project,
    # hierarchical_namespace) and iam_storage_bucket.go (bucket) with the member's role, member.
    "gcp:storage/bucket:Bucket": ("name", "location", "project", "hierarchicalNamespace"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "role", "member"),
    # google/services/lustre/resource_lustre_instance.go (capacity_gib updates in place),
    # compute/resource_compute_global_address.go, servicenetworking/
    # resource_service_networking_connection.go.
    "gcp:lustre/instance:Instance": (
        "instanceId",
        "location",
        "network",
        "filesystem",
        "perUnitStorageThroughput",
        "project",
    ),
    "gcp:compute/globalAddress:GlobalAddress": (
        "name",
        "address",
        "addressType",
        "network",
        "prefixLength",
        "purpose",
        "project",
    ),
    "gcp:servicenetworking/connection:Connection": ("network", "service"),
    # monitoring/resource_monitoring_dashboard.go (dashboard_json updates in place).
    "gcp:monitoring/dashboard:Dashboard": ("project",),
}


def _cidr_not_grown(old: Any, new: Any) -> bool:
    """A subnet's range may only be expanded in place."""
    try:
        was, now = ipaddress.IPv4Network(str(old)), ipaddress.IPv4Network(str(new))
    except ValueError:
        return bool(old != new)
    return not was.subnet_of(now)


# (type, field) -> predicate(old, new) telling whether this change replaces.
_CONDITIONAL: dict[tuple[str, str], Callable[[Any, Any], bool]] = {
    ("gcp:compute/subnetwork:Subnetwork", "ipCidrRange"): _cidr_not_grown,
}

# What a replacement or deletion of these costs: user data or hours of capacity. Listed first by
# tools/change_summary.py; the edit matrix (tests/test_edit_matrix.py) holds them to a policy.
PRECIOUS: dict[str, str] = {
    "kubernetes:core/v1:PersistentVolumeClaim": "user data (workspace, datasets)",
    "gcp:storage/bucket:Bucket": "training data or checkpoints in Cloud Storage",
    "gcp:lustre/instance:Instance": "training data or checkpoints on Managed Lustre",
    "kubernetes:core/v1:Namespace": "deleting it deletes every object in it, claims included",
    "gcp:container/cluster:Cluster": "GKE cluster: every workload on it, ~10 minutes to recreate",
    "gcp:container/nodePool:NodePool": "GPU node pool: the capacity may not come back",
    "gcp:compute/network:Network": "VPC: the cluster and node pool depend on it",
    "gcp:compute/subnetwork:Subnetwork": "subnet: the cluster and node pool depend on it",
}


@dataclass(frozen=True)
class Step:
    """What the engine does to one resource between two renders."""

    type: str
    name: str
    op: Op
    # Inputs that force the replacement (op == "replace"); ("import",) when only the `import`
    # option does.
    fields: tuple[str, ...] = ()
    protected: bool = False  # the previous render has `protect`: the engine refuses delete/replace
    # The previous render has `retainOnDelete`: a delete (also the old half of a replacement)
    # only drops the resource from the state; the object stays in the cluster or cloud.
    retained: bool = False

    @property
    def precious(self) -> bool:
        return self.type in PRECIOUS


def index(rows: Iterable[Row]) -> dict[Key, Row]:
    """Rows keyed by (type, name); the same type and name under two parents keep both."""
    out: dict[Key, Row] = {}
    for row in rows:
        key: Key = (str(row["type"]), str(row["name"]))
        n = 1
        while key in out:
            n += 1
            key = (str(row["type"]), f"{row['name']}#{n}")
        out[key] = row
    return out


def replace_on(type_: str) -> tuple[str, ...]:
    """Input paths whose change replaces a resource of `type_` (unconditionally)."""
    if type_.startswith("kubernetes:"):
        return (*K8S_IDENTITY, *K8S_REPLACE_ON.get(type_, ()))
    return GCP_REPLACE_ON.get(type_, ())


_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\*|\d+)\]")


def _parts(path: str) -> list[str]:
    return [m.group(1) or m.group(2) for m in _PATH_PART.finditer(path)]


def _get(value: Any, parts: list[str]) -> Any:
    for i, part in enumerate(parts):
        if part == "*":
            if not isinstance(value, list):
                return None
            return [_get(item, parts[i + 1 :]) for item in value]
        if isinstance(value, list) and part.isdigit():
            value = value[int(part)] if int(part) < len(value) else None
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def _set_from(target: Any, source: Any, parts: list[str]) -> None:
    """Copy `source`'s value at `parts` into `target` (in place), as ignoreChanges does."""
    if not parts or target is None or source is None:
        return
    head, rest = parts[0], parts[1:]
    if head == "*":
        if isinstance(target, list) and isinstance(source, list):
            for t_item, s_item in zip(target, source, strict=False):
                if rest:
                    _set_from(t_item, s_item, rest)
        return
    if isinstance(target, dict) and isinstance(source, dict):
        if not rest:
            if head in source:
                target[head] = copy.deepcopy(source[head])
            else:
                target.pop(head, None)
        else:
            _set_from(target.get(head), source.get(head), rest)


def effective_inputs(old: Row, new: Row) -> dict[str, Any]:
    """The new inputs after the new options' ignoreChanges (old values kept at those paths)."""
    inputs: dict[str, Any] = copy.deepcopy(dict(new.get("inputs") or {}))
    for path in (new.get("options") or {}).get("ignoreChanges") or ():
        _set_from(inputs, old.get("inputs") or {}, _parts(path))
    return inputs


def replacing_fields(old: Row, new: Row) -> tuple[str, ...]:
    """The input paths whose change makes the engine replace this resource."""
    type_ = str(new["type"])
    before = old.get("inputs") or {}
    after = effective_inputs(old, new)
    paths = (*replace_on(type_), *((new.get("options") or {}).get("replaceOnChanges") or ()))
    fields = [p for p in paths if _get(before, _parts(p)) != _get(after, _parts(p))]
    for (cond_type, field), replaces in _CONDITIONAL.items():
        if cond_type == type_:
            was, now = _get(before, _parts(field)), _get(after, _parts(field))
            if was != now and replaces(was, now):
                fields.append(field)
    return tuple(dict.fromkeys(fields))


def same_resource(old: Row, new: Row) -> bool:
    """Whether the engine takes `new` for `old`: the same URN, or the old URN among the new
    resource's aliases (pulumi/pulumi pkg/resource/deploy/step_generator.go getOldResource).
    Rows without URNs (written by hand) are matched by their key alone."""
    old_urn, new_urn = old.get("urn"), new.get("urn")
    if not old_urn or not new_urn:
        return True
    return bool(old_urn == new_urn or old_urn in (new.get("aliases") or ()))


def kubernetes_id(row: Row) -> str | None:
    """The ID pulumi-kubernetes gives an object it creates: "<namespace>/<name>", or "<name>"
    for a cluster-scoped one (provider/pkg/provider/util.go fqObjName); None for other
    providers' resources, whose IDs the render cannot know."""
    if not str(row["type"]).startswith("kubernetes:"):
        return None
    metadata = (row.get("inputs") or {}).get("metadata") or {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    if not name:
        return None
    return f"{namespace}/{name}" if namespace else str(name)


def _imports_another(old: Row, new: Row) -> bool:
    """The new row imports an object other than the one in the state: the engine imports it in
    the old one's place and then deletes the old one, never checking the old one's `protect`
    (step_generator.go: an import when the state's import ID, or else its ID, differs from the
    goal's; step.go: ImportStep.Apply marks the old one for deletion, which GenerateDeletes
    carries out as a replacement's delete, exempt from DeleteStep.Apply's protect check). The
    same ID, as when a created namespace is adopted under its own name, is an ordinary update."""
    wanted = (new.get("options") or {}).get("import")
    if not wanted:
        return False
    had = (old.get("options") or {}).get("import") or kubernetes_id(old)
    return had is not None and had != wanted


def plan(before: Mapping[Key, Row], after: Mapping[Key, Row]) -> list[Step]:
    """Every resource that is created, deleted, replaced or updated, in a stable order; a read
    (`<Resource>.get`) is none of those: it changes nothing the stack owns."""
    steps: list[Step] = []
    moved = _moved_across_keys(before, after)
    for key in sorted(before.keys() | after.keys()):
        old, new = before.get(key), after.get(key)
        if any("read" in (row.get("options") or {}) for row in (old, new) if row is not None):
            continue
        if key in moved:
            old_key, new_key = moved[key]
            steps.extend(_moved_steps(key, before[old_key], after[new_key]))
            continue
        if old is None:
            steps.append(Step(*key, "create"))
            continue
        # The engine refuses to delete a resource its state marks protected, and to replace one
        # that is protected in the state and still in the program: unprotecting and replacing
        # may happen in one update, unprotecting and deleting may not (pulumi/pulumi
        # pkg/resource/deploy/step_generator.go and step.go, DeleteStep.Apply).
        was_protected = bool((old.get("options") or {}).get("protect"))
        retained = bool((old.get("options") or {}).get("retainOnDelete"))
        if new is None or not same_resource(old, new):
            steps.append(Step(*key, "delete", protected=was_protected, retained=retained))
            if new is not None:
                steps.append(Step(*key, "create"))
            continue
        still_protected = was_protected and bool((new.get("options") or {}).get("protect"))
        fields = replacing_fields(old, new)
        if _imports_another(old, new):
            steps.append(Step(*key, "replace", fields or ("import",), False, retained))
        elif fields:
            steps.append(Step(*key, "replace", fields, still_protected, retained))
        elif effective_inputs(old, new) != (old.get("inputs") or {}):
            steps.append(Step(*key, "update", protected=still_protected))
    return steps


def _moved_across_keys(
    before: Mapping[Key, Row], after: Mapping[Key, Row]
) -> dict[Key, tuple[Key, Key]]:
    """Resources whose type or name changed under an alias (the StatefulSet and the JobSet of
    workload.kind alias each other): each key of such a pair -> (old key, new key)."""
    old_keys = {str(row["urn"]): key for key, row in before.items() if row.get("urn")}
    out: dict[Key, tuple[Key, Key]] = {}
    for new_key, row in after.items():
        if new_key in before:
            continue
        for alias in row.get("aliases") or ():
            old_key = old_keys.get(str(alias))
            if old_key is not None and old_key not in after:
                out[old_key] = out[new_key] = (old_key, new_key)
    return out


def _moved_steps(key: Key, old: Row, new: Row) -> list[Step]:
    """The step of one side (`key`) of a resource that moved: where a replacing field changed,
    the engine replaces it, deleting the old object (its old type's step) and creating the new
    one (its new type's); otherwise it updates it under its new type."""
    options = old.get("options") or {}
    fields = replacing_fields(old, new)
    if fields:
        protected = bool(options.get("protect")) and bool((new.get("options") or {}).get("protect"))
        return [Step(*key, "replace", fields, protected, bool(options.get("retainOnDelete")))]
    is_new_side = (str(new["type"]), str(new["name"])) == key
    changed = effective_inputs(old, new) != (old.get("inputs") or {})
    return [Step(*key, "update")] if is_new_side and changed else []


# The training's own controllers, whose pods a step stops: a JobSet replaced (any change of its
# spec, replaceOnChanges) or deleted ends its run's pods, and the JobSet controller starts the
# run again; a StatefulSet replaced or deleted ends its pods, and one whose pod template changes
# replaces every pod (its RollingUpdate; kubernetes apps/v1 StatefulSetUpdateStrategy).
JOBSET_TYPE = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
STATEFULSET_TYPE = "kubernetes:apps/v1:StatefulSet"
POD_TEMPLATE = "spec.template"


def training_restarts(
    steps: Iterable[Step], before: Mapping[Key, Row], after: Mapping[Key, Row]
) -> list[Step]:
    """The steps that stop or restart the training pods: a training controller replaced or
    deleted, or a StatefulSet updated with a new pod template (`fields` then names it)."""
    out: list[Step] = []
    for s in steps:
        if s.type not in (JOBSET_TYPE, STATEFULSET_TYPE):
            continue
        if s.op in ("replace", "delete"):
            out.append(s)
        elif s.op == "update" and s.type == STATEFULSET_TYPE:
            old, new = before.get((s.type, s.name)), after.get((s.type, s.name))
            if old is None or new is None:  # moved from the JobSet's type: new pods anyway
                out.append(Step(s.type, s.name, "update", (POD_TEMPLATE,)))
                continue
            template = ((old.get("inputs") or {}).get("spec") or {}).get("template")
            if (effective_inputs(old, new).get("spec") or {}).get("template") != template:
                out.append(Step(s.type, s.name, "update", (POD_TEMPLATE,)))
    return out


def destructive(steps: Iterable[Step]) -> list[Step]:
    """Replacements and deletions of precious resources, the ones a reviewer must see first."""
    return [s for s in steps if s.precious and s.op in ("replace", "delete")]
