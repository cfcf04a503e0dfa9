"""Judging a run: results per requirement, the baseline, scores and the exit status."""

from __future__ import annotations

import pytest

from harness.contract.baseline import Baseline, BaselineError, parse_baseline
from harness.contract.compliance import Result, judge
from harness.contract.manifest import Level, Manifest, Requirement, Selection
from harness.contract.report import compliance_document, render_markdown
from harness.contract.verdicts import ItemInfo, Vote, blocked_votes

MANIFEST = Manifest((
    Requirement("a:must", Level.MUST, "contracts/SPEC.md#wire", "A must."),
    Requirement("b:must", Level.MUST, "contracts/SPEC.md#wire", "B must."),
    Requirement("c:should", Level.SHOULD, "contracts/SPEC.md#wire", "C should."),
    Requirement("d:may", Level.MAY, "contracts/SPEC.md#wire", "D may."),
    Requirement("e:must:deferred", Level.MUST, "contracts/SPEC.md#wire", "E later.", deferred="needs a provider"),
    Requirement("f:must:elsewhere", Level.MUST, "contracts/SPEC.md#wire", "F live.", verified_by="tests/codex/test_x.py"),
    Requirement("collab:g:must", Level.MUST, "contracts/SPEC.md#wire", "G in the tree."),
))
CASES = ["suite/a-case", "suite/b-case"]


def vote(requirement: str, passed: bool, case: str | None = None) -> Vote:
    return Vote(requirement=requirement, passed=passed, check="something holds", item=f"item-{requirement}",
                case=case, detail=None if passed else "it did not")


def run(votes, selection=Selection(), baseline=Baseline()):
    return judge(MANIFEST, votes, selection, baseline, CASES)


ALL_PASS = [vote("a:must", True), vote("b:must", True), vote("c:should", True), vote("d:may", True),
            vote("collab:g:must", True)]


def test_all_selected_musts_passing_is_compliant():
    compliance = run(ALL_PASS)
    assert compliance.ok and compliance.exit_status == 0
    assert compliance.verdict("a:must").result is Result.PASS


def test_one_failing_vote_fails_the_requirement_and_the_run():
    compliance = run(ALL_PASS + [vote("b:must", False, "suite/b-case")])
    assert compliance.verdict("b:must").result is Result.FAIL
    assert compliance.exit_status == 1
    assert any("b:must" in p and "suite/b-case" in p for p in compliance.problems)


def test_not_tested_never_passes():
    compliance = run([vote("a:must", True)])
    assert compliance.verdict("b:must").result is Result.NOT_TESTED
    assert "MUST b:must was not tested" in compliance.problems
    # deferred counts against the score; verified_by is the reference's alone and is not counted
    assert compliance.scores[Level.MUST].score == pytest.approx(1 / 4)


def test_deferred_and_unselected_requirements_do_not_fail_the_run():
    compliance = run([vote("a:must", True)], selection=Selection(Level.MUST, ("a",)))
    assert compliance.ok, compliance.problems
    assert not compliance.verdict("e:must:deferred").selected
    assert compliance.verdict("b:must").result is Result.NOT_TESTED


def test_verified_by_requirements_are_listed_apart_and_never_scored():
    compliance = run(ALL_PASS)
    verdict = compliance.verdict("f:must:elsewhere")
    assert verdict.result is Result.REFERENCE_ONLY and not verdict.selected
    assert compliance.reference_only == (verdict,)
    assert compliance.ok, compliance.problems
    must = compliance.scores[Level.MUST]
    assert (must.passed, must.not_tested, must.total) == (3, 1, 4), "only the deferred one counts against"


def test_the_headline_score_is_over_the_selected_profiles():
    messaging_only = Selection(profiles=("messaging",))
    compliance = run([v for v in ALL_PASS if v.requirement != "collab:g:must"], selection=messaging_only)
    must = compliance.scores[Level.MUST]
    assert (must.passed, must.total) == (2, 3), "a.b pass; e is deferred; f and the collab profile are not counted"
    assert compliance.profile_scores["collab"][Level.MUST].total == 1


@pytest.mark.parametrize("pytest_status, final, ok", [(0, 0, True), (1, 0, True), (5, 0, True), (2, 2, False),
                                                      (3, 3, False), (4, 4, False)])
def test_the_final_status_is_the_verdicts_unless_the_run_broke(pytest_status, final, ok):
    compliance = run(ALL_PASS).after_run(pytest_status)
    assert compliance.final_status == final and compliance.ok is ok
    failing = run(ALL_PASS + [vote("b:must", False)]).after_run(pytest_status)
    assert failing.final_status == (1 if pytest_status in (0, 1, 5) else pytest_status) and not failing.ok


def test_a_profile_left_out_is_not_tested_and_scored_apart():
    messaging_only = Selection(profiles=("messaging",))
    compliance = run([v for v in ALL_PASS if v.requirement != "collab:g:must"], selection=messaging_only)
    assert compliance.ok, compliance.problems
    collab = compliance.verdict("collab:g:must")
    assert collab.result is Result.NOT_TESTED and not collab.selected
    assert compliance.profile_scores["collab"][Level.MUST].not_tested == 1
    assert compliance.profile_scores["collab"][Level.MUST].score == 0
    assert compliance.profile_scores["messaging"][Level.MUST].passed == 2
    # selected, the same profile's untested MUST fails the run
    assert "MUST collab:g:must was not tested" in run(ALL_PASS[:4]).problems


def test_should_failures_warn_but_do_not_fail():
    compliance = run([v for v in ALL_PASS if v.requirement != "c:should"] + [vote("c:should", False)])
    assert compliance.ok
    assert compliance.verdict("c:should").result is Result.FAIL
    assert any("c:should" in w for w in compliance.warnings)


def test_level_selection_includes_stricter_levels():
    selection = Selection(Level.SHOULD)
    assert selection.includes(MANIFEST["a:must"]) and selection.includes(MANIFEST["c:should"])
    assert not selection.includes(MANIFEST["d:may"])
    assert Selection(patterns=("a",)).includes(MANIFEST["a:must"])
    assert not Selection(patterns=("a",)).includes(MANIFEST["b:must"])
    assert Selection(patterns=("*:must",)).includes(MANIFEST["b:must"])
    assert MANIFEST["collab:g:must"].profile == "collab" and MANIFEST["a:must"].profile == "messaging"
    assert not Selection(profiles=("messaging",)).includes(MANIFEST["collab:g:must"])
    assert Selection(profiles=("collab",)).includes(MANIFEST["collab:g:must"])


def test_a_baselined_requirement_is_an_expected_failure():
    baseline = parse_baseline("b:must  # known gap\n")
    compliance = run(ALL_PASS + [vote("b:must", False)], baseline=baseline)
    verdict = compliance.verdict("b:must")
    assert verdict.result is Result.EXPECTED_FAILURE and verdict.baselined == "known gap"
    assert compliance.ok


def test_a_baselined_case_covers_only_its_own_failures():
    baseline = parse_baseline("suite/b-case  # flaky fixture\n")
    covered = run(ALL_PASS + [vote("b:must", False, "suite/b-case")], baseline=baseline)
    assert covered.verdict("b:must").result is Result.EXPECTED_FAILURE and covered.ok
    uncovered = run(ALL_PASS + [vote("b:must", False, "suite/b-case"), vote("b:must", False, "suite/a-case")],
                    baseline=baseline)
    assert uncovered.verdict("b:must").result is Result.FAIL and not uncovered.ok


def test_a_baselined_requirement_that_passes_is_stale_and_fails_the_run():
    compliance = run(ALL_PASS, baseline=parse_baseline("a:must  # used to fail\n"))
    assert compliance.verdict("a:must").stale
    assert any("stale" in p and "a:must" in p for p in compliance.problems)


def test_a_baselined_case_that_passes_is_stale():
    compliance = run(ALL_PASS + [vote("b:must", True, "suite/b-case")],
                     baseline=parse_baseline("suite/b-case  # used to fail\n"))
    assert any("stale" in p and "suite/b-case" in p for p in compliance.problems)


def test_unknown_baseline_entries_fail_the_run():
    compliance = run(ALL_PASS, baseline=parse_baseline("no:such:thing  # typo\n"))
    assert any("no:such:thing" in p for p in compliance.problems)


@pytest.mark.parametrize("text, complaint", [
    ("a:must\n", "needs a comment"),
    ("a:must   #   \n", "needs a comment"),
    ("a:must b:must  # two\n", "one requirement or case a line"),
    ("a:must  # one\na:must  # again\n", "already listed on line 1"),
])
def test_malformed_baselines_are_refused(text, complaint):
    with pytest.raises(BaselineError, match=complaint):
        parse_baseline(text)


def test_baseline_comments_and_blank_lines_are_ignored():
    baseline = parse_baseline("# header\n\n  a:must   # reason with # inside\n")
    assert [e.key for e in baseline] == ["a:must"] and baseline.comment("a:must") == "reason with # inside"


def test_a_narrowed_run_is_never_called_conformant():
    """Three MUSTs of one source a run can judge (a fourth is deferred), one selected and passing: the verdict counts what ran, and says so."""
    narrowed = run([vote("a:must", True)], selection=Selection(patterns=("a",)))
    group = MANIFEST["a:must"].source_group
    assert narrowed.source_verdict(group) == "not judged (1 of 3 MUSTs run)"
    assert narrowed.source_verdicts()[group] is False
    assert narrowed.coverage()[Level.MUST] == (1, 3)
    nothing = run([], selection=Selection(patterns=("c",)))
    assert nothing.source_verdict(group) == "not judged (0 of 3 MUSTs run)"
    whole = run(ALL_PASS)
    assert whole.source_verdict(group) == "conformant", "a deferred MUST has no test any run could judge"
    assert whole.coverage()[Level.MUST] == (3, 3)
    failing = run(ALL_PASS + [vote("b:must", False, "suite/b-case")], selection=Selection(patterns=("b",)))
    assert failing.source_verdict(group) == "NOT conformant"


def test_a_passing_check_notes_the_form_it_saw():
    noted = Vote(requirement="a:must", passed=True, check="an error id", item="item-a", detail="id omitted ×3")
    compliance = run([noted, vote("a:must", True)])
    assert compliance.verdict("a:must").result is Result.PASS
    assert compliance.verdict("a:must").notes == ("id omitted ×3",)


def test_a_narrowed_run_says_in_its_report_how_much_ran():
    narrowed = run([vote("a:must", True)], selection=Selection(patterns=("a",)))
    document = compliance_document(narrowed, target={"server_cmd": ["x"]}, tests={})
    assert document["verdict"]["ran"]["MUST"] == {"ran": 1, "of": 3}
    assert "- Judged over what ran only: 1 of 3 MUSTs" in render_markdown(document)
    whole = compliance_document(run(ALL_PASS), target={"server_cmd": ["x"]}, tests={})
    assert "Judged over what ran only" not in render_markdown(whole)


# -- requirements an item never reached: blocked by baselined prerequisites ----------------------

def stopped_at(failed: str, unreached: str) -> list[Vote]:
    """What an item declaring ``failed`` then ``unreached`` casts when it stops at ``failed``."""
    info = ItemInfo(item="item-two", requirement=failed, also=(unreached,))
    cast = [Vote(requirement=failed, passed=False, check="the test passes", item=info.item, detail="stopped")]
    return cast + blocked_votes(info, cast)


def test_a_failed_item_votes_blocked_only_for_what_it_never_judged():
    info = ItemInfo(item="item-two", requirement="a:must", also=("b:must", "c:should"))
    cast = [Vote("a:must", False, "x", item="item-two"), Vote("c:should", True, "y", item="item-two")]
    [blocked] = blocked_votes(info, cast)
    assert (blocked.requirement, blocked.blocked_by) == ("b:must", ("a:must",))
    assert Vote.from_json(blocked.to_json()) == blocked, "blocked votes cross xdist workers and shard reports"
    assert blocked_votes(info, [Vote("a:must", True, "x"), Vote("b:must", True, "x")]) == []


def test_a_requirement_blocked_by_a_baselined_failure_leaves_the_run_green():
    votes = [v for v in ALL_PASS if v.requirement not in ("a:must", "b:must")] + stopped_at("a:must", "b:must")
    compliance = run(votes, baseline=parse_baseline("a:must  # our SDK drops it\n"))
    blocked = compliance.verdict("b:must")
    assert blocked.result is Result.BLOCKED and blocked.blocked_by == ("a:must",)
    assert compliance.verdict("a:must").result is Result.EXPECTED_FAILURE
    assert compliance.ok and compliance.exit_status == 0, compliance.problems
    must = compliance.scores[Level.MUST]
    assert (must.blocked, must.passed, must.not_tested) == (1, 1, 1), "blocked still counts against the score"


def test_a_requirement_blocked_by_an_unexpected_failure_is_not_tested():
    votes = [v for v in ALL_PASS if v.requirement not in ("a:must", "b:must")] + stopped_at("a:must", "b:must")
    compliance = run(votes)
    assert compliance.verdict("b:must").result is Result.NOT_TESTED
    assert "MUST b:must was not tested: its test stopped at the failure of a:must" in compliance.problems
    assert compliance.exit_status == 1


def test_another_vote_decides_over_a_blocked_one():
    passed = run([v for v in ALL_PASS if v.requirement != "a:must"] + stopped_at("a:must", "b:must"),
                 baseline=parse_baseline("a:must  # known\n"))
    assert passed.verdict("b:must").result is Result.PASS and passed.ok
    failed = run([v for v in ALL_PASS if v.requirement not in ("a:must", "b:must")] + stopped_at("a:must", "b:must")
                 + [vote("b:must", False)], baseline=parse_baseline("a:must  # known\n"))
    assert failed.verdict("b:must").result is Result.FAIL and not failed.ok


def test_a_stale_entry_still_fails_when_something_is_blocked():
    votes = [v for v in ALL_PASS if v.requirement not in ("a:must", "b:must")] + stopped_at("a:must", "b:must")
    compliance = run(votes, baseline=parse_baseline("a:must  # known\nc:should  # used to fail\n"))
    assert compliance.verdict("b:must").result is Result.BLOCKED
    assert any("stale" in p and "c:should" in p for p in compliance.problems) and compliance.exit_status == 1
