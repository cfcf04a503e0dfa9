"""The recording proxy on loopback, against upstreams played by real HTTP servers: what it forwards, what it streams
back and when, what it logs, and what it never logs."""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.evidence.model_bodies import bodies_path, read_log
from harness.evidence.model_log import ModelRequestLog
from harness.model.proxy import ProxyError, RecordingProxy
from tests.patience import POLL_S, WAIT_S

KEY = "sk-upstream-secret-0123456789abcdef"
ACCOUNT = "acct-9f8e7d6c5b4a"
BOUND_S = WAIT_S
"""Every wait in these tests; a safety net against a hang, never the verdict."""


class Upstream:
    """A provider played by a real HTTP server: ``answer(handler, body)`` writes each response; every request is
    kept as it arrived (method, path, headers, body bytes)."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler, bytes], None]):
        self.requests: list[dict[str, Any]] = []
        self.answer = answer
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                upstream.requests.append({"method": "POST", "path": self.path, "headers": dict(self.headers.items()),
                                          "raw": raw})
                upstream.answer(self, raw)

            do_GET = do_POST

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def sse(event: dict[str, Any]) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


ITEM = {"type": "message", "role": "assistant", "id": "msg_1", "phase": "final_answer",
        "content": [{"type": "output_text", "text": "Kestrel ✓"}]}
STREAM = [sse({"type": "response.created", "response": {"id": "resp_1"}}),
          sse({"type": "response.output_item.done", "output_index": 0, "item": ITEM}),
          sse({"type": "response.completed", "response": {"id": "resp_1", "usage": {"input_tokens": 3}}})]


def start_sse(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.send_header("Connection", "close")
    handler.end_headers()
    handler.close_connection = True


@pytest.fixture
def body() -> bytes:
    # Spacing and key order Codex chose, and text JSON would escape: forwarded as these bytes, not re-encoded.
    return ('{"model": "m",  "stream": true, "input": [{"type": "message", "role": "user", '
            '"content": [{"type": "input_text", "text": "Héllo\\n✓"}]}], "tools": []}').encode()


def post(port: int, path: str, body: bytes, headers: dict[str, str] | None = None) -> http.client.HTTPResponse:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=BOUND_S)
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json",
                                                         "Authorization": f"Bearer {KEY}",
                                                         "ChatGPT-Account-ID": ACCOUNT, **(headers or {})})
    return connection.getresponse()


def logged(path: Path) -> list[dict[str, Any]]:
    return [record for _, record in read_log(path)]


def test_a_request_is_forwarded_unchanged_and_logged_without_its_credentials(tmp_path: Path, body: bytes) -> None:
    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        start_sse(handler)
        for event in STREAM:
            handler.wfile.write(event)

    upstream = Upstream(answer)
    log = tmp_path / "model-requests.jsonl"
    try:
        with RecordingProxy(upstream.base_url, log_path=log) as proxy:
            assert proxy.base_url("A") == f"http://127.0.0.1:{proxy.port}/agents/A"
            response = post(proxy.port, "/agents/A/responses?api-version=2", body, {"X-Codex-Turn": "t1"})
            received = response.read()
    finally:
        upstream.close()
    (request,) = upstream.requests
    # where it went, and as what: the provider's base_url plus the rest, the query kept, the bytes the same,
    # the credential passed on
    assert request["path"] == "/v1/responses?api-version=2"
    assert request["raw"] == body
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    assert request["headers"]["ChatGPT-Account-ID"] == ACCOUNT and request["headers"]["X-Codex-Turn"] == "t1"
    assert received == b"".join(STREAM) and response.status == 200
    # the log: the scripted model's format, read back whole by the same readers
    first, last = logged(log)
    assert (first["event"], first["agent"], first["method"]) == ("request", "A", "POST")
    assert first["raw_sha256"] == hashlib.sha256(body).hexdigest()
    assert first["body"] == json.loads(body) and first["headers"]["x-codex-turn"] == "t1"
    assert not {"authorization", "chatgpt-account-id"} & set(first["headers"])
    assert (last["event"], last["outcome"], last["status"], last["items"]) == ("response", "answered", 200, [ITEM])
    assert last["upstream"] == upstream.base_url + "/responses"  # no query: it may carry a key
    (parsed,) = ModelRequestLog.load(log).requests
    assert parsed.agent == "A" and parsed.outcome == "answered" and list(parsed.items) == [ITEM]
    for path in (log, bodies_path(log)):
        text = path.read_text(encoding="utf-8")
        assert KEY not in text and ACCOUNT not in text, path.name


def test_the_answer_streams_back_event_by_event(tmp_path: Path, body: bytes) -> None:
    """The provider sends its second event only once the client has read the first through the proxy: a proxy
    that held the stream, or a buffer of it, would leave both waiting (until the bound, then fail)."""
    first_seen = threading.Event()
    waited: list[bool] = []

    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        start_sse(handler)
        handler.wfile.write(STREAM[0])
        handler.wfile.flush()
        waited.append(first_seen.wait(BOUND_S))
        handler.wfile.write(STREAM[1] + STREAM[2])

    upstream = Upstream(answer)
    try:
        with RecordingProxy(upstream.base_url, log_path=tmp_path / "log.jsonl") as proxy:
            response = post(proxy.port, "/agents/B/responses", body)
            assert response.getheader("Content-Type") == "text/event-stream"
            got = b""
            while STREAM[0] not in got:
                chunk = response.read1(65536)
                assert chunk, f"the stream ended after {got!r}"
                got += chunk
            first_seen.set()
            got += response.read()
    finally:
        upstream.close()
    assert waited == [True], "the client saw the first event only after the provider had sent them all"
    assert got == b"".join(STREAM)


def test_an_error_status_is_relayed_and_logged_as_failed(tmp_path: Path, body: bytes) -> None:
    error = json.dumps({"error": {"message": "no rule matches", "code": "bad"}}).encode()

    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        handler.send_response(400)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(error)))
        handler.end_headers()
        handler.wfile.write(error)

    upstream = Upstream(answer)
    log = tmp_path / "log.jsonl"
    try:
        with RecordingProxy(upstream.base_url, log_path=log) as proxy:
            response = post(proxy.port, "/agents/A/responses", body)
            assert (response.status, response.read()) == (400, error)
    finally:
        upstream.close()
    last = logged(log)[-1]
    assert (last["outcome"], last["status"]) == ("failed", 400) and "HTTP 400" in last["error"]


def test_a_stream_cut_before_completion_is_failed(tmp_path: Path, body: bytes) -> None:
    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        start_sse(handler)
        handler.wfile.write(STREAM[0] + STREAM[1])

    upstream = Upstream(answer)
    log = tmp_path / "log.jsonl"
    try:
        with RecordingProxy(upstream.base_url, log_path=log) as proxy:
            assert post(proxy.port, "/agents/A/responses", body).read() == STREAM[0] + STREAM[1]
    finally:
        upstream.close()
    last = logged(log)[-1]
    assert last["outcome"] == "failed" and "response.completed" in last["error"] and last["items"] == [ITEM]


def _hang_up_after(port: int, body: bytes, *, event: bytes = STREAM[0], agent: str = "B", reset: bool = False) -> None:
    """Codex as a raw client: post for ``agent``, read until the stream's ``event`` arrived, hang up (with a reset)."""
    client = socket.create_connection(("127.0.0.1", port), timeout=BOUND_S)
    if reset:
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.sendall(f"POST /agents/{agent}/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    got = b""
    while event not in got:
        chunk = client.recv(65536)
        assert chunk, f"the proxy closed before {event!r}: {got[-300:]!r}"
        got += chunk
    client.close()


def test_a_client_that_hangs_up_ends_the_upstream_request(tmp_path: Path, body: bytes) -> None:
    """Codex hanging up (an interrupted turn) closes the provider's request too, and the log says disconnected."""
    upstream_saw_close = threading.Event()

    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        start_sse(handler)
        handler.wfile.write(STREAM[0])
        handler.wfile.flush()
        # a provider still thinking: it reads nothing more, so EOF means the proxy closed the request
        handler.connection.settimeout(BOUND_S)
        try:
            if handler.connection.recv(1) == b"":
                upstream_saw_close.set()
        except OSError:
            upstream_saw_close.set()

    upstream = Upstream(answer)
    log = tmp_path / "log.jsonl"
    try:
        with RecordingProxy(upstream.base_url, log_path=log) as proxy:
            _hang_up_after(proxy.port, body)
            assert upstream_saw_close.wait(BOUND_S), "the provider's request stayed open after Codex hung up"
    finally:
        upstream.close()
    last = logged(log)[-1]
    assert last["outcome"] == "disconnected" and last["seq"] == 0


def test_a_client_that_hangs_up_while_the_provider_streams_on_is_disconnected_not_failed(
        tmp_path: Path, body: bytes) -> None:
    """Codex hanging up while the provider keeps streaming: the proxy's next write to Codex fails (a broken pipe or
    a reset), which is the same hang-up however soon it comes, never a failure of the provider."""
    client_closed = threading.Event()

    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        start_sse(handler)
        handler.wfile.write(STREAM[0])
        handler.wfile.flush()
        client_closed.wait(BOUND_S)
        try:
            for _ in range(2000):  # far more than the sockets' buffers hold: a write to Codex must fail
                handler.wfile.write(STREAM[0])
                handler.wfile.flush()
        except OSError:
            pass  # the proxy closed the provider's request

    upstream = Upstream(answer)
    log = tmp_path / "log.jsonl"
    try:
        with RecordingProxy(upstream.base_url, log_path=log) as proxy:
            _hang_up_after(proxy.port, body, reset=True)
            client_closed.set()
            # the outcome as the proxy judged it, before stopping it (a stopping proxy calls every exchange gone)
            deadline = time.monotonic() + BOUND_S
            while not any("outcome" in entry for entry in logged(log)) and time.monotonic() < deadline:
                time.sleep(POLL_S)
    finally:
        upstream.close()
    (last,) = [entry for entry in logged(log) if "outcome" in entry]
    assert last["outcome"] == "disconnected", last


def test_an_unknown_route_and_an_unreachable_provider(tmp_path: Path, body: bytes) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens there
    log = tmp_path / "log.jsonl"
    with RecordingProxy(f"http://127.0.0.1:{port}/v1", log_path=log) as proxy:
        unknown = post(proxy.port, "/v1/responses", body)
        assert unknown.status == 404 and b"no route" in unknown.read()
        gone = post(proxy.port, "/agents/A/responses", body)
        assert gone.status == 502 and b"could not be reached" in gone.read()
    records = [r for r in logged(log) if r["event"] == "response"]
    assert [(r["agent"], r["outcome"]) for r in records] == [(None, "unexpected"), ("A", "failed")]
    with pytest.raises(ProxyError):
        RecordingProxy("file:///etc/passwd")


def test_a_client_that_lets_go_after_the_completed_event_was_answered(tmp_path: Path, body: bytes) -> None:
    """Codex stops reading once ``response.completed`` arrives and drops the connection, possibly before the
    provider closed its end: the whole answer went through, so the request was answered, not cut."""

    def answer(handler: BaseHTTPRequestHandler, raw: bytes) -> None:
        start_sse(handler)
        handler.wfile.write(b"".join(STREAM))
        handler.wfile.flush()
        # the provider keeps its end open until the proxy, seeing Codex gone, closes the request
        handler.connection.settimeout(BOUND_S)
        with contextlib.suppress(OSError):
            handler.connection.recv(1)

    upstream = Upstream(answer)
    log = tmp_path / "log.jsonl"
    try:
        with RecordingProxy(upstream.base_url, log_path=log) as proxy:
            _hang_up_after(proxy.port, body, event=STREAM[2], agent="A")
            (exchange,) = proxy.exchanges
            assert exchange.client_gone.wait(BOUND_S)
    finally:
        upstream.close()
    last = logged(log)[-1]
    assert (last["outcome"], last["items"]) == ("answered", [ITEM]), last
