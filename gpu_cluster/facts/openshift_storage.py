"""StorageClasses of OpenShift Data Foundation (ODF), Red Hat's Ceph storage for OpenShift: which
of them provision shared (ReadWriteMany) file systems, the volumes the training pods mount."""

from __future__ import annotations

# The StorageCluster ODF creates: `ocs-storagecluster` in internal mode (Red Hat ODF 4.9,
# "Deploying OpenShift Data Foundation using bare metal infrastructure", 2.5.4 "Verifying that
# the storage classes are created and listed": ocs-storagecluster-ceph-rbd,
# ocs-storagecluster-cephfs), `ocs-external-storagecluster` on a Ceph cluster outside OpenShift
# (Red Hat ODF 4.15, "Deploying multiple OpenShift Data Foundation storage clusters", 5.6
# "Verifying that storage cluster is ready"); docs.redhat.com, consulted 2026-11-28.
ODF_STORAGE_CLUSTERS = ("ocs-storagecluster", "ocs-external-storagecluster")

# Each StorageCluster's Ceph RBD class, `<StorageCluster>-ceph-rbd`, with its CephFS class,
# `<StorageCluster>-cephfs`, in either mode (red-hat-storage/ocs-operator 82e94fd
# controllers/storagecluster/generate.go GenerateNameForCephBlockPoolSC and
# GenerateNameForCephFilesystemSC; external_resources.go at 409a0df). The RBD class "Provides RWO
# Filesystem volumes, and RWO and RWX Block volumes" (its description, storageclasses.go at
# 82e94fd): ceph-csi refuses a ReadWriteMany file system, "multi node access modes are only
# supported on rbd `block` type volumes" (ceph/ceph-csi 347b4d2 internal/rbd/controllerserver.go
# parseVolCreateRequest; ceph/ceph-csi#427), so such a claim stays Pending. CephFS provides them.
CEPHFS_CLASS_BY_RBD_CLASS = {
    f"{cluster}-ceph-rbd": f"{cluster}-cephfs" for cluster in ODF_STORAGE_CLUSTERS
}
