"""The ACP client's own rules: what it refuses an agent, what its transcript never keeps."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from peerwire.acp.client import REDACTED, AcpClient, decline_agent_request, redact_credentials, stdio_mcp_server
from peerwire.jsonrpc import Request
from peerwire.stdio_peer import JsonRpcError
from tests.patience import WAIT_S


def run(coro):
    return asyncio.run(coro)


def test_a_permission_request_gets_the_agents_own_reject_option():
    options = [{"optionId": "a", "kind": "allow_once", "name": "Allow"},
               {"optionId": "r-always", "kind": "reject_always", "name": "Never"},
               {"optionId": "r", "kind": "reject_once", "name": "Reject"}]
    answer = run(decline_agent_request(Request(1, "session/request_permission", {"options": options})))
    assert answer == {"outcome": {"outcome": "selected", "optionId": "r"}}
    only_allow = [{"optionId": "a", "kind": "allow_once"}]
    assert run(decline_agent_request(Request(2, "session/request_permission", {"options": only_allow}))) == \
        {"outcome": {"outcome": "cancelled"}}


@pytest.mark.parametrize("method", ["fs/read_text_file", "fs/write_text_file", "terminal/create", "x/unknown"])
def test_file_system_terminal_and_unknown_requests_are_refused(method):
    with pytest.raises(JsonRpcError) as refused:
        run(decline_agent_request(Request(1, method, {})))
    assert refused.value.code == -32601


def test_the_transcript_keeps_no_mcp_credential():
    server = stdio_mcp_server("peerwire", ["/usr/bin/python3", "-m", "peerwire", "mcp", "serve"],
                              {"PEERWIRE_HOME": "/h", "PEERWIRE_SESSION_ID": "s3cret"})
    for method in ("session/new", "session/load", "session/resume"):
        message = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"cwd": "/w", "mcpServers": [server]}}
        kept = redact_credentials(message)
        assert "s3cret" not in json.dumps(kept)
        assert [p["name"] for p in kept["params"]["mcpServers"][0]["env"]] == ["PEERWIRE_HOME", "PEERWIRE_SESSION_ID"]
        assert {p["value"] for p in kept["params"]["mcpServers"][0]["env"]} == {REDACTED}
        assert message["params"]["mcpServers"][0]["env"][1]["value"] == "s3cret"  # what is sent is unchanged


AGENT = r'''
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("method") == "initialize":
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"protocolVersion": 1, "agentCapabilities": {}}}), flush=True)
    elif m.get("method") == "session/new":
        print(json.dumps({"jsonrpc": "2.0", "id": 99, "method": "session/request_permission",
                          "params": {"options": [{"optionId": "no", "kind": "reject_once"}]}}), flush=True)
        print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": {"sessionId": "ses_x"}}), flush=True)
'''


def test_a_live_session_redacts_its_file_and_answers_the_agent(tmp_path: Path):
    async def scenario():
        client = await AcpClient.start(command=[sys.executable, "-c", AGENT], cwd=tmp_path,
                                       env={"PEERWIRE_UNSET_ME": None}, transcript_path=tmp_path / "t.jsonl")
        server = stdio_mcp_server("peerwire", [sys.executable], {"PEERWIRE_SESSION_ID": "s3cret"})
        result = await client.session_new(str(tmp_path), [server], timeout=WAIT_S)
        async with asyncio.timeout(WAIT_S):
            while not client.server_requests:
                await asyncio.sleep(0.01)
        await client.close()
        return result, client
    result, client = run(scenario())
    assert result == {"sessionId": "ses_x"}
    (handled,) = client.server_requests
    assert handled.response["result"] == {"outcome": {"outcome": "selected", "optionId": "no"}}
    text = (tmp_path / "t.jsonl").read_text()
    assert "s3cret" not in text and REDACTED in text
