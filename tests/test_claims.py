"""The workload's claims as plan.claims decides them: their keys name the claim resources (so
their URNs), their names are the ones the StatefulSet controller adopts."""

from __future__ import annotations

from gpu_cluster.config.storage import StorageSettings
from gpu_cluster.plan.claims import (
    Claim,
    claim_retention_annotations,
    retention_annotations,
    training_claims,
)


def test_shared_claims_are_one_read_write_many_claim_per_volume() -> None:
    storage = StorageSettings.model_validate(
        {"mode": "rwx", "workspaceSize": "1Ti", "datasetsSize": "2Ti"}
    )
    assert training_claims(storage, "train", replicas=3) == [
        Claim("workspace", "workspace", "train-workspace", "1Ti", "ReadWriteMany"),
        Claim("datasets", "datasets", "train-datasets", "2Ti", "ReadWriteMany"),
    ]


def test_per_pod_claims_are_named_as_the_stateful_set_names_its_claims() -> None:
    storage = StorageSettings.model_validate(
        {"mode": "per-pod", "workspaceSize": "1Ti", "datasetsSize": "2Ti"}
    )
    assert training_claims(storage, "train", replicas=2) == [
        Claim("workspace-0", "workspace", "workspace-train-0", "1Ti", "ReadWriteOnce"),
        Claim("workspace-1", "workspace", "workspace-train-1", "1Ti", "ReadWriteOnce"),
        Claim("datasets-0", "datasets", "datasets-train-0", "2Ti", "ReadWriteOnce"),
        Claim("datasets-1", "datasets", "datasets-train-1", "2Ti", "ReadWriteOnce"),
    ]


def test_only_storage_the_stack_chose_not_to_keep_is_marked() -> None:
    assert retention_annotations(True) == {}
    assert retention_annotations(False) == {"gpu-cluster/retain-on-delete": "false"}


def test_a_claim_is_marked_either_way() -> None:
    """The policy pack reads a claim's retention from the mark: the engine does not send it."""
    assert claim_retention_annotations(True) == {"gpu-cluster/retain-on-delete": "true"}
    assert claim_retention_annotations(False) == {"gpu-cluster/retain-on-delete": "false"}
