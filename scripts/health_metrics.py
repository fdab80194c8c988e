"""The node health runner's metrics (node_health_runner.py serves them): the bus bandwidth each
pairwise fabric check measured between two nodes, and each node's last result per check, in
Prometheus' text format (prometheus_text.py beside it). Standard library only."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from prometheus_text import family, sample, text

# fabric_verdict.py's GB/s are of 1e9 bytes.
BYTES_PER_GB = 1e9
BUSBW = "gpu_cluster_fabric_bus_bandwidth_bytes_per_second"
MEASURED = "gpu_cluster_fabric_check_timestamp_seconds"
RESULT = "gpu_cluster_node_health_result"


class HealthMetrics:
    """What the runner has measured and written, kept from pass to pass; read by its server's
    thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (node, peer) -> (GB/s, when), both ways for each pair.
        self._fabric: dict[tuple[str, str], tuple[float, float]] = {}
        # (node, check) -> its result label's value.
        self._results: dict[tuple[str, str], str] = {}

    def measured(self, nodes: Sequence[str], gbps: float, now: float) -> None:
        """A pair's check between `nodes` measured `gbps` (GB/s) at `now`."""
        first, second = nodes
        with self._lock:
            self._fabric[(first, second)] = self._fabric[(second, first)] = (gbps, now)

    def observed(self, nodes: Iterable[str], results: Mapping[tuple[str, str], str]) -> None:
        """The GPU nodes now (a pair with one gone is dropped) and their results, (node, check)
        -> result."""
        pool = set(nodes)
        with self._lock:
            self._results = dict(results)
            self._fabric = {k: v for k, v in self._fabric.items() if set(k) <= pool}

    def exposition(self) -> str:
        with self._lock:
            fabric, results = dict(self._fabric), dict(self._results)
        lines: list[str] = []
        if fabric:
            lines += family(
                BUSBW,
                "gauge",
                "Average all_gather bus bandwidth the last fabric check between node and peer "
                "measured over its largest sizes.",
            )
            for (node, peer), (gbps, _) in sorted(fabric.items()):
                lines.append(sample(BUSBW, {"node": node, "peer": peer}, gbps * BYTES_PER_GB))
            lines += family(MEASURED, "gauge", "When that check ended, Unix seconds.")
            for (node, peer), (_, when) in sorted(fabric.items()):
                lines.append(sample(MEASURED, {"node": node, "peer": peer}, when))
        if results:
            lines += family(RESULT, "gauge", "1 for each GPU node's last result of each check.")
            for (node, check), result in sorted(results.items()):
                lines.append(sample(RESULT, {"node": node, "check": check, "result": result}, 1))
        return text(lines)
