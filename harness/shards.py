"""Splitting a run across machines: ``--shard K/N`` and the plan every shard computes alike.

A run's cases (acceptance: scenario runs, named by their identity's slug;
contract suite: pytest node ids) are split into ``N`` shards by
:func:`plan`: longest first, each to the shard with the least work so far
(ties to the lower shard), with durations recorded by earlier runs where known
and the median of the known ones otherwise. The plan depends only on the set
of cases, ``N`` and the durations, never on order or on the machine, so
``N`` processes started anywhere with the same selection agree on it, and every
case lands in exactly one shard. Its digest lets a merge tell whether all
shards used the same plan.

Durations live in a JSON file, by suite: ``{"acceptance": {case: seconds},
"contract": {case: seconds}}``. Runs write theirs beside their reports; a
merge writes the union (see ``runner.py report merge``), which can be kept in
the repository as :data:`DEFAULT_DURATIONS` (``.ci/durations.json``, shipped as package data).
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .resources import recorded_durations

T = TypeVar("T")

DEFAULT_DURATIONS = recorded_durations()
"""The durations kept in the repository; the default for ``--durations``."""
DURATIONS_FILE = "durations.json"
"""The name runs and merges give the durations they write."""
UNKNOWN_S = 1.0
"""The estimate for every case when no duration at all is known."""
_SPEC = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


class ShardError(ValueError):
    """A shard that cannot be: not ``K/N``, ``K`` outside ``1..N``, or a plan over repeated cases."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (1-based) of ``count``."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> "Shard":
        """``"K/N"`` with ``1 <= K <= N``; anything else raises :class:`ShardError`."""
        match = _SPEC.fullmatch(str(text))
        if not match:
            raise ShardError(f"--shard {text!r}: give K/N, e.g. 1/4 (shard K of N, counting from 1)")
        index, count = int(match.group(1)), int(match.group(2))
        if count < 1 or not 1 <= index <= count:
            raise ShardError(f"--shard {text}: K must be between 1 and N, and N at least 1")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


@dataclass(frozen=True)
class ShardPlan:
    """Which shard each case runs in, and the estimate behind it."""

    count: int
    assignment: Mapping[str, int]
    """case -> shard index (1-based)."""
    estimates: Mapping[str, float]
    known: int
    """How many cases had a recorded duration."""

    def cases(self, index: int, order: Iterable[str] | None = None) -> list[str]:
        """Shard ``index``'s cases, in ``order`` (default: sorted)."""
        return [case for case in (order if order is not None else sorted(self.assignment))
                if self.assignment.get(case) == index]

    def loads(self) -> list[float]:
        """Estimated seconds of work per shard, shard 1 first."""
        totals = [0.0] * self.count
        for case, index in self.assignment.items():
            totals[index - 1] += self.estimates[case]
        return totals

    @property
    def digest(self) -> str:
        """SHA-256 of the assignment: equal exactly when two shards split the same cases the same way."""
        canonical = json.dumps({"count": self.count, "assignment": dict(sorted(self.assignment.items()))},
                               sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def describe(self, shard: Shard, order: Iterable[str] | None = None) -> dict[str, Any]:
        """What a shard's report records about its place in the plan."""
        return {"index": shard.index, "count": shard.count, "cases": self.cases(shard.index, order),
                "plan_cases": len(self.assignment), "plan_sha256": self.digest, "durations_known": self.known,
                "estimated_s": [round(load, 3) for load in self.loads()],
                "plan": dict(sorted(self.assignment.items()))}


def plan(cases: Sequence[str], count: int, durations: Mapping[str, float] | None = None) -> ShardPlan:
    """Split ``cases`` into ``count`` shards, balanced by ``durations`` (see the module docs).

    Raises :class:`ShardError` when a case is listed twice (it would run twice) or
    ``count`` is below 1.
    """
    if count < 1:
        raise ShardError("a plan needs at least one shard")
    repeated = sorted(case for case, n in Counter(cases).items() if n > 1)
    if repeated:
        raise ShardError(f"cases listed more than once: {', '.join(repeated)}")
    durations = durations or {}
    known = {case: float(durations[case]) for case in cases
             if isinstance(durations.get(case), (int, float)) and durations[case] >= 0}
    fallback = statistics.median(known.values()) if known else UNKNOWN_S
    estimates = {case: known.get(case, fallback) for case in cases}
    loads = [0.0] * count
    assignment: dict[str, int] = {}
    for case in sorted(cases, key=lambda c: (-estimates[c], c)):
        lightest = min(range(count), key=lambda i: (loads[i], i))
        assignment[case] = lightest + 1
        loads[lightest] += estimates[case]
    return ShardPlan(count, assignment, estimates, len(known))


def disagreements(what: str, shards: Sequence[tuple[str, Any]],
                  properties: Sequence[tuple[str, Callable[[Any], Any]]]) -> list[str]:
    """Where shard reports are not one run's: a line per property on which they differ.

    ``shards`` are ``(label, report)`` pairs; each property is ``(name, reader)``.
    Values are compared as canonical JSON. A merge refuses reports that disagree.
    """
    out = []
    for name, read in properties:
        values: dict[str, list[str]] = {}
        for label, report in shards:
            values.setdefault(json.dumps(read(report), sort_keys=True, ensure_ascii=False), []).append(label)
        if len(values) > 1:
            out.append(f"the {what} differ in {name}: " + "; ".join(
                f"{value} in {', '.join(labels)}" for value, labels in values.items()))
    return out


def find_folders(paths: Sequence[Path], name: str) -> list[Path]:
    """The folders named by ``paths`` that hold a file ``name``: each path that does, else every folder
    below it that does (downloaded CI artifacts nest them), in path order, each once."""
    found: list[Path] = []
    for path in paths:
        if (path / name).is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.rglob(name))
    return list(dict.fromkeys(found))


def one_per_shard(reports: Sequence[T], place: Callable[[T], Mapping[str, Any]], label: Callable[[T], str],
                  what: str) -> tuple[dict[int, T], list[str]]:
    """The first report given for each shard index, and a problem for each index given twice or missing.

    ``place`` reads a report's ``{"index", "count", ...}``; ``what`` names the shards' runs in the
    problems (they are shown to people, so say what is lost: "scenario runs", "tests").
    """
    problems: list[str] = []
    by_index: dict[int, T] = {}
    for report in reports:
        index = place(report)["index"]
        if index in by_index:
            problems.append(f"shard {index} is given twice: {label(by_index[index])} and {label(report)}; "
                            "the first is kept")
            continue
        by_index[index] = report
    for count in sorted({place(r)["count"] for r in reports}):
        missing = [k for k in range(1, count + 1) if k not in by_index]
        if missing:
            problems.append(f"shard{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))} of {count} "
                            f"missing: their {what} are not in this report")
    return dict(sorted(by_index.items())), problems


class MergeRefused(ValueError):
    """Shard reports that cannot be one run's: different suite, target, selection, shard count or plan."""


def refuse_unless_forced(what: str, shards: Sequence[tuple[str, Any]],
                         properties: Sequence[tuple[str, Callable[[Any], Any]]], *, force: bool) -> list[str]:
    """The :func:`disagreements` of ``shards``; raises :class:`MergeRefused` naming them unless ``force``
    (then they are returned, for the merged report to keep as warnings)."""
    found = disagreements(what, shards, properties)
    if found and not force:
        raise MergeRefused("; ".join(found) + " (--force merges them anyway)")
    return found


def coverage(ran: Sequence[tuple[int, Sequence[str]]], planned: Mapping[str, int], *, case: str,
             ran_nowhere: Callable[[str, int], str], excused: Callable[[str, int], bool] = lambda c, i: False
             ) -> tuple[dict[str, int], list[str]]:
    """Whether every planned case ran in exactly one shard.

    ``ran`` is each chosen shard's ``(index, cases)``; ``planned`` the plan's case -> shard index.
    Returns where each case ran (the first shard that ran it) and a problem for each case that ran in two
    shards (``case`` names it: "test X") and for each planned case that ran in none (``ran_nowhere``
    words it), unless ``excused`` (a shard that is missing is flagged once already; a case a shard could
    not run is said by that shard).
    """
    where: dict[str, int] = {}
    problems: list[str] = []
    for index, cases in ran:
        for name in cases:
            if name in where:
                problems.append(f"{case} {name} ran in shards {where[name]} and {index}; the first is kept")
                continue
            where[name] = index
    problems += [ran_nowhere(name, index) for name, index in sorted(planned.items())
                 if name not in where and not excused(name, index)]
    return where, problems


def load_durations(path: str | Path | None, suite: str) -> dict[str, float]:
    """The recorded durations of ``suite`` in ``path`` (default :data:`DEFAULT_DURATIONS`).

    A missing file means none are known; a file that is not such a JSON object
    raises :class:`ShardError` naming it (a silently ignored file would skew
    every split).
    """
    path = Path(path) if path is not None else DEFAULT_DURATIONS
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ShardError(f"durations file {path} is not JSON: {error}") from None
    table = document.get(suite, {}) if isinstance(document, dict) else None
    if not isinstance(table, dict) or not all(isinstance(v, (int, float)) for v in table.values()):
        raise ShardError(f"durations file {path}: {suite!r} must map case names to seconds")
    return {str(case): float(seconds) for case, seconds in table.items()}


def write_durations(path: Path, tables: Mapping[str, Mapping[str, float]]) -> Path:
    """Write ``{suite: {case: seconds}}`` (cases sorted, seconds rounded to milliseconds)."""
    document = {suite: {case: round(float(s), 3) for case, s in sorted(table.items())}
                for suite, table in sorted(tables.items()) if table}
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
