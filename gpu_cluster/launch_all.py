"""`python3 -m gpu_cluster.launch_all CLI TARGET... NAMESPACE STATEFULSET NODES COMMAND...`:
runs launch-all.sh from this package or repository on the user's machine (launchCommand,
verifyCommand and stopCommand call it), so the code run there is never a copy read from the
cluster. TARGET: --kubeconfig FILE and/or --context CONTEXT, as the stack names its cluster.

Standard library and plan.shipped only (no pydantic, no `X | Y` types): it runs under whatever
python3 is on PATH, from the project directory without installing anything."""

from __future__ import annotations

import os
import sys

from gpu_cluster.plan.shipped import SCRIPTS_PATH


def main(argv: list[str]) -> None:
    # exec, not a child: Ctrl-C reaches launch-all.sh itself, which stops every pod's training.
    os.execvp("bash", ["bash", str(SCRIPTS_PATH / "launch-all.sh"), *argv])


if __name__ == "__main__":
    main(sys.argv[1:])
