"""StepRunner: a step that fails because the run was stopped under it says so."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness.lab.driver import CoreRefused
from harness.acceptance.scenario import Step
from harness.acceptance.steps import StepFailed, StepRunner
from harness.lab.live import LabHalted

PROMPT = Step(3, "prompt", {"agent": "B"})


def runner(halted: str | None, error: Exception) -> StepRunner:
    steps = StepRunner(SimpleNamespace(steps=[PROMPT]), "attached", SimpleNamespace(halted=halted),  # type: ignore[arg-type]
                       SimpleNamespace(), SimpleNamespace())  # type: ignore[arg-type]

    def fail(step: Step) -> None:
        raise error

    steps._actions["prompt"] = fail
    return steps


@pytest.mark.parametrize("error", [CoreRefused({"code": "internal", "message": "AppServerExited"}),
                                   TimeoutError("no answer"), StepFailed("step 4 (prompt agent=B): refused")])
def test_a_step_that_fails_after_the_run_was_halted_names_the_halt(error: Exception) -> None:
    with pytest.raises(LabHalted) as halted:
        runner("A reached the cap of 1 model requests", error).run()
    message = str(halted.value)
    assert message.startswith("step 4 (prompt agent=B): the run was stopped (A reached the cap of 1 model requests)")
    assert type(error).__name__ in message and str(error) in message  # what the step itself saw is kept


def test_a_step_that_fails_on_its_own_is_a_step_failure() -> None:
    with pytest.raises(StepFailed, match=r"^step 4 \(prompt agent=B\): CoreRefused: internal: AppServerExited$"):
        runner(None, CoreRefused({"code": "internal", "message": "AppServerExited"})).run()
