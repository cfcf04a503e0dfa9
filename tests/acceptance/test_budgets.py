"""Trials, request caps and usage: what a real-provider run costs and how often it passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.acceptance.execution import RunSettings, run_scenario
from harness.acceptance.progress import Progress
from harness.acceptance.scenario import discover
from harness.acceptance.trials import pass_rates
from harness.codex.install import locate_codex
from harness.evidence.rollouts import Location, RolloutLine
from harness.evidence.usage import UNVERIFIED, usage_of


def _result(name: str, trial: int, passed: bool, failing: str | None = None) -> dict:
    checks = [{"id": "a", "verdict": "pass"}, {"id": "b", "verdict": "fail" if failing == "b" else "pass"}]
    return {"name": name, "mode": "attached", "provider": "openai", "trial": trial, "passed": passed,
            "checks": checks}


def test_pass_rates_group_trials_by_run_identity_and_name_each_check() -> None:
    results = [_result("smoke", 1, True), _result("smoke", 2, False, "b"), _result("smoke", 3, True),
               _result("negative", 1, True), _result("negative", 2, True), _result("negative", 3, True)]
    rates = pass_rates(results, 3, 0.6)
    smoke, negative = rates["rates"]
    assert smoke["label"] == "smoke · attached · openai" and (smoke["runs"], smoke["passed"]) == (3, 2)
    assert smoke["rate"] == pytest.approx(2 / 3, abs=1e-3) and smoke["checks"]["b"] == pytest.approx(2 / 3, abs=1e-3)
    assert negative["rate"] == 1 and rates["met"] is True
    # the bound is inclusive and every scenario run must meet it
    assert pass_rates(results, 3, 0.67)["met"] is False
    assert pass_rates(results, 3, 2 / 3 - 1e-9)["met"] is True


def _line(n: int, record_type: str, payload: dict) -> RolloutLine:
    return RolloutLine(Location("rollouts/A/r.jsonl", n), None, record_type, payload, "t", "u")


def test_usage_sums_what_codex_recorded_per_response_and_keeps_model_and_effort() -> None:
    usage = {"input_tokens": 100, "cached_input_tokens": 60, "output_tokens": 7, "reasoning_output_tokens": 3}
    lines = [
        _line(1, "turn_context", {"model": "m1", "effort": "low"}),
        _line(2, "event_msg", {"type": "token_count", "info": {"last_token_usage": usage}}),
        _line(3, "event_msg", {"type": "token_count", "info": None}),  # a rate-limit update: no response
        _line(4, "event_msg", {"type": "token_count", "info": {"last_token_usage": usage}}),
        _line(5, "turn_context", {"model": "m1", "effort": "high"}),
    ]
    assert usage_of(lines) == {"model_requests": 2, "input_tokens": 200, "cached_input_tokens": 120,
                               "output_tokens": 14, "reasoning_output_tokens": 6, "models": ["m1"],
                               "reasoning_efforts": ["low", "high"]}
    assert usage_of([])["reasoning_efforts"] == [UNVERIFIED]


@pytest.mark.codex
def test_a_request_cap_stops_the_run_cleanly_and_names_the_cap(tmp_path: Path) -> None:
    (smoke,) = [s for s in discover() if s.name == "smoke"]
    settings = RunSettings(codex=locate_codex(), homes_root=tmp_path / "homes", artifacts_root=tmp_path / "artifacts",
                           max_requests=1)
    result = run_scenario(smoke, "attached", settings, progress=Progress("smoke", quiet=True))
    checks = {check["id"]: check for check in result["checks"]}
    assert not result["passed"]
    assert checks["max-requests"]["verdict"] == "fail"
    assert "cap of 1 model requests" in checks["max-requests"]["summary"]
    assert "A reached" in checks["max-requests"]["summary"]
    # stopped, never timed out: either a waiting step ended because the run was halted at the cap, or the
    # steps had all completed before the request over the cap arrived (A's tool call admits the record the
    # steps wait for; whether its next request comes before they see it is a race the cap does not decide)
    steps = checks["steps-completed"]["summary"]
    assert "reached the cap" in steps or "detached" in steps or steps == "all steps of the attached run completed", steps
    # what was made is still recorded, from A's rollout (a request already in flight when the cap was seen
    # may complete: the cap stops the run, it cannot recall a request)
    assert result["usage"]["agents"]["A"]["model_requests"] >= 1
