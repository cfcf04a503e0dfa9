"""Operator operations need the operator credential; an agent's session token never grants them.

The app keeps its operator credential in ``<home>/operator.token`` (0600,
created at its first start). Registering, listing with secrets, disabling,
revoking, tracing, exporting, attaching, prompting: each is refused
``not_authorized`` without it, with a wrong one, and with an agent's session
token, so an agent that knows its home cannot read everyone's mail or register
a second "bob" to make every send to bob ambiguous.
"""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys

import pytest

from harness.contract.manifest import requirement
from peerwire.control import ControlClient, encode
from peerwire.home import HOME_ENV, SESSION_ENV
from peerwire.operations import OPERATOR_OPS
from tests.patience import WAIT_S

ARGS = {
    "status": {}, "register_agent": {"name": "bob"}, "agents": {}, "set_agent": {"agent_id": "x", "enabled": False},
    "revoke_sessions": {"agent_id": "x"}, "trace": {"id": "ix_0"}, "attach_codex": {}, "detach_codex": {},
    "prompt": {"text": "hi"}, "await_turn": {"turn_id": "t"}, "owners": {}, "await_change": {}, "export": {},
}


def _raw(core, request: dict) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        with core.home.socket_address() as address:
            sock.connect(address)
        sock.settimeout(WAIT_S)
        sock.sendall(encode(request))
        with sock.makefile("rb") as reader:
            return json.loads(reader.readline())


def test_every_operator_operation_is_listed():
    assert OPERATOR_OPS == set(ARGS)


@requirement("operator:credential")
@pytest.mark.parametrize("op", sorted(ARGS))
def test_an_agents_session_token_grants_no_operator_operation(core, op):
    agent = core.register("agent")
    answer = _raw(core, {"id": 1, "op": op, "args": ARGS[op], "token": agent.token})
    assert answer["ok"] is False and answer["error"]["code"] == "not_authorized", answer
    assert "operator credential" in answer["error"]["message"]


@requirement("operator:credential")
@pytest.mark.parametrize("credential", [None, "", "not-the-credential"], ids=["none", "empty", "wrong"])
def test_an_operator_operation_without_the_credential_is_refused(core, credential):
    request = {"id": 1, "op": "export", "args": {}}
    if credential is not None:
        request["operator"] = credential
    answer = _raw(core, request)
    assert answer["ok"] is False and answer["error"]["code"] == "not_authorized", answer


@requirement("operator:credential")
def test_an_agent_cannot_register_a_second_bob(core):
    agent = core.register("agent")
    bob = core.register("bob")
    refused = _raw(core, {"id": 1, "op": "register_agent", "args": {"name": "bob"}, "token": agent.token})
    assert refused["error"]["code"] == "not_authorized", refused
    sent = ControlClient(core.home, agent.token).call("send_message", {"target": "bob", "message": "still one bob"})
    assert sent["recipient"]["agent_id"] == bob.agent_id


@requirement("operator:credential")
def test_the_credential_is_private_in_the_home_and_in_no_agents_environment(core):
    agent = core.register("agent")
    path = core.home.path / "operator.token"
    info = path.lstat()
    assert stat.S_ISREG(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
    credential = path.read_text().strip()
    assert len(credential) >= 43  # 256 bits, URL-safe base64
    assert credential not in json.dumps(core.caller_env(agent)), "an agent's environment never carries it"
    assert _raw(core, {"id": 1, "op": "status", "args": {}, "operator": credential})["ok"] is True
    # The same credential survives a restart: the operator's tools keep working.
    core.restart()
    assert path.read_text().strip() == credential
    assert _raw(core, {"id": 1, "op": "status", "args": {}, "operator": credential})["ok"] is True


def test_the_operators_cli_reads_the_credential_from_the_home_and_an_agents_client_sends_none(core):
    agent = core.register("agent")
    env = {**os.environ, HOME_ENV: str(core.home.path)}
    env.pop(SESSION_ENV, None)
    done = subprocess.run([sys.executable, "-m", "peerwire", "export", "--json"], env=env, capture_output=True,
                          text=True, timeout=WAIT_S)
    assert done.returncode == 0, done.stderr
    with pytest.raises(Exception) as refused:
        ControlClient(core.home, agent.token).call("export")
    assert getattr(refused.value, "code", None) == "not_authorized"
