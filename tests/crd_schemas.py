"""JSON schemas for the custom resources the program creates: the CRDs' required fields and types.

Sources: openshift/api security/v1/zz_generated.crd-manifests/
0000_03_config-operator_01_securitycontextconstraints.crd.yaml (required keys below);
k8snetworkplumbingwg NetworkAttachmentDefinition CRD (spec.config: string);
GKE networking.gke.io/v1 Network and GKENetworkParamSet (GKE multi-networking docs).
"""

from __future__ import annotations

from typing import Any

_STRING_LIST_OR_NULL = {"type": ["array", "null"], "items": {"type": "string"}}
_NAME = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}
_METADATA = {"type": "object", "required": ["name"], "properties": {"name": _NAME}}
_STRATEGY = {"type": "object", "properties": {"type": {"type": "string"}}}

SCC: dict[str, Any] = {
    "type": "object",
    "required": [
        "apiVersion",
        "kind",
        "metadata",
        "allowHostDirVolumePlugin",
        "allowHostIPC",
        "allowHostNetwork",
        "allowHostPID",
        "allowHostPorts",
        "allowPrivilegedContainer",
        "allowedCapabilities",
        "defaultAddCapabilities",
        "priority",
        "readOnlyRootFilesystem",
        "requiredDropCapabilities",
        "volumes",
    ],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "security.openshift.io/v1"},
        "kind": {"const": "SecurityContextConstraints"},
        "metadata": _METADATA,
        **{
            key: {"type": "boolean"}
            for key in (
                "allowHostDirVolumePlugin",
                "allowHostIPC",
                "allowHostNetwork",
                "allowHostPID",
                "allowHostPorts",
                "allowPrivilegeEscalation",
                "allowPrivilegedContainer",
                "readOnlyRootFilesystem",
            )
        },
        "allowedCapabilities": _STRING_LIST_OR_NULL,
        "defaultAddCapabilities": _STRING_LIST_OR_NULL,
        "requiredDropCapabilities": _STRING_LIST_OR_NULL,
        "volumes": _STRING_LIST_OR_NULL,
        "seccompProfiles": _STRING_LIST_OR_NULL,
        "users": _STRING_LIST_OR_NULL,
        "groups": _STRING_LIST_OR_NULL,
        "priority": {"type": ["integer", "null"]},
        "fsGroup": _STRATEGY,
        "runAsUser": _STRATEGY,
        "seLinuxContext": _STRATEGY,
        "supplementalGroups": _STRATEGY,
    },
}


def _with_spec(api_version: str, required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """A namespaced-or-cluster CR whose fields live under a closed `spec`."""
    return {
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": api_version},
            "metadata": _METADATA,
            "spec": {
                "type": "object",
                "required": required,
                "additionalProperties": False,
                "properties": properties,
            },
        },
    }


NAD = _with_spec("k8s.cni.cncf.io/v1", ["config"], {"config": {"type": "string"}})

GKE_NETWORK_PARAM_SET = _with_spec(
    "networking.gke.io/v1",
    ["vpc", "vpcSubnet", "deviceMode"],
    {
        "vpc": {"type": "string"},
        "vpcSubnet": {"type": "string"},
        "deviceMode": {"enum": ["NetDevice", "DPDK-VFIO", "RDMA"]},
    },
)

GKE_NETWORK = _with_spec(
    "networking.gke.io/v1",
    ["type"],
    {
        "type": {"enum": ["L3", "Device"]},
        "parametersRef": {
            "type": "object",
            "required": ["group", "kind", "name"],
            "properties": {
                "group": {"const": "networking.gke.io"},
                "kind": {"const": "GKENetworkParamSet"},
                "name": {"type": "string"},
            },
        },
    },
)

# CNI plugin config carried in a NAD's spec.config (CNI spec 1.0 + the plugins' own keys).
CNI_CONFIG: dict[str, Any] = {
    "type": "object",
    "required": ["cniVersion", "name", "type", "ipam"],
    "properties": {
        "cniVersion": {"enum": ["0.3.1", "0.4.0", "1.0.0"]},
        "name": {"type": "string"},
        "type": {"enum": ["sriov", "macvlan", "host-device"]},
        "mtu": {"type": "integer", "minimum": 1280, "maximum": 9216},
        "master": {"type": "string"},
        "device": {"type": "string"},
        "ipam": {
            "type": "object",
            "required": ["type", "range"],
            "properties": {
                "type": {"const": "whereabouts"},
                "range": {"type": "string"},
                "routes": {
                    "type": "array",
                    "items": {"type": "object", "required": ["dst"]},
                },
            },
        },
    },
    "allOf": [
        {"if": {"properties": {"type": {"const": "macvlan"}}}, "then": {"required": ["master"]}},
        # host-device takes the device Multus passes (deviceID); a `device` would override it
        # (containernetworking/plugins plugins/main/host-device/host-device.go getLink).
        {
            "if": {"properties": {"type": {"const": "host-device"}}},
            "then": {"not": {"required": ["device"]}},
        },
    ],
}

# machineconfiguration.openshift.io/v1 MachineConfig (openshift/api machineconfiguration/v1
# types.go: spec.config is an Ignition config; MCO reads storage.files path/mode/contents.source).
MACHINE_CONFIG: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "machineconfiguration.openshift.io/v1"},
        "kind": {"const": "MachineConfig"},
        "metadata": {
            "type": "object",
            "required": ["name", "labels"],
            "properties": {
                "name": _NAME,
                "labels": {
                    "type": "object",
                    "required": ["machineconfiguration.openshift.io/role"],
                },
            },
        },
        "spec": {
            "type": "object",
            "required": ["config"],
            "properties": {
                "config": {
                    "type": "object",
                    "required": ["ignition"],
                    "properties": {
                        "ignition": {
                            "type": "object",
                            "required": ["version"],
                            "properties": {"version": {"pattern": "^3\\.[0-9]+\\.[0-9]+$"}},
                        },
                        "storage": {
                            "type": "object",
                            "properties": {
                                "files": {
                                    "type": "array",
                                    "items": {
                                        "type": "object",
                                        "required": ["path", "contents"],
                                        "additionalProperties": False,
                                        "properties": {
                                            "path": {"type": "string", "pattern": "^/"},
                                            "mode": {"type": "integer"},
                                            "overwrite": {"type": "boolean"},
                                            "contents": {
                                                "type": "object",
                                                "required": ["source"],
                                                "properties": {
                                                    "source": {
                                                        "type": "string",
                                                        "pattern": "^data:",
                                                    }
                                                },
                                            },
                                        },
                                    },
                                }
                            },
                        },
                    },
                }
            },
        },
    },
}

BY_KIND = {
    "SecurityContextConstraints": SCC,
    "NetworkAttachmentDefinition": NAD,
    "MachineConfig": MACHINE_CONFIG,
    "GKENetworkParamSet": GKE_NETWORK_PARAM_SET,
    "Network": GKE_NETWORK,
}
