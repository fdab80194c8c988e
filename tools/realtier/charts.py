"""The controllers' upstream Helm charts rendered by the real helm, as a stack installs them.

A stack that installs Kueue and JobSet (workload.controllers) registers one pulumi-kubernetes
helm.v4.Chart per controller: release name = chart name, the controller's namespace, the chart's
default values. A v4 Chart renders like `helm template` with the cluster's version and then
creates each object (pulumi-kubernetes docs, kubernetes.helm.sh/v4.Chart), so the tier renders
the same charts with the built helm the same way, at the versions it builds the managers from.

The module's chart is the published one but for what the release packaging writes into it
(kueue and jobset hack/helm-chart-package.sh: image repository, tag and pull policy of a
promoted release); those values are given here, so the objects are the published chart's.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass

import yaml

from gpu_cluster.facts.kueue import JOBSET_NAMESPACE, KUEUE_NAMESPACE
from tools.realtier.build import JOBSET_VERSION, KUBERNETES_VERSION, KUEUE_VERSION, Tools
from tools.realtier.kube import Object

# What hack/helm-chart-package.sh sets for a promoted release `v<version>` (kueue v0.19.2,
# jobset v0.12.0): the image at registry.k8s.io/<project>/<name>, tagged with the release.
PUBLISHED_VALUES = {
    "kueue": {
        "controllerManager.manager.image.repository": "registry.k8s.io/kueue/kueue",
        "controllerManager.manager.image.tag": KUEUE_VERSION,
        "controllerManager.manager.image.pullPolicy": "IfNotPresent",
    },
    "jobset": {
        "image.repository": "registry.k8s.io/jobset/jobset",
        "image.tag": JOBSET_VERSION,
        "image.pullPolicy": "IfNotPresent",
    },
}
NAMESPACES = {"kueue": KUEUE_NAMESPACE, "jobset": JOBSET_NAMESPACE}


@dataclass(frozen=True)
class RenderedChart:
    """One chart's objects, in the order helm writes them (shared by every caller: copy before
    changing one)."""

    release: str
    namespace: str
    objects: tuple[Object, ...]

    def of_kind(self, kind: str) -> list[Object]:
        return [o for o in self.objects if o["kind"] == kind]

    def manager_config(self) -> Object:
        """The manager's Configuration, from the chart's ConfigMap (controller_manager_config.yaml,
        which its Deployment mounts and passes with --config)."""
        (config_map,) = self.of_kind("ConfigMap")
        config: Object = yaml.safe_load(config_map["data"]["controller_manager_config.yaml"])
        return config

    def manager_args(self) -> list[str]:
        """The manager container's arguments in the chart's Deployment."""
        (deployment,) = self.of_kind("Deployment")
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        return list(container["args"])


@functools.cache  # the same chart at the same release for every control plane of a run
def render_chart(tools: Tools, release: str) -> RenderedChart:
    """`helm template` of the chart named `release`, as the stack's Chart renders it (CRDs too:
    a v4 Chart installs a chart's crds/ unless told to skip them)."""
    command = [
        str(tools.binary("helm")),
        "template",
        release,
        str(tools.chart(release)),
        "--namespace",
        NAMESPACES[release],
        "--kube-version",
        KUBERNETES_VERSION,
        "--include-crds",
    ]
    for key, value in PUBLISHED_VALUES[release].items():
        command += ["--set-string", f"{key}={value}"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"helm template {release} failed:\n{result.stderr[-4000:]}")
    objects = tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)
    return RenderedChart(release, NAMESPACES[release], objects)


def chart_crds(tools: Tools) -> list[Object]:
    """Every CRD the two charts install, as rendered (their conversion webhooks name Kueue's
    Service: without a manager only the stored version, v1beta2, can be read and written)."""
    return [
        crd
        for release in ("jobset", "kueue")
        for crd in render_chart(tools, release).of_kind("CustomResourceDefinition")
    ]
