"""OpenShift SecurityContextConstraints for the training pods (pure).

restricted-v2 plus exactly the capabilities the network mode needs. The CRD's required keys:
openshift/api security/v1/zz_generated.crd-manifests/
0000_03_config-operator_01_securitycontextconstraints.crd.yaml.
"""

from __future__ import annotations

from typing import Any

# Annotation that pins a pod to one SCC instead of letting admission pick (OpenShift >= 4.14).
REQUIRED_SCC_ANNOTATION = "openshift.io/required-scc"
# restricted-v2's allowed volume types.
RESTRICTED_VOLUMES = (
    "configMap",
    "downwardAPI",
    "emptyDir",
    "persistentVolumeClaim",
    "projected",
    "secret",
)


def scc_manifest(name: str, capabilities: tuple[str, ...]) -> dict[str, Any]:
    """restricted-v2 with `capabilities` allowed in addition to NET_BIND_SERVICE.

    Every key the CRD requires is present; the nullable ones get their empty value because
    Pulumi drops None-valued inputs.
    """
    return {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {
            "name": name,
            "annotations": {
                "kubernetes.io/description": (
                    "restricted-v2 plus "
                    + ", ".join(capabilities)
                    + " for gpu-cluster training pods"
                )
            },
        },
        "allowHostDirVolumePlugin": False,
        "allowHostIPC": False,
        "allowHostNetwork": False,
        "allowHostPID": False,
        "allowHostPorts": False,
        "allowPrivilegeEscalation": False,
        "allowPrivilegedContainer": False,
        "allowedCapabilities": ["NET_BIND_SERVICE", *capabilities],
        "defaultAddCapabilities": [],
        "fsGroup": {"type": "MustRunAs"},
        "groups": [],
        "priority": 0,
        "readOnlyRootFilesystem": False,
        "requiredDropCapabilities": ["ALL"],
        "runAsUser": {"type": "MustRunAsRange"},
        "seLinuxContext": {"type": "MustRunAs"},
        "seccompProfiles": ["runtime/default"],
        "supplementalGroups": {"type": "RunAsAny"},
        "users": [],
        "volumes": list(RESTRICTED_VOLUMES),
    }
