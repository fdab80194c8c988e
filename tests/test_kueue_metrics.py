"""Managed Service for Prometheus scraping the Kueue a GKE stack installs (plan/kueue_metrics.py):
its objects against Google's own example, field by field (tests/vendor/kueue_scrape.yaml), and
only where the stack installs Kueue on GKE. The real Kueue authorizing the stack's token, and
the dashboard's queue queries over what it serves: tests/real/test_jobset_stack.py; the chart's
labels, port and role these objects name: tests/real/test_kueue_chart.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import BARCELONA_RWX, GKE_RWX, kueue_scrape_objects, run_stack
from tests.test_vendor_scrape import covered, fields

DATA = yaml.safe_load((Path(__file__).parent / "vendor" / "kueue_scrape.yaml").read_text())
JOBSET = ("workload.kind=jobset", "workload.command[0]=t.py")


@pytest.mark.parametrize("vendor", DATA["objects"], ids=lambda v: v["kind"])
def test_each_object_is_the_examples_but_where_it_says_why(vendor: dict[str, Any]) -> None:
    (ours,) = [o for o in kueue_scrape_objects(run_stack("gcp-a4")) if o["kind"] == vendor["kind"]]
    upstream, mine = fields(vendor["upstream"]), fields(ours)
    deviations = {**DATA["common_deviations"], **vendor["deviations"]}
    added = {**DATA["added_everywhere"], **vendor["added"]}
    for path, value in upstream.items():
        if not covered(path, deviations):
            assert mine.get(path) == value, f"{path}: ours {mine.get(path)!r}, theirs {value!r}"
    unexplained = [
        p
        for p in mine
        if p not in upstream and not covered(p, deviations) and not covered(p, added)
    ]
    assert unexplained == []


def test_the_objects_are_those_of_the_example_and_no_more() -> None:
    kinds = sorted(o["kind"] for o in kueue_scrape_objects(run_stack("gcp-a4")))
    assert kinds == sorted(v["kind"] for v in DATA["objects"])


@pytest.mark.parametrize(
    ("stack", "sets"),
    [
        ("gcp-a3", ()),  # a StatefulSet stack: no Kueue
        # The cluster's own Kueue, which the stack did not install.
        ("gcp-a3", (*JOBSET, *GKE_RWX, "workload.controllers.install=false")),
        ("barcelona", ("networkMode=tcp", *JOBSET, *BARCELONA_RWX)),  # Red Hat's operator
    ],
    ids=["statefulset", "cluster-kueue", "openshift"],
)
def test_only_a_kueue_the_gke_stack_installs_is_scraped(stack: str, sets: tuple[str, ...]) -> None:
    assert kueue_scrape_objects(run_stack(stack, *sets)) == []


def test_the_pod_monitoring_names_the_token_the_grants_are_for() -> None:
    objects = {o["kind"]: o for o in kueue_scrape_objects(run_stack("gcp-a4"))}
    secret = objects["Secret"]["metadata"]
    account = objects["ServiceAccount"]["metadata"]
    assert secret["annotations"]["kubernetes.io/service-account.name"] == account["name"]
    (endpoint,) = objects["PodMonitoring"]["spec"]["endpoints"]
    assert endpoint["authorization"]["credentials"]["secret"]["name"] == secret["name"]
    assert objects["Role"]["rules"][0]["resourceNames"] == [secret["name"]]
    assert objects["RoleBinding"]["roleRef"]["name"] == objects["Role"]["metadata"]["name"]
    (subject,) = objects["ClusterRoleBinding"]["subjects"]
    assert (subject["name"], subject["namespace"]) == (account["name"], account["namespace"])
    namespaces = {o["metadata"].get("namespace") for o in objects.values()}
    assert namespaces == {secret["namespace"], None}  # the ClusterRoleBinding's: none
