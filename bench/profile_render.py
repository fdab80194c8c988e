"""Where an offline render's time goes: SDK imports, the program's own share, and exit.

    python bench/profile_render.py [--stacks gcp-a3,barcelona] [--nodes 2,512] [--repeat 5]
                                   [--wait-idle 30]

Four parts, each in fresh `python -c` subprocesses (same environment as render_bench.py):

1. Import cost of the SDK modules the program uses, and of narrower alternatives (median
   wall time inside the child, peak RSS).
2. Phases of one render with the SDK modules imported beforehand, so what is left is the
   program's own share: its imports (pydantic, yaml, gpu_cluster), config, validation, the
   program run under the mock engine, and writing the three files.
3. cProfile of that render (SDK already imported): self time by owner and the slowest
   functions of the program itself.
4. Garbage-collection time, and whole-process time, of a render as is, with gc.disable()
   first and/or os._exit() last (what a short-lived CLI could do).

Like render_bench.py, each run first waits (up to 30 s, `--wait-idle`) for other load on the
machine to settle. Nothing is asserted. Writes bench/results/profile.json next to the printed
report.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from render_bench import (
    PROJECT_DIR,
    RESULTS_DIR,
    WAIT_IDLE_SECONDS,
    overrides_for,
    run_child,
    sdk_modules,
    stack_platform,
)

IMPORT_CHILD = """
import importlib, json, resource, sys, time
t0 = time.perf_counter()
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    hasattr(module, "_bench_force_load_")  # runs a module the SDK registered lazily
t1 = time.perf_counter()
print(json.dumps({
    "seconds": t1 - t0,
    "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    "modules_loaded": sum(
        1 for n, m in sys.modules.items()
        if n.split(".")[0] in ("pulumi_kubernetes", "pulumi_gcp")
        and type(m).__name__ != "_LazyModule"
    ),
}))
"""

# Times render()'s steps by wrapping the functions it and the program look up at call time.
# Inclusive times: `run_program` contains `read_settings`, `build_platform` and the registrations.
PHASES_CHILD = """
import importlib, json, sys, time
stack, overrides, sdk, platform_module = sys.argv[1], json.loads(sys.argv[2]), \\
    json.loads(sys.argv[3]), sys.argv[4]
clock = time.perf_counter
marks = {}
t = clock()
for name in sdk:
    hasattr(importlib.import_module(name), "_bench_force_load_")
marks["sdk_imports"] = clock() - t
t = clock()
import pydantic, yaml
marks["import pydantic+yaml"] = clock() - t
t = clock()
import gpu_cluster.offline.render, gpu_cluster.offline.engine
import gpu_cluster.components.select, gpu_cluster.components.stack_config
importlib.import_module(platform_module)
marks["import gpu_cluster"] = clock() - t
spent, calls = {}, {}
gc_time, gc_start = [0.0, 0], [0.0]

def on_gc(phase, info):
    if phase == "start":
        gc_start[0] = clock()
    else:
        gc_time[0] += clock() - gc_start[0]
        gc_time[1] += info["generation"] == 2

import gc

def wrap(module, attr, label):
    inner = getattr(module, attr)
    def timed(*a, **k):
        t0 = clock()
        try:
            return inner(*a, **k)
        finally:
            spent[label] = spent.get(label, 0.0) + clock() - t0
            calls[label] = calls.get(label, 0) + 1
    setattr(module, attr, timed)

r, o = gpu_cluster.offline.render, gpu_cluster.offline.engine
for attr in ("checked_config", "run_program", "kubernetes_yaml", "resources_json"):
    wrap(r, attr, attr)
wrap(gpu_cluster.components.stack_config, "read_settings", "run_program > read_settings (again)")
wrap(gpu_cluster.components.select, "build_platform", "run_program > build_platform")
wrap(o._RecordingMonitor, "RegisterResource", "run_program > RegisterResource (mock)")
gc.callbacks.append(on_gc)
t = clock()
files = r.render(stack, tuple(overrides))
total = clock() - t
print(json.dumps({"imports": marks, "render_total": total, "spent": spent, "calls": calls,
                  "gc_seconds": gc_time[0], "gc_full_collections": gc_time[1],
                  "output_bytes": sum(len(v) for v in files.values())}))
"""

PROFILE_CHILD = """
import cProfile, importlib, json, pstats, sys
stack, overrides, sdk, platform_module = sys.argv[1], json.loads(sys.argv[2]), \\
    json.loads(sys.argv[3]), sys.argv[4]
for name in sdk:
    hasattr(importlib.import_module(name), "_bench_force_load_")
import gpu_cluster.offline.render
importlib.import_module(platform_module)
profile = cProfile.Profile()
profile.enable()
gpu_cluster.offline.render.render(stack, tuple(overrides))
profile.disable()
stats = pstats.Stats(profile).stats
rows = []
for (path, line, func), (cc, nc, tt, ct, callers) in stats.items():
    rows.append([path, line, func, nc, tt, ct])
print(json.dumps({"rows": rows}))
"""

# One render as `python -m gpu_cluster.offline` does it, with the garbage collector and the
# interpreter exit as they are, or changed: gc.disable() first, os._exit() last.
EXIT_CHILD = """
import gc, json, os, resource, sys, time
stack, mode = sys.argv[1], sys.argv[2]
clock = time.perf_counter
spent, start = {0: 0.0, 1: 0.0, 2: 0.0}, [0.0]
def on_gc(phase, info):
    if phase == "start":
        start[0] = clock()
    else:
        spent[info["generation"]] += clock() - start[0]
gc.callbacks.append(on_gc)
if "gc.disable" in mode:
    gc.disable()
t = clock()
from gpu_cluster.offline.render import render
render(stack, ())
print(json.dumps({
    "seconds": clock() - t,
    "gc_seconds": sum(spent.values()),
    "gc_full_seconds": spent[2],
    "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}), flush=True)
if "os._exit" in mode:
    os._exit(0)
"""
EXIT_MODES = ("as is", "gc.disable()", "os._exit()", "gc.disable() + os._exit()")


def _median_child(code: str, repeat: int, wait_idle: float, *args: str) -> dict[str, Any]:
    runs = [run_child(code, *args, wait_idle=wait_idle) for _ in range(repeat)]
    out = dict(runs[0])
    for key in ("seconds", "process_seconds"):
        if key in out:
            out[key] = statistics.median(r[key] for r in runs)
    if "peak_kib" in out:
        out["peak_mib"] = max(r["peak_kib"] for r in runs) / 1024
    return out


def import_costs(repeat: int, wait_idle: float) -> list[dict[str, Any]]:
    gke, _ = sdk_modules("gke")
    openshift, _ = sdk_modules("openshift")
    pulumi_only = [m for m in gke if m.split(".")[0] == "pulumi"]
    k8s_used = [m for m in openshift if m.startswith("pulumi_kubernetes")]
    gcp_used = [m for m in gke if m.startswith("pulumi_gcp")]
    variants: list[tuple[str, list[str]]] = [
        ("pulumi runtime modules the program uses", pulumi_only),
        ("+ pulumi_kubernetes (top level only)", [*pulumi_only, "pulumi_kubernetes"]),
        ("+ pulumi_gcp (top level only)", [*pulumi_only, "pulumi_gcp"]),
        ("+ pulumi_kubernetes.core.v1", [*pulumi_only, "pulumi_kubernetes.core.v1"]),
        ("+ k8s packages of the OpenShift path", [*pulumi_only, *k8s_used]),
        ("+ pulumi_gcp.container", [*pulumi_only, "pulumi_gcp.container"]),
        ("+ pulumi_gcp.compute", [*pulumi_only, "pulumi_gcp.compute"]),
        ("+ pulumi_gcp.compute + container", [*pulumi_only, *gcp_used]),
        (
            "+ only the compute/container modules gke.py uses",
            [
                *pulumi_only,
                *(
                    f"pulumi_gcp.compute.{m}"
                    for m in (
                        "network",
                        "subnetwork",
                        "firewall",
                        "router",
                        "router_nat",
                        "resource_policy",
                    )
                ),
                "pulumi_gcp.container.cluster",
                "pulumi_gcp.container.node_pool",
            ],
        ),
        ("GKE path: all of the above the program uses", gke),
        ("OpenShift path: all of the above the program uses", openshift),
        ("pydantic + yaml (program's own dependencies)", ["pydantic", "yaml"]),
    ]
    out = []
    for label, mods in variants:
        result = _median_child(IMPORT_CHILD, repeat, wait_idle, json.dumps(mods))
        out.append({"variant": label, "modules": mods, **result})
        print(
            f"  {result['seconds']:6.2f} s  {result['peak_mib']:5.0f} MiB  "
            f"{result['modules_loaded']:4d} SDK modules run  {label}",
            file=sys.stderr,
        )
    return out


def phases(stack: str, nodes: int, repeat: int, wait_idle: float) -> dict[str, Any]:
    platform = stack_platform(stack)
    sdk, _ = sdk_modules(platform)
    module = (
        "gpu_cluster.components.gke" if platform == "gke" else "gpu_cluster.components.openshift"
    )
    args = (stack, json.dumps(overrides_for(stack, nodes)), json.dumps(sdk), module)
    runs = [run_child(PHASES_CHILD, *args, wait_idle=wait_idle) for _ in range(repeat)]

    def med(get: Any) -> float:
        return float(statistics.median(get(r) for r in runs))

    imports = {k: med(lambda r, k=k: r["imports"][k]) for k in runs[0]["imports"]}
    spent = {k: med(lambda r, k=k: r["spent"][k]) for k in runs[0]["spent"]}
    return {
        "stack": stack,
        "nodes": nodes,
        "imports": imports,
        "render_total": med(lambda r: r["render_total"]),
        "spent": spent,
        "calls": runs[0]["calls"],
        "gc_seconds": med(lambda r: r["gc_seconds"]),
        "gc_full_collections": runs[0]["gc_full_collections"],
        "output_bytes": runs[0]["output_bytes"],
    }


def _owner(path: str) -> str:
    if path.startswith(str(PROJECT_DIR / "gpu_cluster")) or path == str(
        PROJECT_DIR / "__main__.py"
    ):
        return "program (gpu_cluster/, __main__.py)"
    for pkg in ("pulumi_kubernetes", "pulumi_gcp", "pydantic_core", "pydantic", "yaml", "grpc"):
        if f"/{pkg}/" in path:
            return pkg
    if "/pulumi/" in path:
        return "pulumi (runtime, rpc, mocks)"
    if path.startswith("<frozen") or path == "~":
        return "builtins / import machinery"
    return "stdlib (asyncio, json, typing, copy ...)"


def profile(stack: str, nodes: int, top: int, wait_idle: float) -> dict[str, Any]:
    platform = stack_platform(stack)
    sdk, _ = sdk_modules(platform)
    module = (
        "gpu_cluster.components.gke" if platform == "gke" else "gpu_cluster.components.openshift"
    )
    result = run_child(
        PROFILE_CHILD,
        stack,
        json.dumps(overrides_for(stack, nodes)),
        json.dumps(sdk),
        module,
        wait_idle=wait_idle,
    )
    rows = result["rows"]
    total = sum(r[4] for r in rows)
    by_owner: dict[str, float] = {}
    for path, _line, _func, _nc, tt, _ct in rows:
        by_owner[_owner(path)] = by_owner.get(_owner(path), 0.0) + tt
    program = [r for r in rows if _owner(r[0]).startswith("program")]
    program.sort(key=lambda r: -r[5])
    selfish = sorted(rows, key=lambda r: -r[4])

    def fmt(r: list[Any]) -> str:
        path = r[0].split(f"{PROJECT_DIR}/")[-1].split("site-packages/")[-1]
        return f"{path}:{r[1]}({r[2]})"

    return {
        "stack": stack,
        "nodes": nodes,
        "profiled_seconds": total,
        "self_seconds_by_owner": dict(sorted(by_owner.items(), key=lambda kv: -kv[1])),
        "program_functions_by_cumulative": [
            {"function": fmt(r), "calls": r[3], "cumulative": r[5], "self": r[4]}
            for r in program[:top]
        ],
        "functions_by_self": [
            {"function": fmt(r), "calls": r[3], "self": r[4], "cumulative": r[5]}
            for r in selfish[:top]
        ],
    }


def exit_cost(stack: str, repeat: int, wait_idle: float) -> dict[str, dict[str, float]]:
    out = {}
    for mode in EXIT_MODES:
        runs = [run_child(EXIT_CHILD, stack, mode, wait_idle=wait_idle) for _ in range(repeat)]
        out[mode] = {
            key: statistics.median(r[key] for r in runs)
            for key in ("seconds", "process_seconds", "gc_seconds", "gc_full_seconds")
        }
        out[mode]["peak_mib"] = max(r["peak_kib"] for r in runs) / 1024
    return out


def report(result: dict[str, Any]) -> str:
    lines = ["## 1. SDK import cost (fresh interpreter, median)", ""]
    lines += ["| imports | s | peak MiB | SDK modules run |", "|---|---:|---:|---:|"]
    for v in result["imports"]:
        lines.append(
            f"| {v['variant']} | {v['seconds']:.2f} | {v['peak_mib']:.0f} | {v['modules_loaded']} |"
        )
    lines += ["", "## 2. Render phases with the SDK imported first (median, inclusive)", ""]
    for p in result["phases"]:
        lines.append(f"### {p['stack']}, nodes={p['nodes']} ({p['output_bytes']} bytes written)")
        for k, v in p["imports"].items():
            lines.append(f"- {k}: {v:.3f} s")
        lines.append(
            f"- render() total: {p['render_total']:.3f} s, of which garbage collection "
            f"{p['gc_seconds']:.3f} s ({p['gc_full_collections']} full collections)"
        )
        for k, v in p["spent"].items():
            lines.append(f"  - {k}: {v:.3f} s ({p['calls'][k]} calls)")
    lines += ["", "## 3. cProfile of render() with the SDK imported first", ""]
    for p in result["profiles"]:
        lines.append(
            f"### {p['stack']}, nodes={p['nodes']}: {p['profiled_seconds']:.2f} s under cProfile"
        )
        lines.append("Self time by owner:")
        for k, v in p["self_seconds_by_owner"].items():
            lines.append(f"- {k}: {v:.3f} s")
        lines.append("Program functions by cumulative time:")
        for f in p["program_functions_by_cumulative"]:
            lines.append(
                f"- {f['cumulative']:.3f} s cum, {f['self']:.3f} s self, "
                f"{f['calls']} calls: {f['function']}"
            )
        lines.append("Functions by self time:")
        for f in p["functions_by_self"]:
            lines.append(f"- {f['self']:.3f} s self, {f['calls']} calls: {f['function']}")
    lines += ["", "## 4. Garbage collector and interpreter exit (import + render, median)", ""]
    lines += [
        "| stack | variant | in-process s | of which GC s (full GC s) | whole process s "
        "| peak MiB |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for stack, modes in result["exit"].items():
        for mode, v in modes.items():
            lines.append(
                f"| {stack} | {mode} | {v['seconds']:.2f} "
                f"| {v['gc_seconds']:.2f} ({v['gc_full_seconds']:.2f}) "
                f"| {v['process_seconds']:.2f} | {v['peak_mib']:.0f} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stacks", default="gcp-a3,barcelona")
    parser.add_argument("--nodes", default="2,512")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument(
        "--wait-idle",
        type=float,
        default=WAIT_IDLE_SECONDS,
        help="before each run, wait up to this many seconds for the machine to be quiet "
        "(as render_bench.py; 0: do not wait)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / "profile.json")
    args = parser.parse_args(argv)
    stacks = [s for s in args.stacks.split(",") if s]
    node_counts = sorted(int(n) for n in args.nodes.split(","))

    print("warm-up and import costs", file=sys.stderr)
    for stack in stacks:
        run_child(EXIT_CHILD, stack, "as is")
    result: dict[str, Any] = {"imports": import_costs(args.repeat, args.wait_idle)}
    print("render phases", file=sys.stderr)
    result["phases"] = [
        phases(s, n, args.repeat, args.wait_idle) for s in stacks for n in node_counts
    ]
    print("cProfile", file=sys.stderr)
    result["profiles"] = [
        profile(s, n, args.top, args.wait_idle) for s in stacks for n in node_counts
    ]
    print("garbage collector and exit", file=sys.stderr)
    result["exit"] = {s: exit_cost(s, args.repeat, args.wait_idle) for s in stacks}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(report(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
