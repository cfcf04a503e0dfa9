"""The benchmark runs and reports every row with its baseline (its numbers are read by people, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from tests.patience import RUN_S, WAIT_S

ROWS = ("durable sends/s, one MCP session", "aggregate durable sends/s, 8 MCP sessions", "wake latency p50",
        "wake latency p95", "wake latency p99", "warm list_agents round trip p50",
        "mcp serve cold start to initialize answer", "receive page latency, mailbox of 500 records",
        "receive page latency, mailbox of 2,000 records", "peer: persist-queue SQLiteQueue puts/s",
        "growth: acknowledging a whole mailbox of 1,000 records", "growth: wait_agent with 1,000 records",
        "growth: list_agents name_prefix (10 listed) in a roster of 1,000", "growth: send p99 while another agent",
        "growth: send p99 against its bound", "growth: send p99 against no acknowledgement running")


@pytest.mark.slow
@pytest.mark.heavy
def test_quick_bench_reports_every_row_beside_its_baseline():
    done = subprocess.run([sys.executable, "-m", "peerwire_lab.bench", "--quick", "--json"], capture_output=True,
                          text=True, timeout=RUN_S)  # seconds of work, a dozen processes: minutes when busy
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    rows = {r["measure"]: r for r in report["rows"]}
    for name in ROWS:
        (row,) = [r for measure, r in rows.items() if measure.startswith(name)]
        for key in ("value", "baseline"):
            figure = row[key]
            assert (isinstance(figure, (int, float)) and figure > 0) or figure.startswith("not measured: "), row
        assert row["baseline_name"] and row["target"]
        if isinstance(row["value"], (int, float)) and isinstance(row["baseline"], (int, float)):
            assert row["ratio"] == round(row["value"] / row["baseline"], 3)
    assert "bench: wake latency" in done.stderr  # progress is shown while it runs


def test_the_core_benchmark_imports_nothing_from_the_harness():
    probe = "import sys, peerwire_lab.bench, peerwire_lab.bench.measures; print(sorted(m for m in sys.modules if m.split('.')[0] == 'harness'))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
