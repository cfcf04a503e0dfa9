"""The control socket protocol: one JSON object a line, in both directions.

Request:  ``{"id": 1, "op": "send_message", "token": "...", "args": {...}, "meta": {...}}``
Response: ``{"id": 1, "ok": true, "result": {...}}`` or
          ``{"id": 1, "ok": false, "error": {"code": "...", "message": "...", "details": {...}}}``

:class:`ControlClient` opens one connection per call, so a slow call (a wait)
never holds up another, and a client that gives up closes only its own call.
Giving up cancels nothing the app has admitted.
"""

from __future__ import annotations

import errno
import itertools
import json
import socket
from typing import Any

from .errors import Code, PeerwireError
from .home import Home
from .limits import CONTROL_GRACE_S, CONTROL_LINE_BYTES

_ids = itertools.count(1)


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


class ControlClient:
    """Calls the app that owns ``home`` as the caller holding ``token``."""

    def __init__(self, home: Home, token: str | None = None):
        self.home = home
        self.token = token

    def call(self, op: str, args: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
             wait_s: float = 0.0) -> dict[str, Any]:
        """Run one operation. ``wait_s`` is how long the operation itself may wait."""
        request = {"id": next(_ids), "op": op, "args": args or {}, "meta": meta or {}}
        if self.token:
            request["token"] = self.token
        with self._connect() as sock:
            sock.settimeout(wait_s + CONTROL_GRACE_S)
            try:
                sock.sendall(encode(request))
                line = _read_line(sock)
            except socket.timeout:
                raise PeerwireError(
                    Code.APP_UNAVAILABLE,
                    f"the app for {self.home.path} did not answer {op} within {wait_s + CONTROL_GRACE_S:.0f}s; "
                    "anything it admitted stays admitted",
                ) from None
            except OSError as exc:
                raise self._unavailable(f"the connection to the app broke during {op} ({exc.strerror})") from None
        if not line:
            raise self._unavailable(f"the app closed the connection during {op}; it may be stopping")
        response = json.loads(line)
        if response.get("ok"):
            return response["result"]
        raise PeerwireError.from_dict(response.get("error") or {})

    def _connect(self) -> socket.socket:
        if not self.home.require_reachable():
            raise PeerwireError(
                Code.APP_UNAVAILABLE,
                f"home {self.home.path} does not exist; start `peerwire app --home {self.home.path}`",
                {"home": str(self.home.path)},
            )
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.home.socket_address() as address:
                sock.connect(address)
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.ENOENT, errno.ECONNREFUSED, errno.ENOTDIR):
                raise self._unavailable("no app is running for this home") from None
            if exc.errno == errno.EACCES:
                raise PeerwireError(Code.NOT_AUTHORIZED, f"no permission to reach the app's socket in {self.home.path}") from None
            raise self._unavailable(f"cannot reach the app ({exc.strerror})") from None
        return sock

    def _unavailable(self, why: str) -> PeerwireError:
        return PeerwireError(
            Code.APP_UNAVAILABLE,
            f"{why}: start it with `peerwire app --home {self.home.path}`",
            {"home": str(self.home.path)},
        )


def _read_line(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if chunk.endswith(b"\n") or b"\n" in chunk:
            data = b"".join(chunks)
            return data[: data.index(b"\n")]
        if size > CONTROL_LINE_BYTES * 64:
            raise PeerwireError(Code.INTERNAL, "the app sent an oversized response")
