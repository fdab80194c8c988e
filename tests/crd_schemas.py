"""JSON schemas for the custom resources the program creates: the CRDs' required fields and types.

Sources: openshift/api security/v1/zz_generated.crd-manifests/
0000_03_config-operator_01_securitycontextconstraints.crd.yaml (required keys below);
k8snetworkplumbingwg NetworkAttachmentDefinition CRD (spec.config: string);
GKE networking.gke.io/v1 Network and GKENetworkParamSet (GKE multi-networking docs); Kueue's
and JobSet's CRDs (below).
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

# Kueue v1beta2 (kubernetes-sigs/kueue config/components/crd/bases, v0.17.1; every field here is
# in v0.19.2's too) and JobSet v1alpha2 (kubernetes-sigs/jobset config/components/crd/bases,
# v0.10.1, and v0.12.0): the spec fields the program sets. A JobSet's Job templates are
# validated as batch/v1 Jobs (tests/test_schemas.py).
_KUEUE = "kueue.x-k8s.io/v1beta2"
_STRING = {"type": "string"}
_STRINGS = {"type": "array", "items": _STRING}
_QUANTITY = {"type": "string", "pattern": "^[0-9]+(m)?$"}


def _closed(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    """An object of these properties only."""
    return {
        "type": "object",
        "required": required,
        "additionalProperties": False,
        "properties": properties,
    }


def _list_of(item: dict[str, Any], min_items: int = 0) -> dict[str, Any]:
    return {"type": "array", "minItems": min_items, "items": item}


KUEUE_TOPOLOGY = _with_spec(
    _KUEUE, ["levels"], {"levels": _list_of(_closed(["nodeLabel"], {"nodeLabel": _STRING}), 1)}
)
RESOURCE_FLAVOR = _with_spec(
    _KUEUE,
    [],
    {"nodeLabels": {"type": "object", "additionalProperties": _STRING}, "topologyName": _STRING},
)
_QUOTA = _closed(["name", "nominalQuota"], {"name": _STRING, "nominalQuota": _QUANTITY})
_FLAVOR_QUOTAS = _closed(["name", "resources"], {"name": _STRING, "resources": _list_of(_QUOTA)})
CLUSTER_QUEUE = _with_spec(
    _KUEUE,
    ["resourceGroups"],
    {
        "namespaceSelector": {"type": "object"},
        # v1beta2 has no spec.admissionChecks (v1beta1's); the API server would prune it.
        "admissionChecksStrategy": _closed(
            ["admissionChecks"],
            {
                "admissionChecks": _list_of(
                    _closed(["name"], {"name": _STRING, "onFlavors": _STRINGS}), 1
                )
            },
        ),
        "resourceGroups": _list_of(
            _closed(
                ["coveredResources", "flavors"],
                {"coveredResources": _STRINGS, "flavors": _list_of(_FLAVOR_QUOTAS)},
            )
        ),
        # kueue v0.19.2 config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml
        # spec.preemption.withinClusterQueue's enum.
        "preemption": _closed(
            [],
            {
                "withinClusterQueue": {
                    "enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"]
                }
            },
        ),
    },
)
# No spec: `value` (int32, required) and `description` at the top (kueue v0.19.2
# config/components/crd/bases/kueue.x-k8s.io_workloadpriorityclasses.yaml).
WORKLOAD_PRIORITY_CLASS = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "value"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": _KUEUE},
        "kind": {"const": "WorkloadPriorityClass"},
        "metadata": _METADATA,
        "value": {"type": "integer", "minimum": -(2**31), "maximum": 2**31 - 1},
        "description": {"type": "string", "maxLength": 2048},
    },
}
LOCAL_QUEUE = _with_spec(_KUEUE, ["clusterQueue"], {"clusterQueue": _STRING})
PROVISIONING_REQUEST_CONFIG = _with_spec(
    _KUEUE,
    ["provisioningClassName"],
    {"provisioningClassName": _STRING, "managedResources": _STRINGS},
)
ADMISSION_CHECK = _with_spec(
    _KUEUE,
    ["controllerName"],
    {
        "controllerName": _STRING,
        "parameters": _closed(
            ["apiGroup", "kind", "name"],
            {
                "apiGroup": {"const": "kueue.x-k8s.io"},
                "kind": {"const": "ProvisioningRequestConfig"},
                "name": _STRING,
            },
        ),
    },
)
_FAILURE_POLICY_RULE = _closed(
    ["name", "action"],
    {
        # jobset pkg/webhooks jobset_webhook.go validateFailurePolicy.
        "name": {"pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
        "action": {"enum": ["FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts"]},
        "onJobFailureReasons": _list_of(
            {
                "enum": [
                    "BackoffLimitExceeded",
                    "DeadlineExceeded",
                    "PodFailurePolicy",
                    "MaxFailedIndexesExceeded",
                ]
            }
        ),
    },
)
JOBSET = _with_spec(
    "jobset.x-k8s.io/v1alpha2",
    ["replicatedJobs"],
    {
        "failurePolicy": _closed(
            [],
            {
                "maxRestarts": {"type": "integer", "minimum": 0},
                # jobset api/jobset/v1alpha2 jobset_types.go JobSetRestartStrategy (v0.10.1:
                # Recreate, BlockingRecreate; v0.12.0 adds InPlaceRestart, not set here).
                "restartStrategy": {"enum": ["Recreate", "BlockingRecreate"]},
                "rules": _list_of(_FAILURE_POLICY_RULE),
            },
        ),
        "network": _closed([], {"enableDNSHostnames": {"type": "boolean"}, "subdomain": _NAME}),
        "replicatedJobs": _list_of(
            _closed(
                ["name", "template"],
                {
                    "name": _NAME,
                    "replicas": {"type": "integer", "minimum": 1},
                    "template": {"type": "object", "required": ["spec"]},
                },
            ),
            1,
        ),
    },
)

# The run metrics' scrape objects, the fields they set: prometheus-operator v0.85.0
# example/prometheus-operator-crd/monitoring.coreos.com_podmonitors.yaml (spec requires
# selector; interval's pattern) and prometheus-engine v0.17.2
# charts/operator/crds/monitoring.googleapis.com_podmonitorings.yaml (spec requires endpoints
# and selector, an endpoint port and interval).
_MATCH_LABELS = _closed(
    ["matchLabels"],
    {"matchLabels": {"type": "object", "additionalProperties": _STRING}},
)
_DURATION = {
    "type": "string",
    "pattern": "^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?"
    "(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
_SCRAPE_ENDPOINT = _closed(
    ["port", "interval"], {"port": _STRING, "path": _STRING, "interval": _DURATION}
)
POD_MONITOR = _with_spec(
    "monitoring.coreos.com/v1",
    ["selector"],
    {"selector": _MATCH_LABELS, "podMetricsEndpoints": _list_of(_SCRAPE_ENDPOINT, 1)},
)
# A PodMonitoring endpoint's scheme, authorization (a token from a Secret; type "Basic" refused
# by the CRD's validation rule) and TLS (prometheus-engine v0.17.2 ScrapeEndpoint).
_SECRET_SELECTOR = _closed(
    [],
    {"secret": _closed(["key", "name"], {"key": _STRING, "name": _STRING, "namespace": _STRING})},
)
_POD_MONITORING_ENDPOINT = _closed(
    ["port", "interval"],
    {
        "port": _STRING,
        "path": _STRING,
        "interval": _DURATION,
        "scheme": {"enum": ["http", "https"]},
        "authorization": _closed(
            [],
            {
                "type": {"type": "string", "not": {"const": "Basic"}},
                "credentials": _SECRET_SELECTOR,
            },
        ),
        "tls": _closed([], {"insecureSkipVerify": {"type": "boolean"}, "serverName": _STRING}),
    },
)
POD_MONITORING = _with_spec(
    "monitoring.googleapis.com/v1",
    ["selector", "endpoints"],
    {"selector": _MATCH_LABELS, "endpoints": _list_of(_POD_MONITORING_ENDPOINT, 1)},
)

BY_KIND = {
    "PodMonitor": POD_MONITOR,
    "PodMonitoring": POD_MONITORING,
    "Topology": KUEUE_TOPOLOGY,
    "ResourceFlavor": RESOURCE_FLAVOR,
    "ClusterQueue": CLUSTER_QUEUE,
    "LocalQueue": LOCAL_QUEUE,
    "WorkloadPriorityClass": WORKLOAD_PRIORITY_CLASS,
    "ProvisioningRequestConfig": PROVISIONING_REQUEST_CONFIG,
    "AdmissionCheck": ADMISSION_CHECK,
    "JobSet": JOBSET,
    "SecurityContextConstraints": SCC,
    "NetworkAttachmentDefinition": NAD,
    "MachineConfig": MACHINE_CONFIG,
    "GKENetworkParamSet": GKE_NETWORK_PARAM_SET,
    "Network": GKE_NETWORK,
}
