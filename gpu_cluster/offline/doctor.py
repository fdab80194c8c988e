"""`gpu-cluster doctor`: whether this machine has what a stack's `pulumi up` and the commands it
exports need (the Pulumi CLI and a state login, the cluster's CLI, the kube context and its API,
Kueue's namespace label on OpenShift, the GCP APIs) and placeholders left in the stack file.
Each check is one line, PASS, FAIL (with the fix) or SKIP (it could not run: never a PASS)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from gpu_cluster.config.derived import shows_dashboard
from gpu_cluster.config.gke import PLACEHOLDER_PROJECT, placeholders
from gpu_cluster.config.workload import needs_namespace_opt_in
from gpu_cluster.facts.gcp import GKE_STACK_APIS, IMAGE_STREAMING_API, MONITORING_API
from gpu_cluster.facts.kueue import OPENSHIFT_MANAGED_NAMESPACE_LABEL
from gpu_cluster.offline.external import NoAnswerError, run_tool
from gpu_cluster.offline.stack_files import CheckedStack
from gpu_cluster.plan.launch import LAUNCH_ALL_MODULE, TIMELINE_MODULE
from gpu_cluster.plan.outputs import (
    CONTEXT_KEY,
    GKE_CLI,
    OPENSHIFT_CLI,
    gke_context,
    kube_target,
)

# The oldest Pulumi CLI the program runs under: adopting an object whose live state differs
# from the stack's (an import with a diff, namespaceMode/rdma.networkAttachments: adopt) needs
# the engine that imports and updates in one deployment (pulumi/pulumi CHANGELOG.md, 3.174.0,
# #19339, at 22677124c240171391f2b21c1be663b4d143e81b).
MIN_PULUMI_CLI = (3, 174, 0)
# The version the real tier builds and tests against (tools/realtier/build.py PULUMI_VERSION;
# tests/test_doctor.py holds the two equal).
TESTED_PULUMI_CLI = "3.259.0"
INSTALL_PULUMI = f"curl -fsSL https://get.pulumi.com | sh -s -- --version {TESTED_PULUMI_CLI}"
# A local command (version, login, kubeconfig) answers at once; these bound a hung one.
LOCAL_TIMEOUT_S = 30
# One API request (the kube API's /version, a namespace read): past this, unreachable.
API_TIMEOUT_S = 30
# `gcloud services list` pages through every service of the project.
GCLOUD_TIMEOUT_S = 60
# Pulumi's update check reaches the network; a doctor run should not wait on it.
PULUMI_ENV = {"PULUMI_SKIP_UPDATE_CHECK": "true"}
INSTALL = {
    "oc": "install the OpenShift CLI (oc: the cluster's web console, ? > Command line tools)",
    "gcloud": "install the Google Cloud CLI (cloud.google.com/sdk/docs/install)",
    "kubectl": "gcloud components install kubectl",
    "gke-gcloud-auth-plugin": "gcloud components install gke-gcloud-auth-plugin",
}

Verdict = Literal["PASS", "FAIL", "SKIP"]


@dataclass(frozen=True)
class Finding:
    verdict: Verdict
    what: str
    detail: str
    fix: str = ""  # what to run (or do) about a FAIL, or to let a SKIP run

    def line(self) -> str:
        fix = f"; fix: {self.fix}" if self.fix and self.verdict != "PASS" else ""
        return f"{self.verdict} {self.what}: {self.detail}{fix}"


@dataclass(frozen=True)
class Stack:
    name: str
    project_dir: Path
    checked: CheckedStack

    @property
    def on_gke(self) -> bool:
        return self.checked.settings.platform == "gke"

    @property
    def cli(self) -> str:
        """What the stack's exported commands run."""
        return GKE_CLI if self.on_gke else OPENSHIFT_CLI

    @property
    def target(self) -> tuple[str, ...]:
        """The flags naming the stack's cluster, as its exported commands name it."""
        if self.on_gke:
            return ("--context", gke_context(self.checked.settings))
        return kube_target(self.checked.config)


def pulumi_checks(stack: Stack) -> Iterator[Finding]:
    """The CLI's version, then whether it is logged in to a state backend."""
    what = "Pulumi CLI"
    try:
        answer = run_tool(("pulumi", "version"), LOCAL_TIMEOUT_S, stack.project_dir, PULUMI_ENV)
    except NoAnswerError as exc:
        yield Finding("FAIL", what, str(exc), INSTALL_PULUMI)
        yield Finding("SKIP", "state login", "needs the Pulumi CLI", INSTALL_PULUMI)
        return
    found = re.match(r"v?(\d+)\.(\d+)\.(\d+)", answer.out.strip())
    oldest = ".".join(map(str, MIN_PULUMI_CLI))
    if answer.status != 0 or found is None:
        detail = f"`pulumi version` gave no version: {answer.first_error_line()}"
        yield Finding("FAIL", what, detail, INSTALL_PULUMI)
    elif tuple(int(n) for n in found.groups()) < MIN_PULUMI_CLI or found.group(1) != "3":
        detail = f"{found.group(0)}; the program needs 3.x from {oldest} on"
        yield Finding("FAIL", what, detail, INSTALL_PULUMI)
    else:
        detail = f"{found.group(0)} (3.x from {oldest} on; {TESTED_PULUMI_CLI} is tested)"
        yield Finding("PASS", what, detail)
    login = "pulumi login (Pulumi Cloud), pulumi login --local or pulumi login gs://BUCKET"
    try:
        whoami = run_tool(
            ("pulumi", "whoami", "--non-interactive"),
            LOCAL_TIMEOUT_S,
            stack.project_dir,
            PULUMI_ENV,
        )
    except NoAnswerError as exc:
        yield Finding("FAIL", "state login", str(exc), login)
        return
    if whoami.status == 0 and whoami.out.strip():
        yield Finding("PASS", "state login", f"logged in as {whoami.out.strip().splitlines()[0]}")
    else:
        yield Finding("FAIL", "state login", f"not logged in: {whoami.first_error_line()}", login)


def tool_checks(stack: Stack) -> Iterator[Finding]:
    """The CLIs the exported commands (and on GKE, getCredentialsCommand) run."""
    tools = ("gcloud", GKE_CLI, "gke-gcloud-auth-plugin") if stack.on_gke else (OPENSHIFT_CLI,)
    for tool in tools:
        path = shutil.which(tool)
        if path is None:
            yield Finding("FAIL", tool, "not on PATH", INSTALL[tool])
        else:
            yield Finding("PASS", tool, path)


def python_check(stack: Stack) -> Finding:
    """The `python3` that launchCommand and timelineCommand run finds the package's modules from
    the project directory, where `pulumi stack output` runs: it does in this repository (the
    package is there) and where the project's virtualenv is active or the package installed for
    that python3; in a project of one's own with the package only in an inactive virtualenv it
    does not (`No module named 'gpu_cluster'`)."""
    what = "python3 for the exported commands"
    imports = f"import {LAUNCH_ALL_MODULE}, {TIMELINE_MODULE}"
    try:
        answer = run_tool(("python3", "-c", imports), LOCAL_TIMEOUT_S, stack.project_dir)
    except NoAnswerError as exc:
        return Finding("FAIL", what, str(exc), "install Python 3 (python3 on PATH)")
    if answer.status != 0:
        fix = (
            "activate the project's virtualenv (source venv/bin/activate, or the one Pulumi.yaml's "
            "runtime.options.virtualenv names) or install the package for this python3 "
            "(pip install gpu-cluster)"
        )
        # A traceback's last line says what went wrong.
        said = (answer.err.strip().splitlines() or [f"exit {answer.status}"])[-1]
        return Finding("FAIL", what, f"`python3 -c '{imports}'`: {said}", fix)
    return Finding("PASS", what, f"imports {LAUNCH_ALL_MODULE} and {TIMELINE_MODULE}")


def kube_checks(stack: Stack) -> Iterator[Finding]:
    """The stack's context in the kubeconfig, its API answering, and on an OpenShift JobSet
    stack whose namespace it does not create, Kueue's label on that namespace."""
    s = stack.checked.settings
    answered = False
    api: Finding | None = None
    if not stack.target:
        detail = (
            f"the stack sets no {CONTEXT_KEY} (nor kubernetes:kubeconfig as a file): "
            "pulumi up and the exported commands would use whichever context is current"
        )
        fix = f"pulumi config set {CONTEXT_KEY} CONTEXT --stack {stack.name}"
        yield Finding("FAIL", "kube context", detail, fix)
    elif shutil.which(stack.cli) is None:
        yield Finding("SKIP", "kube context", f"needs {stack.cli}", INSTALL[stack.cli])
    else:
        context = _context_check(stack)
        yield context
        if context.verdict == "PASS":
            api = _api_check(stack)
            answered = api.verdict == "PASS"
            yield api
    if api is None:
        yield Finding("SKIP", "kube API", "needs the kube context (above)")
    if needs_namespace_opt_in(s) and s.namespace_mode != "create":
        yield _kueue_label_check(stack, answered)


def _credentials(stack: Stack) -> str:
    """What writes the stack's context into the kubeconfig."""
    s = stack.checked.settings
    if s.gcp is not None:
        return (
            f"gcloud container clusters get-credentials {s.name} --zone {s.gcp.zone} "
            f"--project {s.gcp.project}"
        )
    context = _flag(stack.target, "--context") or "CONTEXT"
    return (
        f'oc login --server=API_URL && oc config rename-context "$(oc config current-context)" '
        f"{context}"
    )


def _flag(target: tuple[str, ...], flag: str) -> str | None:
    return dict(zip(target[::2], target[1::2], strict=True)).get(flag)


def _context_check(stack: Stack) -> Finding:
    """Whether the kubeconfig holds the context the stack names (or, naming only a kubeconfig
    file, any context)."""
    context = _flag(stack.target, "--context")
    kubeconfig = _flag(stack.target, "--kubeconfig")
    files = ("--kubeconfig", kubeconfig) if kubeconfig else ()
    argv = (stack.cli, *files, "config", "get-contexts", "-o", "name")
    what = f"kube context {context}" if context else f"kubeconfig {kubeconfig}"
    try:
        answer = run_tool(argv, LOCAL_TIMEOUT_S)
    except NoAnswerError as exc:
        return Finding("SKIP", what, str(exc), INSTALL.get(stack.cli, ""))
    names = answer.out.split() if answer.status == 0 else []
    if context is None and names:
        return Finding("PASS", what, f"holds {len(names)} contexts; its current one is used")
    if context in names:
        return Finding("PASS", what, "in the kubeconfig")
    where = f"{kubeconfig}" if kubeconfig else "the kubeconfig"
    if stack.on_gke:
        # The cluster may not exist yet: pulumi up makes it, get-credentials then the context.
        detail = f"not in {where}: the exported commands need it once pulumi up made the cluster"
        return Finding("SKIP", what, detail, _credentials(stack))
    return Finding("FAIL", what, f"not in {where}", _credentials(stack))


def _api_check(stack: Stack) -> Finding:
    """The API server's /version through the stack's context: reachable, credentials taken."""
    what = "kube API"
    argv = (stack.cli, *stack.target, "get", "--raw", "/version")
    fix = _credentials(stack)
    if stack.on_gke:
        fix += " (and this machine's address in gcp.authorizedNetworks)"
    try:
        answer = run_tool((*argv, f"--request-timeout={API_TIMEOUT_S}s"), API_TIMEOUT_S + 5)
    except NoAnswerError as exc:
        return Finding("FAIL", what, str(exc), fix)
    try:
        version = json.loads(answer.out)["gitVersion"] if answer.status == 0 else None
    except (ValueError, KeyError, TypeError):
        version = None
    if not isinstance(version, str):
        return Finding("FAIL", what, f"no answer: {answer.first_error_line()}", fix)
    return Finding("PASS", what, f"answers (Kubernetes {version})")


def _kueue_label_check(stack: Stack, answered: bool) -> Finding:
    """Red Hat's build of Kueue admits only jobs in namespaces with its label; the stack labels
    only a namespace it creates."""
    namespace = stack.checked.settings.namespace
    label = f"{OPENSHIFT_MANAGED_NAMESPACE_LABEL}=true"
    what = f"Kueue's label {label} on namespace {namespace}"
    fix = f"{shlex.join((stack.cli, *stack.target, 'label', 'namespace', namespace, label))}"
    fix += " (a cluster admin)"
    if not answered:
        return Finding("SKIP", what, "needs the cluster's API (above)", "")
    argv = (stack.cli, *stack.target, "get", "namespace", namespace, "-o", "json")
    try:
        answer = run_tool(argv, API_TIMEOUT_S)
    except NoAnswerError as exc:
        return Finding("SKIP", what, str(exc))
    if answer.status != 0:
        if "NotFound" in answer.err or "not found" in answer.err:
            mode = stack.checked.settings.namespace_mode
            detail = f"the namespace does not exist (namespaceMode: {mode} needs it)"
            return Finding("FAIL", what, detail, f"oc new-project {namespace}")
        return Finding("SKIP", what, f"could not read it: {answer.first_error_line()}")
    try:
        labels = json.loads(answer.out).get("metadata", {}).get("labels") or {}
    except (ValueError, AttributeError):
        return Finding("SKIP", what, "the namespace read was not JSON")
    value = labels.get(OPENSHIFT_MANAGED_NAMESPACE_LABEL)
    if value == "true":
        return Finding("PASS", what, "set")
    shown = "unset" if value is None else f"{value!r}"
    detail = f"{shown}: every run would wait at Kueue's admission"
    return Finding("FAIL", what, detail, fix)


def gcp_checks(stack: Stack) -> Iterator[Finding]:
    """The GCP APIs the stack's pulumi up calls, enabled in its project."""
    gcp = stack.checked.settings.gcp
    if gcp is None:
        return
    needed = (
        *GKE_STACK_APIS,
        *((IMAGE_STREAMING_API,) if gcp.image_streaming else ()),
        *((MONITORING_API,) if shows_dashboard(stack.checked.settings) else ()),
    )
    what = f"GCP APIs of project {gcp.project}"
    if gcp.project == PLACEHOLDER_PROJECT:
        yield Finding("SKIP", what, "gcp.project is the shipped placeholder (below)")
        return
    argv = ("gcloud", "services", "list", "--enabled", "--project", gcp.project)
    try:
        answer = run_tool((*argv, "--format=value(config.name)"), GCLOUD_TIMEOUT_S)
    except NoAnswerError as exc:
        yield Finding("SKIP", what, str(exc), INSTALL["gcloud"] if exc.missing else "")
        return
    if answer.status != 0:
        detail = f"gcloud could not list them: {answer.first_error_line()}"
        yield Finding("SKIP", what, detail, "gcloud auth login")
        return
    enabled = set(answer.out.split())
    for api in needed:
        if api in enabled:
            yield Finding("PASS", f"GCP API {api}", f"enabled in {gcp.project}")
        else:
            fix = f"gcloud services enable {api} --project {gcp.project}"
            yield Finding("FAIL", f"GCP API {api}", f"not enabled in {gcp.project}", fix)


def placeholder_checks(stack: Stack) -> Iterator[Finding]:
    """The values a GKE stack file must not keep (config/gke.py placeholders)."""
    if not stack.on_gke:
        return
    found = placeholders(stack.checked.settings)
    for p in found:
        key = p.warning.split(" = ", 1)[0]
        yield Finding("FAIL", f"placeholder {key}", p.warning, f"{p.fix} --stack {stack.name}")
    if not found:
        yield Finding("PASS", "placeholders", f"none left in Pulumi.{stack.name}.yaml")


def doctor(stack: Stack) -> list[Finding]:
    return [
        *pulumi_checks(stack),
        *tool_checks(stack),
        python_check(stack),
        *kube_checks(stack),
        *gcp_checks(stack),
        *placeholder_checks(stack),
    ]
