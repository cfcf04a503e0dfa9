"""The GitHub Actions workflow shards as the Makefile and runner understand it (read as text: no YAML parser)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = (ROOT / ".github" / "workflows" / "acceptance.yml").read_text(encoding="utf-8")
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")


def test_the_matrix_covers_every_shard_of_the_count_once():
    count = int(re.search(r"^\s*SHARD_COUNT: (\d+)$", WORKFLOW, re.M).group(1))
    shards = [int(n) for n in re.search(r"^\s*shard: \[([\d, ]+)\]$", WORKFLOW, re.M).group(1).split(",")]
    assert shards == list(range(1, count + 1))
    assert "SHARD=${{ matrix.shard }}/${{ env.SHARD_COUNT }}" in WORKFLOW


def test_every_make_target_the_workflow_runs_exists():
    targets = set(re.findall(r"\bmake (\w+)", WORKFLOW))
    assert targets == {"setup", "accept", "contract", "merge"}
    defined = set(re.findall(r"^([a-z]+):", MAKEFILE, re.M))
    assert targets <= defined


def test_shard_reports_are_uploaded_and_merged_even_after_a_failing_shard():
    merge = WORKFLOW[WORKFLOW.index("\n  merge:"):]
    assert "needs: shard" in merge and "if: ${{ !cancelled() }}" in merge
    assert "pattern: shard-*" in merge and "make merge SHARDS=shards OUT=merged" in merge
    upload = WORKFLOW[WORKFLOW.index("Upload this shard's reports"):WORKFLOW.index("\n  merge:")]
    assert "if: ${{ !cancelled() }}" in upload and "path: out/" in upload
