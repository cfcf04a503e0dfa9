"""The capability probe's verdict reaches runs that started before it: none attaches an owner before it is
in, each attaches with what it enabled, and a run it rules out stops there, skipped, naming the capability."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest

from harness.acceptance.execution import PhaseClock
from harness.acceptance.gate import PROBE_FAILED, RunSkipped, Verdict, VerdictBoard, gate, read_verdict
from harness.lab.reference import ReferenceLab
from harness.model.rules import script_from_document
from harness.names import AWAITING_CAPABILITIES
from harness.report.shard_reports import durations
from tests.patience import WAIT_S

PROBED = Verdict(("idle_start", "inject"), {"steer": "the live probe failed: steer: refused"})


def test_a_verdict_crosses_the_pipe_whole() -> None:
    assert Verdict.from_line(PROBED.to_line()) == PROBED
    assert PROBED.to_line().endswith(b"\n") and PROBED.to_line().count(b"\n") == 1


def test_the_gate_passes_what_the_probe_enabled_and_skips_a_run_that_needs_more() -> None:
    assert gate(lambda: PROBED, ["idle_start"])() == ["idle_start", "inject"]
    with pytest.raises(RunSkipped) as skipped:
        gate(lambda: PROBED, ["idle_start", "steer", "resume"])()
    assert skipped.value.missing == ["steer", "resume"]
    assert skipped.value.why == "the live probe failed: steer: refused"
    assert str(skipped.value) == "needs capability steer, resume (the live probe failed: steer: refused)"
    # a probe that broke enables nothing, and says so
    with pytest.raises(RunSkipped, match=PROBE_FAILED):
        gate(lambda: Verdict.of(None), ["idle_start"])()


def test_the_gate_refuses_a_need_the_capability_table_does_not_declare() -> None:
    with pytest.raises(ValueError, match=r"unknown capabilities \['stear'\]"):
        gate(lambda: PROBED, ["idle_start", "stear"])


def test_a_worker_reads_its_verdict_once_and_an_ended_pipe_is_a_failed_probe() -> None:
    stream = io.BytesIO(PROBED.to_line() + b"anything after it is not read\n")
    verdict = read_verdict(stream)
    assert verdict() == PROBED and verdict() == PROBED
    assert stream.read() == b"anything after it is not read\n"
    assert read_verdict(io.BytesIO(b""))() == Verdict((), {})


def test_the_board_gives_the_verdict_to_workers_waiting_and_to_workers_started_later() -> None:
    board = VerdictBoard()
    early_r, early_w = os.pipe()
    with os.fdopen(early_r, "rb") as early, os.fdopen(early_w, "wb") as early_in:
        board.hand(early_in)
        assert board.verdict is None and not board.posted.is_set()
        board.post(PROBED)
        assert Verdict.from_line(early.readline()) == PROBED
        assert early.read() == b"", "the worker's stdin is closed once it has its verdict"
    late_r, late_w = os.pipe()
    with os.fdopen(late_r, "rb") as late:
        board.hand(os.fdopen(late_w, "wb"))
        assert Verdict.from_line(late.readline()) == PROBED
    gone_r, gone_w = os.pipe()
    os.close(gone_r)
    board.hand(os.fdopen(gone_w, "wb"))  # a worker that died first: nothing to hand, nothing raised


def test_the_wait_is_a_phase_of_its_own_and_no_part_of_a_runs_duration() -> None:
    clock = PhaseClock()
    clock.phases.append({"name": "start", "s": 9.5})
    clock.carve(AWAITING_CAPABILITIES, "start", 6.0)
    assert clock.phases == [{"name": AWAITING_CAPABILITIES, "s": 6.0}, {"name": "start", "s": 3.5}]
    report = {"scenarios": [{"identity": {"slug": "smoke.attached"}, "wall_s": 11.0, "phases": clock.phases},
                            {"identity": {"slug": "negative.attached"}, "wall_s": 4.0, "phases": []}]}
    assert durations(report) == {"smoke.attached": 5.0, "negative.attached": 4.0}


@pytest.mark.codex
def test_no_owner_attaches_before_the_verdict_and_each_attaches_with_what_it_enabled(tmp_path: Path) -> None:
    idle = [{"id": "idle", "emit": [{"message": {"phase": "final_answer", "text": "idle"}}]}]
    script = script_from_document({"scenario": {"name": "gate", "description": "Owners wait for the probe."},
                                   "rules": {"A": idle, "B": idle}}, source="gate")
    asked, released = threading.Event(), threading.Event()

    def verdict() -> list[str]:
        asked.set()
        assert released.wait(WAIT_S), "the test never gave the verdict"
        return ["idle_start", "interrupt"]

    lab = ReferenceLab(tmp_path, script, agents=("A", "B"), capabilities=verdict)
    starting = threading.Thread(target=lab.start)
    starting.start()
    try:
        assert asked.wait(WAIT_S), "the lab never asked for the verdict"
        # Everything but the attach is up while the probe runs: the core, each agent's registration,
        # workspace and projection; no owner yet.
        assert {row["name"] for row in lab.control().call("agents")["agents"]} == {"A", "B"}
        assert all((agent.workspace / ".git").is_dir() and agent.registration is not None
                   for agent in lab.agents.values())
        assert lab.control().call("owners")["owners"] == []
        released.set()
        starting.join(WAIT_S)
        assert not starting.is_alive() and lab.started
        owners = lab.control().call("owners")["owners"]
        assert sorted(o["name"] for o in owners) == ["A", "B"]
        assert all(o["capabilities"] == ["idle_start", "interrupt"] for o in owners), owners
        assert lab.capabilities_awaited_s > 0
    finally:
        released.set()
        starting.join(WAIT_S)
        lab.stop()
