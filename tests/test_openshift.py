"""The OpenShift stacks through the real program: what `barcelona` and `nerc-production` build."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
import urllib.parse
from pathlib import Path
from subprocess import CompletedProcess

import pytest

from gpu_cluster.components.namespace import PATCH_FORCE_ANNOTATION
from gpu_cluster.offline.engine import ProgramRun, RecordedResource, run_program
from gpu_cluster.offline.stack_files import engine_config
from tests.cli import cli, program_copy
from tests.conftest import (
    BARCELONA_ADOPTS_NADS,
    BARCELONA_CREATES_NADS,
    ROOT,
    container,
    env_of,
    manifests,
    one,
    pod_spec,
    run_stack,
)


def test_barcelona_builds_the_rdma_cluster() -> None:
    # The namespace and the four NADs exist (the seed's workflow made them): referenced only.
    run = run_stack("barcelona")
    kinds = sorted(m["kind"] for m in run.manifests())
    assert kinds == sorted(
        [
            *("ServiceAccount", "SecurityContextConstraints", "Role", "RoleBinding"),
            *("ConfigMap", "Service", "NetworkPolicy", "StatefulSet"),
            # The image pre-pull (openshift.prePull) and the policy that isolates its pods.
            *("DaemonSet", "NetworkPolicy"),
        ]
        + ["PersistentVolumeClaim"] * 4  # workspace and datasets for each of the 2 pods
    )
    sts = one(run, "StatefulSet")
    assert sts["spec"]["replicas"] == 2
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["spec"]["serviceName"] == "ml-dev-env-headless"


def test_scc_is_restricted_v2_plus_ipc_lock_and_any_uid_granted_only_to_the_training_account() -> (
    None
):
    # memlock root-ipc-lock: IPC_LOCK is effective only for UID 0, so this SCC lets the training
    # container run as root (runAsUser RunAsAny) with IPC_LOCK and nothing else.
    run = run_stack("barcelona")
    scc = one(run, "SecurityContextConstraints")
    assert scc["allowedCapabilities"] == ["NET_BIND_SERVICE", "IPC_LOCK"]
    assert scc["requiredDropCapabilities"] == ["ALL"]
    for key in ("allowHostIPC", "allowHostNetwork", "allowHostPID", "allowHostPorts"):
        assert scc[key] is False
    assert scc["allowPrivilegedContainer"] is False and scc["allowPrivilegeEscalation"] is False
    assert scc["runAsUser"] == {"type": "RunAsAny"}
    assert scc["fsGroup"] == {"type": "MustRunAs"}
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


def test_only_the_training_container_runs_as_root_with_ipc_lock_and_nothing_is_privileged() -> None:
    spec = pod_spec(run_stack("barcelona"))
    assert "hostNetwork" not in spec and "hostPID" not in spec and "hostIPC" not in spec
    for c in spec["containers"] + spec.get("initContainers", []):
        sc = c["securityContext"]
        assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        expected = ["IPC_LOCK"] if c["name"] == "training" else None
        assert sc["capabilities"].get("add") == expected, c["name"]
    training = container(run_stack("barcelona"))["securityContext"]
    assert (training["runAsUser"], training["runAsNonRoot"]) == (0, False)
    # The SCC assigns no UID under RunAsAny, so the detection step gets an unprivileged one.
    detect = container(run_stack("barcelona"), "detect-rdma")["securityContext"]
    assert detect["runAsUser"] == 65534 and "runAsNonRoot" not in detect
    assert spec["securityContext"]["runAsNonRoot"] is True


def test_nads_are_sriov_with_one_subnet_each_attached_as_net1_to_net4() -> None:
    run = run_stack("barcelona", *BARCELONA_CREATES_NADS)
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
        assert cni["type"] == "sriov" and cni["cniVersion"] == "1.0.0"
        # sriov-cni ignores a NAD's mtu (the SriovNetworkNodePolicy sets it): none rendered.
        assert "mtu" not in cni
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
    assert "NCCL_IB_HCA" not in env  # detected per pod (VF device names follow allocation)
    # Unset: NCCL picks it from the topology (nothing checked the seed's SYS).
    assert "NCCL_NET_GDR_LEVEL" not in env
    assert env["NCCL_CROSS_NIC"] == "0"
    # The seed's NCCL_MIN_NCHANNELS=4 under its current name: NCCL 2.17 deprecated it for
    # NCCL_MIN_CTAS (NVIDIA/nccl docs/userguide/source/env.rst at 5067397).
    assert env["NCCL_MIN_CTAS"] == "4"
    assert "NCCL_MIN_NCHANNELS" not in env
    # Exact interface name: a bare "eth0" is a prefix that also matches eth01.
    assert env["NCCL_SOCKET_IFNAME"] == "=eth0"
    # SR-IOV VFs have their own GID tables: NCCL (2.21+) picks the GID.
    assert "NCCL_IB_GID_INDEX" not in env
    assert (env["NCCL_IB_ROCE_VERSION_NUM"], env["NCCL_IB_ADDR_FAMILY"]) == ("2", "AF_INET")
    detect = container(run_stack("barcelona"), "detect-rdma")
    assert env_of(detect)["RDMA_INTERFACES"] == "net1,net2,net3,net4"
    assert env_of(detect)["RDMA_HCAS"] == ",,,"
    assert env_of(detect)["RDMA_GID_INDEX"] == "nccl"


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
    # No SCC of its own: the pods are pinned to restricted-v2 (openshift.io/required-scc,
    # OpenShift >= 4.14), so admission never picks another SCC the account may also use.
    annotations = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["openshift.io/required-scc"] == "restricted-v2"
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
    # One key: the rdma block stays in the stack file for the way back, unused, with a note.
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
    nics = {f"openshift.io/eno{i}np0rdma" for i in (5, 6, 7, 8)}
    for side, expected in ((rdma, nics), (tcp, set())):
        resources = container(side)["resources"]
        assert {*resources["limits"], *resources["requests"]} & nics == expected
    env = env_of(container(tcp))
    assert (env["NCCL_NET"], env["NCCL_IB_DISABLE"], env["NCCL_SOCKET_IFNAME"]) == (
        "Socket",
        "1",
        "^lo,docker",
    )
    rdma_only = {"NCCL_CROSS_NIC", "NCCL_IB_TIMEOUT", "NCCL_MIN_CTAS", "GDR_REQUIRED"}
    assert rdma_only <= set(env_of(container(rdma))) and not rdma_only & set(env)
    claims_of = [one(run, "StatefulSet")["spec"]["volumeClaimTemplates"] for run in (tcp, rdma)]
    assert claims_of[0] == claims_of[1]
    assert tcp.warnings == [
        "gpu-cluster:rdma is kept but not used while networkMode is 'tcp'; it is used again "
        "when networkMode is 'rdma'"
    ]
    assert rdma.warnings == []
    # Kept, the block changes nothing: the render is the one without it.
    without = run_stack("barcelona", "networkMode=tcp", "!rdma")
    assert tcp.manifests() == without.manifests() and tcp.outputs == without.outputs
    assert without.warnings == []


def test_barcelona_switches_to_tcp_and_back_with_one_line_of_its_stack_file(
    tmp_path: Path,
) -> None:
    text = (ROOT / "Pulumi.barcelona.yaml").read_text()
    rdma_line = "  gpu-cluster:networkMode: rdma\n"
    assert text.count(rdma_line) == 1
    tcp_file = text.replace(rdma_line, "  gpu-cluster:networkMode: tcp\n")
    program = program_copy(tmp_path / "program", {"barcelona": tcp_file})
    snapshot = str(ROOT / "tests" / "snapshots" / "barcelona")
    switched = cli("--stack", "barcelona", "--project-dir", str(program), "--diff", snapshot)
    assert switched.returncode == 1, switched.stderr
    assert (
        "warning: gpu-cluster:rdma is kept but not used while networkMode is 'tcp'; it is used "
        "again when networkMode is 'rdma'\n"
    ) in switched.stderr
    (program / "Pulumi.barcelona.yaml").write_text(text)
    back = cli("--stack", "barcelona", "--project-dir", str(program), "--diff", snapshot)
    assert (back.returncode, back.stdout, back.stderr) == (0, "", "")


PINNED = tuple(f"rdma.nics[{i}].hca=mlx5_{6 + i}" for i in range(4))


def test_gid_index_modes_reach_nccl() -> None:
    fixed = env_of(container(run_stack("barcelona", "rdma.gidIndex=3")))
    assert fixed["NCCL_IB_GID_INDEX"] == "3"
    by_nccl = env_of(container(run_stack("barcelona", "rdma.gidIndex=nccl")))
    assert by_nccl["NCCL_IB_ROCE_VERSION_NUM"] == "2" and "NCCL_IB_GID_INDEX" not in by_nccl
    detected = env_of(container(run_stack("barcelona", "rdma.gidIndex=auto"), "detect-rdma"))
    assert detected["RDMA_GID_INDEX"] == "auto"
    # HCAs pinned and a fixed index: nothing left to detect, so no init container.
    pinned = run_stack("barcelona", "rdma.gidIndex=3", *PINNED)
    assert "initContainers" not in pod_spec(pinned)
    assert env_of(container(pinned))["NCCL_IB_HCA"] == "=mlx5_6:1,mlx5_7:1,mlx5_8:1,mlx5_9:1"


def test_gid_index_is_detected_by_default_when_a_macvlan_shares_an_hca() -> None:
    # NCCL's own pick (the lowest RoCE v2 IPv4 GID) can be the host's or another pod's there.
    run = run_stack(
        "barcelona",
        "rdma.nics[0].flavour=macvlan",
        "rdma.nics[0].resource=rdma/rdma_shared_device_a",
    )
    assert env_of(container(run, "detect-rdma"))["RDMA_GID_INDEX"] == "auto"
    assert "NCCL_IB_ROCE_VERSION_NUM" not in env_of(container(run))


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
    run = run_stack("barcelona", "openshift.prePull=false")
    policy = one(run, "NetworkPolicy")["spec"]
    own_labels = one(run, "StatefulSet")["spec"]["selector"]["matchLabels"]
    assert policy["podSelector"]["matchLabels"] == own_labels
    assert policy["policyTypes"] == ["Ingress"]
    assert policy["ingress"] == [{"from": [{"podSelector": {"matchLabels": own_labels}}]}]


# --- memlock strategies (rdma.memlock) ------------------------------------------------------


def test_machineconfig_memlock_lifts_cri_o_default_ulimits_on_the_gpu_pool() -> None:
    run = run_stack("barcelona", "rdma.memlock=machineconfig", "rdma.machineConfigPool=gpu")
    config = one(run, "MachineConfig")
    assert config["metadata"]["name"] == "99-gpu-gpu-cluster-memlock"
    assert config["metadata"]["labels"] == {"machineconfiguration.openshift.io/role": "gpu"}
    # What applying it does is visible in the preview.
    assert (
        "reboots every node of MachineConfigPool 'gpu'"
        in (config["metadata"]["annotations"]["gpu-cluster/disruption"])
    )
    (file,) = config["spec"]["config"]["storage"]["files"]
    # After MCO's 00-default, so it wins; the nofile entry 00-default sets is carried over.
    assert file["path"] == "/etc/crio/crio.conf.d/99-gpu-cluster-memlock"
    assert file["mode"] == 0o644 and file["overwrite"] is True
    content = urllib.parse.unquote(file["contents"]["source"].removeprefix("data:,"))
    assert tomllib.loads(content) == {
        "crio": {"runtime": {"default_ulimits": ["memlock=-1:-1", "nofile=1048576"]}}
    }
    # The limit itself is lifted: the container stays non-root, with no capability and no SCC.
    assert not manifests(run, "SecurityContextConstraints") and not manifests(run, "Role")
    sc = container(run)["securityContext"]
    assert "add" not in sc["capabilities"] and "runAsUser" not in sc
    # Pinned to restricted-v2, so admission never picks another SCC the account may use.
    annotations = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["openshift.io/required-scc"] == "restricted-v2"
    assert env_of(container(run))["MEMLOCK_STRATEGY"] == "machineconfig"
    assert env_of(container(run))["MEMLOCK_MACHINE_CONFIG"] == "99-gpu-gpu-cluster-memlock"


def machine_configs(run: ProgramRun) -> list[RecordedResource]:
    return [r for r in run.resources if r.type.endswith(":MachineConfig")]


def test_memlock_machine_config_is_one_per_pool_owned_by_its_creator_and_kept_on_destroy() -> None:
    # One name per pool, not per stack: another stack (other name, namespace) on the same pool
    # would register the same object, so only the owner creates it.
    own = run_stack("barcelona", "rdma.memlock=machineconfig")
    other = run_stack("barcelona", "rdma.memlock=machineconfig", "name=team-b", "namespace=team-b")
    assert one(own, "MachineConfig")["metadata"]["name"] == "99-worker-gpu-cluster-memlock"
    assert one(other, "MachineConfig")["metadata"]["name"] == "99-worker-gpu-cluster-memlock"
    (created,) = machine_configs(own)
    # Removing it would drain and reboot the pool under every other stack that relies on it.
    assert created.options["retainOnDelete"] is True and "import" not in created.options
    annotations = created.inputs["metadata"]["annotations"]
    assert annotations["gpu-cluster/owner"] == "gpu-cluster/barcelona"
    assert "`pulumi destroy` keeps it" in annotations["gpu-cluster/disruption"]
    assert (
        "oc delete machineconfig 99-worker-gpu-cluster-memlock"
        in (annotations["gpu-cluster/disruption"])
    )


def test_a_second_stack_references_or_adopts_the_memlock_machine_config() -> None:
    referenced = run_stack(
        "barcelona", "rdma.memlock=machineconfig", "rdma.machineConfig=reference"
    )
    # Relies on the owner's object: registers none, pods still lift nothing themselves...
    assert not machine_configs(referenced)
    training = env_of(container(referenced))
    assert training["MEMLOCK_STRATEGY"] == "machineconfig"
    # ...and preflight names the object to look for when the limit is still low.
    assert training["MEMLOCK_MACHINE_CONFIG"] == "99-worker-gpu-cluster-memlock"
    assert "add" not in container(referenced)["securityContext"]["capabilities"]
    # Taking it over (its creator was destroyed and left it): imported by its cluster-wide name.
    adopted = run_stack("barcelona", "rdma.memlock=machineconfig", "rdma.machineConfig=adopt")
    (config,) = machine_configs(adopted)
    assert config.options["import"] == "99-worker-gpu-cluster-memlock"
    assert config.options["retainOnDelete"] is True
    # Its owner annotation is the creator's apply's: only forced may it change
    # (tests/real/test_engine.py); a created one needs no force.
    assert config.inputs["metadata"]["annotations"][PATCH_FORCE_ANNOTATION] == "true"
    created = machine_configs(run_stack("barcelona", "rdma.memlock=machineconfig"))
    assert [PATCH_FORCE_ANNOTATION in c.inputs["metadata"]["annotations"] for c in created] == [
        False
    ]


def test_machineconfig_memlock_warns_in_the_preview() -> None:
    config, secret_keys = engine_config("barcelona", ("rdma.memlock=machineconfig",))
    run = run_program(config, secret_keys, "barcelona")
    assert any("reboots every node of MachineConfigPool 'worker'" in w for w in run.warnings)


def test_preconfigured_memlock_renders_no_node_or_security_change() -> None:
    run = run_stack("barcelona", "rdma.memlock=preconfigured")
    kinds = {m["kind"] for m in run.manifests()}
    assert not kinds & {"MachineConfig", "SecurityContextConstraints", "Role", "RoleBinding"}
    assert "add" not in container(run)["securityContext"]["capabilities"]
    # preflight (on by default in rdma mode) then stops training on a node that is not ready.
    assert env_of(container(run))["PREFLIGHT"] == "1"
    assert env_of(container(run))["MEMLOCK_STRATEGY"] == "preconfigured"


# --- existing objects: namespace and NADs (namespaceMode, rdma.networkAttachments) ----------


def resources_of(run: ProgramRun, kind: str) -> list[RecordedResource]:
    return [r for r in run.resources if r.type.endswith(f":{kind}")]


def test_created_namespace_survives_destroy_and_renames_unless_opted_out() -> None:
    run = run_stack("barcelona", "namespaceMode=create")
    (namespace,) = resources_of(run, "Namespace")
    assert namespace.inputs["metadata"]["name"] == "nccl-test"
    assert namespace.options["retainOnDelete"] is True and "import" not in namespace.options
    # Everything namespaced waits for it.
    account = resources_of(run, "ServiceAccount")[0]
    assert namespace.urn in account.options["dependsOn"]
    opted_out = run_stack("barcelona", "namespaceMode=create", "storage.retainOnDelete=false")
    (namespace,) = resources_of(opted_out, "Namespace")
    assert namespace.options["retainOnDelete"] is False
    assert namespace.inputs["metadata"]["annotations"] == {"gpu-cluster/retain-on-delete": "false"}


def test_existing_namespace_and_nads_can_be_adopted() -> None:
    run = run_stack("barcelona", "namespaceMode=adopt", *BARCELONA_ADOPTS_NADS)
    (namespace,) = resources_of(run, "Namespace")
    # Cluster-scoped: the import ID is the name. No labels of ours, so the import matches.
    assert namespace.options["import"] == "nccl-test"
    assert namespace.inputs["metadata"] == {"name": "nccl-test"}
    nads = resources_of(run, "NetworkAttachmentDefinition")
    assert sorted(r.options["import"] for r in nads) == [
        f"nccl-test/eno{i}np0-network" for i in (5, 6, 7, 8)
    ]
    # They existed before the stack: destroy leaves them in place.
    assert all(r.options["retainOnDelete"] for r in [namespace, *nads])
    # The stack changes the NADs' spec.config, which the seed's `oc` owns: only forced may it
    # (tests/real/test_migration.py, adopt). The namespace's import changes nothing.
    assert all(r.inputs["metadata"]["annotations"][PATCH_FORCE_ANNOTATION] == "true" for r in nads)
    created = run_stack("barcelona", *BARCELONA_CREATES_NADS)
    annotations = [
        r.inputs["metadata"]["annotations"]
        for r in resources_of(created, "NetworkAttachmentDefinition")
    ]
    assert annotations and not any(PATCH_FORCE_ANNOTATION in a for a in annotations)


def test_existing_namespace_and_nads_can_be_referenced() -> None:
    run = run_stack("barcelona")
    assert not resources_of(run, "Namespace")
    assert not resources_of(run, "NetworkAttachmentDefinition")
    # ...and the pods still attach them by name, in the stack's namespace.
    annotation = one(run, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    attached = json.loads(annotation["k8s.v1.cni.cncf.io/networks"])
    assert {(a["name"], a["namespace"]) for a in attached} == {
        (f"eno{i}np0-network", "nccl-test") for i in (5, 6, 7, 8)
    }
    assert not any("import" in r.options for r in run.resources)


def test_nerc_production_namespace_is_referenced() -> None:
    assert not resources_of(run_stack("nerc-production"), "Namespace")


# --- pods -------------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["barcelona", "nerc-production"])
def test_volumes_are_reowned_only_when_their_root_does_not_match(stack: str) -> None:
    assert pod_spec(run_stack(stack))["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch"


def run_with_fake_oc(command: str, oc_body: str, tmp_path: Path) -> CompletedProcess[str]:
    """An output command in bash, with a stand-in `oc` that logs its argv and runs `oc_body`."""
    tmp_path.mkdir(exist_ok=True)
    oc = tmp_path / "oc"
    oc.write_text(f'#!/usr/bin/env bash\necho "$*" >>"{tmp_path}/oc.log"\n{oc_body}\n')
    oc.chmod(0o755)
    env = {"PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}"}
    # From the project directory, where `python3 -m gpu_cluster.launch_all` finds the package.
    return subprocess.run(
        ["bash", "-c", command], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )


# A StatefulSet stack's pods answering statusCommand: pod 0 trains, pod 1's training has ended,
# pod 2 is gone.
STATUS_ANSWERS = """case "$*" in
  *" get "*) echo "NAME READY STATUS" ;;
  *ml-dev-env-0*launch-status.sh) echo "launch-status: running (pid 42)" ;;
  *ml-dev-env-1*launch-status.sh) echo "launch-status: not running"; exit 3 ;;
  *) echo 'Error from server (NotFound): pods "ml-dev-env-2" not found' >&2; exit 1 ;;
esac"""


def test_status_command_asks_every_pod_whether_its_training_runs(tmp_path: Path) -> None:
    command = str(run_stack("barcelona", "nodes=3").outputs["statusCommand"])
    # As a user evals it in a shell of their own: the shell's `pod` is left as it was.
    result = run_with_fake_oc(f'pod=mine; {command}; echo "pod=$pod"', STATUS_ANSWERS, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "NAME READY STATUS",
        "ml-dev-env-0: launch-status: running (pid 42)",
        "ml-dev-env-1: launch-status: not running",
        "ml-dev-env-2: -",
        "pod=mine",
    ]
    assert 'pods "ml-dev-env-2" not found' in result.stderr


def test_launch_command_runs_launch_all_on_every_pod(tmp_path: Path) -> None:
    run = run_stack("barcelona")
    # The repository's launch-all.sh runs here and starts the launcher in each pod.
    result = run_with_fake_oc(str(run.outputs["launchCommand"]), "exit 0", tmp_path)
    assert result.returncode == 0, result.stderr
    # The pods are looked up first: an unreachable cluster is one message, nothing started.
    assert sorted((tmp_path / "oc.log").read_text().splitlines()) == [
        *(
            f"--context barcelona exec -n nccl-test ml-dev-env-{i} -c training --"
            " /opt/gpu-cluster/launch-torchrun.sh /workspace/train.py"
            for i in (0, 1)
        ),
        "--context barcelona get pod -n nccl-test ml-dev-env-0 -o name",
    ]
    data = one(run, "ConfigMap")["data"]
    # The stop script it calls in each pod is there; launch-all.sh itself never runs in a pod.
    assert data["launch-stop.sh"] == (ROOT / "scripts/launch-stop.sh").read_text()
    assert "launch-all.sh" not in data


@pytest.mark.parametrize("detected", [True, False])
def test_shell_command_starts_with_the_detected_nccl_settings(
    tmp_path: Path, detected: bool
) -> None:
    # A stand-in `oc` runs what follows `--` here, in an environment like the container's, with
    # the repository's scripts where the pod mounts them.
    oc = tmp_path / "oc"
    oc.write_text(
        '#!/usr/bin/env bash\nwhile [ "$1" != -- ]; do shift; done\nshift\n'
        f'exec "${{@//\\/opt\\/gpu-cluster/{ROOT / "scripts"}}}"\n'
    )
    oc.chmod(0o755)
    env_file = tmp_path / "nccl.env"
    if detected:
        env_file.write_text("export NCCL_IB_HCA==mlx5_6:1,mlx5_7:1\nexport NCCL_IB_GID_INDEX=3\n")
    result = subprocess.run(
        ["bash", "-c", str(run_stack("barcelona").outputs["shellCommand"])],
        env={
            "PATH": f"{tmp_path}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "NCCL_ENV_FILE": str(env_file),
        },
        input='echo "hca=$NCCL_IB_HCA gid=$NCCL_IB_GID_INDEX"\n',
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    # Without the file (tcp mode, or before detection ran) the shell still starts.
    expected = "hca==mlx5_6:1,mlx5_7:1 gid=3" if detected else "hca= gid="
    assert result.stdout == expected + "\n"


def test_migration_guide_keeps_the_seeds_claims_by_the_names_barcelona_registers() -> None:
    guide = (ROOT / "docs" / "migration.md").read_text()
    guide = " ".join(guide.split())  # the commands wrap across lines
    run = run_stack("barcelona")
    claims = run.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    assert claims
    for claim in claims:
        name, namespace = claim.inputs["metadata"]["name"], claim.inputs["metadata"]["namespace"]
        # The guide's pattern for the claim's name, and its import ID, <namespace>/<name>.
        assert f"`{name.rsplit('-', 1)[0]}-N`" in guide, name
        assert f"`id` to `{namespace}/<claim name>`" in guide
    # The hand-written import file names the claim's parents and resource name as registered.
    by_urn = {r.urn: r for r in run.resources}
    first = next(c for c in claims if c.inputs["metadata"]["name"] == "workspace-ml-dev-env-0")
    chain, resource = [], first
    while resource.parent in by_urn:
        resource = by_urn[resource.parent]
        chain.append(resource)
    workload, platform = chain[0], chain[1]
    assert f'"name": "{first.name}", "parent": "{workload.name}"' in guide
    assert (
        f'{{"type": "{workload.type}", "name": "{workload.name}", "parent": "{platform.name}"'
        in guide
    )
    assert f'{{"type": "{platform.type}", "name": "{platform.name}", "component": true}}' in guide
    # Plain create: an existing claim of that name must be imported, never "reused" silently.
    assert "kubernetes:core/v1:PersistentVolumeClaim" in guide and "AlreadyExists" in guide
    assert "pulumi preview --import-file" in guide and "pulumi import --file" in guide
    # The seed's StatefulSet and headless Service go first: this stack's have the same names
    # (tests/real/test_migration.py runs the guide's commands against a real API server).
    for kind in ("StatefulSet", "Service"):
        meta = one(run, kind)["metadata"]
        assert f"oc delete {kind.lower()} {meta['name']} -n {meta['namespace']}" in guide


def test_launch_command_fails_when_a_pod_is_not_there(tmp_path: Path) -> None:
    run = run_stack("barcelona")
    # Every exec on the pod, the status query after the failure included, finds no pod.
    not_found = (
        '[[ " $* " == *" exec "*" ml-dev-env-0 "* ]] || exit 0;'
        """ echo 'Error from server (NotFound): pods "ml-dev-env-0" not found' >&2; exit 1"""
    )
    result = run_with_fake_oc(str(run.outputs["launchCommand"]), not_found, tmp_path)
    assert result.returncode == 1 and "NotFound" in result.stderr
    assert "first failure: ml-dev-env-0, exit 1" in result.stderr


def test_sync_command_fails_when_a_pod_does_not_get_the_code(tmp_path: Path) -> None:
    # Pod 0's copy fails, pod 1's works: the loop's status must not be only the last pod's.
    run = run_stack("barcelona")
    pod0_fails = (
        '[[ " $* " == *" ml-dev-env-0:"* ]] && { echo "error: pod 0" >&2; exit 1; }; exit 0'
    )
    result = run_with_fake_oc(str(run.outputs["syncCommand"]), pod0_fails, tmp_path)
    assert result.returncode == 1 and "error: pod 0" in result.stderr
    ok = run_with_fake_oc(str(run.outputs["syncCommand"]), "exit 0", tmp_path / "ok")
    assert ok.returncode == 0, ok.stderr
    assert (tmp_path / "ok/oc.log").read_text().splitlines() == [
        f"--context barcelona rsync -n nccl-test -c training ./ ml-dev-env-{i}:/workspace/"
        for i in (0, 1)
    ]
