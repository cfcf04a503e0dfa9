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


class OneStore:
    """A lab whose core is a real store: its export is the store's, and ``await_core`` asks once, lets the
    recipient receive (if told to), then asks again: a wait that returned on its first answer ignored what it
    waits for."""

    def __init__(self, tmp_path, *, then_receive: bool):
        from peerwire.store import Store
        self.store = Store(tmp_path / "peerwire.db")
        self.a, _ = self.store.registry.register_agent("A", "manual")
        self.b, _ = self.store.registry.register_agent("B", "manual")
        self.sent = self.store.mailbox.admit_information(self.a, self.b, "the record")
        self.then_receive = then_receive
        self.answers: list[object] = []
        self.halted = None

    def export(self):
        from peerwire import export
        return export.of_store(self.store)

    def await_core(self, reached, timeout_s, what):
        self.answers.append(reached())
        if self.then_receive:
            self.store.mailbox.receive(self.b, limit=10)
        self.answers.append(reached())
        if self.answers[-1] is None:
            raise TimeoutError(what)
        return self.answers[-1]


def await_received(lab: OneStore) -> None:
    from harness.acceptance.observations import RunnerView
    step = Step(0, "await_record", {"record": {"kind": "information", "sender": "A", "recipient": "B", "nth": 1},
                                    "state": "admitted", "received": True})
    steps = StepRunner(SimpleNamespace(steps=[step]), "attached", lab,  # type: ignore[arg-type]
                       RunnerView(agents={"A": lab.a.agent_id, "B": lab.b.agent_id}),
                       SimpleNamespace(say=lambda *_: None))  # type: ignore[arg-type]
    steps.run()


def test_a_record_awaited_as_received_is_not_reached_until_its_recipient_received_it(tmp_path) -> None:
    lab = OneStore(tmp_path, then_receive=True)
    try:
        await_received(lab)
        first, second = lab.answers
        assert first is None, "admitted, not yet received: the wait must go on"
        assert second is not None and second["record_id"] == lab.sent["interaction_id"]
        assert second["received_at"] is not None
    finally:
        lab.store.close()


def test_a_record_never_received_fails_the_step_saying_what_it_waited_for(tmp_path) -> None:
    lab = OneStore(tmp_path, then_receive=False)
    try:
        with pytest.raises(StepFailed, match=r"stayed admitted, never admitted and received$"):
            await_received(lab)
    finally:
        lab.store.close()
