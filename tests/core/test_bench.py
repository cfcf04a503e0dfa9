"""The benchmark command keeps working (its numbers are read by people, not asserted)."""

from pathlib import Path

from peerwire.bench import run


def test_bench_runs_and_reports_ratios(tmp_path: Path):
    result = run(sends=5, wakes=3, directory=tmp_path)
    assert result["sends"] == 5 and result["wakes"] == 3
    assert result["raw_sqlite_commits_per_s"] > 0 and result["mcp_durable_sends_per_s"] > 0
    assert result["sends_vs_raw_commits"] > 0 and result["wake_median_in_raw_commits"] > 0
    assert 0 < result["wake_latency_median_ms"] <= result["wake_latency_p95_ms"]
