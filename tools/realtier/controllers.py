"""Kueue and JobSet, the real managers built by build.py, attached to a loopback control plane
as a stack installs them: from their upstream charts (charts.py).

Every object of each chart is created on the API server as rendered, JobSet's chart first (as
the stack installs them), but for what loopback cannot have, and each manager runs as a process
of the ControlPlane (stopped with it) with its chart's Configuration and container arguments:
- there is no Service routing on loopback (no kube-proxy; the API server refuses loopback
  endpoints), so each webhook's and conversion webhook's clientConfig becomes
  `url: https://127.0.0.1:<port><path>` with the CA of a serving pair made by certs.py, and
  Kueue's visibility APIServices (served through a Service only) are not created, Kueue's
  VisibilityOnDemand off;
- the managers run out of process, so the Deployments are created as a dry run (validated and
  admitted in full, not stored: no pods), each Configuration's health, metrics and webhook
  endpoints move to loopback ports (JobSet's metrics off, nothing reads them; Kueue's served
  as in its pod, over HTTPS to a token its API server authorizes: `Controllers.kueue_metrics`),
  and leader election is off (below).
Certificates: Kueue's certificate rotator stays on, as the chart sets it, and is handed what it
keeps its CA and pair in: the chart's Secret, holding a pair that is also valid for 127.0.0.1.
The rotator finds them valid, keeps them, and injects that CA into the webhooks and CRDs
itself. JobSet's rotator writes its pair to a fixed directory under /tmp (jobset
pkg/util/cert/cert.go certDir), which two tiers on one machine would share, so here it is off
and the webhook serves the pair from a directory of the run's own.
"""

from __future__ import annotations

import base64
import copy
import datetime
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.realtier.build import Tools
from tools.realtier.certs import CertificateAuthority, Pair
from tools.realtier.charts import RenderedChart, render_chart
from tools.realtier.controlplane import ControlPlane, free_port
from tools.realtier.kube import Kube, Object, install_crd_objects, install_crds

# cert-controller v0.16.0 pkg/rotator: a CA or pair expiring within 90 days is replaced (and its
# CA key must be RSA, PKCS #1); kueue pkg/util/cert/cert.go `caName`: it keeps a CA only if it
# is valid for this name.
KUEUE_CA_NAME = "kueue-ca"
KUEUE_CERT_VALIDITY = datetime.timedelta(days=365)
WEBHOOK_CONFIGURATIONS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
KUEUE_GROUP = "kueue.x-k8s.io"


@dataclass(frozen=True)
class _Manager:
    chart: RenderedChart
    webhook_port: int
    health_port: int
    ca_bundle: str
    metrics_port: int | None = None  # None: metrics off

    @property
    def name(self) -> str:
        return self.chart.release

    def metrics_address(self) -> str:
        return "0" if self.metrics_port is None else f"127.0.0.1:{self.metrics_port}"


@dataclass(frozen=True)
class Controllers:
    """kueue_metrics: the URL Kueue serves its metrics on (HTTPS with a certificate of its own
    making; a bearer token whose user may `get` the non-resource URL /metrics, as the chart's
    <release>-metrics-reader ClusterRole grants)."""

    kueue_metrics: str


def start_controllers(
    plane: ControlPlane, kube: Kube, tools: Tools, opt_in_label: str | None = None
) -> Controllers:
    """Install JobSet's and Kueue's charts, start both managers on `plane`, and return once both
    report ready (their /readyz waits for the webhook server). `opt_in_label`: Kueue manages
    jobs only in namespaces with this label set to "true", as Red Hat's operator configures
    Kueue on OpenShift (_opt_in)."""
    workdir = plane.workdir / "controllers"
    workdir.mkdir()
    jobset_chart, kueue_chart = render_chart(tools, "jobset"), render_chart(tools, "kueue")
    kueue_certs = kueue_chart.manager_config()["internalCertManagement"]
    kueue_ca = CertificateAuthority(
        _mkdir(workdir / "kueue-pki"),
        common_name=KUEUE_CA_NAME,
        dns_names=(KUEUE_CA_NAME,),
        validity=KUEUE_CERT_VALIDITY,
        pkcs1_rsa=True,
    )
    kueue_pair = kueue_ca.issue(
        "webhook",
        "kueue-webhook",
        server=True,
        dns_names=(f"{kueue_certs['webhookServiceName']}.{kueue_chart.namespace}.svc",),
    )
    jobset_ca = CertificateAuthority(_mkdir(workdir / "jobset-pki"))
    jobset_pair = jobset_ca.issue("webhook", "jobset-webhook", server=True)
    jobset = _Manager(jobset_chart, free_port(), free_port(), _b64(jobset_ca.cert_path))
    kueue = _Manager(
        kueue_chart, free_port(), free_port(), _b64(kueue_ca.cert_path), metrics_port=free_port()
    )
    kueue_secret = {
        "ca.crt": kueue.ca_bundle,
        "ca.key": _b64(kueue_ca.key_path),
        "tls.crt": _b64(kueue_pair.cert),
        "tls.key": _b64(kueue_pair.key),
    }

    install_crds(kube, tools.data("autoscaler-crds").values())
    for manager in (jobset, kueue):
        crds = copy.deepcopy(manager.chart.of_kind("CustomResourceDefinition"))
        for crd in crds:
            conversion = crd["spec"].get("conversion", {})
            if conversion.get("strategy") == "Webhook":
                _point_at(conversion["webhook"]["clientConfig"], manager)
        install_crd_objects(kube, crds)
        # The stack creates each chart's namespace beside the chart.
        namespace = {"apiVersion": "v1", "kind": "Namespace"}
        kube.create({**namespace, "metadata": {"name": manager.chart.namespace}})
        for obj in copy.deepcopy(manager.chart.objects):
            if obj["kind"] in ("CustomResourceDefinition", "APIService"):
                continue
            if obj["kind"] in WEBHOOK_CONFIGURATIONS:
                for webhook in obj["webhooks"]:
                    _point_at(webhook["clientConfig"], manager)
                    if manager is kueue and opt_in_label is not None:
                        _opt_in(webhook, opt_in_label)
            if manager is kueue and obj["kind"] == "Secret":
                obj["data"] = kueue_secret
            kube.create(obj, dry_run=obj["kind"] == "Deployment")

    configs = {
        "jobset": _jobset_config(jobset, _cert_dir(workdir / "jobset-certs", jobset_pair)),
        "kueue": _kueue_config(kueue, _cert_dir(workdir / "kueue-certs", kueue_pair), opt_in_label),
    }
    for manager in (jobset, kueue):
        config = _write(workdir / f"{manager.name}.yaml", configs[manager.name])
        # controller-runtime's --kubeconfig flag (pkg/client/config): the admin's, as for kwok.
        args = [
            f"--config={config}" if arg.startswith("--config=") else arg
            for arg in manager.chart.manager_args()
        ]
        plane.spawn(
            manager.name,
            [str(tools.binary(manager.name)), f"--kubeconfig={plane.kubeconfig}", *args],
        )
    for manager in (jobset, kueue):
        plane.wait_http(manager.name, f"http://127.0.0.1:{manager.health_port}/readyz")
    return Controllers(f"https://127.0.0.1:{kueue.metrics_port}/metrics")


def _opt_in(webhook: Object, label: str) -> None:
    """A job framework's webhook (not one of Kueue's own kinds) also requires the namespace's
    opt-in label, merged into its namespaceSelector as Red Hat's operator merges it
    (openshift/kueue-operator dc3b657 pkg/webhook/pod_webhook.go mergeNamespaceSelectors)."""
    if all(KUEUE_GROUP in rule.get("apiGroups", []) for rule in webhook["rules"]):
        return
    selector = webhook.setdefault("namespaceSelector", {})
    requirement = {"key": label, "operator": "In", "values": ["true"]}
    selector["matchExpressions"] = [*selector.get("matchExpressions", []), requirement]


def _kueue_config(manager: _Manager, cert_dir: Path, opt_in_label: str | None) -> Object:
    """The chart's Configuration out of its pod. VisibilityOnDemand off: its API server is
    reached through an APIService, which loopback cannot route to (not created here). With
    `opt_in_label`, the jobs it manages are those in namespaces so labelled, as Red Hat's
    operator writes it (openshift/kueue-operator dc3b657 pkg/configmap/configmap.go)."""
    config = _out_of_pod(manager, cert_dir)
    config["featureGates"] = {**config.get("featureGates", {}), "VisibilityOnDemand": False}
    if opt_in_label is not None:
        config["managedJobsNamespaceSelector"] = {"matchLabels": {opt_in_label: "true"}}
    return config


def _jobset_config(manager: _Manager, cert_dir: Path) -> Object:
    """The chart's Configuration out of its pod, its own certificate management off (above)."""
    return {**_out_of_pod(manager, cert_dir), "internalCertManagement": {"enable": False}}


def _out_of_pod(manager: _Manager, cert_dir: Path) -> Object:
    """The chart's Configuration with the health probe, webhook and metrics (or none) on the
    manager's loopback ports, and no leader election: each control plane runs one manager of
    each, as it runs one controller-manager and one scheduler (controlplane.py, also without).
    With it on, as the charts set it, a lease renewal later than the renew deadline ends the
    manager ("leader election lost" exits the process: controller-runtime pkg/manager/
    internal.go, OnStoppedLeading), which nothing here restarts as a Deployment would: the
    likely cause (its log was gone) of JobSet's webhooks refusing connections in three tests of
    one run on a loaded VM (load 8-16)."""
    config = manager.chart.manager_config()
    return {
        **config,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{manager.health_port}"},
        "metrics": {
            "bindAddress": "0"
            if manager.metrics_port is None
            else f"127.0.0.1:{manager.metrics_port}"
        },
        "webhook": {"host": "127.0.0.1", "port": manager.webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {**config.get("leaderElection", {}), "leaderElect": False},
    }


def _cert_dir(directory: Path, pair: Pair) -> Path:
    """The pair under the names controller-runtime's webhook server reads (tls.crt, tls.key)."""
    directory.mkdir()
    shutil.copyfile(pair.cert, directory / "tls.crt")
    shutil.copyfile(pair.key, directory / "tls.key")
    return directory


def _point_at(client_config: dict[str, Any], manager: _Manager) -> None:
    """Upstream's `service: {name, namespace, path}` becomes the manager's loopback URL."""
    service = client_config.pop("service")
    client_config["url"] = f"https://127.0.0.1:{manager.webhook_port}{service['path']}"
    client_config["caBundle"] = manager.ca_bundle


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _write(path: Path, config: Object) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()
