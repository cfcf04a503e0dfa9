"""``runner.py report``: read reports back.

    runner.py report PATH                 summary: scenarios, verdicts, failed checks with evidence
    runner.py report --compare OLD NEW    checks whose verdict changed, and checks only one run has

PATH is a report folder (``reports/<run-id>``) or its ``report.json``. Exit status:
0 when the report (NEW, when comparing) passed and, when comparing, no check
regressed from pass to fail or disappeared; 1 otherwise; 2 for unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .identity import RunIdentity
from .writer import load_report


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    parser = argparse.ArgumentParser(prog="runner.py report", description="Summarize or compare run reports.")
    parser.add_argument("path", nargs="?", help="a report folder or its report.json")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="list checks whose verdict changed")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if (args.path is None) == (args.compare is None):
        parser.error("give either PATH or --compare OLD NEW")
    try:
        if args.compare:
            old, new = (load_report(p) for p in args.compare)
            return compare(old, new, out)
        return summarize(load_report(args.path), out)
    except (OSError, ValueError, KeyError) as exc:
        print(f"runner.py report: cannot read report: {exc}", file=sys.stderr)
        return 2


def summarize(report: dict[str, Any], out: TextIO) -> int:
    """Print scenarios, verdicts and each failed check with its evidence; 0 when the run passed."""
    run = report["run"]
    totals = run["totals"]
    print(f"run {run['run_id']}: {'PASSED' if run['passed'] else 'FAILED'} — "
          f"{totals['scenarios']} scenarios ({totals['scenarios_failed']} failed), "
          f"{totals['checks']} checks ({totals['checks_failed']} failed); Codex {run['codex_version']}", file=out)
    for scenario in report["scenarios"]:
        checks = scenario["checks"]
        failed = [c for c in checks if c["verdict"] != "pass"]
        bound = scenario["binding_summary"]
        label = identity_of(scenario, report).label()
        print(f"  {'pass' if scenario['passed'] else 'FAIL'}  {label}: {len(checks) - len(failed)}/"
              f"{len(checks)} checks pass; bindings {bound['bound']} bound, {bound['unbound']} unbound", file=out)
        probe = scenario.get("probe")
        if probe is not None:
            legs = ", ".join(f"{k}={str(v).lower()}" for k, v in probe.items()
                             if isinstance(v, bool) and k != "success")
            print(f"        probe: {'success' if probe['success'] else 'FAILED'} in {probe['requests']} model "
                  f"requests ({legs})", file=out)
        for check in failed:
            print(f"        FAIL {check['id']}: {check['summary']}", file=out)
            for kind, refs in check["evidence"].items():
                if refs:
                    print(f"             {kind}: {', '.join(map(str, refs))}", file=out)
            for problem in check["evidence_problems"]:
                print(f"             missing evidence: {problem}", file=out)
        for binding in scenario["bindings"]:
            if binding["unbound"]:
                why = binding.get("explanation") or binding["unbound"]
                print(f"        unbound {binding['kind']} {binding['interaction_id']}: {why}", file=out)
    scan = report["secret_scan"]
    if scan["findings"]:
        names = sorted({f["name"] for f in scan["findings"]})
        print(f"  secret scan: redacted {', '.join(names)}", file=out)
    if not scan["clean"]:
        print("  secret scan: NOT CLEAN", file=out)
    return 0 if run["passed"] else 1


def identity_of(scenario: dict[str, Any], report: dict[str, Any]) -> RunIdentity:
    """A section's identity (reports written before sections carried one fall back to the run's provider)."""
    return RunIdentity.of(scenario, provider=report["run"].get("provider"))


def verdicts(report: dict[str, Any]) -> dict[tuple[tuple[Any, ...], str], tuple[str, str]]:
    """``(identity key, check id) -> (identity label, verdict)`` of one report.

    Keyed by the whole scenario identity: the same check of the same scenario in
    another mode, persona, provider or trial is another check.
    """
    out = {}
    for s in report["scenarios"]:
        identity = identity_of(s, report)
        for c in s["checks"]:
            out[(identity.key(), c["id"])] = (identity.label(), c["verdict"])
    return out


def compare(old: dict[str, Any], new: dict[str, Any], out: TextIO) -> int:
    """Print changed verdicts and checks present in only one run; 0 when nothing regressed."""
    before, after = verdicts(old), verdicts(new)
    print(f"compare {old['run']['run_id']} -> {new['run']['run_id']}", file=out)
    changed = [(k, before[k][1], after[k][1]) for k in sorted(before.keys() & after.keys())
               if before[k][1] != after[k][1]]
    only_old = sorted(before.keys() - after.keys())
    only_new = sorted(after.keys() - before.keys())
    for key, was, now in changed:
        print(f"  changed   {after[key][0]} / {key[1]}: {was} -> {now}", file=out)
    for key in only_old:
        print(f"  only old  {before[key][0]} / {key[1]}: {before[key][1]}", file=out)
    for key in only_new:
        print(f"  only new  {after[key][0]} / {key[1]}: {after[key][1]}", file=out)
    if not (changed or only_old or only_new):
        print("  no verdict changed", file=out)
    regressed = any(now != "pass" for _k, _was, now in changed) or bool(only_old)
    return 1 if regressed or not new["run"]["passed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
