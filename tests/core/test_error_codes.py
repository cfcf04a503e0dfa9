"""Every error code a caller can meet is reached by a real call path."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from harness.capabilities import PROVIDERS
from harness.process.app import AppProcess
from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError

from .conftest import cli_json
from tests.patience import WAIT_S

# Codes no tool call of the manual-provider core can produce, and where they are tested.
ELSEWHERE = {
    Code.INTERNAL: "no input reaches it by design; it is the app's last line against its own bugs",
    Code.ILLEGAL_TRANSITION: "tests/core/test_lifecycle.py drives the store into one directly",
    Code.HOME_INVALID: "tests/core/test_bad_home.py builds each unusable home on disk",
    Code.STORE_DAMAGED: "tests/core/test_bad_home.py damages real stores",
    Code.STORAGE_UNAVAILABLE: "tests/core/test_storage.py fills the disk under a real store",
    Code.TOO_MANY_WAITERS: "tests/core/test_control_bounds.py holds a caller's maximum of waits",
    Code.TOO_MANY_CONNECTIONS: "tests/core/test_control_bounds.py opens one connection over the app's bound",
    Code.APP_NOT_RESPONDING: "tests/core/test_hung_app.py stops the app with SIGSTOP",
}


def _code(fn) -> Code:
    try:
        fn()
    except PeerwireError as exc:
        assert exc.message and exc.code is not Code.INTERNAL
        return exc.code
    raise AssertionError("no error")


def test_each_code_is_reached(core, tmp_path):
    a, b = core.register("a"), core.register("b")
    core.register("twin"), core.register("twin")
    core.register("odd", provider="carrier_pigeon")
    core.register("sleeper", provider="codex")  # no owner attached: nothing to interrupt
    admin = ControlClient(core.home)
    lead = admin.call("register_agent", {"name": "lead", "provider": "codex", "collab_root": True})
    tree = ControlClient(core.home, lead["session_token"])
    for i in range(4):
        tree.call("collab.spawn_agent", {"task_name": f"w{i}", "message": "go"})
    off = core.register("off")
    admin.call("set_agent", {"agent_id": off.agent_id, "enabled": False})
    ca, cb = ControlClient(core.home, a.token), ControlClient(core.home, b.token)
    task = ca.call("followup_task", {"target": "b", "message": "t"})
    cb.call("reply", {"request_id": task["request_id"], "status": "done", "message": "ok"})
    cursor_b = cb.call("receive_messages", {})["cursor"]

    reached = {
        _code(lambda: ca.call("send_message", {"target": "b", "message": "x", "sender": "b"})),
        _code(lambda: ca.call("send_message", {"target": "b", "message": "x" * 65537})),
        _code(lambda: ca.call("send_message", {"target": "nobody", "message": "x"})),
        _code(lambda: ca.call("send_message", {"target": "twin", "message": "x"})),
        _code(lambda: ca.call("send_message", {"target": "*", "message": "x"})),
        _code(lambda: ca.call("send_message", {"target": "off", "message": "x"})),
        _code(lambda: ca.call("send_message", {"target": "odd", "message": "x"})),
        _code(lambda: ControlClient(core.home, "nope").call("list_agents")),
        _code(lambda: ca.call("reply", {"request_id": task["request_id"], "status": "done", "message": "x"})),
        _code(lambda: ca.call("reply", {"request_id": "rq_" + "0" * 32, "status": "done", "message": "x"})),
        _code(lambda: cb.call("reply", {"request_id": task["request_id"], "status": "done", "message": "x"})),
        _code(lambda: ca.call("receive_messages", {"cursor": cursor_b})),
        _code(lambda: ca.call("interrupt_agent", {"target": "b"})),
        _code(lambda: ca.call("interrupt_agent", {"target": "sleeper"})),
        _code(lambda: admin.call("trace", {"id": "ix_" + "0" * 32})),
        _code(lambda: tree.call("collab.spawn_agent", {"task_name": "w4", "message": "one too many"})),
    }
    locked = subprocess.run([sys.executable, "-m", "peerwire", "app", "--home", str(core.home.path)],
                            capture_output=True, text=True, timeout=WAIT_S)
    assert locked.returncode == 3 and "owned by a running app" in locked.stderr
    reached.add(Code.HOME_LOCKED)
    missing = subprocess.run([sys.executable, "-m", "peerwire", "agent", "list", "--json"],
                             capture_output=True, text=True, timeout=WAIT_S,
                             env={"PATH": "/usr/bin:/bin"})
    assert missing.returncode == 1
    reached.add(Code(cli_error(missing.stdout)))
    core.stop()
    reached.add(_code(lambda: ca.call("list_agents")))
    core.app = AppProcess.start(core.home)

    assert reached | set(ELSEWHERE) == set(Code), f"not reached: {set(Code) - reached - set(ELSEWHERE)}"
    assert not reached & set(ELSEWHERE)


def cli_error(stdout: str) -> str:
    return json.loads(stdout)["error"]["code"]


def test_cli_errors_match_mcp_codes(core):
    a = core.register("a")
    out = cli_json(core, "send", "--to", "all", "--body", "x", caller=a)
    assert out["error"]["code"] == "broadcast_not_supported"


def test_an_agent_of_a_provider_without_adapter_is_told_every_provider_of_the_table(core):
    out = ControlClient(core.home).call("register_agent", {"name": "odd", "provider": "carrier_pigeon"})
    known = re.search(r"\(known: ([^)]*)\)", out["warning"])
    assert known is not None, out["warning"]
    assert known.group(1).split(", ") == list(PROVIDERS), "the providers are the capability table's, acp included"
