"""A thin client over the real API server (the official Python client's dynamic API)."""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import config as kube_config  # type: ignore[import-untyped]
from kubernetes.client import CoreV1Api  # type: ignore[import-untyped]
from kubernetes.dynamic import DynamicClient  # type: ignore[import-untyped]
from kubernetes.dynamic.exceptions import (  # type: ignore[import-untyped]
    ApiException,
    NotFoundError,
)

Object = dict[str, Any]
T = TypeVar("T")

# How long a wait for the cluster to settle may take before the test says what it saw.
SETTLE_DEADLINE_S = 180.0


class Kube:
    """Create, read and delete objects given as plain dicts (the render's form)."""

    def __init__(self, kubeconfig: Path) -> None:
        self._api = kube_config.new_client_from_config(config_file=str(kubeconfig))
        self._client = DynamicClient(self._api)

    def refresh_discovery(self) -> None:
        """After CRDs are installed the client must learn their kinds."""
        self._client = DynamicClient(self._api)

    def _resource(self, api_version: str, kind: str) -> Any:
        return self._client.resources.get(api_version=api_version, kind=kind)

    def openapi_v2_kinds(self) -> set[tuple[str, str, str]]:
        """(group, version, kind) of each definition in the API server's /openapi/v2, the
        document pulumi-kubernetes reads before it creates or diffs an object (client-go's
        discovery OpenAPISchema, with its 32 s timeout). The server builds it on the first read
        after a CRD changes; this read waits for that as long as the tier waits for anything."""
        response = self._api.call_api(
            "/openapi/v2",
            "GET",
            header_params={"Accept": "application/json"},
            _preload_content=False,
            _request_timeout=SETTLE_DEADLINE_S,
        )
        document = json.loads(response[0].data)
        return {
            (gvk["group"], gvk["version"], gvk["kind"])
            for definition in document.get("definitions", {}).values()
            for gvk in definition.get("x-kubernetes-group-version-kind", [])
        }

    def create(self, obj: Object, *, dry_run: bool = False) -> Object:
        """POST the object: what pulumi-kubernetes >= 4.29 does for a resource it creates
        (await.go: a plain create unless upsertExistingObjects), so AlreadyExists surfaces here.
        `dry_run`: validated and admitted in full, then not stored."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        kwargs = {"dry_run": "All"} if dry_run else {}
        try:
            created: Object = resource.create(body=obj, namespace=namespace, **kwargs).to_dict()
        except ApiException as error:
            raise CreateError(obj, error) from error
        return created

    def apply(self, obj: Object) -> Object:
        """Server-side apply with force: what pulumi-kubernetes 4.x does to update a resource
        (server-side apply is its default since v4.0; provider/pkg/await/await.go ssaUpdate)."""
        resource = self._resource(obj["apiVersion"], obj["kind"])
        namespace = obj["metadata"].get("namespace") if resource.namespaced else None
        applied: Object = resource.server_side_apply(
            body=obj,
            name=obj["metadata"]["name"],
            namespace=namespace,
            field_manager="pulumi-kubernetes",
            force_conflicts=True,
        ).to_dict()
        return applied

    def service_account_token(self, name: str, namespace: str) -> str:
        """A token for ServiceAccount `name` (the TokenRequest API, as `kubectl create token`)."""
        tokens = self._resource("v1", "ServiceAccount").subresources["token"]
        request = tokens.create(
            body={"spec": {"expirationSeconds": 3600}}, name=name, namespace=namespace
        )
        return str(request.to_dict()["status"]["token"])

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Object:
        found: Object = (
            self._resource(api_version, kind).get(name=name, namespace=namespace).to_dict()
        )
        return found

    def exists(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        try:
            self.get(api_version, kind, name, namespace)
        except NotFoundError:
            return False
        return True

    def delete_and_follow(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> list[Object]:
        """Delete the object with its grace period, as `kubectl delete` does, and return each
        state it went through until it was gone (a watch from the version before the delete:
        none is missed, the kubelet's last status of a pod included)."""
        resource = self._resource(api_version, kind)
        version = resource.get(name=name, namespace=namespace).metadata.resourceVersion
        resource.delete(name=name, namespace=namespace)
        states: list[Object] = []
        for event in resource.watch(
            namespace=namespace, name=name, resource_version=version, timeout=int(SETTLE_DEADLINE_S)
        ):
            states.append(event["raw_object"])
            if event["type"] == "DELETED":
                return states
        raise TimeoutError(f"{kind} {name} still there {SETTLE_DEADLINE_S:.0f} s after its delete")

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, **selectors: str
    ) -> list[Object]:
        listing = self._resource(api_version, kind).get(namespace=namespace, **selectors)
        items: list[Object] = listing.to_dict()["items"]
        return items

    def patch_status(
        self, api_version: str, kind: str, name: str, namespace: str | None, status: Object
    ) -> Object:
        """Merge `status` into the object's status subresource, as its controller (or kubelet)
        would write it."""
        resource = self._resource(api_version, kind).subresources["status"]
        patched: Object = resource.patch(
            body={"status": status},
            name=name,
            namespace=namespace,
            content_type="application/merge-patch+json",
        ).to_dict()
        return patched

    def merge_patch(
        self, api_version: str, kind: str, name: str, namespace: str | None, patch: Object
    ) -> Object:
        """A JSON merge patch of the object (RFC 7386: a list is replaced whole), as `kubectl
        patch --type merge` or a controller that edits one field sends it."""
        patched: Object = (
            self._resource(api_version, kind)
            .patch(
                body=patch,
                name=name,
                namespace=namespace,
                content_type="application/merge-patch+json",
            )
            .to_dict()
        )
        return patched

    def pod_log(self, name: str, namespace: str, container: str | None = None) -> str:
        """What the pod's container (`container`, when it has several) printed, as `kubectl
        logs` reads it: the API server asks the pod's kubelet (a kwok node's stand-in serves a
        file instead)."""
        kwargs = {"container": container} if container else {}
        return str(CoreV1Api(self._api).read_namespaced_pod_log(name, namespace, **kwargs))

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        with contextlib.suppress(NotFoundError):
            self._resource(api_version, kind).delete(name=name, namespace=namespace)

    def create_all(self, objects: Iterable[Object]) -> None:
        for obj in objects:
            self.create(obj)


class CreateError(RuntimeError):
    """The API server refused an object; says which and why."""

    def __init__(self, obj: Object, error: ApiException) -> None:
        meta = obj["metadata"]
        where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        super().__init__(f"{obj['kind']} {where}{meta['name']}: {error.status} {error.body}")
        self.status: int = error.status
        self.body: str = str(error.body)


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    *,
    explain: Callable[[], str] = lambda: "",
    deadline_s: float = SETTLE_DEADLINE_S,
    scheduled: Callable[[], float | None] = lambda: None,
) -> T:
    """Poll until `probe` returns a value; on the deadline, fail naming what was awaited and
    what `explain` says about the cluster then. `scheduled`: when (Unix time) a controller has
    said it acts next, if it has (Kueue's requeue time): the deadline is then at least
    `deadline_s` after that."""
    deadline = time.time() + deadline_s
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        next_step = scheduled()
        if next_step is not None:
            deadline = max(deadline, next_step + deadline_s)
        if time.time() > deadline:
            raise TimeoutError(f"gave up waiting for {what}\n{explain()}")
        time.sleep(0.5)


def describe(kube: Kube, namespace: str) -> str:
    """Pods with their node, phase and unmet conditions, and the namespace's latest events."""
    lines = []
    for pod in kube.list("v1", "Pod", namespace):
        status = pod.get("status") or {}
        unmet = [
            f"{c['type']}: {c.get('message', '')}"
            for c in status.get("conditions") or []
            if c["status"] != "True"
        ]
        lines.append(
            f"pod {pod['metadata']['name']} on {pod['spec'].get('nodeName')}: "
            f"{status.get('phase')} {'; '.join(unmet)}"
        )
    for event in kube.list("v1", "Event", namespace)[-20:]:
        involved = event["involvedObject"]
        lines.append(
            f"event {involved['kind']}/{involved['name']}: {event.get('reason')} "
            f"{event.get('message', '')}"
        )
    return "\n".join(lines)


def install_crds(kube: Kube, paths: Iterable[Path]) -> list[str]:
    """Create each CRD and wait until the API server serves it; returns their names."""
    return install_crd_objects(
        kube,
        (
            crd
            for path in paths
            for crd in yaml.safe_load_all(path.read_text(encoding="utf-8"))
            if crd
        ),
    )


def install_crd_objects(kube: Kube, crds: Iterable[Object]) -> list[str]:
    """`install_crds` for CRDs already loaded (and changed) by the caller."""
    names = []
    for crd in crds:
        kube.create(crd)
        names.append(crd["metadata"]["name"])
    for name in names:
        wait_for(f"CRD {name} to be established", functools.partial(_established, kube, name))
    kube.refresh_discovery()
    return names


def wait_for_openapi_v2(kube: Kube) -> None:
    """Until the API server's /openapi/v2 lists each kind its established CRDs serve: read
    before a stack's first `pulumi` operation, so the server builds the document for the
    CRDs on the tier's time. On a loaded VM the first build after the CRDs outlasted the
    provider's 32 s and failed a `pulumi up` ("configured Kubernetes cluster is
    unreachable")."""
    served = {
        (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
        for crd in kube.list("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        if _is_established(crd)
        for version in crd["spec"]["versions"]
        if version.get("served", True)
    }
    wait_for("/openapi/v2 to list the CRDs' kinds", lambda: served <= kube.openapi_v2_kinds())


def _established(kube: Kube, name: str) -> bool:
    return _is_established(kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name))


def _is_established(crd: Object) -> bool:
    conditions = crd.get("status", {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)
