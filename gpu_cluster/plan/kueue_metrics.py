"""Kueue's metrics on GKE when the stack installs Kueue: Managed Service for Prometheus scrapes
its manager as the chart's ServiceMonitor does for prometheus-operator (HTTPS, a token of the
chart's metrics-reader role), with the objects Google's own example gives a PodMonitoring for a
target behind authorization (prometheus-engine v0.17.2 examples/inference-optimized-gateway:
a ServiceAccount bound to the reader role, its token Secret, the collector's read of that one
Secret). Pure."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.config.schema import Settings
from gpu_cluster.facts.kueue import (
    KUEUE_METRICS_PORT,
    KUEUE_METRICS_READER_ROLE,
    kueue_manager_pod_labels,
)
from gpu_cluster.facts.metrics_scrape import GKE_MANAGED_COLLECTOR_ACCOUNT, SCRAPE_INTERVAL
from gpu_cluster.plan.controllers import controller_charts

# The key of a service-account-token Secret that holds the token (kubernetes.io/docs
# concepts/configuration/secret, "Service account token Secrets").
TOKEN_KEY = "token"


@dataclass(frozen=True)
class KueueScrapePlan:
    """name: the stack's objects' (the ServiceAccount's; its token Secret and grants add to it),
    in Kueue's `namespace`. release: Kueue's Helm release."""

    name: str
    namespace: str
    release: str

    @property
    def token_secret(self) -> str:
        return f"{self.name}-token"

    @property
    def reader_role(self) -> str:
        return KUEUE_METRICS_READER_ROLE

    @property
    def collector(self) -> tuple[str, str]:
        """(namespace, name) of the ServiceAccount that scrapes, and so reads the token."""
        return GKE_MANAGED_COLLECTOR_ACCOUNT

    def pod_monitoring_spec(self) -> dict[str, object]:
        endpoint = {
            "port": KUEUE_METRICS_PORT,
            "scheme": "https",
            "path": "/metrics",
            "interval": SCRAPE_INTERVAL,
            "authorization": {
                "type": "Bearer",
                "credentials": {"secret": {"name": self.token_secret, "key": TOKEN_KEY}},
            },
            # Kueue's certificate is its own, self-signed; the chart's ServiceMonitor does not
            # verify it either.
            "tls": {"insecureSkipVerify": True},
        }
        return {
            "selector": {"matchLabels": kueue_manager_pod_labels(self.release)},
            "endpoints": [endpoint],
        }


def kueue_scrape_plan(s: Settings) -> KueueScrapePlan | None:
    """None unless the stack installs Kueue on GKE (OpenShift: Red Hat's Kueue operator brings
    its own ServiceMonitor; a Kueue the stack did not install is its owner's to scrape)."""
    if s.platform != "gke":
        return None
    kueue = next((c for c in controller_charts(s) if c.release == "kueue"), None)
    if kueue is None:
        return None
    return KueueScrapePlan(f"{s.name}-kueue-metrics", kueue.namespace, kueue.release)
