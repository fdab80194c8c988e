"""`gpu-cluster run`'s way to the stack's cluster: the official Kubernetes client on the stack's
kube context (as its exported commands name it), what a run command needs the right to do, and
the errors a person can act on (no context, no rights, no template, no queue, no run).

The client is imported when a run command starts, never with the package: the render and the
other commands run without it (`pip install 'gpu-cluster[runs]'`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_cluster.config.derived import queue_name
from gpu_cluster.config.schema import Settings
from gpu_cluster.offline.doctor import Stack
from gpu_cluster.offline.stack_files import checked_settings
from gpu_cluster.plan.outputs import no_context_message
from gpu_cluster.plan.run_template import submitter_role_name, template_name

JOBSET_GROUP, JOBSET_VERSION, JOBSETS = "jobset.x-k8s.io", "v1alpha2", "jobsets"
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
INSTALL_CLIENT = "pip install 'gpu-cluster[runs]' (the official Kubernetes Python client)"
NOT_FOUND, CONFLICT = 404, 409
# One API request; past this the cluster is taken as unreachable.
REQUEST_TIMEOUT_S = 30


class RunCommandError(Exception):
    """What stops a run command, said so that a person can act on it."""


@dataclass(frozen=True)
class Right:
    """One thing a run command does in the namespace: `verb` on `resource` of API `group`
    (`subresource`, object `name` when it is about one; `cluster_wide`: a resource of no
    namespace, such as nodes)."""

    verb: str
    group: str
    resource: str
    subresource: str = ""
    name: str = ""
    cluster_wide: bool = False

    def __str__(self) -> str:
        resource = f"{self.resource}.{self.group}" if self.group else self.resource
        sub = f"/{self.subresource}" if self.subresource else ""
        named = f" {self.name!r}" if self.name else ""
        return f"{self.verb} {resource}{sub}{named}"


@dataclass
class RunCluster:
    """The stack's settings and a client on its cluster."""

    stack: str
    settings: Settings
    api: Any  # kubernetes.client.ApiClient

    @property
    def namespace(self) -> str:
        return self.settings.namespace

    @property
    def queue(self) -> str:
        return queue_name(self.settings)

    def custom(self) -> Any:
        from kubernetes import client  # type: ignore[import-untyped]

        return client.CustomObjectsApi(self.api)

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api)

    def require(self, rights: Sequence[Right]) -> None:
        """Raises RunCommandError naming every right in `rights` the user lacks (asked with
        SelfSubjectAccessReviews, which every authenticated user may create)."""
        missing = [r for r in rights if not self.allowed(r)]
        if missing:
            role = submitter_role_name(self.settings.name)
            raise RunCommandError(
                f"no right to {', '.join(map(str, missing))} in namespace {self.namespace!r}: "
                f"ask the cluster's admins for the Role {role!r} there (stack config "
                "workload.runs.submitters)"
            )

    def allowed(self, right: Right) -> bool:
        """Whether the user has `right` in the namespace, or cluster-wide for a `cluster_wide`
        one (a SelfSubjectAccessReview)."""
        from kubernetes import client

        review = client.V1SelfSubjectAccessReview(
            spec=client.V1SelfSubjectAccessReviewSpec(
                resource_attributes=client.V1ResourceAttributes(
                    namespace=None if right.cluster_wide else self.namespace,
                    verb=right.verb,
                    group=right.group,
                    resource=right.resource,
                    subresource=right.subresource or None,
                    name=right.name or None,
                )
            )
        )
        answer = self.call(
            client.AuthorizationV1Api(self.api).create_self_subject_access_review, review
        )
        return bool(answer.status.allowed)

    def call(
        self, method: Any, *args: Any, timeout: object = REQUEST_TIMEOUT_S, **kwargs: Any
    ) -> Any:
        """`method(*args, **kwargs)` within `timeout` (seconds, or the client's (connect, read)
        pair); an API error other than a missing object or a name taken becomes a
        RunCommandError."""
        from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]
        from urllib3.exceptions import HTTPError

        try:
            return method(*args, _request_timeout=timeout, **kwargs)
        except ApiException as exc:
            if exc.status in (NOT_FOUND, CONFLICT):
                raise
            answered = f"the API server answered {exc.status}: {_message(exc)}"
            raise RunCommandError(answered) from None
        except HTTPError as exc:
            raise RunCommandError(f"cannot reach the stack's cluster: {exc}") from None

    def read(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        """A JSON answer as plain data (camelCase keys, as the API writes them)."""
        return json.loads(self.call(method, *args, _preload_content=False, **kwargs).data)

    def template(self) -> dict[str, str]:
        """The run template ConfigMap's data."""
        name = template_name(self.settings.name)
        try:
            found = self.read(self.core().read_namespaced_config_map, name, self.namespace)
        except Exception as exc:
            if not is_status(exc, NOT_FOUND):
                raise
            raise RunCommandError(
                f"no run template (ConfigMap {name!r}) in namespace {self.namespace!r}: the "
                f"stack {self.stack!r} publishes one once `pulumi up` ran with workload.kind "
                "jobset"
            ) from None
        data: dict[str, str] = found.get("data") or {}
        return data

    def job_sets(self) -> list[dict[str, Any]]:
        """The runs in the stack's queue."""
        answer = self.read(
            self.custom().list_namespaced_custom_object,
            JOBSET_GROUP,
            JOBSET_VERSION,
            self.namespace,
            JOBSETS,
            label_selector=f"{KUEUE_GROUP}/queue-name={self.queue}",
        )
        items: list[dict[str, Any]] = answer["items"]
        return items

    def job_set(self, name: str) -> dict[str, Any]:
        try:
            found: dict[str, Any] = self.read(
                self.custom().get_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                self.namespace,
                JOBSETS,
                name,
            )
        except Exception as exc:
            if not is_status(exc, NOT_FOUND):
                raise
            raise RunCommandError(
                f"no run {name!r} in namespace {self.namespace!r} (gpu-cluster run list "
                f"--stack {self.stack})"
            ) from None
        return found

    def workloads(self) -> list[dict[str, Any]]:
        answer = self.read(
            self.custom().list_namespaced_custom_object,
            KUEUE_GROUP,
            KUEUE_VERSION,
            self.namespace,
            "workloads",
        )
        items: list[dict[str, Any]] = answer["items"]
        return items

    def pods(self, selector: str) -> list[dict[str, Any]]:
        answer = self.read(self.core().list_namespaced_pod, self.namespace, label_selector=selector)
        items: list[dict[str, Any]] = answer["items"]
        return items


def is_status(exc: BaseException, status: int) -> bool:
    """Whether `exc` is the client's ApiException for HTTP `status`."""
    return getattr(exc, "status", None) == status


def _message(exc: Any) -> str:
    """The API's own message in an error answer (a Status object), else its reason."""
    try:
        return str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        return str(exc.reason)


def _kubeconfig(target: tuple[str, ...]) -> tuple[str | None, str | None]:
    flags = dict(zip(target[::2], target[1::2], strict=True))
    return flags.get("--kubeconfig"), flags.get("--context")


def connect(stack: str, overrides: tuple[str, ...], project_dir: Path) -> RunCluster:
    """The stack's settings and a client on its kube context; raises RunCommandError."""
    checked = checked_settings(stack, overrides, project_dir)
    target = Stack(stack, project_dir, checked).target
    if not target:
        raise RunCommandError(no_context_message("gpu-cluster run"))
    try:
        from kubernetes import config
        from kubernetes.config.config_exception import (  # type: ignore[import-untyped]
            ConfigException,
        )
    except ImportError:
        raise RunCommandError(f"the Kubernetes client is not installed: {INSTALL_CLIENT}") from None
    kubeconfig, context = _kubeconfig(target)
    # As kubectl reads it: --kubeconfig, else $KUBECONFIG (a list of files), else ~/.kube/config.
    files = kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    try:
        api = config.new_client_from_config(config_file=files, context=context)
    except (ConfigException, OSError) as exc:
        raise RunCommandError(
            f"kube context {context or '(current)'} of stack {stack!r} cannot be used from "
            f"{files}: {exc} (gpu-cluster doctor --stack {stack})"
        ) from None
    return RunCluster(stack, checked.settings, api)


def lines(rows: Sequence[Sequence[str]]) -> Iterator[str]:
    """`rows` as columns padded to their widest cell."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))] if rows else []
    for row in rows:
        yield "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
