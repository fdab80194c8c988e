"""Kueue and JobSet, the real managers built by build.py, attached to a loopback control plane.

Each manager runs as a process of the ControlPlane (stopped with it) with its upstream CRDs and
webhook configurations. There is no Service routing on loopback (no kube-proxy; the API server
refuses loopback endpoints), so the configurations are taken from each release's
config/components (the kustomize patches there applied, names prefixed as its config/default
does) and only their clientConfig is rewritten: `url: https://127.0.0.1:<port><path>` with the
CA of a serving pair made by certs.py. Kueue's CRDs get the conversion webhooks its
config/components/crd/kustomization.yaml patches in, their clientConfig rewritten the same way.

Certificates: JobSet's internal certificate management is off and its webhook serves the pair
from its certDir. Kueue's cannot be turned off here: without it Kueue 0.17.1 reads its metrics
certificate from the fixed path /etc/kueue/metrics/certs (cmd/kueue/main.go) and exits when it is
missing. So Kueue's rotator (open-policy-agent/cert-controller) stays on, as upstream installs
it, and is handed what cert-manager and the kubelet would hand it: the Secret it keeps its CA and
pair in, holding a pair that is also valid for 127.0.0.1, and the same pair in its certDir. The
rotator finds them valid, keeps them, and injects that CA into the webhooks and CRDs itself.
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
from tools.realtier.controlplane import ControlPlane, free_port
from tools.realtier.kube import Kube, Object, install_crd_objects

KUEUE_NAMESPACE = "kueue-system"
# Kueue's defaults (apis/config/v1beta2/defaults.go): its rotator keeps the pair in this Secret
# and wants it valid for <service>.<namespace>.svc.
KUEUE_WEBHOOK_SERVICE = "kueue-webhook-service"
KUEUE_WEBHOOK_SECRET = "kueue-webhook-server-cert"
# pkg/util/cert/cert.go `caName`: the rotator keeps a CA only if it is valid for this name.
KUEUE_CA_NAME = "kueue-ca"
# cert-controller v0.16.0 pkg/rotator: a CA or pair expiring within 90 days is replaced (and its
# CA key must be RSA, PKCS #1).
KUEUE_CERT_VALIDITY = datetime.timedelta(days=365)
# The frameworks Kueue manages here: JobSet only (issue #19 queues training as JobSets).
KUEUE_FRAMEWORKS = ("jobset.x-k8s.io/jobset",)


@dataclass(frozen=True)
class _Manager:
    name: str  # the binary, and the namePrefix of its config/default kustomization
    webhooks: str  # the data set holding its webhook manifests and their kustomization
    webhook_port: int
    health_port: int
    ca_bundle: str


def start_controllers(plane: ControlPlane, kube: Kube, tools: Tools) -> None:
    """Install the controllers' CRDs and webhooks, start Kueue and JobSet on `plane`, and return
    once both report ready (their /readyz waits for the webhook server)."""
    workdir = plane.workdir / "controllers"
    workdir.mkdir()
    kueue_pki, jobset_pki = workdir / "kueue-pki", workdir / "jobset-pki"
    kueue_pki.mkdir()
    jobset_pki.mkdir()
    kueue_ca = CertificateAuthority(
        kueue_pki,
        common_name=KUEUE_CA_NAME,
        dns_names=(KUEUE_CA_NAME,),
        validity=KUEUE_CERT_VALIDITY,
        pkcs1_rsa=True,
    )
    kueue_pair = kueue_ca.issue(
        "webhook",
        "kueue-webhook",
        server=True,
        dns_names=(f"{KUEUE_WEBHOOK_SERVICE}.{KUEUE_NAMESPACE}.svc",),
    )
    jobset_ca = CertificateAuthority(jobset_pki)
    jobset_pair = jobset_ca.issue("webhook", "jobset-webhook", server=True)
    kueue = _Manager("kueue", "kueue-webhooks", free_port(), free_port(), _b64(kueue_ca.cert_path))
    jobset = _Manager(
        "jobset", "jobset-webhooks", free_port(), free_port(), _b64(jobset_ca.cert_path)
    )

    conversions = {
        patch["metadata"]["name"]: patch["spec"]["conversion"]
        for path in tools.data("kueue-conversion").values()
        for patch in _load_all(path)
    }
    crds = [crd for path in tools.data("controller-crds").values() for crd in _load_all(path)]
    for crd in crds:
        if crd["metadata"]["name"] in conversions:
            conversion = copy.deepcopy(conversions[crd["metadata"]["name"]])
            _point_at(conversion["webhook"]["clientConfig"], kueue)
            crd["spec"]["conversion"] = conversion
    install_crd_objects(kube, crds)

    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_NAMESPACE}})
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": KUEUE_WEBHOOK_SECRET, "namespace": KUEUE_NAMESPACE},
            "type": "Opaque",
            "data": {
                "ca.crt": kueue.ca_bundle,
                "ca.key": _b64(kueue_ca.key_path),
                "tls.crt": _b64(kueue_pair.cert),
                "tls.key": _b64(kueue_pair.key),
            },
        }
    )
    for manager in (kueue, jobset):
        for configuration in webhook_configurations(tools.data(manager.webhooks), manager.name):
            for webhook in configuration["webhooks"]:
                _point_at(webhook["clientConfig"], manager)
            kube.create(configuration)

    kueue_config = _write(workdir / "kueue.yaml", _kueue_config(kueue, workdir, kueue_pair))
    jobset_config = _write(workdir / "jobset.yaml", _jobset_config(jobset, workdir, jobset_pair))
    # controller-runtime's --kubeconfig flag (pkg/client/config): the admin's, as for kwok.
    kubeconfig = f"--kubeconfig={plane.kubeconfig}"
    plane.spawn("kueue", [str(tools.binary("kueue")), kubeconfig, f"--config={kueue_config}"])
    plane.spawn("jobset", [str(tools.binary("jobset")), kubeconfig, f"--config={jobset_config}"])
    for manager in (kueue, jobset):
        plane.wait_http(manager.name, f"http://127.0.0.1:{manager.health_port}/readyz")


def _kueue_config(manager: _Manager, workdir: Path, pair: Pair) -> Object:
    """Upstream's config/components/manager/controller_manager_config.yaml, on loopback ports:
    JobSet the one framework; TopologyAwareScheduling is on by default (Beta since 0.14,
    pkg/features/kube_features.go). VisibilityOnDemand is off: its extra API server would need
    an APIService and a port of its own, and nothing here reads it."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        **_on_loopback(manager, _cert_dir(workdir / "kueue-certs", pair)),
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": KUEUE_WEBHOOK_SERVICE,
            "webhookSecretName": KUEUE_WEBHOOK_SECRET,
        },
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        "featureGates": {"VisibilityOnDemand": False},
    }


def _jobset_config(manager: _Manager, workdir: Path, pair: Pair) -> Object:
    """JobSet's Configuration (api/config/v1alpha1) with its own certificate management off."""
    return {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        **_on_loopback(manager, _cert_dir(workdir / "jobset-certs", pair)),
        "internalCertManagement": {"enable": False},
    }


def _on_loopback(manager: _Manager, cert_dir: Path) -> Object:
    """The settings both managers take in controller-runtime's shape: health probe and webhook
    on their loopback ports, metrics off, no leader election (one replica)."""
    return {
        "health": {"healthProbeBindAddress": f"127.0.0.1:{manager.health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": manager.webhook_port, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
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


def webhook_configurations(files: dict[str, Path], name_prefix: str) -> list[Object]:
    """manifests.yaml with the patches its kustomization.yaml lists applied (inline strategic
    merge patches, and JSON 6902 patches from files), named with config/default's namePrefix."""
    kustomization = yaml.safe_load(files["kustomization.yaml"].read_text(encoding="utf-8"))
    objects = _load_all(files["manifests.yaml"])
    for entry in kustomization.get("patches", []):
        if "patch" in entry:
            patch = yaml.safe_load(entry["patch"])
        else:
            patch = yaml.safe_load(files[Path(entry["path"]).name].read_text(encoding="utf-8"))
        if isinstance(patch, list):
            target = entry["target"]
            (obj,) = [o for o in objects if _is(o, target["kind"], target["name"])]
            for operation in patch:
                _json6902(obj, operation)
        else:
            (obj,) = [o for o in objects if _is(o, patch["kind"], patch["metadata"]["name"])]
            _merge_webhooks(obj, patch)
    for obj in objects:
        obj["metadata"]["name"] = f"{name_prefix}-{obj['metadata']['name']}"
    return objects


def _is(obj: Object, kind: str, name: str) -> bool:
    return bool(obj["kind"] == kind and obj["metadata"]["name"] == name)


def _merge_webhooks(obj: Object, patch: Object) -> None:
    """A strategic merge patch of a webhook configuration: `webhooks` merges by `name`."""
    by_name = {webhook["name"]: webhook for webhook in obj["webhooks"]}
    for patched in patch.get("webhooks", []):
        _merge(by_name[patched["name"]], patched)


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _json6902(obj: Object, operation: dict[str, Any]) -> None:
    """The `replace` and `add` operations of RFC 6902 (all the upstream patches use)."""
    if operation["op"] not in ("replace", "add"):
        raise ValueError(f"unsupported JSON patch operation {operation['op']}")
    *parents, last = operation["path"].lstrip("/").split("/")
    node: Any = obj
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        if operation["op"] == "add":
            node.insert(len(node) if last == "-" else int(last), operation["value"])
        else:
            node[int(last)] = operation["value"]
    else:
        node[last] = operation["value"]


def _load_all(path: Path) -> list[Object]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def _write(path: Path, config: Object) -> Path:
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()
