"""Stack outputs: where the pods are and the exact commands a user runs next (pure)."""

from __future__ import annotations

from gpu_cluster.config.schema import Settings
from gpu_cluster.plan import launch
from gpu_cluster.plan.verify import verify_command


def stack_outputs(s: Settings, cli: str) -> dict[str, object]:
    outputs: dict[str, object] = {
        "namespace": s.namespace,
        "podDnsNames": launch.pod_dns_names(s),
        "masterAddr": launch.master_addr(s),
        "worldSize": s.world_size,
        "shellCommand": launch.shell_command(s, cli),
        "launchCommand": launch.launch_command(s, cli),
        "syncCommand": launch.sync_command(s, cli),
    }
    if s.verify.enabled:
        outputs["verifyCommand"] = verify_command(s, cli)
    return outputs
