"""The controllers a JobSet stack needs (workload.controllers): which upstream charts it
installs, at which versions, in which namespaces, in install order; or, when the cluster runs
them already, what the stack reads first to know they serve its APIs (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.derived import queue_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import installs_controllers
from gpu_cluster.facts.kueue import (
    JOBSET_API,
    JOBSET_CHART,
    JOBSET_CRD,
    JOBSET_NAMESPACE,
    KUEUE_API,
    KUEUE_CHART,
    KUEUE_CRD,
    KUEUE_NAMESPACE,
)


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


@dataclass(frozen=True)
class ServedApi:
    """An API the stack writes objects of: the CustomResourceDefinition that defines it, which
    must serve `version`."""

    crd: str
    version: str


@dataclass(frozen=True)
class ExistingControllers:
    """What a JobSet stack that uses the cluster's Kueue and JobSet reads before it writes any
    of their objects, so that `pulumi preview` already fails where they are missing or too old.
    crds: the definitions of the APIs it writes (a stack that creates its queue: its runner
    may create cluster-scoped objects, and reads these). local_queue: (namespace, name) of the
    LocalQueue it submits to, read at Kueue's API, when it references one (any user of the
    namespace may read it: Kueue's localqueue-viewer-role is aggregated to view)."""

    crds: tuple[ServedApi, ...]
    local_queue: tuple[str, str] | None


def existing_controllers(s: Settings) -> ExistingControllers | None:
    """None unless the stack runs JobSets on controllers it does not install."""
    if s.workload.kind != "jobset" or installs_controllers(s):
        return None
    if s.workload.queue.mode == "reference":
        return ExistingControllers(crds=(), local_queue=(s.namespace, queue_name(s)))
    served = (
        ServedApi(KUEUE_CRD, KUEUE_API.split("/")[1]),
        ServedApi(JOBSET_CRD, JOBSET_API.split("/")[1]),
    )
    return ExistingControllers(crds=served, local_queue=None)
