"""Driving a scenario: each ``[[steps]]`` entry becomes an action on the live lab.

Steps only act and wait; they never judge the exchange (the checks do, from
the records afterwards). A step fails with :class:`StepFailed` when it
cannot do its part: a turn that ends otherwise than expected, a hold that is
never reached, a tool that fails unexpectedly or does not fail as expected.
Every wait is bounded by the step's ``timeout_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from harness.lab.live import TURN_TIMEOUT_S, CodexLab, LabHalted
from harness.evidence.core import CoreEvidence

from harness.lab.driver import CoreRefused
from .observations import EvidenceMissing, RunnerView, select_record
from .progress import Progress
from .scenario import Scenario, Step


class StepFailed(RuntimeError):
    """A step could not do its part; the message names the step."""


class StepRunner:
    """Runs a scenario's steps for one mode against a started lab, recording what it saw in ``view``."""

    def __init__(self, scenario: Scenario, mode: str, lab: CodexLab, view: RunnerView, progress: Progress):
        self.scenario = scenario
        self.mode = mode
        self.lab = lab
        self.view = view
        self.progress = progress
        self.prompts_sent: dict[str, list[str]] = {}
        self.tool_calls: list[dict[str, Any]] = []
        """The runner's own tool calls (``tool`` steps): records they admit were made by no model."""
        self._turn_numbers: dict[str, int] = {}
        self._actions: dict[str, Callable[[Step], None]] = {
            "prompt": self._prompt, "await_turn": self._await_turn, "await_hold": self._await_hold,
            "release": self._release, "observe_turn": self._observe_turn, "tool": self._tool,
            "await_record": self._await_record, "await_model": self._await_model, "detach": self._detach,
            "attach": self._attach, "await_task_turn": self._await_task_turn,
        }

    def run(self) -> None:
        """Run every step that applies to the mode and fits the agents' kinds (``needs``, ``lacks``), in order;
        the first failure stops the run."""
        kinds = {name: agent.kind for name, agent in getattr(self.lab, "kinds", {}).items()}
        for step in self.scenario.steps:
            if step.applies(self.mode) and not step.fits(kinds):
                self.progress.say(f"{step.describe()} not run: it is for agents that "
                                  + " and ".join([*(f"{a} can {c}" for a, c in step.needs.items()),
                                                  *(f"{a} cannot {c}" for a, c in step.lacks.items())]))
                continue
            if step.applies(self.mode):
                try:
                    self._actions[step.do](step)
                except (StepFailed, CoreRefused, TimeoutError, KeyError) as error:
                    if self.lab.halted is not None:
                        # The run was stopped under the step (a request cap detaches every agent): that is
                        # why it failed, whatever the call it was making reported.
                        raise LabHalted(f"{step.describe()}: the run was stopped ({self.lab.halted}); the step "
                                        f"ended with {type(error).__name__}: {error}") from error
                    if isinstance(error, StepFailed):
                        raise
                    raise StepFailed(f"{step.describe()}: {type(error).__name__}: {error}") from error

    # -- turns ------------------------------------------------------------------------------

    def _prompt(self, step: Step) -> None:
        agent = step.params["agent"]
        sent = self.prompts_sent.setdefault(agent, [])
        text = self.scenario.prompts[agent][len(sent)]
        number = self._turn_numbers[agent] = self._turn_numbers.get(agent, 0) + 1
        label = step.params.get("turn", f"{agent}{number}")
        turn_id = self.lab.prompt(agent, text)
        sent.append(text)
        self.view.turns[label] = {"agent": agent, "turn_id": turn_id, "status": None, "number": number}
        self.progress.say(f"{agent}: turn {number} started ({label}, {turn_id})")

    def _await_turn(self, step: Step) -> None:
        label = step.params["turn"]
        turn = self._turn(label, step)
        expected = step.params.get("status", "completed")
        outcome = self.lab.await_turn(turn["agent"], turn["turn_id"], timeout_s=self._timeout(step))
        turn["status"] = outcome["status"]
        self.progress.say(f"{turn['agent']}: turn {label} {outcome['status']}")
        if outcome["status"] != expected:
            raise StepFailed(f"{step.describe()}: turn {label} ended {outcome['status']}, expected {expected}")

    def _await_task_turn(self, step: Step) -> None:
        selector = step.params["record"]
        deadline = time.monotonic() + self._timeout(step)
        found: dict[str, Any] = {}

        def bound() -> bool:
            core = self._core()
            try:
                task = select_record(core.records, selector, self.view)
            except EvidenceMissing:
                return False
            binding = next(iter(core.bindings_of(task["request_id"])), None)
            found.update(task=task, binding=binding)
            return binding is not None

        try:
            self.lab.await_core(bound, self._timeout(step), f"the binding of task {selector}")
        except TimeoutError:
            raise StepFailed(f"{step.describe()}: task {selector} was never bound to a turn") from None
        task, binding = found["task"], found["binding"]
        agent = next(name for name, agent_id in self.view.agents.items() if agent_id == binding["agent_id"])
        label = step.params.get("turn", f"task:{task['request_id']}")
        self.view.turns[label] = {"agent": agent, "turn_id": binding["turn_id"], "status": None}
        outcome = self.lab.await_turn(agent, binding["turn_id"], timeout_s=max(1.0, deadline - time.monotonic()))
        self.view.turns[label]["status"] = outcome["status"]
        self.progress.say(f"{agent}: task turn {label} {outcome['status']}")
        expected = step.params.get("status", "completed")
        if outcome["status"] != expected:
            raise StepFailed(f"{step.describe()}: task turn ended {outcome['status']}, expected {expected}")

    def _observe_turn(self, step: Step) -> None:
        agent, label = step.params["agent"], step.params["turn"]
        owner = self.lab.owner(agent)
        if owner is None or owner["active_turn"] is None:
            raise StepFailed(f"{step.describe()}: {agent} has no active turn to observe")
        self.view.turns[label] = {"agent": agent, "turn_id": owner["active_turn"], "status": None}
        self.progress.say(f"{agent}: observed active turn {label} ({owner['active_turn']})")

    # -- the scripted model ------------------------------------------------------------------

    def _await_hold(self, step: Step) -> None:
        self._require_scripted(step)
        exchange = self.lab.model.wait_for_hold(step.params["hold"], timeout=self._timeout(step))
        self.progress.say(f"{exchange.agent}: model request {exchange.seq} held at {step.params['hold']}")

    def _release(self, step: Step) -> None:
        self._require_scripted(step)
        waiting = self.lab.model.release(step.params["hold"])
        self.progress.say(f"released hold {step.params['hold']} ({waiting} waiting)")

    def _await_model(self, step: Step) -> None:
        self._require_scripted(step)
        agent, rule, count = step.params["agent"], step.params["rule"], step.params.get("count", 1)
        model = self.lab.model

        def reached(exchange: Any) -> bool:
            if exchange.agent != agent or exchange.rule_id != rule:
                return False
            same = [e for e in model.exchanges if e.agent == agent and e.rule_id == rule and e.outcome != "pending"]
            return len(same) >= count

        exchange = model.wait_for_exchange(reached, timeout=self._timeout(step))
        self.progress.say(f"{agent}: model answered with rule {rule} (request {exchange.seq})")

    # -- tools and records ------------------------------------------------------------------

    def _tool(self, step: Step) -> None:
        agent, tool = step.params["agent"], step.params["tool"]
        expected = step.params.get("error")
        label = step.params.get("record")
        call = {"step": step.index + 1, "agent": agent, "tool": tool, "arguments": dict(step.params["arguments"]),
                "result": None, "error": None}
        self.tool_calls.append(call)
        try:
            result = self.lab.call_tool(agent, tool, step.params["arguments"], self._timeout(step))
        except CoreRefused as error:
            call["error"] = error.error
            if expected != error.code:
                raise StepFailed(f"{step.describe()}: {tool} failed with {error}"
                                 f"{'' if expected is None else f' (expected {expected})'}") from error
            if isinstance(label, str):
                self.view.receipts[label] = {"error": error.error}
            self.progress.say(f"{agent}: {tool} refused as expected ({error.code})")
            return
        call["result"] = result
        if expected is not None:
            raise StepFailed(f"{step.describe()}: {tool} succeeded ({result}), expected error {expected}")
        if isinstance(label, str):
            self.view.receipts[label] = result
        self.progress.say(f"{agent}: {tool} -> {_summary(result)}")

    def _await_record(self, step: Step) -> None:
        """Until the record is in ``state``, and (``received``) a receive of its recipient has returned it."""
        selector, state, received = step.params["record"], step.params.get("state"), step.params.get("received")
        goal = " and ".join(([state] if state else []) + (["received"] if received else []))
        seen: dict[str, Any] = {"state": "not admitted"}

        def reached() -> dict[str, Any] | None:
            try:
                record = select_record(self._core().records, selector, self.view)
            except EvidenceMissing:
                return None
            seen["state"] = record["state"] + ("" if record.get("received_at") is None else ", received")
            done = (state is None or record["state"] == state) and (not received or record.get("received_at"))
            return record if done else None

        try:
            record = self.lab.await_core(reached, self._timeout(step), f"record {selector} becoming {goal}")
        except TimeoutError:
            raise StepFailed(f"{step.describe()}: record {selector} stayed {seen['state']}, never {goal}") from None
        self.progress.say(f"record {record['record_id']} ({record['kind']}) is {goal}")

    def _core(self) -> CoreEvidence:
        """The core as it stands (its live export), with the agents registered since the start (a
        collaboration root's children) named in the view."""
        core = CoreEvidence.of(self.lab.export())
        for row in core.agents:
            self.view.agents.setdefault(row["name"], row["agent_id"])
        return core

    # -- owners -------------------------------------------------------------------------------

    def _detach(self, step: Step) -> None:
        owner = self.lab.detach(step.params["agent"])
        self.progress.say(f"{step.params['agent']}: owner generation {owner['generation']} detached")

    def _attach(self, step: Step) -> None:
        agent = step.params["agent"]
        owner = self.lab.attach(agent, resume=step.params.get("resume", True))
        self.view.attachments[:] = self.lab.attachments
        self.progress.say(f"{agent}: owner generation {owner['generation']} attached (thread {owner['thread_id']})")

    # -- helpers --------------------------------------------------------------------------------

    def _turn(self, label: str, step: Step) -> dict[str, Any]:
        if label not in self.view.turns:
            raise StepFailed(f"{step.describe()}: no turn labelled {label!r} yet")
        return self.view.turns[label]

    def _require_scripted(self, step: Step) -> None:
        if not self.lab.scripted:
            raise StepFailed(f"{step.describe()}: needs the scripted model")

    @staticmethod
    def _timeout(step: Step) -> float:
        return float(step.params.get("timeout_s", TURN_TIMEOUT_S))


def _summary(result: dict[str, Any]) -> str:
    keys = ("request_id", "interaction_id", "state", "turn_id", "previous_status")
    return ", ".join(f"{key}={result[key]}" for key in keys if key in result) or "ok"
