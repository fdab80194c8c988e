"""The cluster-level rights an OpenShift stack's `pulumi up` needs beyond a project admin's, each
with the config that needs it, the `oc auth can-i` reads that show whether the user has it, and
the way to run the stack without it (pure).

A project admin (OpenShift's `admin` role in the namespace) creates the namespaced objects;
what is listed here is cluster-scoped, or a grant that RBAC's escalation prevention allows only
to a user who holds what it grants: creating a Role or RoleBinding that grants `use` of an SCC
needs that `use` already, or `escalate` on roles (for the Role) and `bind` on roles (for the
binding) (kubernetes/website content/en/docs/reference/access-authn-authz/rbac.md, "Privilege
escalation prevention and bootstrapping", at 7bde1aa).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from gpu_cluster.config.derived import shows_dashboard
from gpu_cluster.config.netmodes import mode_of
from gpu_cluster.config.schema import Settings
from gpu_cluster.config.workload import installs_controllers
from gpu_cluster.facts.dashboards import CONSOLE_DASHBOARD_NAMESPACE
from gpu_cluster.plan.health_runner import runner_checks
from gpu_cluster.plan.run_metrics import metrics_port
from gpu_cluster.plan.security import memlock_machine_config_name, training_scc_name

SCCS = "securitycontextconstraints.security.openshift.io"
MACHINE_CONFIGS = "machineconfigs.machineconfiguration.openshift.io"
ROLES = "roles.rbac.authorization.k8s.io"
CRDS = "customresourcedefinitions.apiextensions.k8s.io"
PRIORITY_CLASSES = "workloadpriorityclasses.kueue.x-k8s.io"
POD_MONITORS = "podmonitors.monitoring.coreos.com"


@dataclass(frozen=True)
class Check:
    """One `oc auth can-i VERB RESOURCE[/NAME] [-n NAMESPACE]` (a SelfSubjectAccessReview)."""

    verb: str
    resource: str
    namespace: str | None = None  # None: cluster-scoped

    def args(self) -> tuple[str, ...]:
        scope = ("-n", self.namespace) if self.namespace is not None else ()
        return ("auth", "can-i", self.verb, self.resource, *scope)


@dataclass(frozen=True)
class Right:
    """What `pulumi up` must be allowed for `needed_for`: any one of `any_of`, each a set of
    checks that must all say yes. `without`: the config that needs no such right."""

    needed_for: str
    any_of: tuple[tuple[Check, ...], ...]
    without: str


def cluster_rights(s: Settings) -> tuple[Right, ...]:
    """The rights beyond a project admin's that `s` needs on OpenShift; () on GKE."""
    if s.platform != "openshift":
        return ()
    rights: list[Right] = []
    if s.namespace_mode == "create":
        rights.append(
            Right(
                f"namespaceMode: create (the namespace {s.namespace!r})",
                ((Check("create", "namespaces"),),),
                f"`oc new-project {s.namespace}` (a project request, open to every user by "
                "default) and namespaceMode: reference",
            )
        )
    rdma = mode_of(s).rdma(s)
    if rdma is not None and rdma.memlock == "root-ipc-lock":
        scc = training_scc_name(s.namespace, s.name)
        use = Check("use", f"{SCCS}/{scc}", s.namespace)
        rights.append(
            Right(
                f"rdma.memlock: root-ipc-lock (the SCC {scc!r}, cluster-scoped, and the Role "
                f"{s.name}-use-scc granting its use)",
                (
                    (Check("create", SCCS), use),
                    (
                        Check("create", SCCS),
                        Check("escalate", ROLES, s.namespace),
                        Check("bind", f"{ROLES}/{s.name}-use-scc", s.namespace),
                    ),
                ),
                "rdma.memlock: preconfigured where the nodes already allow unlimited locked "
                "memory, or machineconfig with rdma.machineConfig: reference once an admin "
                "applied the memlock MachineConfig (docs/operations.md, OpenShift: RDMA memory "
                "locking)",
            )
        )
    if rdma is not None and rdma.memlock == "machineconfig" and rdma.machine_config != "reference":
        config = memlock_machine_config_name(rdma.machine_config_pool)
        verb, resource = (
            ("create", MACHINE_CONFIGS)
            if rdma.machine_config == "create"
            else ("patch", f"{MACHINE_CONFIGS}/{config}")
        )
        rights.append(
            Right(
                f"rdma.machineConfig: {rdma.machine_config} (the MachineConfig {config!r})",
                ((Check(verb, resource),),),
                "rdma.machineConfig: reference once an admin applied it",
            )
        )
    if installs_controllers(s):
        rights.append(
            Right(
                "workload.controllers.install (Kueue's and JobSet's CRDs, cluster roles and "
                "webhooks)",
                ((Check("create", CRDS),),),
                "workload.controllers.install: false once an admin installed both",
            )
        )
    queue = s.workload.queue
    if s.workload.kind == "jobset" and queue.mode == "create" and queue.priority_classes:
        rights.append(
            Right(
                "workload.queue.priorityClasses (Kueue WorkloadPriorityClasses, cluster-scoped)",
                ((Check("create", PRIORITY_CLASSES),),),
                "workload.queue.priorityClasses: [] (runs without priorities), or "
                "workload.queue.mode: reference with classes an admin created",
            )
        )
    if metrics_port(s) is not None or runner_checks(s):
        rights.append(
            Right(
                "PodMonitors (the runs' metrics, monitoring.runMetrics; the node health runner's), "
                "which a project admin may not create: OpenShift's monitoring-edit role may",
                ((Check("create", POD_MONITORS, s.namespace),),),
                f"a cluster admin's `oc policy add-role-to-user monitoring-edit <user> -n "
                f"{s.namespace}` (OpenShift's monitoring docs, \"Granting users permission to "
                'monitor user-defined projects"), or monitoring.runMetrics.enabled: false and '
                "no health runner",
            )
        )
    if shows_dashboard(s):
        rights.append(
            Right(
                f"monitoring.dashboard (a ConfigMap in {CONSOLE_DASHBOARD_NAMESPACE}, where the "
                "console reads dashboards)",
                ((Check("create", "configmaps", CONSOLE_DASHBOARD_NAMESPACE),),),
                "monitoring.dashboard: false (the metrics are collected all the same)",
            )
        )
    return tuple(rights)


def can_i_argv(check: Check, cli: str, target: tuple[str, ...]) -> tuple[str, ...]:
    """One check as `cli` (oc or kubectl) runs it on the cluster `target` names
    (outputs.kube_target)."""
    return (cli, *target, *check.args())


def can_i_command(check: Check, cli: str, target: tuple[str, ...]) -> str:
    return shlex.join(can_i_argv(check, cli, target))
