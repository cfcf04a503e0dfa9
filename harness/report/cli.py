"""``runner.py report``: read reports back, and merge shard reports.

    runner.py report PATH                 summary: scenarios, verdicts, failed checks with evidence
    runner.py report --compare OLD NEW    checks whose verdict changed, and checks only one run has
    runner.py report matrix [LABEL=]RUN... [--out DIR]
                                          contract runs of many implementations side by side
                                          (:mod:`.matrix`: matrix.html, matrix.md, matrix.json)
    runner.py report matrix --compare OLD NEW
                                          what newly fails, is fixed or changed between two contract
                                          runs of one implementation; exit 1 on a new MUST failure
    runner.py report merge DIR... --out OUT [--force] [--run-id ID]
                                          the reports of a sharded run as one (see below)
    runner.py report PATH --request RUN SEQ
                                          model request SEQ of scenario run RUN (its slug, e.g.
                                          smoke.attached) whole, as Codex sent it, checked against its digest

PATH is a report folder (``reports/<run-id>``) or its ``report.json``; or a contract run's
report folder or its ``compliance.json``, summarized as its verdict, scores and a line per
failing requirement (:func:`summarize_contract`; exit status: the run's own). Exit status:
0 when the report (NEW, when comparing) passed and, when comparing, no check
regressed from pass to fail or disappeared; 1 otherwise; 2 for unreadable input.

``merge`` finds every acceptance report (``report.json``) and contract-suite
report (``compliance.json``) in or below the given folders and writes
``OUT/acceptance/`` (:mod:`.merge`: report.json, report.md, report.html,
junit.xml, artifacts/) and ``OUT/contract/`` (:mod:`harness.contract.shard_compliance`:
compliance.json, compliance.md, junit.xml), and ``OUT/durations.json``, the
shards' recorded durations for balancing later splits. Exit status: 0 when
every merged verdict passes, 1 when a check fails or a shard is missing or
duplicated, 2 when the reports are not one run's (different Codex or suite
versions, shard counts or plans; ``--force`` merges them anyway) or unreadable.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from collections.abc import Sequence
from typing import Any, TextIO

from harness import invocation
from harness.evidence import stored
from harness.evidence.model_bodies import read_log

from harness.evidence.identity import RunIdentity
from .writer import load_report


def main(argv: Sequence[str] | None = None, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["merge"]:
        return merge(argv[1:], out)
    if argv[:1] == ["matrix"]:
        from . import matrix
        return matrix.main(argv[1:], out)
    parser = argparse.ArgumentParser(prog=invocation.command("report"), description="Summarize or compare run reports.")
    parser.add_argument("path", nargs="?", help="a report folder or its report.json")
    parser.add_argument("--compare", nargs=2, metavar=("OLD", "NEW"), help="list checks whose verdict changed")
    parser.add_argument("--request", nargs=2, metavar=("RUN", "SEQ"),
                        help="print model request SEQ of scenario run RUN (e.g. smoke.attached) whole")
    args = parser.parse_args(argv)
    if (args.path is None) == (args.compare is None):
        parser.error("give either PATH or --compare OLD NEW")
    try:
        if args.request:
            return show_request(Path(args.path), args.request[0], args.request[1], out)
        if args.compare:
            old, new = (load_report(p) for p in args.compare)
            return compare(old, new, out)
        contract = _compliance_file(Path(args.path))
        if contract is not None:
            return summarize_contract(json.loads(contract.read_text("utf-8")), out)
        return summarize(load_report(args.path), out)
    except LookupError as exc:
        print(f"{invocation.command('report')}: {exc.args[0]}", file=sys.stderr)
        return 1
    except (OSError, ValueError) as exc:
        print(f"{invocation.command('report')}: cannot read report: {exc}", file=sys.stderr)
        return 2


def merge(argv: Sequence[str], out: TextIO) -> int:
    """``runner.py report merge``: see the module docs."""
    from harness.contract.shard_compliance import ContractMergeRefused, find_compliance, merge_compliance
    from harness.shards import DURATIONS_FILE, load_durations, write_durations

    from .shard_reports import MergeRefused, durations, find_reports, merge_reports

    parser = argparse.ArgumentParser(prog=invocation.command("report merge"),
                                     description="Merge the shard reports of one run into one report.")
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR",
                        help="shard report folders, or folders holding them (searched recursively)")
    parser.add_argument("--out", type=Path, required=True, help="the merged reports' folder (must not exist)")
    parser.add_argument("--force", action="store_true",
                        help="merge reports of different Codex or suite versions, shard counts or plans")
    parser.add_argument("--run-id", help="the merged acceptance report's run id (default: merged-<UTC time>)")
    args = parser.parse_args(argv)
    acceptance, contract = find_reports(args.folders), find_compliance(args.folders)
    if not acceptance and not contract:
        print(f"{invocation.command('report merge')}: no report.json or compliance.json in {', '.join(map(str, args.folders))}",
              file=out)
        return 2
    if args.out.exists():
        print(f"{invocation.command('report merge')}: {args.out} already exists; give a new folder", file=out)
        return 2
    status, tables = 0, {}
    try:
        if acceptance:
            merged = merge_reports(acceptance, args.out / "acceptance", force=args.force, run_id=args.run_id)
            run = merged.report["run"]
            print(f"acceptance: {len(acceptance)} reports -> {merged.folder}: "
                  f"{'PASSED' if run['passed'] else 'FAILED'}, {run['totals']['scenarios']} scenario runs, "
                  f"{run['totals']['checks']} checks ({run['totals']['checks_failed']} failed)", file=out)
            for line in [*merged.problems, *run.get("warnings", [])]:
                print(f"  {line}", file=out)
            status = max(status, 0 if run["passed"] else 1)
            tables["acceptance"] = durations(merged.report)
        if contract:
            result = merge_compliance(contract, args.out / "contract", force=args.force)
            print(f"contract: {len(contract)} reports -> {result.folder}: "
                  f"{'compliant' if result.compliance.ok else 'NOT compliant'}", file=out)
            for line in [*result.compliance.problems, *result.warnings]:
                print(f"  {line}", file=out)
            status = max(status, result.compliance.exit_status)
            tables["contract"] = load_durations(result.folder / DURATIONS_FILE, "contract")
    except (MergeRefused, ContractMergeRefused) as refused:
        print(f"{invocation.command('report merge')}: refused: {refused}", file=out)
        return 2
    except (OSError, ValueError, KeyError) as exc:
        print(f"{invocation.command('report merge')}: cannot merge: {exc}", file=out)
        return 2
    print(f"durations: {write_durations(args.out / DURATIONS_FILE, tables)}", file=out)
    return status


def _compliance_file(path: Path) -> Path | None:
    """A contract run's ``compliance.json`` at ``path`` (the file, or the report folder holding it)."""
    if path.name == "compliance.json" and path.is_file():
        return path
    if path.is_dir() and (path / "compliance.json").is_file() and not (path / "report.json").is_file():
        return path / "compliance.json"
    return None


def summarize_contract(document: dict[str, Any], out: TextIO) -> int:
    """A contract run's report: its verdict, scores per level and a line per failing requirement; returns the
    run's own exit status."""
    verdict = document["verdict"]
    state = verdict.get("state") or ("compliant" if verdict["compliant"] else "not compliant")
    target = " ".join(document.get("target", {}).get("server_cmd", []))
    print(f"contract run of {target}: {state} (exit status {verdict['exit_status']}), "
          f"generated {document.get('generated_at')}", file=out)
    print("  " + "; ".join(f"{level} {s['pass']}/{s['total']} pass, {s['fail']} fail, {s['not_tested']} not tested"
                           for level, s in document["scores"].items() if s["total"]), file=out)
    for requirement in document["requirements"]:
        if requirement["result"] in ("fail", "expected failure") and requirement["failures"]:
            first = requirement["failures"][0]
            detail = f"; found {first['detail']}" if first.get("detail") else ""
            label = "FAIL" if requirement["result"] == "fail" else "FAIL (baselined)"
            print(f"  {label} {requirement['level']} {requirement['id']}: expected {first['check']}{detail}"[:400],
                  file=out)
    for problem in verdict["problems"]:
        if " failed: " not in problem:
            print(f"  FAILS RUN: {problem}", file=out)
    return int(verdict["exit_status"])


def summarize(report: dict[str, Any], out: TextIO) -> int:
    """Print scenarios, verdicts and each failed check with its evidence; 0 when the run passed."""
    run = report["run"]
    totals = run["totals"]
    print(f"run {run['run_id']}: {'PASSED' if run['passed'] else 'FAILED'} — "
          f"{totals['scenarios']} scenarios ({totals['scenarios_failed']} failed), "
          f"{totals['checks']} checks ({totals['checks_failed']} failed); Codex {run['codex_version']}", file=out)
    if run.get("shard"):
        print(f"  shard {run['shard']['index']}/{run['shard']['count']}: {len(run['shard']['cases'])} of "
              f"{run['shard']['plan_cases']} scenario runs", file=out)
    if run.get("merged_from"):
        print(f"  merged from {len(run['merged_from'])} shard reports", file=out)
    for problem in run.get("problems") or []:
        print(f"  problem: {problem}", file=out)
    for scenario in report["scenarios"]:
        checks = scenario["checks"]
        failed = [c for c in checks if c["verdict"] == "fail"]
        skipped = [c for c in checks if c["verdict"] == "skip"]
        bound = scenario["binding_summary"]
        label = identity_of(scenario, report).label()
        passed = len(checks) - len(failed) - len(skipped)
        print(f"  {'pass' if scenario['passed'] else 'FAIL'}  {label}: {passed}/{len(checks)} checks pass"
              + (f" ({len(skipped)} skipped: {', '.join(c['id'] for c in skipped)})" if skipped else "")
              + f"; bindings {bound['bound']} bound, {bound['unbound']} unbound", file=out)
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


def show_request(path: Path, run: str, seq: str, out: TextIO) -> int:
    """Print one model request's whole body (JSON), expanded from the stored bodies and checked against the
    digest logged when it arrived; LookupError when the run or the request is not in the report."""
    folder = path.parent if path.is_file() else path
    log = folder / "artifacts" / run / "model-requests.jsonl"
    if not stored.exists(log):
        raise LookupError(f"no model request log for scenario run {run!r} in {folder}")
    for number, record in read_log(log):
        if record is not None and record.get("event") == "request" and str(record.get("seq")) == seq:
            print(f"# {run} model request {seq} ({log.name}:{number}, agent {record.get('agent')}, "
                  f"sha256 {record.get('body_sha256', 'not logged')})", file=out)
            print(json.dumps(record["body"], indent=1, ensure_ascii=False), file=out)
            return 0
    raise LookupError(f"no model request {seq} in {log}")


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
    # A pass that became a skip regressed too: the check no longer holds anything.
    regressed = any(now != "pass" for _k, _was, now in changed) or bool(only_old)
    return 1 if regressed or not new["run"]["passed"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
