"""OpenShift security objects for the training pods (pure): the SCC and the memlock MachineConfig.

The SCC is restricted-v2 (openshift/cluster-kube-apiserver-operator bindata/bootkube/
scc-manifests/0000_20_kube-apiserver-operator_00_scc-restricted-v2.yaml at 79795a6) plus exactly
what the memlock strategy needs; tests/vendor/ keeps that file and the test lists each deviation.
The CRD's required keys: openshift/api security/v1/zz_generated.crd-manifests/
0000_03_config-operator_01_securitycontextconstraints.crd.yaml.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

# Annotation that pins a pod to one SCC instead of letting admission pick (OpenShift >= 4.14).
REQUIRED_SCC_ANNOTATION = "openshift.io/required-scc"
# The SCC every authenticated user may use, which the training SCC starts from (the file above).
RESTRICTED_SCC = "restricted-v2"
# restricted-v2's allowed volume types ("ephemeral" since 9ce4d4a, "csi" since 7c69f56,
# "image" since 79795a6, all in cluster-kube-apiserver-operator).
RESTRICTED_VOLUMES = (
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "image",
    "persistentVolumeClaim",
    "projected",
    "secret",
)
# restricted-v2 allows NET_BIND_SERVICE to be added; everything else must be dropped.
RESTRICTED_CAPABILITIES = ("NET_BIND_SERVICE",)
# Annotation that says what applying an object does to the cluster, for `pulumi preview`.
DISRUPTION_ANNOTATION = "gpu-cluster/disruption"


def training_scc_name(namespace: str, name: str) -> str:
    """The training SCC's name: cluster-scoped, so it names the stack's namespace too."""
    return f"{namespace}-{name}-training"


def scc_manifest(name: str, capabilities: tuple[str, ...], any_user: bool) -> dict[str, Any]:
    """restricted-v2 with `capabilities` allowed too and, with `any_user`, runAsUser RunAsAny
    (so one container may run as UID 0, where an added capability is effective).

    Every key the CRD requires is present. restricted-v2's `priority` and
    `defaultAddCapabilities` are null; Pulumi drops None-valued inputs, so they get 0 and []:
    SCC admission orders a null priority as 0 (openshift/apiserver-library-go
    pkg/securitycontextconstraints/util/sort/byrestrictions.go getPriority), and [] adds
    nothing either.
    """
    description = "restricted-v2 plus " + ", ".join(capabilities) + " for gpu-cluster training"
    if any_user:
        description += "; runAsUser RunAsAny so only the training container runs as UID 0"
    return {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": name, "annotations": {"kubernetes.io/description": description}},
        "allowHostDirVolumePlugin": False,
        "allowHostIPC": False,
        "allowHostNetwork": False,
        "allowHostPID": False,
        "allowHostPorts": False,
        "allowPrivilegeEscalation": False,
        "allowPrivilegedContainer": False,
        "allowedCapabilities": [*RESTRICTED_CAPABILITIES, *capabilities],
        "defaultAddCapabilities": [],
        "fsGroup": {"type": "MustRunAs"},
        "groups": [],
        "priority": 0,
        "readOnlyRootFilesystem": False,
        "requiredDropCapabilities": ["ALL"],
        "runAsUser": {"type": "RunAsAny" if any_user else "MustRunAsRange"},
        "seLinuxContext": {"type": "MustRunAs"},
        "seccompProfiles": ["runtime/default"],
        "supplementalGroups": {"type": "RunAsAny"},
        "users": [],
        "volumes": list(RESTRICTED_VOLUMES),
    }


# CRI-O drop-in that lifts the memlock limit of every container on the pool's nodes. Drop-ins
# apply in lexical order and the later file wins per option, a list replacing the earlier list
# (cri-o/cri-o docs/crio.conf.d.5.md at 7b8e49f, pkg/config/config.go UpdateFromDropInFile), so
# it sorts after MCO's 00-default and carries the nofile entry 00-default sets on release-4.20
# (openshift/machine-config-operator templates/worker/01-worker-container-runtime/_base/files/
# crio.yaml, 3ed973f).
MEMLOCK_DROP_IN_PATH = "/etc/crio/crio.conf.d/99-gpu-cluster-memlock"
MEMLOCK_DROP_IN = (
    '[crio.runtime]\ndefault_ulimits = [\n  "memlock=-1:-1",\n  "nofile=1048576",\n]\n'
)
# Ignition spec version MachineConfigs carry (OpenShift docs' MachineConfig examples).
IGNITION_VERSION = "3.2.0"
# Annotation naming the stack that manages the shared memlock MachineConfig.
OWNER_ANNOTATION = "gpu-cluster/owner"


def memlock_machine_config_name(pool: str) -> str:
    """One name per pool, not per stack: every stack on the pool needs the same drop-in, and a
    second copy under another name would reboot the pool again when created and when deleted
    for a setting that does not change. The stack that creates it owns it; the others
    reference it (rdma.machineConfig)."""
    return f"99-{pool}-gpu-cluster-memlock"


# MCO drains and reboots for a changed file no node disruption policy names; the cluster's
# MachineConfiguration `cluster` can name this path with a CRI-O restart instead (OpenShift >=
# 4.17: openshift/api operator/v1/types_machineconfiguration.go NodeDisruptionPolicyConfig at
# 2a3d739; openshift/machine-config-operator pkg/daemon/update.go
# calculatePostConfigChangeNodeDisruptionActionFromMCDiffs and pkg/apihelpers/apihelpers.go's
# defaults, which name no crio.conf.d file, at 7ff337a). Cluster-wide, so the admin's, not
# the stack's: docs/operations.md shows it.
def memlock_disruption(pool: str) -> str:
    return (
        f"applying or removing this drains and reboots every node of MachineConfigPool "
        f"{pool!r}, one at a time (crio.conf.d is not in MCO's no-reboot list), unless the "
        f"cluster's node disruption policy maps {MEMLOCK_DROP_IN_PATH} to a restart of "
        "crio.service (OpenShift >= 4.17; docs/operations.md, 'OpenShift: RDMA memory "
        "locking'); needs cluster-admin. Shared by every stack on the pool, so `pulumi "
        f"destroy` keeps it: `oc delete machineconfig {memlock_machine_config_name(pool)}` "
        "once none needs it"
    )


def memlock_machine_config(pool: str, owner: str) -> dict[str, Any]:
    """MachineConfig (machineconfiguration.openshift.io/v1) writing MEMLOCK_DROP_IN on `pool`,
    annotated with its `owner` (the Pulumi project/stack that manages it). MCO names the pool's
    rendered config by a hash of the merged MachineConfigs' spec (openshift/machine-config-operator
    pkg/controller/render/hash.go at 0d843aa), so a change of owner alone touches no node."""
    return {
        "apiVersion": "machineconfiguration.openshift.io/v1",
        "kind": "MachineConfig",
        "metadata": {
            "name": memlock_machine_config_name(pool),
            # The pool selects its MachineConfigs by this label (MCO docs).
            "labels": {"machineconfiguration.openshift.io/role": pool},
            "annotations": {
                "kubernetes.io/description": (
                    "CRI-O default memlock unlimited for RDMA memory registration (gpu-cluster)"
                ),
                DISRUPTION_ANNOTATION: memlock_disruption(pool),
                OWNER_ANNOTATION: owner,
            },
        },
        "spec": {
            "config": {
                "ignition": {"version": IGNITION_VERSION},
                "storage": {
                    "files": [
                        {
                            "path": MEMLOCK_DROP_IN_PATH,
                            "mode": 0o644,
                            "overwrite": True,
                            "contents": {"source": "data:," + urllib.parse.quote(MEMLOCK_DROP_IN)},
                        }
                    ]
                },
            }
        },
    }
