"""The docs can be found in: every document over 100 lines opens with a table of contents that
lists each of its sections, and every link between the documents leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
IDS = [str(d.relative_to(ROOT)) for d in DOCS]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def headings(text: str) -> list[tuple[int, str]]:
    """(level, title) of each heading outside fenced blocks."""
    text = re.sub(r"^[ \t]*```.*?^[ \t]*```", "", text, flags=re.MULTILINE | re.DOTALL)
    return [(len(m.group(1)), m.group(2)) for m in re.finditer(r"^(#+) (.+)$", text, re.M)]


def anchor(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^a-z0-9 _-]", "", title.strip().lower()).replace(" ", "-")


def test_anchor_follows_github() -> None:
    assert anchor("After `pulumi up`") == "after-pulumi-up"
    assert anchor("OpenShift: RDMA memory locking") == "openshift-rdma-memory-locking"
    assert anchor("`rdma.nics[]`") == "rdmanics"


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
def test_a_long_document_lists_every_section_in_its_contents(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    if text.count("\n") <= 100:
        return
    assert "\n## Contents\n" in text, f"{doc.name}: over 100 lines without a ## Contents"
    contents = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"\]\(#([^)]+)\)", contents))
    sections = {anchor(t) for level, t in headings(text) if level == 2 and t != "Contents"}
    assert sections - listed == set(), f"{doc.name}: contents lack {sections - listed}"


@pytest.mark.parametrize("doc", DOCS, ids=IDS)
def test_every_link_leads_to_a_file_and_heading(doc: Path) -> None:
    prose = re.sub(r"`[^`\n]*`", "", doc.read_text(encoding="utf-8"))  # code spans hold no links
    for target in LINK.findall(prose):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        assert file.exists(), f"{doc.name}: link to {target}: no such file"
        if fragment and file.suffix == ".md":
            titles = {anchor(t) for _, t in headings(file.read_text(encoding="utf-8"))}
            assert fragment in titles, f"{doc.name}: link to {target}: no such heading"


def test_the_readme_leads_to_every_document() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for doc in DOCS[1:]:
        assert f"]({doc.relative_to(ROOT)})" in readme, f"README.md does not link {doc.name}"
