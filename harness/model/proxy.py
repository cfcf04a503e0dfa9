"""The recording proxy: a real provider behind a loopback route per agent, logged like the scripted model.

In a real-provider run each agent's Codex reaches the provider through this
proxy, owned by the run. ``http://127.0.0.1:PORT/agents/<agent>`` stands for
the provider's ``base_url``: a request to ``/agents/<agent>/<rest>`` is sent
to ``<base_url>/<rest>`` (the query kept) with its method, headers and body
unchanged (only the hop-by-hop headers and ``Host`` are the new connection's
own), and the answer comes back unchanged: status, headers and body bytes,
streamed chunk by chunk as they arrive (an SSE stream is never held whole).

Every request and its outcome go to the model request log in the scripted
model's format (:mod:`harness.model.log`), so every reader of model inputs
works for both: the ``request`` record as it arrived (credential headers left
out, ``raw_sha256`` of the body's bytes), and the ``response`` record with
the upstream ``status``, the ``items`` the model emitted (each
``response.output_item.done`` of the stream) and an ``outcome``:

* ``answered``: a 2xx answer relayed whole (an SSE stream up to ``response.completed``);
* ``failed``: the provider answered an error status, cut its stream short, or could not be reached (502);
* ``disconnected``: Codex hung up first (an interrupted turn); the upstream request is closed then too;
* ``unexpected``: not an agent's route (404), or a WebSocket upgrade, which the proxy does not carry (501).

Credentials pass through (the provider needs them) but are never written: the
log keeps no header that may carry one, and the upstream URL it records has no
user information or query.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import select
import socket
import ssl
import sys
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

from harness.model.log import ModelLogWriter, redacted_headers
from harness.model.server import decode_body

_ROUTE = re.compile(r"^/agents/(?P<agent>[^/?]+)(?P<rest>/[^?]*)?(?:\?(?P<query>.*))?$")
# Hop-by-hop headers (RFC 9110 § 7.6.1) belong to one connection; Host and the body's framing are the new one's.
_HOP = frozenset({"connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
                  "trailer", "transfer-encoding", "upgrade", "host", "content-length"})
CHUNK = 64 * 1024
UPSTREAM_TIMEOUT_S = 600.0
"""How long an upstream connection may stay silent (a model may think long before its first event)."""
_WATCH_S = 0.05
_HANDLER_JOIN_S = 5.0


class ProxyError(ValueError):
    """The upstream base URL cannot be proxied (not http or https, no host)."""


@dataclass
class ProxiedExchange:
    """One request through the proxy and what became of it (``outcome`` ``pending`` until it ends)."""

    seq: int
    agent: str | None
    method: str
    path: str
    raw: bytes = field(repr=False)
    outcome: str = "pending"
    status: int | None = None
    items: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    client_gone: threading.Event = field(default_factory=threading.Event, repr=False)
    upstream: socket.socket | None = field(default=None, repr=False)
    """The upstream connection's socket once connected (http.client lets go of it when the answer owns it)."""

    def cut(self) -> None:
        """End the upstream request now, waking whoever reads it."""
        if self.upstream is not None:
            with contextlib.suppress(OSError):
                self.upstream.shutdown(socket.SHUT_RDWR)


class SseItems:
    """Reads an SSE stream as it passes, bytes in any cuts: the items of ``response.output_item.done`` events and
    whether ``response.completed`` came. A content encoding it cannot undo leaves it blind (``readable`` False)."""

    def __init__(self, encoding: str | None):
        encoding = (encoding or "identity").lower()
        self._inflate = (zlib.decompressobj(16 + zlib.MAX_WBITS) if encoding == "gzip" else
                         zlib.decompressobj() if encoding == "deflate" else None)
        self.readable = encoding in ("identity", "gzip", "deflate")
        self._pending = b""
        self.items: list[dict[str, Any]] = []
        self.completed = False
        self.failed: str | None = None

    def feed(self, chunk: bytes) -> None:
        if not self.readable:
            return
        data = self._inflate.decompress(chunk) if self._inflate is not None else chunk
        self._pending += data.replace(b"\r\n", b"\n")
        while b"\n\n" in self._pending:
            block, self._pending = self._pending.split(b"\n\n", 1)
            self._event(block)

    def _event(self, block: bytes) -> None:
        data = b"\n".join(line[5:].lstrip(b" ") for line in block.split(b"\n") if line.startswith(b"data:"))
        try:
            event = json.loads(data) if data else None
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            self.items.append(event["item"])
        elif kind == "response.completed":
            self.completed = True
        elif kind in ("response.failed", "error", "response.incomplete"):
            self.failed = json.dumps(event.get("response", {}).get("error") or event.get("error") or kind)[:500]


def upstream_url(base_url: str, rest: str, query: str | None) -> str:
    """Where ``/agents/<agent><rest>?<query>`` goes: ``base_url`` + ``rest`` (one slash between) + the query."""
    return base_url.rstrip("/") + (rest or "") + (f"?{query}" if query else "")


def shown_url(url: str) -> str:
    """``url`` without user information and query: what a log may say of where a request went."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path}"


class RecordingProxy:
    """A running recording proxy in front of ``upstream`` (the provider's ``base_url``); see the module docs.

    Binds 127.0.0.1 on an ephemeral port (or ``port``) and serves from a
    background thread; ``exchanges`` lists every request, in arrival order.
    ``stop()`` closes upstream connections still open and waits for handlers."""

    def __init__(self, upstream: str, *, log_path: str | os.PathLike[str] | None = None, port: int = 0):
        parts = urlsplit(upstream)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ProxyError(f"cannot proxy {shown_url(upstream)!r}: the provider's base_url must be an http or "
                             f"https URL with a host")
        self.upstream = upstream
        self.exchanges: list[ProxiedExchange] = []
        self._address = ("127.0.0.1", port)
        self._lock = threading.Lock()
        self._log = ModelLogWriter(log_path)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._handlers: set[threading.Thread] = set()
        self._stopping = threading.Event()

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> "RecordingProxy":
        self._log.open()
        self._server = _Server(self._address, _Handler, self)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": _WATCH_S},
                                        name="recording-proxy", daemon=True)
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
            open_exchanges, handlers = [e for e in self.exchanges if e.outcome == "pending"], list(self._handlers)
        for exchange in open_exchanges:
            exchange.cut()
        for handler in handlers:
            handler.join(_HANDLER_JOIN_S)
        self._server = None
        with self._lock:
            self._log.close()

    def __enter__(self) -> "RecordingProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the recording proxy is not running")
        return self._server.server_address[1]

    def base_url(self, agent: str) -> str:
        """The ``base_url`` agent ``agent``'s Codex is given: its route, standing for the provider's."""
        return f"http://127.0.0.1:{self.port}/agents/{agent}"

    # -- one exchange (handler threads) ------------------------------------------------------

    def _begin(self, handler: "_Handler", raw: bytes) -> tuple[ProxiedExchange, re.Match[str] | None]:
        route = _ROUTE.fullmatch(handler.path)
        with self._lock:
            self._handlers.add(threading.current_thread())
            exchange = ProxiedExchange(len(self.exchanges), unquote(route.group("agent")) if route else None,
                                       handler.command, handler.path, raw)
            self.exchanges.append(exchange)
            self._log.request(seq=exchange.seq, at=time.time(), method=handler.command, path=handler.path,
                              agent=exchange.agent, headers=redacted_headers(handler.headers.items()),
                              body=decode_body(raw, handler.headers.get("Content-Encoding")), raw=raw)
        return exchange, route

    def _finish(self, exchange: ProxiedExchange, outcome: str, error: str | None = None, *,
                upstream: str | None = None) -> None:
        with self._lock:
            exchange.outcome, exchange.error = outcome, error
            self._log.write({"event": "response", "seq": exchange.seq, "at": time.time(), "agent": exchange.agent,
                             "outcome": outcome, "rule": None, "hold": None, "status": exchange.status,
                             "upstream": upstream, "items": exchange.items, "error": error})
            self._handlers.discard(threading.current_thread())

    def _connect(self, url: str) -> http.client.HTTPConnection:
        parts = urlsplit(url)
        if parts.scheme == "https":
            return http.client.HTTPSConnection(parts.hostname, parts.port, timeout=UPSTREAM_TIMEOUT_S,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(parts.hostname, parts.port, timeout=UPSTREAM_TIMEOUT_S)


def _peer_closed(connection: socket.socket) -> bool:
    # Codex sends nothing after the request body: a readable socket means it hung up.
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], proxy: RecordingProxy):
        super().__init__(address, handler)
        self.proxy = proxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return  # a client that hung up: the exchange's outcome says so
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the model request log is the record

    def do_GET(self) -> None:
        self._relay()

    def do_POST(self) -> None:
        self._relay()

    do_PUT = do_PATCH = do_DELETE = do_POST

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts = []
            while (size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)) > 0:
                parts.append(self.rfile.read(size))
                self.rfile.readline()
            while self.rfile.readline().strip():  # trailers
                pass
            return b"".join(parts)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _relay(self) -> None:
        proxy = self.server.proxy
        exchange, route = proxy._begin(self, self._body())
        self.close_connection = True
        if route is None:
            self._refuse(exchange, HTTPStatus.NOT_FOUND, f"no route {self.path}: the proxy serves /agents/<agent>/...")
            return
        if "websocket" in self.headers.get("Upgrade", "").lower():
            self._refuse(exchange, HTTPStatus.NOT_IMPLEMENTED, "the recording proxy carries HTTP requests, not "
                                                                "WebSocket upgrades")
            return
        url = upstream_url(proxy.upstream, route.group("rest") or "", route.group("query"))
        connection = proxy._connect(url)
        threading.Thread(target=self._watch, args=(exchange,), name="proxy-watch", daemon=True).start()
        try:
            self._forward(exchange, connection, url)
        finally:
            exchange.client_gone.set()  # ends the watcher
            connection.close()
            if exchange.upstream is not None:
                exchange.upstream.close()

    def _watch(self, exchange: ProxiedExchange) -> None:
        """Until the exchange ends: if Codex hangs up, end the upstream request too (a cancelled turn).

        Codex sends nothing after the request body, so there is no event to block on: a bounded poll."""
        while not exchange.client_gone.wait(_WATCH_S):
            if _peer_closed(self.connection):
                exchange.error = exchange.error or "the client hung up"
                exchange.client_gone.set()
                exchange.cut()
                return

    def _forward(self, exchange: ProxiedExchange, connection: http.client.HTTPConnection, url: str) -> None:
        proxy = self.server.proxy
        shown = shown_url(url)
        parts = urlsplit(url)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        headers = [(name, value) for name, value in self.headers.items() if name.lower() not in _HOP | {"expect"}]
        try:
            connection.putrequest(self.command, target or "/", skip_accept_encoding=True)
            for name, value in headers:
                connection.putheader(name, value)
            if exchange.raw or self.command in ("POST", "PUT", "PATCH"):
                connection.putheader("Content-Length", str(len(exchange.raw)))
            connection.endheaders(exchange.raw or None)
            exchange.upstream = connection.sock
            if exchange.client_gone.is_set() or proxy._stopping.is_set():
                exchange.cut()  # hung up (or stopped) while we connected: the watcher found no socket to end
            answer = connection.getresponse()
        except (OSError, http.client.HTTPException) as error:
            gone = exchange.client_gone.is_set() or proxy._stopping.is_set()
            if not gone:
                self._send_error(HTTPStatus.BAD_GATEWAY, f"the provider at {shown} could not be reached: {error}")
            proxy._finish(exchange, "disconnected" if gone else "failed", f"{type(error).__name__}: {error}",
                          upstream=shown)
            return
        exchange.status = answer.status
        reader = SseItems(answer.getheader("Content-Encoding"))
        cut: str | None = None  # why the relay stopped short, if it did
        try:
            self.send_response_only(answer.status, answer.reason)
            for name, value in answer.getheaders():
                if name.lower() not in _HOP:
                    self.send_header(name, value)
            self.send_header("Connection", "close")  # one request a connection: the body ends with it
            self.end_headers()
            self.wfile.flush()
            for chunk in _chunks(answer):
                reader.feed(chunk)
                self.wfile.write(chunk)
                self.wfile.flush()
        except (OSError, http.client.HTTPException) as error:
            cut = f"{type(error).__name__}: {error}"
            if _peer_closed(self.connection):
                # Writing to Codex failed because it hung up, before the watcher's next look: the same hang-up.
                exchange.error = exchange.error or "the client hung up"
                exchange.client_gone.set()
        exchange.items = reader.items
        gone = exchange.client_gone.is_set() or proxy._stopping.is_set()
        sse = _is_sse(answer) and reader.readable
        if not 200 <= answer.status < 300:
            outcome, error = "failed", f"the provider answered HTTP {answer.status} {answer.reason}"
        elif sse and reader.failed:
            outcome, error = "failed", reader.failed
        elif sse and reader.completed:
            # The whole answer went through: Codex may let go of the stream right after response.completed.
            outcome, error = "answered", None
        elif gone:
            outcome, error = "disconnected", exchange.error or cut
        elif cut is not None:
            outcome, error = "failed", cut
        elif sse:
            outcome, error = "failed", "the stream ended before response.completed"
        else:
            outcome, error = "answered", None
        proxy._finish(exchange, outcome, error, upstream=shown)

    def _refuse(self, exchange: ProxiedExchange, status: HTTPStatus, message: str) -> None:
        exchange.status = status.value
        self.server.proxy._finish(exchange, "unexpected", message)
        self._send_error(status, message)

    def _send_error(self, status: HTTPStatus, message: str) -> None:
        data = json.dumps({"error": {"message": f"recording proxy: {message}", "type": "proxy_error"}}).encode()
        with contextlib.suppress(OSError):
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()


def _is_sse(answer: http.client.HTTPResponse) -> bool:
    return (answer.getheader("Content-Type") or "").lower().startswith("text/event-stream")


def _chunks(answer: http.client.HTTPResponse) -> Iterator[bytes]:
    """The body as it arrives: whatever the connection has, never waiting to fill a buffer."""
    while chunk := answer.read1(CHUNK):
        yield chunk
