"""Rules across keys: what each key allows depends on others (platform, network mode, sizes).

They run where the config is loaded (loading.validate_settings), after the schema: this module
imports Settings, so the schema never imports it (tests/test_layers.py refuses the circle)."""

from __future__ import annotations

from gpu_cluster.config.checkpoints import checkpoint_problems
from gpu_cluster.config.derived import (
    elastic_range,
    health_gate_name,
    health_runner_name,
    run_ledger_name,
    training_account_name,
)
from gpu_cluster.config.gke import gke_problems
from gpu_cluster.config.monitoring_rules import monitoring_problems
from gpu_cluster.config.netmodes import find_mode, mode_of, names_on
from gpu_cluster.config.quantities import sweep_bytes
from gpu_cluster.config.rdma_rules import rdma_problems
from gpu_cluster.config.reads import unread_keys
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.storage_rules import (
    filestore_size_problems,
    no_shared_claims,
    shared_claim_class_problems,
    storage_class_problems,
)
from gpu_cluster.config.volume_rules import volume_problems
from gpu_cluster.config.workload import (
    installs_controllers,
    job_set_name_problems,
    nodes_on_demand,
    required_level,
    topology_levels,
)
from gpu_cluster.facts.fabric import GPU_LINK_MAX_GBPS
from gpu_cluster.facts.gcp import GCP_NAME_MAX, GKE_CLUSTER_NAME_MAX
from gpu_cluster.facts.gpudirect import RDMA_NIC_COUNT, RELEASES
from gpu_cluster.facts.health import RUNNER_CHECKS
from gpu_cluster.facts.kubernetes import (
    ADMISSION_POLICY_MINOR,
    ANONYMOUS_USER,
    EVERYONE_GROUPS,
    KUBERNETES_NAMESPACE_PREFIXES,
    MIN_KUBERNETES_MINOR,
    NATIVE_SIDECAR_MINOR,
    PLATFORM_NAMESPACES,
    SERVICE_ACCOUNT_USER_PREFIX,
    SERVICE_ACCOUNTS_GROUP_PREFIX,
    STATEFULSET_NAME_MAX,
    SYSTEM_NAMESPACES,
)
from gpu_cluster.facts.kueue import HOSTNAME_LEVEL, JOBSET_NAMESPACE, KUEUE_NAMESPACE

# Smallest all_gather of the fabric check's sweep (scripts/allreduce_check.py --min-bytes).
CHECK_MIN_BYTES = 8
# Largest: PyTorch sizes tensors and NCCL counts elements in 64 bits.
CHECK_MAX_BYTES = 2**63 - 1


def cross_field_problems(s: Settings) -> list[str]:
    out: list[str] = []
    mode = find_mode(s.platform, s.network_mode)
    if mode is None:
        out.append(
            f"gpu-cluster:networkMode = {s.network_mode!r} is not available on platform "
            f"{s.platform!r}; allowed: {', '.join(map(repr, names_on(s.platform)))}"
        )
    else:
        out.extend(mode.problems(s))
    if s.platform == "gke" and s.gcp is None:
        out.append("gpu-cluster:gcp is required when platform is 'gke' (project, region, zone)")
    # Then every key the stack does not read; the rules below look only at what it reads.
    out.extend(unread_keys(s))
    if out:
        return out
    if s.gcp is not None:
        out.extend(gke_problems(s, s.gcp))
    if s.openshift.node_names:
        if len(set(s.openshift.node_names)) != len(s.openshift.node_names):
            out.append("gpu-cluster:openshift.nodeNames lists a node twice")
        if len(s.openshift.node_names) < s.nodes:
            out.append(
                f"gpu-cluster:openshift.nodeNames lists {len(s.openshift.node_names)} nodes but "
                f"nodes = {s.nodes}: one pod runs per node, so list at least {s.nodes}"
            )
    minor = int(s.kubernetes_version.split(".")[1])
    if minor < MIN_KUBERNETES_MINOR:
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r}: needs "
            f"1.{MIN_KUBERNETES_MINOR} or newer (NODE_RANK comes from the pod-index label)"
        )
    sidecars = [
        *([f"networkMode {s.network_mode!r}"] if mode_of(s).native_sidecars else []),
        *(["codeSync (git-sync)"] if s.code_sync is not None else []),
    ]
    if sidecars and minor < NATIVE_SIDECAR_MINOR:
        out.append(
            f"gpu-cluster:kubernetesVersion = {s.kubernetes_version!r}: {' and '.join(sidecars)} "
            f"run as native sidecars, which need 1.{NATIVE_SIDECAR_MINOR} or newer"
        )
    out.extend(_name_problems(s))
    out.extend(namespace_problems(s))
    out.extend(
        storage_class_problems(s.platform, s.storage.storage_class, s.storage.storage_class_mode)
    )
    out.extend(shared_claim_class_problems(s))
    out.extend(filestore_size_problems(s))
    out.extend(volume_problems(s))
    out.extend(_verify_problems(s))
    if s.workload.kind == "jobset":
        out.extend(workload_problems(s))
    out.extend(monitoring_problems(s))
    lo, hi = elastic_range(s)
    if not lo <= s.nodes <= hi:
        out.append(
            f"gpu-cluster:launcher.minNodes/maxNodes = {lo}:{hi} must satisfy "
            f"minNodes <= nodes ({s.nodes}) <= maxNodes"
        )
    if s.rdma is not None:
        out.extend(rdma_problems(s.rdma, s.nodes))
    tcp = s.tcp
    if (
        tcp.socket_nthreads
        and tcp.nsocks_per_thread
        and tcp.socket_nthreads * tcp.nsocks_per_thread > 64
    ):
        out.append(
            "gpu-cluster:tcp.socketNthreads x tcp.nsocksPerThread must be <= 64 (NCCL limit)"
        )
    return out


def _name_problems(s: Settings) -> list[str]:
    """`name` becomes the StatefulSet, Service and (GKE) cluster and VPC names."""
    out: list[str] = []
    limit, why = STATEFULSET_NAME_MAX, "the StatefulSet's controller-revision-hash pod label"
    if s.platform == "gke":
        limit, why = GKE_CLUSTER_NAME_MAX, "the GKE cluster name"
        longest = max(_GCP_NAME_SUFFIXES, key=len)
        if len(s.name) + len(longest) > GCP_NAME_MAX:
            out.append(
                f"gpu-cluster:name = {s.name!r}: the GCP resource name {s.name + longest!r} "
                f"exceeds {GCP_NAME_MAX} characters"
            )
    if len(s.name) > limit:
        out.append(
            f"gpu-cluster:name = {s.name!r} has {len(s.name)} characters; at most {limit} fit {why}"
        )
    return out


# Suffixes GKE's components append to `name` for VPCs, subnets, firewalls, router and policy
# (components/gcp_vpc.py, gke_gcp.py); GPU VPCs counted as many as any release wires, so the
# limit holds whatever the stack's release (which may itself be in question when names are
# checked) and across mode switches.
_GCP_NAME_SUFFIXES = (
    "-host",
    "-host-internal",
    "-compact",
    *(f"-gpu{i}-internal" for i in range(1, max(r.nic_count for r in RELEASES.values()) + 1)),
    f"-rdma-{RDMA_NIC_COUNT - 1}",
)


def workload_problems(s: Settings) -> list[str]:
    """A JobSet's rules: it runs a command, its pods share one template, its names fit."""
    out: list[str] = []
    w = s.workload
    if not w.command:
        out.append(
            "gpu-cluster:workload.command is required when workload.kind is 'jobset': the "
            "training script and its arguments the launcher runs, e.g. [/workspace/train.py]"
        )
    if s.storage.mode == "per-pod":
        shared = (
            "use storage.mode 'rwx' and a storage.storageClass that provisions ReadWriteMany claims"
        )
        refusal = no_shared_claims(s)
        if refusal is not None:
            shared += (
                f", which storage.storageClass {refusal.which} does not ({refusal.why}): "
                f"{refusal.instead}"
            )
        out.append(
            "gpu-cluster:storage.mode = 'per-pod' needs workload.kind 'statefulset': a JobSet's "
            f"pods share one template and so one set of claims; {shared}"
        )
    out.extend(job_set_name_problems(s))
    out.extend(checkpoint_problems(s))
    out.extend(_submitter_problems(s))
    if s.platform == "openshift" and w.controllers.install:
        out.append(
            "gpu-cluster:workload.controllers.install = true: on OpenShift Kueue and JobSet come "
            "from Red Hat's operators (the Red Hat build of Kueue, with JobSet among its "
            "frameworks), which the stack does not install; install them and set false "
            '(docs/operations.md, "Training as a JobSet")'
        )
    levels = topology_levels(s)
    required = required_level(s)
    placed = w.queue.topology_levels is not None or w.queue.required_level is not None
    if nodes_on_demand(s) and placed:
        out.append(
            "gpu-cluster:workload.queue.topologyLevels/requiredLevel: topology-aware placement "
            "needs the GPU nodes to exist, and a flex-start pool (gcp.provisioning) starts empty, "
            "its nodes coming only for pods Kueue has admitted: no run would ever be admitted; "
            "remove them"
        )
    if w.queue.mode == "create" and required is not None and required not in levels:
        allowed = ", ".join(map(repr, levels)) or "none: set workload.queue.topologyLevels"
        out.append(
            f"gpu-cluster:workload.queue.requiredLevel = {required!r} is not a placement "
            f"level; allowed: {allowed}"
        )
    if w.queue.mode == "create" and w.queue.health_gate.enabled and not levels:
        out.append(
            "gpu-cluster:workload.queue.healthGate.enabled = true needs topology-aware "
            "placement, which names a run's nodes before it is admitted: set "
            "workload.queue.topologyLevels on OpenShift; a flex-start pool (gcp.provisioning) "
            "has none, its nodes come only after admission"
        )
    gate = w.queue.health_gate
    if gate.enabled and gate.runner.enabled and not set(RUNNER_CHECKS) & set(gate.checks):
        runs = " and ".join(repr(c) for c in RUNNER_CHECKS)
        out.append(
            f"gpu-cluster:workload.queue.healthGate.runner.enabled = true runs the {runs} "
            "checks, of which workload.queue.healthGate.checks lists neither: add one to "
            "checks, or set runner.enabled to false"
        )
    minor = int(s.kubernetes_version.split(".")[1])
    if gate.enabled and gate.runner.enabled and minor < ADMISSION_POLICY_MINOR:
        out.append(
            "gpu-cluster:workload.queue.healthGate.runner.enabled = true confines the runner's "
            f"node writes by a ValidatingAdmissionPolicy, which needs kubernetesVersion "
            f"1.{ADMISSION_POLICY_MINOR} or newer (it is {s.kubernetes_version!r})"
        )
    classes = [c.name for c in w.queue.priority_classes]
    if len(set(classes)) != len(classes):
        out.append(
            "gpu-cluster:workload.queue.priorityClasses names a class twice: " + ", ".join(classes)
        )
    if w.queue.topology_levels is not None:
        given = list(w.queue.topology_levels)
        if HOSTNAME_LEVEL in given or len(set(given)) != len(given):
            out.append(
                "gpu-cluster:workload.queue.topologyLevels lists a label twice or "
                f"{HOSTNAME_LEVEL!r} (always the last level, added by the stack)"
            )
    return out


def _submitter_problems(s: Settings) -> list[str]:
    """The submitter Role bound to one of the stack's own ServiceAccounts would hand its
    rights (create and delete runs) to every process that runs as it; bound to a group the API
    server puts everyone (or every ServiceAccount) in, to all of them."""
    own = {
        training_account_name(s.name): "its training pods'",
        health_gate_name(s): "its node health gate's",
        health_runner_name(s): "its node health runner's",
        run_ledger_name(s): "its runs' ledger exporter's",
    }
    submitters = s.workload.runs.submitters
    key = "gpu-cluster:workload.runs.submitters"
    repeated = [
        f"{key}.{name} lists {entry!r} twice: name each subject once"
        for name, entries in (
            ("groups", submitters.groups),
            ("users", submitters.users),
            ("serviceAccounts", submitters.service_accounts),
        )
        for entry in sorted({e for e in entries if entries.count(e) > 1})
    ]
    out = [
        *repeated,
        *(
            f"{key}.serviceAccounts[{i}] = {account!r} is the stack's own ServiceAccount "
            f"({own[account]}): bound to the submitter Role, every process running as it could "
            "submit, stop and delete runs; name a ServiceAccount of your own (a CI pipeline's)"
            for i, account in enumerate(submitters.service_accounts)
            if account in own
        ),
    ]
    for i, user in enumerate(submitters.users):
        namespace, _, account = user.removeprefix(SERVICE_ACCOUNT_USER_PREFIX).rpartition(":")
        if user.startswith(SERVICE_ACCOUNT_USER_PREFIX) and (namespace, account) in {
            (s.namespace, name) for name in own
        }:
            out.append(
                f"{key}.users[{i}] = {user!r} is the stack's own ServiceAccount "
                f"({own[account]}) by its user name: every process running as it could submit, "
                "stop and delete runs; name a ServiceAccount of your own"
            )
        elif user == ANONYMOUS_USER:
            out.append(
                f"{key}.users[{i}] = {user!r} is every request without credentials: anyone "
                "who reaches the API server could submit, stop and delete runs; name people"
            )
    for i, group in enumerate(submitters.groups):
        if group in EVERYONE_GROUPS or group == f"{SERVICE_ACCOUNTS_GROUP_PREFIX}{s.namespace}":
            out.append(
                f"{key}.groups[{i}] = {group!r} is a group the API server puts every requester "
                "of its kind in (the stack's own ServiceAccounts among them): all could submit, "
                "stop and delete runs; name a group of people, or ServiceAccounts one by one"
            )
    return out


def _verify_problems(s: Settings) -> list[str]:
    """Fabric-check settings that could never PASS."""
    out: list[str] = []
    v = s.verify
    ceiling, carrier = mode_of(s).fabric_gbps(s), "the fabric's NICs"
    if ceiling is None:
        ceiling, carrier = GPU_LINK_MAX_GBPS, "the fastest GPU link (NVLink 5)"
    expected = v.expected_busbw_gbps
    if expected is not None and expected > ceiling:
        out.append(
            f"gpu-cluster:verify.expectedBusbwGbps = {v.expected_busbw_gbps:g}: above the "
            f"{ceiling:g} GB/s {carrier} can carry, so the check could never pass"
        )
    if v.max_bytes is not None and sweep_bytes(v.max_bytes) < CHECK_MIN_BYTES:
        out.append(
            f"gpu-cluster:verify.maxBytes = {v.max_bytes!r}: the sweep starts at "
            f"{CHECK_MIN_BYTES} bytes; use at least {CHECK_MIN_BYTES}"
        )
    if v.max_bytes is not None and sweep_bytes(v.max_bytes) > CHECK_MAX_BYTES:
        out.append(
            f"gpu-cluster:verify.maxBytes = {v.max_bytes!r}: above 2^63 - 1 bytes, more than "
            "a tensor or an NCCL count holds"
        )
    return out


def namespace_problems(s: Settings) -> list[str]:
    """A namespace the stack is to create that every cluster has, or that Kubernetes or the
    platform keeps for itself; in any mode, one the stack's own Kueue and JobSet go into."""
    key, name = f"gpu-cluster:namespace = {s.namespace!r}", s.namespace
    if installs_controllers(s) and name in (KUEUE_NAMESPACE, JOBSET_NAMESPACE):
        return [
            f"{key}: the stack installs Kueue and JobSet into "
            f"{KUEUE_NAMESPACE} and {JOBSET_NAMESPACE}, whose charts' objects would be in the "
            "training's namespace (and the stack would create it twice); choose another name"
        ]
    if s.namespace_mode != "create":
        return []
    if name in SYSTEM_NAMESPACES:
        return [
            f"{key}: the API server creates it in every cluster, so namespaceMode 'create' "
            "fails with AlreadyExists; use namespaceMode: reference (it stays as it is) or "
            "adopt (the stack manages it)"
        ]
    names, prefixes = PLATFORM_NAMESPACES[s.platform]
    if name.startswith(KUBERNETES_NAMESPACE_PREFIXES):
        whose = "Kubernetes keeps kube-* for its own namespaces"
    elif name in names or name.startswith(prefixes):
        platform = {"openshift": "OpenShift", "gke": "GKE"}[s.platform]
        whose = f"{platform} keeps {', '.join([*names, *(p + '*' for p in prefixes)])} for itself"
    else:
        return []
    return [
        f"{key}: {whose}; choose another name for the stack to create, or, for one that exists, "
        "namespaceMode: reference or adopt"
    ]
