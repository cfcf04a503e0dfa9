"""From votes to a compliance verdict: each requirement's result, scores and exit status.

A requirement *fails* when any vote for it failed, *passes* when it has votes
and none failed, and is *not tested* otherwise — never passing. A failure every
one of whose votes is covered by the baseline (the requirement itself, or the
cases that failed) is an *expected failure*. A requirement whose only votes say an item stopped
before judging it, at failures that are all expected, is *blocked* by those
requirements: a baseline that excuses a prerequisite does not turn what
depends on it into a failure of the run. Blocked by a failure that is not
expected, it is *not tested*, as before (that failure already fails the run).

The run is compliant exactly when every selected MUST requirement passes or is
an expected failure, and the baseline holds: no entry is stale (it passes now)
or unknown. A blocked requirement is left out of the exit status. A deferred requirement, one ``verified_by`` the reference's own
tests, and one of a profile the run leaves out are never selected. SHOULD and
MAY failures are reported, not fatal.

The headline scores are over the profiles the run selected: every requirement
of a level in them, deferred and level- or pattern-unselected ones included,
so "not tested" always counts against the score. A requirement only the
reference's own tests can verify (``verified_by``: a Codex turn, an envelope a
model reads) is *verified by the reference only*: listed apart and never
counted, for the reference or any other implementation. Per-profile scores are
kept for every profile, a profile the run left out marked as such.

Scores are also kept per source (:attr:`Requirement.source_group`: JSON-RPC 2.0,
each MCP revision, the messaging contract) with a verdict each, so a report says
whether a server is MCP-conformant apart from whether it meets the contract. A
requirement whose every vote says it does not apply (an MCP rule of a revision
the server did not negotiate) is *not applicable*: listed, never scored. Votes
for a requirement the run did not select (a test that also judges a stricter
rule, say) are left out: an unselected requirement is never judged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Iterable

from .baseline import Baseline
from .manifest import PROFILES, Level, Manifest, Requirement, Selection
from .verdicts import Vote


class Result(enum.StrEnum):
    PASS = "pass"
    FAIL = "fail"
    NOT_TESTED = "not tested"
    EXPECTED_FAILURE = "expected failure"
    REFERENCE_ONLY = "verified by the reference only"
    """No black-box suite can observe it; the reference proves it in its own tests (``verified_by``)."""
    NOT_APPLICABLE = "not applicable"
    """The rule does not hold for this target (an MCP revision it did not negotiate); never scored."""
    BLOCKED = "blocked by baselined prerequisites"
    """Its test stopped at failures the baseline expects before it could judge it (``blocked_by`` names them)."""


UNSCORED = (Result.REFERENCE_ONLY, Result.NOT_APPLICABLE)
RAN = (Result.PASS, Result.FAIL, Result.EXPECTED_FAILURE)
"""The results of a requirement that was judged."""


SCORED_STATUSES = (0, 1, 5)
"""pytest exit statuses (ok, tests failed, no tests collected) after which the verdict decides the exit status."""


@dataclass(frozen=True)
class RequirementVerdict:
    requirement: Requirement
    result: Result
    selected: bool
    passes: int
    failures: tuple[Vote, ...]
    items: tuple[str, ...]
    baselined: str | None = None
    stale: bool = False
    notes: tuple[str, ...] = ()
    """What passing checks noted: a form the spec leaves to the server, and which one it used."""
    blocked_by: tuple[str, ...] = ()
    """For a blocked requirement, or one not tested because its prerequisites failed: those requirements."""


@dataclass(frozen=True)
class LevelScore:
    level: Level
    total: int
    passed: int
    failed: int
    expected_failures: int
    not_tested: int
    blocked: int = 0

    @property
    def score(self) -> float:
        return self.passed / self.total if self.total else 1.0


@dataclass(frozen=True)
class Compliance:
    verdicts: tuple[RequirementVerdict, ...]
    scores: dict[Level, LevelScore]
    profile_scores: dict[str, dict[Level, LevelScore]]
    problems: tuple[str, ...]
    warnings: tuple[str, ...]
    selection: Selection
    baseline: Baseline
    run_status: int | None = None
    source_scores: dict[str, dict[Level, LevelScore]] | None = None
    """Scores over the selected profiles, per source group (JSON-RPC 2.0, MCP <revision>, messaging contract)."""
    interrupted_by: str | None = None
    """The signal that ended the run before it finished (``SIGINT``, ``SIGTERM``, ``SIGHUP``), if one did."""

    @property
    def state(self) -> str:
        """``interrupted``, ``compliant`` or ``not compliant``: what the report says in one word or two."""
        if self.interrupted_by:
            return "interrupted"
        return "compliant" if self.ok else "not compliant"

    def source_verdicts(self) -> dict[str, bool]:
        """Per source group: whether it is conformant (:meth:`source_verdict`): every MUST of it in the selected
        profiles ran, and passed (or is an expected failure)."""
        groups = dict.fromkeys(v.requirement.source_group for v in self._scored_in_profiles())
        return {group: self.source_verdict(group) == "conformant" for group in groups}

    def source_verdict(self, group: str) -> str:
        """A source group's verdict in words, counting what ran: "NOT conformant" when a selected MUST failed or
        went untested, "conformant" when every MUST of the group in the selected profiles ran and passed, else
        "not judged (N of M MUSTs run)": a narrowed run is never called conformant."""
        musts = [v for v in self._scored_in_profiles()
                 if v.requirement.source_group == group and v.requirement.level is Level.MUST]
        if any(v.selected and v.result in (Result.FAIL, Result.NOT_TESTED) for v in musts):
            return "NOT conformant"
        ran = sum(v.selected and v.result in RAN for v in musts)
        return "conformant" if ran == len(musts) else f"not judged ({ran} of {len(musts)} MUSTs run)"

    def coverage(self) -> dict[Level, tuple[int, int]]:
        """Per level, over the selected profiles: (requirements that ran, requirements a run could judge)."""
        scored = self._scored_in_profiles()
        return {level: (sum(v.selected and v.result in RAN for v in mine), len(mine))
                for level in Level for mine in [[v for v in scored if v.requirement.level is level]]}

    def _scored_in_profiles(self) -> list[RequirementVerdict]:
        """The requirements a run of the selected profiles could judge (a deferred one has no test to run)."""
        return [v for v in self.verdicts if v.result not in UNSCORED and not v.requirement.deferred
                and v.requirement.profile in self.selection.profiles]

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def exit_status(self) -> int:
        return 0 if self.ok else 1

    @property
    def reference_only(self) -> tuple[RequirementVerdict, ...]:
        """The requirements only the reference's own tests verify: listed apart, never scored."""
        return tuple(v for v in self.verdicts if v.result is Result.REFERENCE_ONLY)

    def after_run(self, pytest_status: int) -> "Compliance":
        """This verdict for a run that pytest ended with ``pytest_status``.

        A run that pytest could not finish (interrupted, internal or usage
        error) proves nothing: it is not compliant, and keeps pytest's status.
        """
        if pytest_status in SCORED_STATUSES:
            return self
        return replace(self, problems=(*self.problems, f"the run did not finish (pytest exit status {pytest_status})"),
                       run_status=pytest_status)

    def interrupted(self, signal_name: str, status: int) -> "Compliance":
        """This verdict for a run a signal ended: what ran is judged as usual; what did not is listed as not
        tested but is no reason of its own (the run stopped), and the exit status is ``status``."""
        selected = [v for v in self.verdicts if v.selected]
        not_run = [v for v in selected if v.result is Result.NOT_TESTED]
        unrun = {_not_tested(v.requirement) for v in not_run}
        head = (f"the run was interrupted by {signal_name}: {len(selected) - len(not_run)} of {len(selected)} "
                f"selected requirements ran, {len(not_run)} did not (listed as not tested)")
        return replace(self, problems=(head, *(p for p in self.problems if p not in unrun)), run_status=status,
                       interrupted_by=signal_name)

    @property
    def final_status(self) -> int:
        """The run's exit status: pytest's when the run broke, else the verdict's."""
        return self.run_status if self.run_status is not None else self.exit_status

    def verdict(self, requirement_id: str) -> RequirementVerdict:
        for v in self.verdicts:
            if v.requirement.id == requirement_id:
                return v
        raise KeyError(requirement_id)


def judge(manifest: Manifest, votes: Iterable[Vote], selection: Selection, baseline: Baseline,
          known_cases: Iterable[str]) -> Compliance:
    """The compliance verdict of a run that cast ``votes``."""
    votes = list(votes)
    by_requirement: dict[str, list[Vote]] = {}
    for vote in votes:
        by_requirement.setdefault(vote.requirement, []).append(vote)
    failed_cases = {v.case for v in votes if v.case and not v.passed}
    passed_cases = {v.case for v in votes if v.case} - failed_cases

    verdicts = []
    problems: list[str] = []
    warnings: list[str] = []
    for req in manifest:
        selected = selection.includes(req) and not req.outside_suite
        own = by_requirement.get(req.id, []) if selected else []
        stopped = [v for v in own if v.blocked_by]
        own = [v for v in own if not v.blocked_by]
        applicable = [v for v in own if v.applicable]
        failures = tuple(v for v in applicable if not v.passed)
        baselined = baseline.comment(req.id)
        if failures:
            covered = baselined is not None or all(v.case in baseline for v in failures)
            result = Result.EXPECTED_FAILURE if covered else Result.FAIL
        elif req.verified_by and not own:
            result = Result.REFERENCE_ONLY
        elif own and not applicable:
            result = Result.NOT_APPLICABLE
        else:
            result = Result.PASS if own else Result.NOT_TESTED
        stale = baselined is not None and result is Result.PASS
        blockers = tuple(dict.fromkeys(r for v in stopped for r in v.blocked_by)) if result is Result.NOT_TESTED \
            else ()
        verdicts.append(RequirementVerdict(
            requirement=req, result=result, selected=selected, passes=len(applicable) - len(failures),
            failures=failures, items=tuple(dict.fromkeys(v.item for v in own + stopped)), baselined=baselined,
            stale=stale, blocked_by=blockers,
            notes=tuple(dict.fromkeys(v.detail for v in applicable if v.passed and v.detail))))
    verdicts = _blocked(verdicts)

    for verdict in verdicts:
        req, result, failures, selected = verdict.requirement, verdict.result, verdict.failures, verdict.selected
        if selected and req.level is Level.MUST and result is Result.FAIL:
            problems.append(f"MUST {req.id} failed: {_first(failures)}")
        elif selected and req.level is Level.MUST and result is Result.NOT_TESTED:
            problems.append(_not_tested(req, verdict.blocked_by))
        elif selected and result is Result.FAIL:
            warnings.append(f"{req.level.name} {req.id} failed: {_first(failures)}")
        if verdict.stale:
            problems.append(f"baseline entry {req.id} is stale: it passes now; remove it")

    known_cases = set(known_cases)
    for entry in baseline:
        if entry.key in manifest:
            continue
        if entry.key not in known_cases:
            problems.append(f"baseline entry {entry.key!r} (line {entry.line}) names no requirement or case")
        elif entry.key in passed_cases:
            problems.append(f"baseline entry {entry.key} is stale: the case passes now; remove it")

    scored = [v for v in verdicts if v.result not in UNSCORED]
    in_profiles = [v for v in scored if v.requirement.profile in selection.profiles]
    groups = dict.fromkeys(v.requirement.source_group for v in in_profiles)
    return Compliance(verdicts=tuple(verdicts),
                      scores=_scores(in_profiles),
                      profile_scores={p: _scores([v for v in scored if v.requirement.profile == p])
                                      for p in PROFILES},
                      problems=tuple(problems), warnings=tuple(warnings), selection=selection, baseline=baseline,
                      source_scores={g: _scores([v for v in in_profiles if v.requirement.source_group == g])
                                     for g in sorted(groups, key=_group_order)})


def _blocked(verdicts: list[RequirementVerdict]) -> list[RequirementVerdict]:
    """``verdicts`` with each requirement left untested only by expected failures marked blocked."""
    results = {v.requirement.id: v.result for v in verdicts}
    return [replace(v, result=Result.BLOCKED)
            if v.blocked_by and all(results.get(r) is Result.EXPECTED_FAILURE for r in v.blocked_by) else v
            for v in verdicts]


def _not_tested(requirement: Requirement, blocked_by: tuple[str, ...] = ()) -> str:
    return (f"MUST {requirement.id} was not tested"
            + (f": its test stopped at the failure of {', '.join(blocked_by)}" if blocked_by else ""))


def _group_order(group: str) -> tuple[int, str]:
    """JSON-RPC 2.0 first, then MCP by revision, then the messaging contract."""
    return ({"JSON-RPC 2.0": 0, "messaging contract": 2}.get(group, 1), group)


def _scores(verdicts: list[RequirementVerdict]) -> dict[Level, LevelScore]:
    scores = {}
    for level in Level:
        mine = [v for v in verdicts if v.requirement.level is level]
        scores[level] = LevelScore(
            level=level, total=len(mine),
            passed=sum(v.result is Result.PASS for v in mine),
            failed=sum(v.result is Result.FAIL for v in mine),
            expected_failures=sum(v.result is Result.EXPECTED_FAILURE for v in mine),
            not_tested=sum(v.result is Result.NOT_TESTED for v in mine),
            blocked=sum(v.result is Result.BLOCKED for v in mine))
    return scores


def _first(failures: tuple[Vote, ...]) -> str:
    vote = failures[0]
    where = f"{vote.case or vote.item}" + (f" step {vote.step}" if vote.step else "")
    detail = f" ({vote.detail})" if vote.detail else ""
    return f"{where}: expected {vote.check}{detail}"[:400]
