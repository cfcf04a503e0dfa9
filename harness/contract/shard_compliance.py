"""Merging contract-suite shard reports into one compliance verdict.

A shard (``runner.py contract --shard K/N``) writes ``compliance.json`` with its
place in the plan (``shard``) and every vote its items cast (``votes``): alone it
can only say whether a MUST failed in it, since the other shards test the rest.
The merge judges all shards' votes together with the same manifest, selection
and baseline (:func:`harness.contract.compliance.judge`), so "not tested" and
stale baseline entries are decided over the whole run, and writes
``compliance.json``, ``compliance.md``, ``junit.xml`` (every shard's test suites
in one file) and the union of the shards' ``durations.json``.

Refused unless forced: shards of different suite versions, targets,
selections, baselines, shard counts or plans. Flagged, failing the merged
verdict: a missing or duplicated shard, a test in two shards or in none.
"""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.shards import (
    DURATIONS_FILE,
    MergeRefused,
    coverage,
    find_folders,
    load_durations,
    one_per_shard,
    refuse_unless_forced,
    write_durations,
)

from .baseline import Baseline, BaselineEntry
from .cases import CaseError, all_cases
from .compliance import Compliance, judge
from .manifest import NEEDS, Level, Selection, manifest
from .report import JSON_NAME, JUNIT_NAME, write_reports
from .verdicts import Vote

SUITE = "contract"


ContractMergeRefused = MergeRefused
"""The shard reports cannot be one run's (different suite, target, selection, baseline or plan)."""


@dataclass
class ContractShard:
    folder: Path
    document: dict[str, Any]

    @property
    def shard(self) -> dict[str, Any] | None:
        return self.document.get("shard")

    @property
    def label(self) -> str:
        shard = self.shard
        return f"contract shard {shard['index']}/{shard['count']}" if shard else f"contract report {self.folder.name}"


@dataclass
class MergedCompliance:
    folder: Path
    compliance: Compliance
    problems: list[str]
    warnings: list[str]


def find_compliance(paths: Sequence[Path]) -> list[Path]:
    """The contract report folders named by ``paths`` (holding ``compliance.json``, or below them)."""
    return find_folders(paths, JSON_NAME)


def merge_compliance(folders: Sequence[Path], out: Path, *, force: bool = False) -> MergedCompliance:
    """Judge the shards in ``folders`` as one run and write the merged reports into ``out`` (new).

    Raises :class:`ContractMergeRefused` for incompatible shards unless ``force``,
    ``ValueError`` for a report that is not a shard's (it carries no votes) and
    ``FileExistsError`` when ``out`` exists.
    """
    shards = [ContractShard(f, json.loads((f / JSON_NAME).read_text(encoding="utf-8"))) for f in folders]
    for shard in shards:
        if shard.shard is None or "votes" not in shard.document:
            raise ValueError(f"{shard.folder}: not a shard report (run the suite with --shard K/N to merge it)")
    warnings = _compatibility(shards, force)
    chosen, problems = _choose(shards)
    # An interrupted shard's unfinished tests show as ones that ran nowhere; say why first.
    problems = [f"contract shard {s.shard['index']}/{s.shard['count']} ({s.folder.name}) was interrupted by "
                f"{s.document['verdict']['interrupted_by']}: its remaining tests did not run"
                for s in chosen if (s.document.get("verdict") or {}).get("interrupted_by")] + problems
    votes = [Vote.from_json(v) for shard in chosen for v in shard.document["votes"]]
    first = chosen[0].document
    try:
        known_cases = [c.id for c in all_cases()]
    except CaseError:
        known_cases = []
    compliance = judge(manifest(), votes, _selection(first["selection"]), _baseline(first["baseline"]), known_cases)
    compliance = dataclasses.replace(compliance, problems=(*compliance.problems, *problems))
    tests: dict[str, int] = {}
    for shard in chosen:
        for outcome, n in (shard.document.get("tests") or {}).items():
            tests[outcome] = tests.get(outcome, 0) + n
    if out.exists():
        raise FileExistsError(f"{out} already exists")
    write_reports(out, compliance, target=first["target"], tests=tests,
                  extra={"merge": {"shards": [{"index": s.shard["index"], "count": s.shard["count"],
                                               "cases": len(s.shard["cases"])} for s in chosen],
                                   "problems": problems, "warnings": warnings}})
    _merge_junit([s.folder / JUNIT_NAME for s in chosen], out / JUNIT_NAME)
    merged_durations: dict[str, float] = {}
    for shard in chosen:
        merged_durations.update(load_durations(shard.folder / DURATIONS_FILE, SUITE))
    write_durations(out / DURATIONS_FILE, {SUITE: merged_durations})
    return MergedCompliance(out, compliance, problems, warnings)


def _compatibility(shards: list[ContractShard], force: bool) -> list[str]:
    return refuse_unless_forced("contract shards", [(s.label, s.document) for s in shards], [
        ("suite version", lambda d: d.get("suite_version")), ("target", lambda d: d.get("target")),
        ("selection", lambda d: d.get("selection")), ("baseline", lambda d: (d.get("baseline") or {}).get("entries")),
        ("shard count", lambda d: (d.get("shard") or {}).get("count")),
        ("shard plan", lambda d: (d.get("shard") or {}).get("plan_sha256"))], force=force)


def _choose(shards: list[ContractShard]) -> tuple[list[ContractShard], list[str]]:
    by_index, flagged = one_per_shard(shards, lambda s: s.shard, lambda s: s.folder.name, "tests")
    problems = [f"contract {problem}" for problem in flagged]
    chosen = list(by_index.values())
    _, missed = coverage([(s.shard["index"], s.shard["cases"]) for s in chosen], chosen[0].shard.get("plan") or {},
                         case="contract test",
                         ran_nowhere=lambda case, index: f"contract test {case} (planned for shard {index}) ran in "
                                                         "no shard",
                         excused=lambda case, index: index not in by_index)
    return chosen, problems + missed


def _selection(data: dict[str, Any]) -> Selection:
    return Selection(level=Level.parse(str(data["level"]).lower()), patterns=tuple(data.get("patterns") or ()),
                     profiles=tuple(data.get("profiles") or ()), offers=tuple(data.get("offers", NEEDS)))


def _baseline(data: dict[str, Any]) -> Baseline:
    entries = {e["key"]: BaselineEntry(e["key"], e["comment"], line) for line, e in
               enumerate(data.get("entries") or [], start=1)}
    return Baseline(entries, data.get("path"))


def _merge_junit(paths: list[Path], out: Path) -> None:
    """Every shard's ``<testsuite>`` elements under one ``<testsuites>``, with summed counts."""
    root = ET.Element("testsuites", name="peerwire contract suite")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for path in paths:
        if not path.is_file():
            continue
        tree = ET.parse(path).getroot()
        suites = [tree] if tree.tag == "testsuite" else list(tree.iter("testsuite"))
        for suite in suites:
            root.append(suite)
            for key in totals:
                totals[key] += int(suite.get(key, "0"))
    for key, value in totals.items():
        root.set(key, str(value))
    out.write_text('<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n",
                   encoding="utf-8")
