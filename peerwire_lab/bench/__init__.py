"""Benchmarks of the reference core, each figure beside a baseline measured in the same run.

``python -m peerwire_lab.bench [--quick] [--rounds N] [--section S] [--json]`` (or ``make bench``)
starts its own ``peerwire app`` on a temporary home and reports, as the median
of ``--rounds`` rounds:

* durable sends/s on one MCP session, and aggregated over 8 concurrent
  sessions, against a raw SQLite WAL + ``synchronous=FULL`` single-commit loop;
* wake latency (p50/p95/p99): ``send_message`` written to one ``mcp serve``
  process until ``wait_agent`` returns in another, against one raw commit;
* the warm ``list_agents`` round trip on one session against the official
  SDK's high-level server (FastMCP, now ``MCPServer``) answering an echo tool;
* ``mcp serve`` cold start to the ``initialize`` answer against the same SDK server;
* ``receive_messages`` page latency as the mailbox grows (10k to 1M records;
  up to 2k in quick mode), against a second app's mailbox at the smallest size,
  the two read in turn so that a machine's changing load falls on both;
* a peer: persist-queue's ``SQLiteQueue`` (one commit per ``put``, same
  ``synchronous``) against the raw loop;
* growth (:mod:`.growth`): acknowledging a whole mailbox, ``wait_agent`` with
  N unacknowledged, ``list_agents`` by roster size and another agent's send p99
  during a large acknowledgement, at 1e3 and 1e5 (1e2 and 1e3 quick), each as a
  ratio to its figure at the smaller size.

``--section core`` or ``--section growth`` runs one part only.

Machines here are shared and noisy: read the ratios, not the absolute numbers.
``--quick`` (CI) checks that everything runs and prints its figures; it
asserts no timing. Rows whose baseline cannot run say ``not measured`` and why.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .growth import SEND_P99_BOUND_MS, GrowthSizes, measure_growth
from .measures import Sizes, measure_round

SECTIONS = ("core", "growth")


@dataclass
class Row:
    """One line of the report: a figure, its same-run baseline, their ratio and the target."""

    measure: str
    value: float | str
    unit: str
    baseline: float | str
    baseline_name: str
    target: str
    ratio: float | None = None
    detail: dict[str, Any] = field(default_factory=dict)


def _median(values: list[Any]) -> Any:
    numbers = [v for v in values if isinstance(v, (int, float))]
    if len(numbers) != len(values):
        return next(v for v in values if not isinstance(v, (int, float)))  # "not measured: ..."
    return statistics.median(numbers)


def _ratio(value: Any, baseline: Any) -> float | None:
    if isinstance(value, (int, float)) and isinstance(baseline, (int, float)) and baseline:
        return round(value / baseline, 3)
    return None


def rows_from(rounds: list[dict[str, Any]]) -> list[Row]:
    """The report's rows: each figure and baseline is the median over the rounds."""
    m = {key: _median([r[key] for r in rounds]) for key in rounds[0] if key != "mailbox"}
    rows = [
        Row("durable sends/s, one MCP session", m["sends_1"], "sends/s", m["raw_commits"],
            "raw SQLite WAL+FULL single-commit loop", "≥ 0.5× raw"),
        Row("aggregate durable sends/s, 8 MCP sessions", m["sends_8"], "sends/s", m["raw_commits"],
            "raw SQLite WAL+FULL single-commit loop", "≥ 1.5× raw (group commit)"),
        Row("wake latency p50", m["wake_p50"], "ms", m["raw_commit_ms"], "one raw commit", "< 1 ms"),
        Row("wake latency p95", m["wake_p95"], "ms", m["raw_commit_ms"], "one raw commit", "—"),
        Row("wake latency p99", m["wake_p99"], "ms", m["raw_commit_ms"], "one raw commit", "< 3 ms"),
        Row("warm list_agents round trip p50", m["list_agents_ms"], "ms", m["fastmcp_echo_ms"],
            "FastMCP (MCPServer) echo tool round trip p50", "≤ 1× FastMCP"),
        Row("mcp serve cold start to initialize answer", m["cold_ms"], "ms", m["fastmcp_cold_ms"],
            "FastMCP (MCPServer) cold start", "< 250 ms"),
    ]
    sizes = rounds[0]["mailbox"].keys()
    base = min(sizes)
    for size in sizes:
        value = _median([r["mailbox"][size]["ms"] for r in rounds])
        smallest = _median([r["mailbox"][size]["smallest_ms"] for r in rounds])
        rows.append(Row(f"receive page latency, mailbox of {size:,} records", value, "ms", smallest,
                        f"a mailbox of {base:,} records, read in turn with it", "ratio ≤ 1.5"))
    rows.append(Row("peer: persist-queue SQLiteQueue puts/s (one commit each, synchronous=FULL)", m["peer_puts"],
                    "puts/s", m["raw_commits"], "raw SQLite WAL+FULL single-commit loop", "— (for comparison)",
                    detail={"peerwire_sends_per_s": m["sends_1"]}))
    return _rounded(rows)


GROWTH_ROWS = {
    "ack_all_ms": "growth: acknowledging a whole mailbox of {n} records",
    "wait_ms": "growth: wait_agent with {n} records unacknowledged",
    "list_agents_ms": "growth: list_agents name_prefix (10 listed) in a roster of {n} agents",
    "send_p99_ms": "growth: send p99 while another agent acknowledges {n} records",
}


def growth_rows(rounds: list[dict[str, dict[int, float]]], sizes: GrowthSizes) -> list[Row]:
    """Each growth figure at the larger size against the same at the smaller one (medians over the rounds)."""
    small, large = sizes.small, sizes.large
    rows = []
    for measure, name in GROWTH_ROWS.items():
        rows.append(Row(name.format(n=f"{large:,}"), _median([r[measure][large] for r in rounds]), "ms",
                        _median([r[measure][small] for r in rounds]), f"the same at {small:,}", "ratio ≤ 2"))
    during = _median([r["send_p99_ms"][large] for r in rounds])
    rows.append(Row(f"growth: send p99 against its bound, another agent acknowledging {large:,} records", during, "ms",
                    SEND_P99_BOUND_MS, "the bound", f"< {SEND_P99_BOUND_MS:g} ms (ratio < 1)"))
    rows.append(Row(f"growth: send p99 against no acknowledgement running, {large:,} records", during,
                    "ms", _median([r["send_p99_quiet_ms"][large] for r in rounds]),
                    "the same sends just before, with no acknowledgement running", "— (what the machine gives)"))
    return _rounded(rows)


def _rounded(rows: list[Row]) -> list[Row]:
    for row in rows:
        for key in ("value", "baseline"):
            if isinstance(getattr(row, key), float):
                setattr(row, key, round(getattr(row, key), 3))
        row.ratio = _ratio(row.value, row.baseline)  # of the figures as shown
    return rows


def run(*, quick: bool, rounds: int, directory: Path, progress=None,
        sections: tuple[str, ...] = SECTIONS) -> dict[str, Any]:
    """Measure ``rounds`` rounds of ``sections`` in ``directory``; returns the report as JSON-ready data."""
    sizes = Sizes.quick() if quick else Sizes.full()
    growth = GrowthSizes.quick() if quick else GrowthSizes.full()
    measured: list[dict[str, Any]] = []
    grown: list[dict[str, dict[int, float]]] = []
    for n in range(rounds):
        if progress:
            progress(f"round {n + 1} of {rounds}")
        if "core" in sections:
            measured.append(measure_round(directory / f"round-{n + 1}", sizes, progress=progress))
        if "growth" in sections:
            grown.append(measure_growth(directory / f"round-{n + 1}", growth, progress=progress))
    rows = (rows_from(measured) if measured else []) + (growth_rows(grown, growth) if grown else [])
    return {"mode": "quick" if quick else "full", "rounds": rounds, "sections": list(sections),
            "sizes": asdict(sizes) if measured else {}, "growth_sizes": asdict(growth) if grown else {},
            "rows": [asdict(r) for r in rows], "raw": measured, "raw_growth": grown}


def render(report: dict[str, Any]) -> str:
    lines = [f"peerwire bench ({report['mode']} mode, median of {report['rounds']} round(s); "
             "a shared machine: read the ratios)", ""]
    width = max(len(r["measure"]) for r in report["rows"])
    for r in report["rows"]:
        value = f"{r['value']} {r['unit']}" if isinstance(r["value"], (int, float)) else r["value"]
        baseline = f"{r['baseline']}" if isinstance(r["baseline"], (int, float)) else r["baseline"]
        ratio = f"ratio {r['ratio']}" if r["ratio"] is not None else "ratio —"
        lines.append(f"{r['measure']:<{width}}  {value:>16}  vs {r['baseline_name']}: {baseline}  "
                     f"({ratio}; target {r['target']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m peerwire_lab.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small counts for CI: checks it runs, asserts nothing")
    parser.add_argument("--rounds", type=int, default=None, help="rounds to take the median of (default 3; quick 1)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--section", choices=SECTIONS, action="append",
                        help="measure only this part (repeatable; default: all of them)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (1 if args.quick else 3)

    def progress(text: str) -> None:
        sys.stderr.write(f"bench: {text}\n")
        sys.stderr.flush()

    with tempfile.TemporaryDirectory(prefix="peerwire-bench-") as tmp:
        report = run(quick=args.quick, rounds=rounds, directory=Path(tmp), progress=progress,
                     sections=tuple(args.section or SECTIONS))
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0
