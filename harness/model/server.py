"""The scripted model: a Responses-API server on loopback that Codex talks to.

Routes (one model per agent):

- `POST /agents/<agent>/v1/responses` — Codex's model request. The answer is
  an SSE stream: `response.created`, one `response.output_item.done` per
  output item, `response.completed` with `usage`. What to send is decided by
  `harness.model.rules` from the request body alone. A request no rule
  matches gets HTTP 400 with an OpenAI-style error body (Codex fails the turn
  without retrying and shows the message) and is recorded as `unexpected`.
- `POST /agents/<agent>/v1/chat/completions` — OpenCode's model request (an
  OpenAI-compatible provider, `stream: true`). The same rules decide, on the
  request's Responses view (`harness.evidence.chat_requests`); the answer streams as
  `chat.completion.chunk` events and `[DONE]`. Errors as above.
- `POST /control/release/<hold>` — open a hold (see `ScriptedModel.release`).
- `GET /control/holds` — every hold with `released` and `waiting` counts.

Anything else is answered 404 and recorded as `unexpected`.

Every request and its outcome go to the model request log
(:mod:`harness.model.log`, the format the recording proxy writes too): a
`request` record (agent, path, headers without credentials, the body's digests
and the body, stored compacted) when it arrives, a `response` record (rule,
outcome, emitted items) when it ends, and a `release` record per released hold. Run in-process (`with ScriptedModel(script) as model:`) or
as a subprocess:

    python -m harness.model.server --scenario FILE --port-file F --log FILE
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import re
import select
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

from harness.evidence import chat_requests
from harness.model import chat
from harness.model.log import ModelLogWriter, redacted_headers
from harness.model.rules import Decision, ModelScript, load_script, namespaces

_RESPONSES_ROUTE = re.compile(r"^/agents/([^/]+)/v1/(?:responses|chat/completions)$")
_PROVIDER_ROUTE = "/v1/responses"
_RELEASE_ROUTE = re.compile(r"^/control/release/([^/]+)$")
# How often a handler parked on a hold checks whether Codex hung up.
_HOLD_POLL_S = 0.05
_HANDLER_JOIN_S = 5.0
# serve_forever notices shutdown() only between polls.
_SHUTDOWN_POLL_S = 0.05

UNEXPECTED_ERROR_CODE = "scripted_model_unexpected_request"

Outcome = Literal["pending", "answered", "unexpected", "disconnected", "aborted"]


@dataclass
class Exchange:
    """One HTTP request to the scripted model and what became of it.

    `outcome` is `pending` while it runs, then one of `answered` (rule matched,
    stream completed), `unexpected` (no rule or unknown route),
    `disconnected` (the client went away before the answer was complete) or
    `aborted` (the server stopped while the request was held).
    """

    seq: int
    method: str
    path: str
    agent: str | None
    headers: dict[str, str]
    body: Any
    received_at: float
    raw: bytes | None = field(default=None, repr=False)
    """The body's bytes as they arrived."""
    outcome: Outcome = "pending"
    rule_id: str | None = None
    hold: str | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    finished_at: float | None = None
    view: dict[str, Any] | None = None
    """A chat request's Responses view (what the rules read); None for a Responses request."""

    def input_items(self) -> list[Any]:
        """The request's input as Responses items (a chat request's messages, translated)."""
        body = self.view if self.view is not None else self.body if isinstance(self.body, dict) else {}
        return list(body.get("input") or [])

    @property
    def wire(self) -> str:
        """``chat`` for a Chat Completions request, else ``responses``."""
        return "chat" if chat_requests.is_chat(self.path) else "responses"


@dataclass
class _Hold:
    released: threading.Event = field(default_factory=threading.Event)
    waiting: list[Exchange] = field(default_factory=list)
    arrivals: int = 0


class ScriptedModel:
    """A running scripted model server for one `ModelScript`.

    Binds 127.0.0.1 on an ephemeral port (or `port`) when started and serves
    from a background thread. `stop()` aborts held requests (their streams end
    without `response.completed`, which Codex reports as a failed turn),
    waits for handlers and closes the log. The server decides from request
    bodies only; the in-memory `exchanges` and the log are for the runner.
    """

    def __init__(
        self,
        script: ModelScript,
        *,
        port: int = 0,
        log_path: str | os.PathLike[str] | None = None,
    ):
        self.script = script
        self.exchanges: list[Exchange] = []
        # Loopback only: the model is for the agents on this machine.
        self._address = ("127.0.0.1", port)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._holds: dict[str, _Hold] = {name: _Hold() for name in script.holds}
        self._stopping = threading.Event()
        self._log = ModelLogWriter(log_path)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._handlers: set[threading.Thread] = set()
        self._servers = chat_requests.servers_of(_script_namespaces(script))
        """The MCP servers the rules name: how a chat tool name splits into namespace and tool."""

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> ScriptedModel:
        self._log.open()
        self._server = _Server(self._address, _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": _SHUTDOWN_POLL_S},
            name="scripted-model",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; idempotent."""
        if self._server is None:
            return
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            handlers = list(self._handlers)
        for handler in handlers:
            handler.join(_HANDLER_JOIN_S)
        self._server = None
        with self._lock:
            self._log.close()

    def __enter__(self) -> ScriptedModel:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("scripted model is not running")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def base_url(self, agent: str) -> str:
        """The `base_url` for agent's Codex provider config."""
        return f"{self.url}/agents/{agent}/v1"

    # -- holds -------------------------------------------------------------------

    def release(self, hold: str) -> int:
        """Open `hold`: requests parked on it continue, later ones pass straight
        through (a hold is a gate that stays open once released). Returns how
        many requests were parked. Raises KeyError for a hold no rule names."""
        with self._changed:
            gate = self._holds[hold]
            waiting = len(gate.waiting)
            gate.released.set()
            self._write_log({"event": "release", "hold": hold, "at": time.time(), "waiting": waiting})
            self._changed.notify_all()
        return waiting

    def wait_for_hold(self, hold: str, *, timeout: float) -> Exchange:
        """Block until a request is parked on `hold` (or has passed it) and
        return that exchange; raises TimeoutError after `timeout` seconds."""
        with self._changed:
            gate = self._holds[hold]
            if not self._changed.wait_for(lambda: gate.arrivals > 0, timeout):
                raise TimeoutError(f"no request reached hold {hold!r} within {timeout} s")
            return next(exchange for exchange in reversed(self.exchanges) if exchange.hold == hold)

    def holds(self) -> dict[str, dict[str, Any]]:
        """Each hold's state: `released`, `waiting` (parked now), `arrivals` (ever)."""
        with self._lock:
            return {
                name: {
                    "released": gate.released.is_set(),
                    "waiting": len(gate.waiting),
                    "arrivals": gate.arrivals,
                }
                for name, gate in self._holds.items()
            }

    # -- observation -------------------------------------------------------------

    def wait_for_exchange(self, predicate: Callable[[Exchange], bool], *, timeout: float) -> Exchange:
        """Block until some exchange (earlier ones included) satisfies
        `predicate` and has finished; raises TimeoutError."""

        def found() -> Exchange | None:
            return next((e for e in self.exchanges if e.outcome != "pending" and predicate(e)), None)

        with self._changed:
            if not self._changed.wait_for(lambda: found() is not None, timeout):
                raise TimeoutError(f"no matching model request within {timeout} s")
            result = found()
            assert result is not None
            return result

    def unexpected(self) -> list[Exchange]:
        """Requests no rule matched or to unknown routes, in arrival order."""
        with self._lock:
            return [exchange for exchange in self.exchanges if exchange.outcome == "unexpected"]

    # -- request handling (called from handler threads) ---------------------------

    def _begin(self, handler: _Handler, method: str, body: Any, raw: bytes | None = None) -> Exchange:
        match = _RESPONSES_ROUTE.fullmatch(handler.path)
        with self._changed:
            self._handlers.add(threading.current_thread())
            exchange = Exchange(
                seq=len(self.exchanges),
                method=method,
                path=handler.path,
                agent=unquote(match.group(1)) if match else self._agent_of(handler.path, body),
                headers=redacted_headers(handler.headers.items()),
                body=body,
                received_at=time.time(),
                raw=raw,
            )
            self.exchanges.append(exchange)
            self._log.request(seq=exchange.seq, at=exchange.received_at, method=method, path=exchange.path,
                              agent=exchange.agent, headers=exchange.headers, body=body, raw=raw)
            self._changed.notify_all()
        return exchange

    def _finish(self, exchange: Exchange, outcome: Outcome, error: str | None = None) -> None:
        with self._changed:
            exchange.outcome = outcome
            exchange.error = error
            exchange.finished_at = time.time()
            if exchange.hold is not None:
                with contextlib.suppress(ValueError):
                    self._holds[exchange.hold].waiting.remove(exchange)
            self._write_log(
                {
                    "event": "response",
                    "seq": exchange.seq,
                    "at": exchange.finished_at,
                    "agent": exchange.agent,
                    "outcome": outcome,
                    "rule": exchange.rule_id,
                    "hold": exchange.hold,
                    "items": exchange.items,
                    "error": error,
                }
            )
            self._handlers.discard(threading.current_thread())
            self._changed.notify_all()

    def _agent_of(self, path: str, body: Any) -> str | None:
        """A request to the provider's own route (``/v1/responses``, as a real provider is addressed) names no
        agent; a script that can tell the agent from the request itself (see :mod:`harness.acceptance.standin`)
        says which."""
        agent_of = getattr(self.script, "agent_of", None)
        if path != _PROVIDER_ROUTE or agent_of is None or not isinstance(body, dict):
            return None
        return agent_of(body)

    def _decide(self, exchange: Exchange) -> Decision | None:
        if exchange.agent is None or not isinstance(exchange.body, dict):
            return None
        body = exchange.body
        if exchange.wire == "chat":
            body = chat_requests.responses_view(body, self._servers, session=chat_requests.session_of(exchange.headers))
            with self._lock:
                exchange.view = body
        decision = self.script.decide(exchange.agent, body)
        if decision is not None:
            with self._lock:
                exchange.rule_id = decision.rule_id
                exchange.hold = decision.hold
                exchange.items = decision.items
        return decision

    def _park(self, exchange: Exchange, connection: socket.socket) -> Outcome | None:
        """Wait on the exchange's hold; returns None once released, else the
        outcome that ends the exchange (`disconnected` or `aborted`)."""
        assert exchange.hold is not None
        with self._changed:
            gate = self._holds[exchange.hold]
            gate.arrivals += 1
            gate.waiting.append(exchange)
            self._changed.notify_all()
        while not gate.released.wait(_HOLD_POLL_S):
            if self._stopping.is_set():
                return "aborted"
            if _peer_closed(connection):
                return "disconnected"
        return None

    def _write_log(self, record: dict[str, Any]) -> None:
        # Callers hold self._lock, which also orders the log lines.
        self._log.write(record)


def _script_namespaces(script: Any) -> set[str]:
    """The namespaces a script's rules name (a stand-in's scripts' too)."""
    found = namespaces(getattr(script, "rules", {}) or {})
    for inner in (getattr(script, "scripts", None) or {}).values():
        found |= namespaces(inner.rules)
    return found


def decode_body(raw: bytes, encoding: str | None) -> Any:
    """A request body as JSON (else text; empty: None), gzip content decoded first."""
    data = gzip.decompress(raw) if (encoding or "identity").lower() == "gzip" and raw else raw
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", errors="replace")


def _peer_closed(connection: socket.socket) -> bool:
    # Codex sends nothing after the request body, so a readable socket means
    # EOF or a reset: the client has hung up (e.g. the turn was interrupted).
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return False
        return connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def stand_in_usage(body: Any, items: list[dict[str, Any]]) -> dict[str, int]:
    """The usage the scripted model reports, so rollouts record a count per response as with a real
    provider: a quarter of the UTF-8 bytes (about a token's worth each) of the request's input (its
    instructions and tools as cached input) and of the emitted items. A stand-in, labelled as such wherever
    shown; no provider bills it."""
    def quarter(value: Any) -> int:
        return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) // 4 if value else 0

    body = body if isinstance(body, dict) else {}
    cached = quarter(body.get("instructions")) + quarter(body.get("tools"))
    return {"input_tokens": cached + quarter(body.get("input")), "cached_tokens": cached, "output_tokens": quarter(items)}


def sse_events(response_id: str, items: list[dict[str, Any]], *,
               usage: Mapping[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """The events after `response.created` for a completed response (``usage``: input, cached and output
    token counts to report; none: zeros)."""
    usage = usage or {}
    for index, item in enumerate(items):
        yield {"type": "response.output_item.done", "output_index": index, "item": item}
    yield {
        "type": "response.completed",
        "response": {
            "id": response_id,
            "object": "response",
            "status": "completed",
            "usage": {
                "input_tokens": usage.get("input_tokens", 0),
                "input_tokens_details": {"cached_tokens": usage.get("cached_tokens", 0)},
                "output_tokens": usage.get("output_tokens", 0),
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": usage.get("input_tokens", 0) + usage.get("output_tokens", 0),
            },
        },
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], model: ScriptedModel):
        super().__init__(address, handler)
        self.model = model

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client hanging up (Codex dropping a superseded or interrupted stream) is
        # an outcome the exchange log records, not a server fault worth a traceback.
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the JSONL log is the record

    def do_GET(self) -> None:
        if self.path == "/control/holds":
            self._send_json(HTTPStatus.OK, {"holds": self.server.model.holds()})
            return
        # Codex 0.171.0 calls nothing but /responses on a custom provider;
        # anything else is recorded so a new call shows up in the report.
        exchange = self.server.model._begin(self, "GET", None)
        self._unexpected(exchange, f"no route GET {self.path}", HTTPStatus.NOT_FOUND)

    def do_POST(self) -> None:
        raw, body = self._read_body()
        release = _RELEASE_ROUTE.fullmatch(self.path)
        if release:
            self._control_release(unquote(release.group(1)))
            return
        model = self.server.model
        exchange = model._begin(self, "POST", body, raw)
        if exchange.agent is None:
            self._unexpected(exchange, f"no route {self.path}", HTTPStatus.NOT_FOUND)
            return
        try:
            decision = model._decide(exchange)
        except Exception as error:  # a broken script answers like no rule, naming why, and the server stays up
            self._unexpected(exchange, f"the script failed on request #{exchange.seq}: {type(error).__name__}: {error}")
            return
        if decision is None:
            self._unexpected(exchange, f"no rule of agent {exchange.agent!r} matches request #{exchange.seq}")
            return
        self._stream(exchange, decision)

    def _control_release(self, hold: str) -> None:
        try:
            waiting = self.server.model.release(hold)
        except KeyError:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": f"no hold named {hold!r}"})
            return
        self._send_json(HTTPStatus.OK, {"hold": hold, "released": True, "waiting": waiting})

    def _stream(self, exchange: Exchange, decision: Decision) -> None:
        if exchange.wire == "chat":
            self._stream_chat(exchange, decision)
            return
        model = self.server.model
        response_id = decision.response_id
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            # The stream ends when the connection closes; Codex reads to EOF.
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            self._send_event(
                {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}}
            )
            if decision.hold is not None:
                ended = model._park(exchange, self.connection)
                if ended is not None:
                    model._finish(exchange, ended)
                    return
            for event in sse_events(response_id, decision.items, usage=stand_in_usage(exchange.body, decision.items)):
                self._send_event(event)
        except OSError as error:
            model._finish(exchange, "disconnected", repr(error))
            return
        model._finish(exchange, "answered")

    def _stream_chat(self, exchange: Exchange, decision: Decision) -> None:
        """A decision as Chat Completions chunks (held, when its rule holds, before the first one)."""
        model = self.server.model
        try:
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            if decision.hold is not None:
                ended = model._park(exchange, self.connection)
                if ended is not None:
                    model._finish(exchange, ended)
                    return
            usage = stand_in_usage(exchange.view, decision.items)
            for chunk in chat.chunks(decision.response_id, (exchange.body or {}).get("model"), decision.items,
                                     usage=usage, created=int(exchange.received_at)):
                self.wfile.write(f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n".encode("utf-8"))
                self.wfile.flush()
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
        except OSError as error:
            model._finish(exchange, "disconnected", repr(error))
            return
        model._finish(exchange, "answered")

    def _send_event(self, event: Mapping[str, Any]) -> None:
        data = json.dumps(event, ensure_ascii=False)
        self.wfile.write(f"event: {event['type']}\ndata: {data}\n\n".encode("utf-8"))
        self.wfile.flush()

    def _unexpected(
        self, exchange: Exchange, message: str, status: HTTPStatus = HTTPStatus.BAD_REQUEST
    ) -> None:
        # 400 rather than 5xx: Codex never retries it, fails the turn and
        # shows `message` to the user (checked with Codex 0.171.0).
        text = f"scripted model: {message}"
        # Recorded before answering, so whoever sees the 400 also finds the record.
        self.server.model._finish(exchange, "unexpected", text)
        self._send_json(
            status,
            {"error": {"message": text, "type": "invalid_request_error", "code": UNEXPECTED_ERROR_CODE}},
        )

    def _read_body(self) -> tuple[bytes, Any]:
        """The body's bytes as they arrived, and the body decoded (JSON; else text; none: None)."""
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return raw, decode_body(raw, self.headers.get("Content-Encoding"))

    def _send_json(self, status: HTTPStatus, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()


# -- command line ------------------------------------------------------------------


def serving_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options every command that serves a script shares: where to listen, where to say so, what to log."""
    parser.add_argument("--port", type=int, default=0, help="port to bind (default: ephemeral)")
    parser.add_argument("--port-file", required=True, type=Path, help="written with the bound port once serving")
    parser.add_argument("--log", required=True, type=Path, help="JSONL log of every request and response")
    return parser


def serve_until_signalled(script: Any, options: argparse.Namespace) -> int:
    """Serve ``script`` on loopback until SIGTERM or SIGINT; the port file appears, whole, once it listens."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    with ScriptedModel(script, port=options.port, log_path=options.log) as model:
        # Written aside and renamed, so a reader never sees a half-written port.
        partial = options.port_file.with_name(options.port_file.name + ".partial")
        partial.write_text(f"{model.port}\n", encoding="utf-8")
        partial.replace(options.port_file)
        print(f"listening {model.url}", flush=True)
        stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.model.server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", required=True, type=Path, help="scenario TOML with the model rules")
    options = serving_options(parser).parse_args(argv)
    return serve_until_signalled(load_script(options.scenario), options)


if __name__ == "__main__":
    raise SystemExit(main())
