"""Run the real program in-process under the Pulumi SDK's mock engine and record everything.

This is what `pulumi preview` would send to the engine, without the CLI, a cloud or a cluster:
each registered resource's type, name, parent, inputs and options, and the stack outputs, with
each secret value in them replaced by a marker (secret_digest). Used by the offline render and
by the tests.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import logging
import runpy
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime
import pulumi.runtime.settings
from pulumi.runtime import mocks, rpc
from pulumi.runtime import resource as sdk_resource
from pulumi.runtime.proto import source_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from gpu_cluster.components.stack_config import checked_as_of
from gpu_cluster.config.dates import AsOf
from gpu_cluster.config.schema import PROJECT
from gpu_cluster.offline.config_reads import recorded_reads, unread_warnings
from gpu_cluster.offline.secret_digest import SecretDigests
from gpu_cluster.offline.stack_files import PROJECT_DIR

# Documentation-range address (RFC 5737) and placeholder CA for the mocked GKE endpoint.
MOCK_ENDPOINT = "203.0.113.10"
MOCK_CA = base64.b64encode(b"mock cluster CA certificate").decode()


@dataclass(frozen=True)
class RecordedResource:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    options: dict[str, Any]
    # URNs this resource also answers to (its `aliases` option, each as a full URN).
    aliases: tuple[str, ...] = ()


@dataclass
class ProgramRun:
    resources: list[RecordedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    # Warnings the program logged (pulumi.log.warn), as `pulumi up` would show them.
    warnings: list[str] = field(default_factory=list)

    def of_type(self, type_: str) -> list[RecordedResource]:
        return [r for r in self.resources if r.type == type_]

    def kubernetes_objects(self) -> list[RecordedResource]:
        """The resources that are Kubernetes objects the program writes (not providers,
        components or reads)."""
        return [
            r
            for r in self.resources
            if r.custom
            and r.type.startswith("kubernetes:")
            and "apiVersion" in r.inputs
            and "read" not in r.options
        ]

    def manifests(self) -> list[dict[str, Any]]:
        """Kubernetes objects as manifests."""
        return [r.inputs for r in self.kubernetes_objects()]


# --- the mock engine -------------------------------------------------------------------------


# The one provider function the program calls: a GKE stack that mounts buckets reads its
# project's number (IAM names Workload Identity principals by it). The render shows this
# placeholder in its place.
GET_PROJECT = "gcp:organizations/getProject:getProject"
MOCK_PROJECT_NUMBER = "000000000000"
# A Lustre instance's address, known once GCP made it; the render shows this documentation
# address (RFC 5737) in its place.
MOCK_LUSTRE_IP = "192.0.2.10"
# The start of a private services access range GCP picks: a range reserved for benchmarks
# (RFC 2544, 198.18.0.0/15) stands in for it.
MOCK_PEERING_RANGE = "198.18.0.0"


def _computed_state(type_: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs a provider would compute, where the program reads them."""
    state = dict(inputs)
    if type_ == "gcp:container/cluster:Cluster":
        state["endpoint"] = MOCK_ENDPOINT
        state["masterAuth"] = {"clusterCaCertificate": MOCK_CA}
    if type_ == "gcp:lustre/instance:Instance":
        state["mountPoint"] = f"{MOCK_LUSTRE_IP}@tcp:/{inputs['filesystem']}"
    if type_ == "gcp:compute/globalAddress:GlobalAddress":
        state.setdefault("address", MOCK_PEERING_RANGE)
    if type_.startswith("gcp:"):
        resource_name = inputs.get("name", name)
        state.setdefault("name", resource_name)
        state.setdefault("selfLink", f"https://www.googleapis.com/mock/{type_}/{resource_name}")
    return state


def mock_id(name: str) -> str:
    """The ID the mock engine gives the resource named `name` (a provider reference ends
    with it)."""
    return f"{name}-id"


class _Mocks(mocks.Mocks):
    def __init__(self) -> None:
        # Per thread (the SDK sends each registration from a worker thread), the inputs of the
        # registration being made, as the SDK's mock monitor deserialized them: the recording
        # takes them from here instead of deserializing the request a second time.
        self.last_inputs = threading.local()

    def new_resource(self, args: mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.last_inputs.value = args.inputs
        if args.resource_id:
            # A read of an object the cluster has: offline there is no cluster, so what the
            # object holds is unknown, as a preview shows a value not known yet.
            return args.resource_id, {**args.inputs, "spec": rpc.UNKNOWN}
        return mock_id(args.name), _computed_state(args.typ, args.name, args.inputs)

    def call(self, args: mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == GET_PROJECT:
            return {"projectId": args.args["projectId"], "number": MOCK_PROJECT_NUMBER}, []
        raise NotImplementedError(f"the program must not call provider functions: {args.token}")


def _redact(value: Any, digests: SecretDigests) -> Any:
    if rpc.is_rpc_secret(value):
        inner = value.get("value")
        # A secret map keeps its keys (names, not secrets), so the shape stays valid, and
        # --diff names the key whose value changed.
        if isinstance(inner, dict):
            return {k: digests.marker(v) for k, v in inner.items()}
        return digests.marker(inner)
    if isinstance(value, dict):
        return {k: _redact(v, digests) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v, digests) for v in value]
    return value


ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


def resource_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """The URN the engine gives a resource: its parent's whole type chain, then its own type
    (pulumi/pulumi pkg/resource/deploy/deployment.go generateURN: "use the full qualified
    type"; the SDK's mock monitor keeps only the parent's last type)."""
    parent_type = parent.split("::")[2] if parent else ""
    if parent_type and parent_type != ROOT_STACK_TYPE:
        type_ = f"{parent_type}${type_}"
    return f"urn:pulumi:{stack}::{project}::{type_}::{name}"


def _inherited_child_alias(child: str, parent: str, parent_alias: str) -> str:
    """`child` (a URN) under its parent's alias instead of its parent; a name that starts with
    the parent's name starts with the alias's name instead (step_generator.go
    inheritedChildAlias)."""
    stack, project = child.split("::")[0].split(":")[2], child.split("::")[1]
    name, parent_name = child.split("::")[-1], parent.split("::")[-1]
    if name.startswith(parent_name):
        name = parent_alias.split("::")[-1] + name[len(parent_name) :]
    return resource_urn(stack, project, parent_alias, child.split("::")[2].split("$")[-1], name)


class _RecordingMonitor(mocks.MockMonitor):
    """The SDK's mock monitor, also keeping each registration's options, and giving each
    resource the URN the engine would."""

    def __init__(self, run: ProgramRun, digests: SecretDigests) -> None:
        self.recorded_mocks = _Mocks()
        super().__init__(self.recorded_mocks)
        self.run = run
        self.digests = digests
        self.aliases_of: dict[str, tuple[str, ...]] = {}  # each registered URN's aliases

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        return resource_urn(pulumi.get_stack(), pulumi.get_project(), parent, type_, name)

    def _alias_urns(self, request: Any, urn: str) -> tuple[str, ...]:
        """Each alias as the full URN the engine resolves it to (an alias spec's unset parts
        are the resource's own: pulumi/pulumi sdk/proto/alias.proto), and, under each alias
        of its parent, the resource and each of its aliases again (the engine's inherited
        child aliases: pulumi/pulumi pkg/resource/deploy/step_generator.go generateAliases,
        which uses the one parent alias that matched an old resource)."""
        urns = []
        for alias in request.aliases:
            if alias.urn:
                urns.append(alias.urn)
                continue
            spec = alias.spec
            parent = "" if spec.noParent else (spec.parentUrn or request.parent)
            urns.append(
                resource_urn(
                    spec.stack or pulumi.get_stack(),
                    spec.project or pulumi.get_project(),
                    parent,
                    spec.type or request.type,
                    spec.name or request.name,
                )
            )
        own = [urn, *urns]
        for parent_alias in self.aliases_of.get(request.parent, ()):
            urns += [_inherited_child_alias(u, request.parent, parent_alias) for u in own]
        return tuple(sorted(set(urns)))

    def ReadResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        """A read (`<Resource>.get`): recorded as a resource whose option `read` is the ID of
        the object it reads."""
        response = super().ReadResource(request)  # type: ignore[no-untyped-call]
        options = {"read": request.id, **_options(request, owned=False)}
        self._record(request, response.urn, True, options)
        return response

    def _record(
        self,
        request: Any,
        urn: str,
        custom: bool,
        options: dict[str, Any],
        aliases: tuple[str, ...] = (),
    ) -> None:
        """Record the registration or read the SDK's mock monitor has just handled on this
        thread, with the inputs it deserialized."""
        inputs = _redact(_plain(self.recorded_mocks.last_inputs.value), self.digests)
        self.run.resources.append(
            RecordedResource(
                request.type, request.name, urn, request.parent, custom, inputs, options, aliases
            )
        )

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method name
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            aliases = self._alias_urns(request, response.urn)
            self.aliases_of[response.urn] = aliases
            options = _options(request, owned=True)
            if request.importId:
                # Only when set, so renders of stacks that adopt nothing stay as they were.
                options["import"] = request.importId
            timeouts = request.customTimeouts
            if timeouts.create or timeouts.update or timeouts.delete:
                # Likewise only where the program sets any.
                options["customTimeouts"] = {
                    "create": timeouts.create,
                    "update": timeouts.update,
                    "delete": timeouts.delete,
                }
            custom = bool(request.custom)
            self._record(request, response.urn, custom, options, aliases)
        return response


def _options(request: Any, owned: bool) -> dict[str, Any]:
    """The options of a registration (`owned`) or a read, which takes none of those that act on
    a resource the stack owns."""
    return {
        "protect": owned and bool(request.protect),
        "retainOnDelete": owned and bool(request.retainOnDelete),
        "deleteBeforeReplace": owned and bool(request.deleteBeforeReplace),
        "dependsOn": sorted(request.dependencies),
        "ignoreChanges": list(request.ignoreChanges) if owned else [],
        "replaceOnChanges": list(request.replaceOnChanges) if owned else [],
        "provider": request.provider.split("::")[-1] if request.provider else "",
    }


def _plain(value: Any) -> Any:
    """Deserialized inputs with resource references turned into their URNs."""
    if isinstance(value, pulumi.Resource):
        return "resource-reference"
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)  # the wire format has only doubles; Kubernetes wants integers
    return value


async def _resolve(value: Any, digests: SecretDigests) -> Any:
    output = pulumi.Output.from_input(value)
    resolved = await output.future()
    return digests.marker(resolved) if await output.is_secret() else resolved


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """No cyclic garbage collection while the program runs. A run allocates a few MiB and
    drops them at its end, but a full collection in between walks every object the SDK's
    imports created: about half the program's own time in `bench/profile_render.py`."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def _no_stack_traces() -> Iterator[None]:
    """Registrations without the Python stack: for each one the SDK walks the whole stack and
    reads its source lines (traceback.extract_stack) to send the engine where the resource was
    declared (pulumi/runtime/resource.py _get_stack_trace, SDK 3.272.0), a fifth of a large
    render's time, which the mocks drop unread. The run sends instead the empty trace the SDK
    itself sends when it finds no declaring frame."""
    declared_where = sdk_resource._get_stack_trace
    sdk_resource._get_stack_trace = source_pb2.StackTrace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = declared_where


class _WarningRecorder(logging.Handler):
    def __init__(self, run: ProgramRun) -> None:
        super().__init__(logging.WARNING)
        self.run = run

    def emit(self, record: logging.LogRecord) -> None:
        self.run.warnings.append(record.getMessage())


def run_program(
    config: Mapping[str, str],
    secret_keys: list[str] | None = None,
    stack: str = "offline",
    project_dir: Path = PROJECT_DIR,
    record_into: ProgramRun | None = None,
    project: str = PROJECT,
    as_of: AsOf | None = None,
) -> ProgramRun:
    """Run `project_dir`'s `__main__.py` (Pulumi project `project`) with `config` under mocks;
    return what it registered and exported.

    `record_into` receives the registrations even when the program fails. `as_of`: the date
    the program checks its config against (None: today's, as under `pulumi up`)."""
    run = record_into if record_into is not None else ProgramRun()
    digests = SecretDigests()
    pulumi.runtime.settings.ROOT.set(None)  # a fresh root stack for every run
    engine_log = logging.Logger("gpu-cluster.engine")  # this run's own, not the global tree
    # Warnings only, as the recorder keeps: a logger outside the tree has no level to inherit,
    # so it would otherwise build a record for each of the SDK's several debug messages per
    # registration (pulumi/log.py debug -> mocks.MockEngine.Log), only for the handler to drop.
    engine_log.setLevel(logging.WARNING)
    engine_log.addHandler(_WarningRecorder(run))
    pulumi.runtime.set_mocks(
        _Mocks(),
        project=project,
        stack=stack,
        preview=True,
        logger=engine_log,
        monitor=_RecordingMonitor(run, digests),
    )
    # The SDK keeps its outputs' tasks in one set across runs (MockSettings renews only the RPC
    # manager) and leaves a failed one there "to pick up at program exit" (pulumi/output.py,
    # Output._track): cleared, as the SDK's own pulumi.runtime.test does before each test
    # (pulumi/runtime/mocks.py), or a run in the same process would fail with the last one's
    # failure (a secret that could not be marked).
    pulumi.runtime.settings.SETTINGS.outputs.clear()
    pulumi.runtime.set_all_config(dict(config), secret_keys or [])
    if str(project_dir) not in sys.path:
        sys.path.insert(0, str(project_dir))

    def program() -> None:
        runpy.run_path(str(project_dir / "__main__.py"), run_name="__main__")

    dated = checked_as_of(as_of) if as_of is not None else contextlib.nullcontext()
    with _collector_paused(), _no_stack_traces(), dated, recorded_reads() as read:
        _sync_await(run_pulumi_func(program))
        run.warnings.extend(unread_warnings(config, read, project))
        root = pulumi.runtime.get_root_resource()
        exported = getattr(root, "outputs", {})
        loop = asyncio.get_event_loop()
        run.outputs = {
            k: loop.run_until_complete(_resolve(v, digests)) for k, v in sorted(exported.items())
        }
    run.resources.sort(key=lambda r: (r.type, r.name))
    return run
