"""Pass rates over repeated scenario runs (``runner.py --trials N --min-pass-rate P``).

A real model does not answer the same way twice, so one pass proves little
and one failure may be noise. With ``--trials N`` every scenario run is
repeated N times; its pass rate is the share of its trials in which every
check passed, and each check's rate the share in which that check passed.
Trials of one scenario run share its identity without the trial number
(:class:`~harness.evidence.identity.RunIdentity`). The run's exit status is 0
when every scenario run's rate is at least the minimum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from harness.evidence.identity import RunIdentity


def pass_rates(results: Sequence[dict[str, Any]], count: int, min_pass_rate: float) -> dict[str, Any]:
    """The report's ``run.trials``: each scenario run identity's rate and its checks' rates, in run order."""
    groups: dict[RunIdentity, list[dict[str, Any]]] = {}
    for result in results:
        identity = replace(RunIdentity.of(result), trial=None)
        groups.setdefault(identity, []).append(result)
    rates = []
    for identity, runs in groups.items():
        passed = sum(bool(run["passed"]) for run in runs)
        checks: dict[str, list[bool]] = {}
        for run in runs:
            for check in run.get("checks") or []:
                checks.setdefault(check["id"], []).append(check["verdict"] == "pass")
        # A check missing from a trial (its run stopped early) counts as failed there.
        rates.append({"label": identity.label(), "runs": len(runs), "passed": passed,
                      "rate": round(passed / len(runs), 4),
                      "checks": {cid: round(sum(ok) / len(runs), 4) for cid, ok in checks.items()}})
    return {"count": count, "min_pass_rate": min_pass_rate,
            "met": bool(rates) and all(rate["rate"] >= min_pass_rate for rate in rates), "rates": rates}


def describe(rates: dict[str, Any]) -> str:
    """Lines for the terminal: each scenario run's pass rate and its checks below the minimum."""
    lines = [f"runner: pass rates over {rates['count']} trials (minimum {rates['min_pass_rate']:.0%}):"]
    for rate in rates["rates"]:
        mark = "ok " if rate["rate"] >= rates["min_pass_rate"] else "LOW"
        lines.append(f"  {mark} {rate['rate']:6.0%}  {rate['label']} ({rate['passed']}/{rate['runs']})")
        lines += [f"          {cid}: {value:.0%}" for cid, value in rate["checks"].items() if value < 1]
    lines.append(f"runner: minimum pass rate {'met' if rates['met'] else 'NOT met'}")
    return "\n".join(lines)
