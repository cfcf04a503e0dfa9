"""The send pipeline's stages: every request enters first, then is admitted or rejected, and trace says which."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from peerwire.control import ControlClient
from peerwire.errors import PeerwireError
from peerwire.home import HOME_ENV, SESSION_ENV

from .conftest import call, cli, cli_json
from tests.patience import WAIT_S


def refused(fn) -> PeerwireError:
    try:
        fn()
    except PeerwireError as exc:
        return exc
    raise AssertionError("the call was admitted")


def test_a_rejected_request_is_traced_entered_then_rejected_with_the_reason(core):
    a = core.register("a")
    done = cli(core, "send", "--to", "nobody", "--body", "hello?", caller=a)
    error = json.loads(done.stdout)["error"]
    assert done.returncode == 1 and error["code"] == "unknown_target"
    entry_id = error["details"]["entry_id"]
    trace = cli_json(core, "trace", entry_id)
    assert [s["stage"] for s in trace["stages"]] == ["entered", "rejected"]
    entered, rejected = trace["stages"]
    assert entered["detail"] == {"entry_id": entry_id, "op": "send_message", "via": "cli"}
    assert rejected["detail"]["code"] == "unknown_target" and "nobody" in rejected["detail"]["reason"]
    assert entered["at"] <= rejected["at"]
    assert trace["rejected"]["summary"] == {"target": "nobody", "bytes": 6}
    assert trace["rejected"]["agent_id"] == a.agent_id
    assert trace["interactions"] == [], "nothing was admitted"
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: a.token}
    text = subprocess.run([sys.executable, "-m", "peerwire", "send", "--to", "nobody", "--body", "again"], env=env,
                          capture_output=True, text=True, timeout=WAIT_S).stderr
    assert text.startswith("peerwire: unknown_target: ") and "(peerwire trace en_" in text, text


def test_each_kind_of_refusal_is_recorded_before_the_answer(core):
    a, b = core.register("a"), core.register("b")
    client, admin = ControlClient(core.home, a.token), ControlClient(core.home)
    cases = [
        (lambda: client.call("send_message", {"target": "b", "message": "x" * 70_000}), "message_too_large",
         {"target": "b", "bytes": 70_000}),
        (lambda: client.call("followup_task", {"target": "*", "message": "all of you"}), "broadcast_not_supported",
         {"target": "*", "bytes": 10}),
        (lambda: client.call("reply", {"request_id": "rq_" + "0" * 32, "status": "done", "message": "hm"}),
         "unknown_request", {"request_id": "rq_" + "0" * 32, "status": "done", "bytes": 2}),
        (lambda: client.call("send_message", ["not", "an", "object"]), "invalid_argument", {"arguments": "list"}),
        (lambda: ControlClient(core.home, "forged-token").call("send_message", {"target": "b", "message": "hi"}),
         "unknown_caller", {"target": "b", "bytes": 2}),
    ]
    for attempt, code, summary in cases:
        error = refused(attempt)
        assert error.code.value == code
        trace = admin.call("trace", {"id": error.details["entry_id"]})
        assert trace["rejected"]["code"] == code and trace["rejected"]["summary"] == summary, trace
    assert call(core, b, "receive_messages")["records"] == []


def test_an_admitted_request_enters_before_it_is_admitted(core):
    a, _ = core.register("a"), core.register("b")
    receipt = cli_json(core, "task", "--to", "b", "--body", "traced", caller=a)
    trace = cli_json(core, "trace", receipt["request_id"])
    stages = trace["interactions"][0]["stages"]
    assert [s["stage"] for s in stages[:2]] == ["entered", "admitted"]
    entered, admitted = stages[:2]
    assert entered["detail"]["op"] == "followup_task" and entered["detail"]["via"] == "cli"
    assert entered["at"] <= admitted["at"]
    by_entry = cli_json(core, "trace", entered["detail"]["entry_id"])
    assert by_entry["interactions"][0]["record_id"] == receipt["interaction_id"]
