"""Merging acceptance shard reports into one report: ``runner.py report merge``.

Each shard of a sharded run (``runner.py --shard K/N``) writes an ordinary
report whose ``run.shard`` says which shard it is and which plan it followed.
A merge takes the reports of all ``N`` shards and writes one report folder:
``report.json``, ``report.md``, ``report.html``, ``junit.xml`` and
``artifacts/<run slug>/`` for every scenario run, plus ``durations.json`` (the
recorded durations, for balancing later splits).

Refused unless forced (:class:`MergeRefused`): reports of different Codex
versions or suite versions, or of different shard counts or plans. Flagged in
the merged report, which then fails (``run.problems``): a shard that is missing
or given twice, a scenario run in two shards or in none, an artifact whose
SHA-256 no longer matches its shard's report.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.shards import MergeRefused, coverage, find_folders, one_per_shard, refuse_unless_forced

from .artifacts import copy_artifacts, manifest
from harness.evidence import stored
from harness.evidence.identity import RunIdentity
from harness.evidence.model_bodies import RUN_BODIES
from harness.evidence.secrets import Finding, SecretScan
from harness.names import AWAITING_CAPABILITIES
from .store import STORE, TOOL_LISTS, gather_bodies, keep_tool_lists
from .writer import ARTIFACTS, CAPABILITIES, COUNTING, REPORT_JSON, finish_report, load_report, staged_report


__all__ = ["Merged", "MergeRefused", "ShardReport", "durations", "find_reports", "merge_reports"]


@dataclass
class ShardReport:
    folder: Path
    report: dict[str, Any]

    @property
    def shard(self) -> dict[str, Any] | None:
        return self.report["run"].get("shard")

    @property
    def label(self) -> str:
        """How the merged report names this shard (no machine path: reports travel)."""
        shard = self.shard
        where = f"shard {shard['index']}/{shard['count']}" if shard else "unsharded report"
        return f"{where} (run {self.report['run']['run_id']})"


@dataclass
class Merged:
    folder: Path
    report: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def find_reports(paths: Sequence[Path]) -> list[Path]:
    """The acceptance report folders named by ``paths`` (holding ``report.json``, or below them)."""
    return find_folders(paths, REPORT_JSON)


def merge_reports(folders: Sequence[Path], out: Path, *, force: bool = False, run_id: str | None = None,
                  secrets: SecretScan | None = None) -> Merged:
    """Merge the acceptance reports in ``folders`` (shards of one run) into the new folder ``out``.

    Raises :class:`MergeRefused` for incompatible reports unless ``force`` (then
    the differences are kept as warnings), ``FileExistsError`` when ``out``
    exists and ``ValueError`` when there is nothing to merge.
    """
    shards = [ShardReport(folder, load_report(folder)) for folder in folders]
    if not shards:
        raise ValueError("no acceptance report to merge")
    warnings = _compatibility(shards, force)
    chosen, problems = _choose(shards)
    scan = secrets if secrets is not None else SecretScan.collect()

    def build(work: Path) -> dict[str, Any]:
        sections, copied, excluded, findings, seen, moves = [], [], [], [], {}, {}
        for shard in chosen:
            for section in shard.report["scenarios"]:
                identity = RunIdentity.of(section, provider=shard.report["run"].get("provider"))
                slug = identity.slug()
                if slug in seen:
                    problems.append(f"scenario run {identity.label()} is in {seen[slug]} and in {shard.label}; "
                                    "the first is kept")
                    continue
                seen[slug] = shard.label
                files, problems_here = _move_artifacts(shard, section, work / ARTIFACTS / slug)
                copied += files
                problems.extend(problems_here)
                moved = copy.deepcopy(section)
                moved["artifacts_dir"] = f"{ARTIFACTS}/{slug}/"
                sections.append(moved)
                moves[section["artifacts_dir"]] = moved["artifacts_dir"]
            # The run-level evidence of each shard (the capability probe's), kept apart per shard.
            probe = f"{ARTIFACTS}/{CAPABILITIES}/"
            if (shard.folder / probe).is_dir():
                place = f"{ARTIFACTS}/{CAPABILITIES}/shard-{(shard.shard or {}).get('index', 0)}/"
                files, _ = copy_artifacts(shard.folder / probe, work / place)
                copied += files
                moves[probe] = place
            excluded += [_moved(path, moves) for path in shard.report["excluded"]]
            findings += [Finding(f["name"], _moved(f["location"], moves, shard.label), f["occurrences"])
                         for f in shard.report["secret_scan"]["findings"]]
            moves.clear()
        problems.extend(_missing_cases(chosen, seen))
        # The shards' run-level stores become the merged report's, stored compressed as a written report's is.
        copied = stored.compress_all(gather_bodies(work / ARTIFACTS, copied, also=[
            shard.folder / ARTIFACTS / RUN_BODIES for shard in chosen if stored.exists(shard.folder / ARTIFACTS / RUN_BODIES)]))
        findings += scan.redact_tree(work, copied)
        sections.sort(key=lambda s: RunIdentity.of(s).key())
        report = _merged_run(chosen, sections, problems, warnings, run_id)
        lists: dict[str, Any] = {}
        for shard in chosen:
            lists.update(shard.report.get(STORE, {}).get(TOOL_LISTS, {}))
        keep_tool_lists(sections, {TOOL_LISTS: lists})  # a shard written before the store kept its lists inline
        named = {seen["sha256"] for section in sections for seen in section["tool_schemas"]}
        report[STORE] = {TOOL_LISTS: {digest: tools for digest, tools in lists.items() if digest in named}}
        report["artifacts"] = [a.to_json() for a in manifest(work, copied)]
        report["excluded"] = excluded
        finish_report(work, report, scan, findings, copied)
        return report

    folder = staged_report(out, build)
    return Merged(folder, load_report(folder), problems, warnings)


def _compatibility(shards: list[ShardReport], force: bool) -> list[str]:
    """What makes the reports not one run's: one line per differing property (refused unless ``force``)."""
    return refuse_unless_forced("reports", [(s.label, s.report["run"]) for s in shards], [
        ("Codex version", lambda run: run.get("codex_version")), ("suite version", lambda run: run.get("suite")),
        ("shard count", lambda run: (run.get("shard") or {}).get("count")),
        ("shard plan", lambda run: (run.get("shard") or {}).get("plan_sha256"))], force=force)


def _choose(shards: list[ShardReport]) -> tuple[list[ShardReport], list[str]]:
    """One report per shard index (the first given); problems name the missing and duplicated ones."""
    unsharded = [s for s in shards if s.shard is None]
    problems = [f"{shard.label} is not a shard report (it has no run.shard); merged as it is" for shard in unsharded]
    by_index, flagged = one_per_shard([s for s in shards if s.shard is not None], lambda s: s.shard,
                                      lambda s: s.label, "scenario runs")
    return [*by_index.values(), *unsharded], problems + flagged


def _move_artifacts(shard: ShardReport, section: dict[str, Any], dest: Path) -> tuple[list[Path], list[str]]:
    """Copy one scenario run's artifacts into the merged folder, checking each against its shard's SHA-256."""
    relative = section["artifacts_dir"].rstrip("/")
    files, _skipped = copy_artifacts(shard.folder / relative, dest)
    recorded = {a["path"]: a for a in shard.report["artifacts"] if a["path"].startswith(relative + "/")}
    problems = []
    merged = {a.path: a for a in manifest(dest.parent.parent, files)}
    prefix = dest.relative_to(dest.parent.parent).as_posix()
    for path, artifact in recorded.items():
        now = merged.get(prefix + path[len(relative):])
        if now is None:
            problems.append(f"{shard.label}: artifact {path} is missing")
        elif now.sha256 != artifact["sha256"]:
            problems.append(f"{shard.label}: artifact {path} changed after its report was written (SHA-256 "
                            f"{now.sha256[:12]}…, the report says {artifact['sha256'][:12]}…)")
    return files, problems


def durations(report: dict[str, Any]) -> dict[str, float]:
    """``{run slug: wall seconds}`` of a report's scenario runs: what later splits balance by. A run's wait
    for the capability probe (phase :data:`~harness.names.AWAITING_CAPABILITIES`) is the shard's, not the run's:
    left out."""
    return {s["identity"]["slug"]: round(float(s["wall_s"]) - sum(
                phase["s"] for phase in s.get("phases") or [] if phase.get("name") == AWAITING_CAPABILITIES), 3)
            for s in report["scenarios"] if isinstance(s.get("wall_s"), (int, float))}


def _moved(location: str, moves: dict[str, str], shard: str | None = None) -> str:
    """A path of a shard's report as it is in the merged one (``moves``: old artifacts folder -> new)."""
    for old, new in moves.items():
        if location.startswith(old):
            return new + location[len(old):]
    return f"{shard}: {location}" if shard else location


def _missing_cases(chosen: list[ShardReport], seen: dict[str, str]) -> list[str]:
    """Cases of the plan no shard reported (a shard skipping one it cannot run says so, and is believed)."""
    planned: dict[str, int] = {}
    skipped: set[str] = set()
    for shard in chosen:
        if shard.shard is not None:
            planned.update(shard.shard.get("plan") or {})
            skipped.update(shard.shard.get("skipped") or [])
    # Scenario runs reported twice were flagged (and the first kept) as their sections were moved.
    _, missed = coverage([(0, list(seen))], planned, case="scenario run",
                         ran_nowhere=lambda case, index: f"scenario run {case} (planned for shard {index}) is in no "
                                                         "shard report",
                         excused=lambda case, index: case in skipped)
    return missed


def _merged_run(chosen: list[ShardReport], sections: list[dict[str, Any]], problems: list[str],
                warnings: list[str], run_id: str | None) -> dict[str, Any]:
    runs = [s.report["run"] for s in chosen]
    checks = [c for s in sections for c in s["checks"]]
    providers = sorted({str(r.get("provider")) for r in runs})
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    run = {
        "run_id": run_id or f"merged-{stamp}",
        "started_at": min((r["started_at"] for r in runs if r.get("started_at")), default=None),
        "finished_at": max((r["finished_at"] for r in runs if r.get("finished_at")), default=None),
        "codex_version": runs[0].get("codex_version"),
        "provider": providers[0] if len(providers) == 1 else {"providers": ", ".join(providers)},
        "passed": all(s["passed"] for s in sections) and not problems,
        "totals": {"scenarios": len(sections), "scenarios_failed": sum(not s["passed"] for s in sections),
                   "checks": len(checks), "checks_failed": sum(c["verdict"] == "fail" for c in checks),
                   "checks_skipped": sum(c["verdict"] == "skip" for c in checks)},
        "merged_from": [{"shard": (r.get("shard") or {}).get("index"), "run_id": r["run_id"],
                         "passed": r["passed"], "scenarios": len(s.report["scenarios"])}
                        for r, s in zip(runs, chosen)],
        "problems": list(problems),
        "warnings": [f"merged with --force: {w}" for w in warnings],
    }
    if runs[0].get("suite") is not None:
        run["suite"] = runs[0]["suite"]
    kinds = {row["kind"]: row for r in runs for row in r.get("agent_kinds") or []}
    if kinds:
        run["agent_kinds"] = list(kinds.values())
    probed = [r["codex_capabilities"] for r in runs if r.get("codex_capabilities")]
    if probed:
        # Each shard probed its own machine's Codex; they should agree, and a difference is worth saying.
        run["codex_capabilities"] = probed[0]
        if any(p != probed[0] for p in probed):
            run["warnings"].append("the shards' capability probes disagree; this report shows the first shard's, "
                                   f"and each shard's evidence is under {ARTIFACTS}/{CAPABILITIES}/shard-K/")
    return {"report_version": 1, "run": run, "counting": COUNTING, "scenarios": sections}
