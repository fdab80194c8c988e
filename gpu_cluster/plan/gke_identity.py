"""Who GKE nodes and pods are to Google Cloud: the nodes' own service account, its roles, and the
cluster's Workload Identity pool (pure)."""

from __future__ import annotations

import hashlib

# What the nodes' service account may do: GKE's least-privilege role for node accounts (logs,
# metrics, resource metadata, autoscaling metrics), which Google names as the minimum a node
# account needs, and pulling images from Artifact Registry, which Google adds where nodes pull
# private images (docs.cloud.google.com/kubernetes-engine/security/configure-node-service-accounts,
# "Grant the minimum required role for GKE", consulted 2026-11-28). Not the older set
# cluster-toolkit's GPU blueprints still grant `gke-np-sa` (1047080), whose project-wide
# storage.objectViewer reads every bucket of the project and served only gcr.io, which
# Artifact Registry now serves.
NODE_ROLES = (
    "roles/container.defaultNodeServiceAccount",
    "roles/artifactregistry.reader",
)
# Service account IDs: 6-30 characters, [a-z]([-a-z0-9]*[a-z0-9]) (pulumi_gcp 10.2
# serviceaccount.Account `account_id`; cloud.google.com/iam/docs/service-accounts-create).
ACCOUNT_ID_MAX = 30
NODE_ACCOUNT_SUFFIX = "-nodes"
_HASH_CHARS = 6


def node_account_id(name: str) -> str:
    """`<name>-nodes`, or, for a `name` too long for that (a GKE cluster name may have 40
    characters), its first characters, a hash of the whole name (so two such names never share
    an account) and the suffix."""
    plain = f"{name}{NODE_ACCOUNT_SUFFIX}"
    if len(plain) <= ACCOUNT_ID_MAX:
        return plain
    digest = hashlib.sha256(name.encode()).hexdigest()[:_HASH_CHARS]
    keep = ACCOUNT_ID_MAX - len(NODE_ACCOUNT_SUFFIX) - _HASH_CHARS - 1
    return f"{name[:keep].rstrip('-')}-{digest}{NODE_ACCOUNT_SUFFIX}"


def node_account_email(name: str, project: str) -> str:
    """The address GCP gives a user-managed account, <id>@<project>.iam.gserviceaccount.com
    (cloud.google.com/iam/docs/service-account-types), known before the account exists."""
    return f"{node_account_id(name)}@{project}.iam.gserviceaccount.com"


def workload_pool(project: str) -> str:
    """The cluster's Workload Identity pool: one per project, `<project>.svc.id.goog`
    (cluster-toolkit modules/scheduler/gke-cluster main.tf `workload_identity_config`)."""
    return f"{project}.svc.id.goog"


def pod_principal(project_number: str, project: str, namespace: str, account: str) -> str:
    """The IAM principal of Kubernetes ServiceAccount `namespace`/`account` in the cluster's pool
    (Workload Identity Federation for GKE; GoogleCloudPlatform/gcs-fuse-csi-driver
    docs/authentication.md, 5fcdc04)."""
    pool = workload_pool(project)
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/"
        f"workloadIdentityPools/{pool}/subject/ns/{namespace}/sa/{account}"
    )
