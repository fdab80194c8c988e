"""The GKE cluster's monitoring as the stack config sets it (the defaults are held to
cluster-toolkit's blueprints in tests/vendor/gke_gpudirect.yaml)."""

from __future__ import annotations

from typing import Any

from gpu_cluster.offline.replacements import plan
from tests.conftest import rows, run_stack

CLUSTER = "gcp:container/cluster:Cluster"


def monitoring(*overrides: str) -> dict[str, Any]:
    (cluster,) = run_stack("gcp-a4", *overrides).of_type(CLUSTER)
    config: dict[str, Any] = cluster.inputs["monitoringConfig"]
    return config


def test_without_dcgm_the_cluster_keeps_the_other_components_and_managed_prometheus() -> None:
    config = monitoring("monitoring.dcgm=false")
    assert "DCGM" not in config["enableComponents"]
    assert "JOBSET" in config["enableComponents"]
    assert config["managedPrometheus"]["enabled"] is True


def test_dcgm_listed_and_turned_on_is_enabled_once() -> None:
    config = monitoring(
        "monitoring.gkeComponents[0]=SYSTEM_COMPONENTS", "monitoring.gkeComponents[1]=DCGM"
    )
    assert config["enableComponents"] == ["SYSTEM_COMPONENTS", "DCGM"]


def test_a_stack_can_collect_only_the_system_components() -> None:
    config = monitoring("monitoring.gkeComponents[0]=SYSTEM_COMPONENTS", "monitoring.dcgm=false")
    assert config["enableComponents"] == ["SYSTEM_COMPONENTS"]


def test_a_cluster_deployed_without_monitoring_is_updated_in_place() -> None:
    """A cluster an earlier version deployed (no monitoringConfig): the first `pulumi up` of
    this one updates it, replacing nothing (docs/operations.md, "Upgrading the program")."""
    now = rows(run_stack("gcp-a4"))
    before = {key: dict(row) for key, row in now.items()}
    (cluster,) = [key for key in before if key[0] == CLUSTER]
    before[cluster]["inputs"] = {
        k: v for k, v in before[cluster]["inputs"].items() if k != "monitoringConfig"
    }
    changed = {(step.name, step.op) for step in plan(before, now)}
    assert changed == {("gpu-cluster-cluster", "update")}
