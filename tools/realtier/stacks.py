"""A stack's render as the real tier uses it: its objects in apply order, what it imports, the
fake nodes it would run on and the volumes a provisioner would give its claims."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_cluster.components.queue_controllers import QUEUE_CONTROLLERS_TYPE
from gpu_cluster.components.stack_config import PROVIDER_SETTINGS
from gpu_cluster.config.loading import settings_from
from gpu_cluster.config.schema import Settings
from gpu_cluster.offline.engine import ProgramRun, RecordedResource, run_program
from gpu_cluster.offline.render import kind_rank
from tests.as_of import AS_OF
from tests.edits import edited_config
from tools.realtier.nodes import FakeNode, gke_nodes, openshift_nodes

Object = dict[str, Any]
# pulumi-kubernetes' Chart v4 resource type.
CHART_TYPE = "kubernetes:helm.sh/v4:Chart"


@dataclass(frozen=True)
class StackRender:
    stack: str
    settings: Settings
    run: ProgramRun

    def objects(self) -> list[Object]:
        """Every object the stack creates, in the render's apply order (kubernetes.yaml's), but
        the controllers it installs (workload.controllers): the tier installs those charts
        itself (controllers.py), before the stack."""
        created = [
            r.inputs
            for r in self.run.kubernetes_objects()
            if "import" not in r.options and f"{QUEUE_CONTROLLERS_TYPE}$" not in r.urn
        ]
        return sorted(created, key=kind_rank)

    def chart_namespaces(self) -> list[Object]:
        """The namespaces the stack installs the controllers' charts into (workload.controllers),
        which objects of its own live in too (the scrape of Kueue's metrics on GKE)."""
        return [
            r.inputs
            for r in self.run.kubernetes_objects()
            if f"{QUEUE_CONTROLLERS_TYPE}$" in r.urn and r.inputs["kind"] == "Namespace"
        ]

    def charts(self) -> list[dict[str, Any]]:
        """The inputs of each helm.v4.Chart the stack installs, in registration order."""
        return [dict(r.inputs) for r in self.run.of_type(CHART_TYPE)]

    def imported(self) -> dict[str, RecordedResource]:
        """Objects the stack adopts (Pulumi `import`), by import ID."""
        return {
            str(r.options["import"]): r
            for r in self.run.kubernetes_objects()
            if "import" in r.options
        }

    def of_kind(self, kind: str) -> list[Object]:
        return [o for o in self.objects() if o["kind"] == kind]

    def nodes(self) -> list[FakeNode]:
        if self.settings.platform == "gke":
            assert self.settings.gcp is not None
            return gke_nodes(self.run, self.settings.gcp.zone)
        return openshift_nodes(self.settings)


@functools.cache
def render(stack: str, overrides: tuple[str, ...] = ()) -> StackRender:
    """`stack` with `--set`-style overrides (`!key` removes one: tests/edits.py)."""
    config, secret_keys = edited_config(stack, overrides)
    settings, _warnings = settings_from(config, secret_keys, PROVIDER_SETTINGS, as_of=AS_OF)
    return StackRender(stack, settings, run_program(config, secret_keys, stack, as_of=AS_OF))


def fake_nodes(stack: str, overrides: tuple[str, ...] = ()) -> list[FakeNode]:
    return render(stack, overrides).nodes()


def volumes_for(claims: list[Object], host_root: Path | None = None) -> list[Object]:
    """One PersistentVolume per claim, of its class, size and access modes, bound to it: what a
    dynamic provisioner (Ceph RBD, the PD CSI driver) hands out; there is none on loopback. A
    claim that names its volume (a bucket's, which the stack writes itself) gets none.
    `host_root`: real nodes mount it; each volume is a directory below it that anyone may write
    (the real nodes share this host's file system, as an RWX claim is shared)."""
    volumes = []
    for claim in claims:
        meta, spec = claim["metadata"], claim["spec"]
        if spec.get("volumeName"):
            continue
        path = f"/var/lib/realtier/{meta['namespace']}/{meta['name']}"
        if host_root is not None:
            directory = host_root / meta["name"]
            directory.mkdir(parents=True)
            directory.chmod(0o777)
            path = str(directory)
        volumes.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": f"pv-{meta['namespace']}-{meta['name']}"},
                "spec": {
                    "accessModes": spec["accessModes"],
                    "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                    "storageClassName": spec.get("storageClassName", ""),
                    "persistentVolumeReclaimPolicy": "Retain",
                    "claimRef": {"namespace": meta["namespace"], "name": meta["name"]},
                    "hostPath": {"path": path},
                },
            }
        )
    return volumes
