"""`pulumi preview --policy-pack policy` through the real engine (tools/realtier/engine.py): the
engine builds each request from the program's registrations, sends it to the pack and enforces
what the pack answers. tests/test_policy.py holds each policy to deliberate mistakes, with the
requests built as the engine builds them; here the engine builds them.

The OpenShift stacks as they ship, and with the documented opt-out storage.retainOnDelete=false,
pass every policy. The reason the user-data-retained policy reads the program's retention mark
on a claim: a claim registered with retain_on_delete but without the mark is refused, because
the engine does not send the pack that option; the same claim with the mark passes.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from policy.gpu_cluster_policies import RETENTION_MARK
from tests.conftest import ROOT
from tests.real.cluster_state import engine_for, stack_engine
from tests.real.conftest import Cluster
from tools.realtier.stacks import render

pytestmark = pytest.mark.real

PACK = ROOT / "policy"


@pytest.mark.parametrize("stack", ["barcelona", "nerc-production"])
def test_the_stack_passes_every_policy_as_the_engine_sends_it(
    cluster: Cluster, tmp_path: Path, stack: str
) -> None:
    engine = engine_for(cluster, render(stack), tmp_path)
    for overrides in [(), ("storage.retainOnDelete=false",)]:
        preview = engine.preview(*overrides, policy_packs=(PACK,))
        assert preview.violations == [], overrides
        assert preview.ops("create"), overrides  # the preview registered the stack


# Two claims, both registered with retain_on_delete=True (Pulumi leaves them in the cluster when
# the stack is destroyed); only the first carries the program's retention mark.
CLAIMS_PROGRAM = f'''\
import pulumi
import pulumi_kubernetes as k8s

for name, annotations in (("marked", {{"{RETENTION_MARK}": "true"}}), ("unmarked", {{}})):
    k8s.core.v1.PersistentVolumeClaim(
        name,
        metadata={{"name": name, "namespace": "default", "annotations": annotations}},
        spec={{
            "accessModes": ["ReadWriteOnce"],
            "resources": {{"requests": {{"storage": "1Gi"}}}},
        }},
        opts=pulumi.ResourceOptions(retain_on_delete=True),
    )
'''


def test_a_retained_claim_without_the_mark_is_refused_the_option_is_not_sent(
    cluster: Cluster, tmp_path: Path
) -> None:
    program = tmp_path / "program"
    program.mkdir()
    (program / "__main__.py").write_text(CLAIMS_PROGRAM)
    for name in ("Pulumi.yaml", "Pulumi.barcelona.yaml"):
        shutil.copyfile(ROOT / name, program / name)
    engine = stack_engine(cluster, "barcelona", tmp_path / "engine", program_dir=program)

    preview = engine.preview(check=False, policy_packs=(PACK,))
    assert preview.error is not None
    assert [(v.policy, v.urn.rsplit("::", 1)[1], v.enforcement) for v in preview.violations] == [
        ("user-data-retained", "unmarked", "mandatory")
    ]
    assert "retain_on_delete=True" in preview.violations[0].message
