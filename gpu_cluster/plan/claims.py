"""The training workload's user-data claims: which exist, their names, sizes and access modes,
and how a stack's choice not to keep them is marked. components/workload/claims.py registers
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_cluster.config.storage import StorageSettings

# Tells the Kubernetes provider not to wait for a claim to bind: with WaitForFirstConsumer
# storage classes it binds only once a pod uses it (pulumi-kubernetes annotations).
SKIP_AWAIT = {"pulumi.com/skipAwait": "true"}

# Says whether storage is kept on destroy: "false" where the stack chose not to keep it
# (storage.retainOnDelete: false), so the policy pack can tell a deliberate opt-out from a
# mistake; "true" on the claims it keeps, since the engine does not pass the retainOnDelete option
# to policy packs (pulumi/pulumi v3.259.0 proto/pulumi/analyzer.proto, AnalyzerResourceOptions).
RETENTION_MARK = "gpu-cluster/retain-on-delete"


@dataclass(frozen=True)
class Claim:
    """One user-data claim. key: its resource name's suffix (<workload resource>-<key>);
    volume: the pod volume it backs; name: the Kubernetes object's."""

    key: str
    volume: str
    name: str
    size: str
    access_mode: Literal["ReadWriteMany", "ReadWriteOnce"]


def retention_annotations(retain_on_delete: bool) -> dict[str, str]:
    """The opt-out mark, for what holds or reaches the claims (volumes, the StatefulSet, the
    namespace): nothing where they are retained."""
    return {} if retain_on_delete else {RETENTION_MARK: "false"}


def claim_retention_annotations(retain_on_delete: bool) -> dict[str, str]:
    """A claim's mark, either way: registered with retain_on_delete, it says "true"."""
    return {RETENTION_MARK: "true" if retain_on_delete else "false"}


def per_pod_claim_name(volume: str, stateful_set: str, index: int) -> str:
    """The claim the StatefulSet controller uses for pod `index`: <template>-<set>-<ordinal>
    (kubernetes/kubernetes pkg/controller/statefulset/stateful_set_utils.go,
    getPersistentVolumeClaimName); it adopts an existing claim of that name, creating none."""
    return f"{volume}-{stateful_set}-{index}"


def volume_sizes(storage: StorageSettings) -> list[tuple[str, str]]:
    """(volume, size) of each user-data volume: the workspace, and the datasets if sized."""
    sizes = [("workspace", storage.workspace_size)]
    if storage.datasets_size:
        sizes.append(("datasets", storage.datasets_size))
    return sizes


def training_claims(storage: StorageSettings, workload: str, replicas: int) -> list[Claim]:
    """rwx: one ReadWriteMany claim per volume that every pod mounts. per-pod: one ReadWriteOnce
    claim per volume and pod, named as the StatefulSet `workload` names its claims, so the
    controller adopts them."""
    if storage.mode == "rwx":
        return [
            Claim(volume, volume, f"{workload}-{volume}", size, "ReadWriteMany")
            for volume, size in volume_sizes(storage)
        ]
    return [
        Claim(
            f"{volume}-{index}",
            volume,
            per_pod_claim_name(volume, workload, index),
            size,
            "ReadWriteOnce",
        )
        for volume, size in volume_sizes(storage)
        for index in range(replicas)
    ]
