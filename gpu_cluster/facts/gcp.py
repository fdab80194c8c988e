"""Compute Engine and GKE facts: name limits, address ranges, reservations and flex-start, image
streaming (the GPU machines themselves: facts/machines.py)."""

from __future__ import annotations

import ipaddress

# GKE cluster names: 1-40 characters, DNS-1035 (cloud.google.com/kubernetes-engine/docs/
# reference/rest/v1/projects.locations.clusters#Cluster "name").
GKE_CLUSTER_NAME_MAX = 40
# Compute Engine resource names: RFC 1035, at most 63 characters
# (cloud.google.com/compute/docs/naming-resources).
GCP_NAME_MAX = 63
# Ranges a cluster network may use: RFC 1918 private space and RFC 6598 shared space (both valid
# GCP subnet ranges, cloud.google.com/vpc/docs/subnets#valid-ranges). Loopback, link-local,
# multicast, public and reserved ranges are refused by GCP or unroutable between pods.
USABLE_PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(n)
    for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10")
)


# Most authorized ranges GKE takes: 50 on a cluster with a public endpoint and public nodes, 100
# on a private cluster (cloud.google.com/kubernetes-engine/docs/how-to/authorized-networks,
# "Limitations", consulted 2026-11-24).
AUTHORIZED_NETWORKS_MAX = {False: 50, True: 100}


# A reservation, optionally a block or sub-block of it (see GcpSettings.reservation).
_NAME = r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?"
RESERVATION_PATTERN = (
    rf"^(projects/[a-z][-a-z0-9]{{4,28}}[a-z0-9]/reservations/)?{_NAME}"
    rf"(/reservationBlocks/{_NAME}(/reservationSubBlocks/{_NAME})?)?$"
)
# Longest a flex-start VM runs: 7 days (cloud.google.com/kubernetes-engine/docs/concepts/dws).
FLEX_START_MAX_SECONDS = 7 * 24 * 3600
# Oldest GKE version with flex-start for GPU node pools (docs.cloud.google.com/ai-hypercomputer/
# docs/create/gke-ai-hypercompute; cloud.google.com/kubernetes-engine/docs/concepts/dws).
FLEX_START_MIN_GKE = "1.32.2-gke.1652000"

# Image streaming (GKE's Container File System, node_config.gcfs_config) streams only images in
# Artifact Registry, whose Docker hosts are <location>-docker.pkg.dev (a region or a
# multi-region such as `us`); any other image is pulled whole as without it. It needs the
# Container-Optimized OS with containerd node image and the Container File System API
# (containerfilesystem.googleapis.com) enabled in the project
# (cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, "Requirements", consulted
# 2026-11-24).
ARTIFACT_REGISTRY_IMAGE = r"^[a-z0-9]+(-[a-z0-9]+)*-docker\.pkg\.dev/"
IMAGE_STREAMING_API = "containerfilesystem.googleapis.com"
# Cloud Monitoring's API, which creates a dashboard (monitoring.dashboard;
# cloud.google.com/monitoring/dashboards/api-dashboard, "Before you begin", consulted
# 2026-11-29).
MONITORING_API = "monitoring.googleapis.com"

# The APIs a GKE stack's `pulumi up` calls, which the program does not enable (each page's
# "Before you begin", consulted 2026-11-28): Compute Engine for the VPCs and subnets
# (cloud.google.com/vpc/docs/create-modify-vpc-networks), Kubernetes Engine for the cluster and
# pools (cloud.google.com/kubernetes-engine/docs/how-to/creating-a-zonal-cluster), IAM for the
# node service account (docs.cloud.google.com/iam/docs/service-accounts-create) and Resource
# Manager for its project role grants (cloud.google.com/iam/docs/write-policy-client-libraries).
GKE_STACK_APIS = (
    "compute.googleapis.com",
    "container.googleapis.com",
    "iam.googleapis.com",
    "cloudresourcemanager.googleapis.com",
)

# GKE's security group for Google Groups for RBAC: "Group name must be in format
# gke-security-groups@yourdomain.com" (pulumi_gcp container.Cluster authenticatorGroupsConfig).
RBAC_SECURITY_GROUP_NAME = "gke-security-groups"
