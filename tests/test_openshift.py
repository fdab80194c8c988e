"""The OpenShift stacks through the real program: what `barcelona` and `nerc-production` build."""

from __future__ import annotations

import json

from tests.conftest import container, env_of, manifests, one, pod_spec, run_stack


def test_barcelona_builds_the_rdma_cluster() -> None:
    run = run_stack("barcelona")
    kinds = sorted(m["kind"] for m in run.manifests())
    assert kinds == sorted(
        ["Namespace", "ServiceAccount", "SecurityContextConstraints", "Role", "RoleBinding"]
        + ["NetworkAttachmentDefinition"] * 4
        + ["ConfigMap", "Service", "NetworkPolicy", "StatefulSet"]
        + ["PersistentVolumeClaim"] * 4  # workspace and datasets for each of the 2 pods
    )
    sts = one(run, "StatefulSet")
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == "ml-dev-env-headless"


def test_scc_is_restricted_v2_plus_ipc_lock_granted_only_to_the_training_account() -> None:
    run = run_stack("barcelona")
    scc = one(run, "SecurityContextConstraints")
    assert scc["allowedCapabilities"] == ["NET_BIND_SERVICE", "IPC_LOCK"]
    assert scc["requiredDropCapabilities"] == ["ALL"]
    for key in ("allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts"):
        assert scc[key] is False
    assert scc["allowPrivilegedContainer"] is False
    assert scc["runAsUser"] == {"type": "MustRunAsRange"}
    assert not set(scc["allowedCapabilities"]) & set(scc["requiredDropCapabilities"])
    role = one(run, "Role")
    assert role["rules"] == [
        {
            "apiGroups": ["security.openshift.io"],
            "resources": ["securitycontextconstraints"],
            "resourceNames": [scc["metadata"]["name"]],
            "verbs": ["use"],
        }
    ]
    binding = one(run, "RoleBinding")
    account = one(run, "ServiceAccount")
    assert binding["metadata"]["namespace"] == "nccl-test"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "nccl-test"}
    ]
    spec = pod_spec(run)
    assert spec["serviceAccountName"] == account["metadata"]["name"]
    annotations = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["openshift.io/required-scc"] == scc["metadata"]["name"]


def test_only_the_training_container_gets_ipc_lock_and_nothing_is_privileged() -> None:
    spec = pod_spec(run_stack("barcelona"))
    assert "hostNetwork" not in spec and "hostPID" not in spec and "hostIPC" not in spec
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        expected = ["IPC_LOCK"] if c["name"] == "training" else None
        assert sc["capabilities"].get("add") == expected, c["name"]
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_nads_are_sriov_with_one_subnet_each_attached_as_net1_to_net4() -> None:
    run = run_stack("barcelona")
    nads = manifests(run, "NetworkAttachmentDefinition")
    configs = {n["metadata"]["name"]: json.loads(n["spec"]["config"]) for n in nads}
    assert sorted(c["ipam"]["range"] for c in configs.values()) == [
        "10.0.103.0/24",
        "10.0.104.0/24",
        "10.0.105.0/24",
        "10.0.106.0/24",
    ]
    for nad in nads:
        cni = configs[nad["metadata"]["name"]]
        assert cni["type"] == "sriov" and cni["cniVersion"] == "1.0.0" and cni["mtu"] == 9000
        assert cni["ipam"]["type"] == "whereabouts"
        resource = nad["metadata"]["annotations"]["k8s.v1.cni.cncf.io/resourceName"]
        assert resource == f"openshift.io/{nad['metadata']['name'].split('-')[0]}rdma"
    annotation = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    attached = json.loads(annotation["k8s.v1.cni.cncf.io/networks"])
    assert [a["interface"] for a in attached] == ["net1", "net2", "net3", "net4"]
    assert [a["name"] for a in attached] == [f"eno{i}np0-network" for i in (5, 6, 7, 8)]


def test_training_pod_requests_gpus_and_every_rdma_vf() -> None:
    training = container(run_stack("barcelona"))
    for side in ("requests", "limits"):
        resources = training["resources"][side]
        assert resources["nvidia.com/gpu"] == "4"
        for nic in (5, 6, 7, 8):
            assert resources[f"openshift.io/eno{nic}np0rdma"] == "1"


def test_one_pod_per_listed_gpu_node() -> None:
    spec = pod_spec(run_stack("barcelona"))
    anti = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["topologyKey"] == "kubernetes.io/hostname"
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = {e["key"]: e for e in terms["nodeSelectorTerms"][0]["matchExpressions"]}
    assert len(expressions["kubernetes.io/hostname"]["values"]) == 5
    assert expressions["nvidia.com/gpu.present"]["values"] == ["true"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]


def test_rendezvous_env_and_rdma_nccl_env() -> None:
    env = env_of(container(run_stack("barcelona")))
    assert env["WORLD_SIZE"] == "8" and env["NNODES"] == "2" and env["GPUS_PER_NODE"] == "4"
    assert env["NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.labels['apps.kubernetes.io/pod-index']"}
    }
    assert env["MASTER_ADDR"] == "ml-dev-env-0.ml-dev-env-headless.nccl-test.svc.cluster.local"
    assert env["MASTER_PORT"] == "29500"
    assert env["NCCL_NET"] == "IB"
    assert env["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"
    assert env["NCCL_NET_GDR_LEVEL"] == "SYS"
    assert env["NCCL_CROSS_NIC"] == "0"
    assert "NCCL_IB_GID_INDEX" not in env  # auto: detected per pod
    detect = container(run_stack("barcelona"), "detect-rdma")
    assert env_of(detect)["RDMA_INTERFACES"] == "net1,net2,net3,net4"
    assert env_of(detect)["RDMA_GID_INDEX"] == "auto"


def test_dev_shm_is_a_memory_volume_sized_from_config() -> None:
    spec = pod_spec(run_stack("barcelona"))
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "32Gi"}
    mounts = {m["mountPath"]: m["name"] for m in container(run_stack("barcelona"))["volumeMounts"]}
    assert mounts["/dev/shm"] == "dshm"


def test_per_pod_storage_is_standalone_claims_the_stateful_set_adopts() -> None:
    run = run_stack("barcelona")
    sts = one(run, "StatefulSet")
    templates = {t["metadata"]["name"]: t["spec"] for t in sts["spec"]["volumeClaimTemplates"]}
    assert templates["workspace"]["resources"]["requests"]["storage"] == "100Gi"
    assert templates["datasets"]["storageClassName"] == "ocs-external-storagecluster-ceph-rbd"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Retain",
    }
    # <template>-<StatefulSet>-<ordinal>: the names the controller looks up before creating.
    claims = {c["metadata"]["name"]: c["spec"] for c in manifests(run, "PersistentVolumeClaim")}
    assert set(claims) == {f"{v}-ml-dev-env-{i}" for v in ("workspace", "datasets") for i in (0, 1)}
    for name, spec in claims.items():
        volume = name.split("-")[0]
        assert spec == templates[volume]
    registered = run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    assert all(r.options["retainOnDelete"] and r.options["protect"] for r in registered)
    (sts_resource,) = run.of_type("kubernetes:apps/v1:StatefulSet")
    assert {r.urn for r in registered} <= set(sts_resource.options["dependsOn"])


def test_nerc_production_is_tcp_with_shared_storage_and_no_scc_or_nads() -> None:
    run = run_stack("nerc-production")
    kinds = {m["kind"] for m in run.manifests()}
    assert kinds == {
        "ServiceAccount",
        "ConfigMap",
        "PersistentVolumeClaim",
        "Service",
        "NetworkPolicy",
        "StatefulSet",
    }
    env = env_of(container(run))
    assert env["NCCL_IB_DISABLE"] == "1" and env["NCCL_NET"] == "Socket"
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker"
    assert (env["NCCL_SOCKET_NTHREADS"], env["NCCL_NSOCKS_PERTHREAD"]) == ("4", "4")
    assert "add" not in container(run)["securityContext"]["capabilities"]
    claims = manifests(run, "PersistentVolumeClaim")
    assert sorted(c["metadata"]["name"] for c in claims) == [
        "ml-dev-env-datasets",
        "ml-dev-env-workspace",
    ]
    for claim in claims:
        assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
        assert claim["spec"]["storageClassName"] == "nfs-csi"
    retained = [r for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")]
    assert retained and all(r.options["retainOnDelete"] for r in retained)
    mounted = {
        v.get("persistentVolumeClaim", {}).get("claimName") for v in pod_spec(run)["volumes"]
    }
    assert {"ml-dev-env-workspace", "ml-dev-env-datasets"} <= mounted


def test_retention_is_opt_out() -> None:
    run = run_stack("nerc-production", "storage.retainOnDelete=false")
    assert not any(
        r.options["retainOnDelete"] for r in run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    )
    for claim in manifests(run, "PersistentVolumeClaim"):
        assert claim["metadata"]["annotations"]["gpu-cluster/retain-on-delete"] == "false"
    sts = one(run_stack("barcelona", "storage.retainOnDelete=false"), "StatefulSet")
    # A replaced StatefulSet never takes the claims along; Pulumi deletes them on destroy.
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"] == {
        "whenDeleted": "Retain",
        "whenScaled": "Delete",
    }
    assert sts["metadata"]["annotations"]["gpu-cluster/retain-on-delete"] == "false"
    kept = one(run_stack("barcelona"), "StatefulSet")["metadata"]["annotations"]
    assert "gpu-cluster/retain-on-delete" not in kept


def test_switching_barcelona_to_tcp_drops_rdma_pieces_and_keeps_storage() -> None:
    rdma, tcp = run_stack("barcelona"), run_stack("barcelona", "networkMode=tcp")
    kinds = {m["kind"] for m in tcp.manifests()}
    assert not kinds & {
        "SecurityContextConstraints",
        "Role",
        "RoleBinding",
        "NetworkAttachmentDefinition",
    }
    assert "initContainers" not in pod_spec(tcp)
    assert (
        "k8s.v1.cni.cncf.io/networks"
        not in one(tcp, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    )
    assert not any(k.startswith("openshift.io/") for k in container(tcp)["resources"]["limits"])
    claims_of = [one(run, "StatefulSet")["spec"]["volumeClaimTemplates"] for run in (tcp, rdma)]
    assert claims_of[0] == claims_of[1]


def test_gid_index_modes_reach_nccl() -> None:
    fixed = env_of(container(run_stack("barcelona", "rdma.gidIndex=3")))
    assert fixed["NCCL_IB_GID_INDEX"] == "3"
    by_nccl = env_of(container(run_stack("barcelona", "rdma.gidIndex=nccl")))
    assert by_nccl["NCCL_IB_ROCE_VERSION_NUM"] == "2" and "NCCL_IB_GID_INDEX" not in by_nccl
    # HCAs given and a fixed index: nothing left to detect, so no init container.
    assert "initContainers" not in pod_spec(run_stack("barcelona", "rdma.gidIndex=3"))


def test_code_sync_sidecar_keeps_the_repo_in_every_pod_with_credentials_from_a_secret() -> None:
    run = run_stack(
        "barcelona",
        "codeSync.repo=https://github.com/example/train.git",
        "codeSync.ref=v1.2",
        "codeSync.credentialsSecret=git-creds",
    )
    sidecar = container(run, "git-sync")
    assert sidecar["restartPolicy"] == "Always"
    env = env_of(sidecar)
    assert env["GITSYNC_REPO"] == "https://github.com/example/train.git"
    assert env["GITSYNC_REF"] == "v1.2"
    assert env["GITSYNC_PASSWORD"] == {"secretKeyRef": {"name": "git-creds", "key": "password"}}
    assert "add" not in sidecar["securityContext"]["capabilities"]
    mounts = {m["mountPath"]: m for m in container(run)["volumeMounts"]}
    assert mounts["/code"]["readOnly"] is True
    code = next(v for v in pod_spec(run)["volumes"] if v["name"] == "code")
    assert code == {"name": "code", "emptyDir": {}}
    assert "git-sync" not in {
        c["name"] for c in pod_spec(run_stack("barcelona")).get("initContainers", [])
    }


def test_only_peer_pods_may_connect_to_training_pods() -> None:
    run = run_stack("barcelona")
    policy = one(run, "NetworkPolicy")["spec"]
    own_labels = one(run, "StatefulSet")["spec"]["selector"]["matchLabels"]
    assert policy["podSelector"]["matchLabels"] == own_labels
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"from": [{"podSelector": {"matchLabels": own_labels}}]}]
