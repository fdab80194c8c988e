"""The controllers a JobSet stack installs (workload.controllers): which upstream charts, at
which versions, in which namespaces, in install order (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import installs_controllers
from gpu_cluster.facts.kueue import JOBSET_CHART, JOBSET_NAMESPACE, KUEUE_CHART, KUEUE_NAMESPACE


@dataclass(frozen=True)
class ControllerChart:
    """One controller's chart: `release` names its Helm release and the chart's objects (the
    charts prefix them with it), installed with the chart's own default values."""

    release: str
    chart: str
    version: str
    namespace: str


def controller_charts(s: Settings) -> tuple[ControllerChart, ...]:
    """JobSet, then Kueue; () when the stack installs neither. JobSet first, so Kueue finds
    JobSet's API served when it starts and sets up its JobSet controller at once, not after
    polling for the API (kueue v0.19.2 pkg/controller/jobframework/setup.go, WaitForAPI)."""
    if not installs_controllers(s):
        return ()
    c = s.workload.controllers
    return (
        ControllerChart("jobset", JOBSET_CHART, c.jobset_version, JOBSET_NAMESPACE),
        ControllerChart("kueue", KUEUE_CHART, c.kueue_version, KUEUE_NAMESPACE),
    )
