"""The app as a real process: crash safety, cross-process waking, racing claimants."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from harness.contract.manifest import requirement
from harness.process.app import AppProcess
from peerwire.control import ControlClient, encode
from peerwire.errors import Code, PeerwireError
from peerwire.home import HOME_ENV, SESSION_ENV

from .conftest import call, cli, cli_json, wait_until
from tests.patience import WAIT_S


def test_home_is_private_and_locked(core):
    home = core.home
    assert (home.path.stat().st_mode & 0o777) == 0o700
    assert (home.socket.stat().st_mode & 0o777) == 0o600
    assert json.loads(home.lock.read_text())["pid"] == core.app.process.pid
    second = subprocess.run([sys.executable, "-m", "peerwire", "app", "--home", str(home.path)],
                            capture_output=True, text=True, timeout=WAIT_S)
    assert second.returncode != 0
    assert f"pid {core.app.process.pid}" in second.stderr
    # the running app is untouched by the refused second one
    assert ControlClient(home).call("status")["ok"] is True


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_stop_signal_releases_lock_and_socket(core, sig):
    app = core.app
    app.process.send_signal(sig)
    assert app.process.wait(timeout=WAIT_S) == 0
    app.terminate()
    assert not core.home.socket.exists()
    assert core.home.lock.read_text() == ""
    core.app = AppProcess.start(core.home)  # the home can be owned again at once
    assert ControlClient(core.home).call("status")["ok"] is True


def test_kill_9_after_receipt_loses_nothing(core):
    a, b = core.register("a"), core.register("b")
    receipt = cli_json(core, "task", "--to", "b", "--body", "survive a crash", caller=a)
    core.app.process.send_signal(signal.SIGKILL)  # no chance to flush anything more
    core.app.process.wait()
    core.restart()
    page = call(core, b, "receive_messages")
    assert [r["record_id"] for r in page["records"]] == [receipt["interaction_id"]]
    assert page["new_work"] == [receipt["request_id"]]
    trace = cli_json(core, "trace", receipt["request_id"])
    assert [s["stage"] for s in trace["interactions"][0]["stages"]][:2] == ["entered", "admitted"]


def test_waiter_in_one_process_is_woken_by_a_send_from_another(core):
    a, b = core.register("a"), core.register("b")
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: b.token}
    waiter = subprocess.Popen([sys.executable, "-m", "peerwire", "message", "wait", "--timeout-ms", "60000",
                               "--json"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        status = ControlClient(core.home)
        wait_until(lambda: status.call("status")["waiting"].get(b.agent_id), WAIT_S, "the waiter to subscribe")
        cli_json(core, "send", "--to", "b", "--body", "wake up", caller=a)
        out, _ = waiter.communicate(timeout=WAIT_S)
    finally:
        waiter.kill()
    result = json.loads(out)
    assert result == {"woke": True, "timed_out": False, "wake_reason": "mailbox_activity", "pending": 1}
    # waiting acknowledged nothing: the record is still there to receive
    assert call(core, b, "wait_agent", {"timeout_ms": 0})["wake_reason"] == "unacknowledged_activity"
    assert len(call(core, b, "receive_messages")["records"]) == 1


def test_receive_with_timeout_returns_what_arrives(core):
    a, b = core.register("a"), core.register("b")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(call, core, b, "receive_messages", {"timeout_ms": 60_000}, WAIT_S)
        wait_until(lambda: ControlClient(core.home).call("status")["waiting"].get(b.agent_id), WAIT_S,
                   "the receive to wait")
        call(core, a, "send_message", {"target": "b", "message": "arrived"})
        page = pending.result(timeout=WAIT_S)
    assert [r["body"] for r in page["records"]] == ["arrived"]
    assert page["timed_out"] is False and page["wake_reason"] == "mailbox_activity"


@requirement("wait:empty:cancels-nothing")
def test_empty_wait_times_out_and_cancels_nothing(core):
    a, b = core.register("a"), core.register("b")
    receipt = call(core, a, "followup_task", {"target": "b", "message": "keep me"})
    page = call(core, b, "receive_messages")
    call(core, b, "receive_messages", {"ack_cursor": page["cursor"]})
    result = call(core, b, "wait_agent", {"timeout_ms": 50}, wait_s=WAIT_S)
    assert result == {"woke": False, "timed_out": True, "wake_reason": "timeout", "pending": 0}
    assert ControlClient(core.home).call("trace", {"id": receipt["request_id"]})["interactions"][0]["state"] == "claimed"


@requirement("task:new-work:once")
def test_two_sessions_of_a_recipient_race_and_each_task_has_one_claim(core):
    a, b = core.register("a"), core.register("b")
    tasks = 40
    env = {**os.environ, HOME_ENV: str(core.home.path), SESSION_ENV: b.token}
    # Each racer reads from the recipient's acknowledgement, collects the work it was
    # offered, and acknowledges each batch with its next read, until the mailbox stays quiet.
    script = (
        "import json, sys\n"
        "from peerwire.control import ControlClient\n"
        "from peerwire.home import Home\n"
        "c = ControlClient(Home.from_env(), sys.argv[1])\n"
        "offered, ack = [], {}\n"
        "while True:\n"
        "    page = c.call('receive_messages', {'limit': 3, 'timeout_ms': 1500, **ack}, wait_s=1.5)\n"
        "    offered += page['claims']\n"
        "    if page['timed_out']:\n"
        "        break\n"
        "    ack = {'ack_cursor': page['cursor']}\n"
        "print(json.dumps(offered))\n"
    )
    racers = [subprocess.Popen([sys.executable, "-c", script, b.token], env=env,
                               stdout=subprocess.PIPE, text=True) for _ in range(2)]
    sent = [call(core, a, "followup_task", {"target": "b", "message": f"task {i}"})["request_id"]
            for i in range(tasks)]
    outs = [json.loads(p.communicate(timeout=WAIT_S)[0]) for p in racers]
    assert all(p.returncode == 0 for p in racers)
    # Whatever neither racer acknowledged is still offered, under the same claim, to the next read.
    rest = call(core, b, "receive_messages", {"limit": 100})["claims"]
    claims_of: dict[str, set[str]] = {}
    for claim in outs[0] + outs[1] + rest:
        claims_of.setdefault(claim["request_id"], set()).add(claim["claim_id"])
    assert sorted(claims_of) == sorted(sent), "every task offered as new work"
    assert all(len(ids) == 1 for ids in claims_of.values()), "one claim per task, whichever session saw it"


@requirement("call:client-timeout:cancels-nothing")
def test_a_control_client_that_gives_up_mid_call_cancels_nothing(core):
    a, b = core.register("a"), core.register("b")
    request = {"id": 1, "op": "followup_task", "token": a.token, "meta": {},
               "args": {"target": "b", "message": "finish it although I left"}}
    # The client sends its call and leaves at once, never reading the answer (what a timed-out client does).
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        with core.home.socket_address() as address:
            sock.connect(address)
        sock.sendall(encode(request))
    page = call(core, b, "receive_messages", {"timeout_ms": 60_000}, wait_s=WAIT_S)
    (task,) = [r for r in page["records"] if r["kind"] == "task"]
    assert task["body"] == "finish it although I left" and page["new_work"] == [task["request_id"]]
    stages = [s["stage"] for s in ControlClient(core.home).call("trace", {"id": task["request_id"]})
              ["interactions"][0]["stages"]]
    assert stages[:2] == ["entered", "admitted"] and not any("cancel" in s for s in stages), stages
    call(core, b, "reply", {"request_id": task["request_id"], "status": "done", "message": "done anyway"})
    answer = call(core, a, "receive_messages", {"timeout_ms": 60_000}, wait_s=WAIT_S)
    assert [(r["kind"], r["request_id"], r["body"]) for r in answer["records"]] == [
        ("reply", task["request_id"], "done anyway")]


def test_app_unavailable_and_unknown_caller(core, tmp_path):
    a = core.register("a")
    with pytest.raises(PeerwireError) as info:
        ControlClient(core.home, "not-a-token").call("list_agents")
    assert info.value.code is Code.UNKNOWN_CALLER
    revoked = core.register("revoked")
    assert call(core, revoked, "list_agents")["agents"]
    assert cli_json(core, "agent", "revoke", "revoked")["revoked"] == 1
    with pytest.raises(PeerwireError) as info:
        call(core, revoked, "list_agents")
    assert info.value.code is Code.UNKNOWN_CALLER and "revoked" in info.value.message
    core.stop()
    done = cli(core, "send", "--to", "a", "--body", "x", caller=a)
    assert done.returncode == 1
    assert json.loads(done.stdout)["error"]["code"] == "app_unavailable"


def test_await_change_wakes_on_the_next_commit_only(core):
    a, _ = core.register("a"), core.register("b")
    admin = ControlClient(core.home)
    mark = admin.call("await_change", {"mark": None, "timeout_ms": 0})["mark"]
    quiet = admin.call("await_change", {"mark": mark, "timeout_ms": 50}, wait_s=WAIT_S)
    assert quiet == {"mark": mark, "timed_out": True}  # nothing committed, nothing reported
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(admin.call, "await_change", {"mark": mark, "timeout_ms": 60_000}, wait_s=WAIT_S)
        call(core, a, "send_message", {"target": "b", "message": "a change"})
        woke = waiting.result(timeout=WAIT_S)
    assert woke["timed_out"] is False and woke["mark"] != mark
    # a mark that differs from the store's (e.g. from before a restart) returns at once
    assert admin.call("await_change", {"mark": -1, "timeout_ms": 20_000}, wait_s=WAIT_S)["timed_out"] is False


def test_cli_send_strict_and_target(core):
    """``--target`` is ``--to``; ``--strict`` refuses the fallback to an enabled but not sendable agent."""
    a, quiet = core.register("a"), core.register("quiet")
    ControlClient(core.home).call("set_agent", {"agent_id": quiet.agent_id, "sendable": False})

    refused = cli(core, "send", "--strict", "--target", "quiet", "--body", "strictly", caller=a)
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["error"]["code"] == "target_not_sendable"
    refused_task = cli(core, "task", "--strict", "--to", "quiet", "--body", "strictly", caller=a)
    assert json.loads(refused_task.stdout)["error"]["code"] == "target_not_sendable"
    assert call(core, quiet, "receive_messages")["records"] == [], "a refused send admits nothing"

    receipt = cli_json(core, "send", "--target", "quiet", "--body", "by fallback", caller=a)
    assert receipt["state"] == "admitted" and receipt["recipient"]["name"] == "quiet"
    admitted = cli_json(core, "trace", receipt["interaction_id"])["interactions"][0]["stages"]
    assert [s for s in admitted if s["stage"] == "admitted"][0]["detail"]["resolution"] == "enabled_not_sendable"
    assert [r["body"] for r in call(core, quiet, "receive_messages")["records"]] == ["by fallback"]
