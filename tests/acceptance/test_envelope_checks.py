"""The checks judge envelopes by the contract's grammar: a core (or a changed reference) whose envelope departs
from contracts/envelope.json fails them, and the failure says how it departs."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.acceptance.checks import CheckSpec, judge
from harness.acceptance.observations import Observations, RunnerView
from peerwire import envelope
from tests.evidence.exchange import A_ID, B_ID, REPLY_ID, task_exchange

REFERENCE_RENDER = envelope.render
TASK = {"kind": "task", "sender": "A", "recipient": "B"}


def observations(tmp_path: Path, render=REFERENCE_RENDER) -> Observations:
    folder = task_exchange(render=render).write(tmp_path / "run")
    return Observations.load(folder, RunnerView(agents={"A": A_ID, "B": B_ID}))


def reply_correlated(obs: Observations):
    return judge(CheckSpec("reply-correlated", "reply_correlated", {"record": TASK}), obs)


def test_the_reply_injected_as_the_contract_says_reached_the_requester(tmp_path):
    verdict = reply_correlated(observations(tmp_path))
    assert verdict.verdict == "pass", verdict.summary
    assert "injected" in verdict.summary


def _without_status(record):
    return "\n".join(line for line in REFERENCE_RENDER(record).split("\n") if not line.startswith("Status: "))


def _sender_renamed(record):
    return REFERENCE_RENDER(record).replace(f"Sender: {record['sender']['name']} ", "Sender: someone ", 1)


def _payload_marker_lowercased(record):
    return REFERENCE_RENDER(record).replace("\nPayload:\n", "\npayload:\n", 1)


@pytest.mark.parametrize("mutant, says", [
    (_without_status, "header 'Status' ({status}) is missing"),
    (_sender_renamed, "Sender carries sender_name 'someone', not 'B'"),
    (_payload_marker_lowercased, "no text is an envelope by the contract's grammar"),
], ids=["no status", "sender renamed", "payload line changed"])
def test_a_reply_envelope_that_departs_from_the_grammar_fails_the_check(tmp_path, monkeypatch, mutant, says):
    def render(record):
        return mutant(record) if record["record_id"] == REPLY_ID else REFERENCE_RENDER(record)

    # The reference's renderer changes the same way: the verdict must not follow it.
    monkeypatch.setattr(envelope, "render", render)
    verdict = reply_correlated(observations(tmp_path, render))
    assert verdict.verdict == "fail"
    assert says in verdict.summary
