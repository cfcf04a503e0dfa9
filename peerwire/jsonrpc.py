"""JSON-RPC 2.0 messages and their framing for newline-delimited stdio, with no I/O.

One message model serves both ends of the wire: the MCP server reads what a
client asks (:func:`read_line`), and a client of another process's server
(:class:`peerwire.stdio_peer.StdioPeer`, the Codex app-server and ACP clients)
reads what that server says (:func:`read_peer_message`). Either way a message is
a :class:`Request` (it has an id and wants an answer), a :class:`Notification`
(no id, never answered) or, on the client side, a :class:`Response`.

:func:`read_line` turns one input line into what it means: a :class:`Request`,
a :class:`Notification`, a :class:`Batch` of those, a :class:`Rejected`
message that must be answered with an error, or ``None`` (nothing to answer:
a blank line or a response from the client). :func:`encode` turns an outgoing
message into one line of bytes.

What the wire refuses, and how (the client caused it, so never -32603):

* bytes that are not UTF-8, and text that is not JSON — including ``NaN`` and
  ``Infinity``, which JSON does not have — are -32700 with id null;
* nesting deeper than :data:`~peerwire.limits.MAX_JSON_DEPTH` levels is
  -32600 (with the request's id when it can be read, else null);
* a string holding a lone surrogate (a ``\\ud800`` escape with no partner)
  cannot be written as UTF-8: in the id it is -32600 with id null, in the
  method -32601, in the params -32602;
* a value that is not a request object (no string method, an id that is not a
  string or an integer) is -32600 with id null;
* a batch (an array) is answered element by element where the negotiated
  revision allows batches, else refused as a whole with -32600;
* a request whose id is already in flight on the session (:func:`in_flight`)
  is -32600 naming the id, and changes nothing: ``7`` and ``"7"`` are two ids.

Outgoing text never contains ``NaN``/``Infinity`` or a lone surrogate, so
stdout is always valid JSON in valid UTF-8.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

from .limits import MAX_JSON_DEPTH

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

# A \uD800-\uDFFF escape may decode to a lone surrogate; without one none can
# appear (the bytes were decoded strictly), so most lines skip the string walk.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Request:
    """A request: the MCP server's incoming call, or a server-initiated request a client answers."""

    id: str | int
    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Notification:
    """A message with no id, never answered.

    ``index`` is its position in the receiving peer's ``received`` list (see
    :class:`peerwire.stdio_peer.StdioPeer`), so a consumer can resume after it;
    ``None`` where nobody keeps such a list (the MCP server).
    """

    method: str
    params: Any
    index: int | None = None

    @property
    def after(self) -> int:
        """The index just past this one, where a consumer resumes; only a kept notification has one."""
        if self.index is None:
            raise ValueError(f"{self.method}: a notification nobody keeps has no place to resume after")
        return self.index + 1


@dataclass(frozen=True)
class Response:
    """The answer to a request a client sent: ``result``, or ``error`` (an error object) when it failed."""

    id: Any
    result: Any = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class Rejected:
    """A message that is answered with a JSON-RPC error and nothing else."""

    id: str | int | None
    code: int
    message: str


@dataclass(frozen=True)
class Batch:
    items: tuple[Union[Request, Notification, Rejected], ...]


Message = Union[Request, Notification, Rejected, Batch]


def shown(value: Any, limit: int = 60) -> str:
    """A client-supplied value for an error message: ASCII-escaped (surrogates too), shortened."""
    text = json.dumps(value, ensure_ascii=True) if isinstance(value, str) else type(value).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def id_key(msg_id: str | int) -> str:
    """A request id as a key that keeps JSON's types apart: ``7`` and ``"7"`` are different ids."""
    return json.dumps(msg_id, ensure_ascii=True)


def in_flight(msg_id: str | int) -> Rejected:
    """The refusal of a request that reuses ``msg_id`` while a request with that id is unanswered.

    Answers are matched to requests by id alone, so a second request under a
    live id would make both answers ambiguous and take the first call's
    ``notifications/cancelled`` away from it; it is refused and nothing else
    happens. The id is free again once its request is answered or cancelled.
    """
    shown_id = shown(msg_id) if isinstance(msg_id, str) else str(msg_id)
    return Rejected(msg_id, INVALID_REQUEST,
                    f"Invalid Request: id {shown_id} is already in flight on this session; "
                    "use another id, or this one again after its answer")


def refuse_constant(name: str) -> Any:
    """``parse_constant`` for :func:`json.loads`: ``NaN`` and ``Infinity`` are not JSON, so refuse them."""
    raise ValueError(f"{name} is not a JSON value")


def strict_loads(text: str | bytes) -> Any:
    """JSON as the RFC has it: ``NaN``/``Infinity`` raise ``ValueError`` (deep nesting ``RecursionError``)."""
    return json.loads(text, parse_constant=refuse_constant)


def decode(raw: bytes) -> Any:
    """The JSON value of one line, or a :class:`Rejected` saying why there is none."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Rejected(None, PARSE_ERROR, f"Parse error: the line is not UTF-8 (byte {exc.start})")
    try:
        return strict_loads(text)
    except RecursionError:
        return Rejected(None, INVALID_REQUEST,
                        f"Invalid Request: nested more than {MAX_JSON_DEPTH} levels deep")
    except ValueError as exc:
        return Rejected(None, PARSE_ERROR, f"Parse error: {exc}")


def depth_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, level = stack.pop()
        children: Iterable[Any]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if level > limit:
            return True
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list)))
    return False


def lone_surrogate_at(value: Any, path: str = "") -> str | None:
    """The path of the first string (or key) holding a lone surrogate, else ``None``."""
    stack = [(value, path)]
    while stack:
        node, where = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                return where or "(the message)"
        elif isinstance(node, dict):
            for key, child in node.items():
                here = f"{where}.{key}" if where else str(key)
                if _SURROGATE.search(key):
                    return where + " (a key)" if where else "(a key)"
                stack.append((child, here))
        elif isinstance(node, list):
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(node))
    return None


def read_line(raw: bytes, *, batches: bool) -> Message | None:
    """What one input line asks for; ``None`` when nothing is to be answered."""
    line = raw.strip()
    if not line:
        return None
    value = decode(line)
    if isinstance(value, Rejected):
        return value
    # Cheap guards first: nesting needs that many brackets, surrogates need an escape.
    deep = line.count(b"[") + line.count(b"{") > MAX_JSON_DEPTH and depth_exceeds(value)
    suspicious = _SURROGATE_ESCAPE.search(line) is not None
    if isinstance(value, list):
        if not batches:
            return Rejected(None, INVALID_REQUEST,
                            "Invalid Request: batches are not supported by the negotiated protocol revision")
        if not value:
            return Rejected(None, INVALID_REQUEST, "Invalid Request: an empty batch")
        if deep:
            return Rejected(None, INVALID_REQUEST,
                            f"Invalid Request: nested more than {MAX_JSON_DEPTH} levels deep")
        items = [_classify(item, deep=False, suspicious=suspicious) for item in value]
        return Batch(tuple(i for i in items if i is not None))
    return _classify(value, deep=deep, suspicious=suspicious)


def _classify(message: Any, *, deep: bool, suspicious: bool) -> Request | Notification | Rejected | None:
    if not isinstance(message, dict):
        return Rejected(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    method = message.get("method")
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response; this server sends no requests, so there is nothing to match it to
    if "id" not in message:
        if isinstance(method, str):
            return Notification(method, message.get("params"))  # never answered, valid or not
        return Rejected(None, INVALID_REQUEST, 'Invalid Request: needs a string "method"')
    msg_id = message["id"]
    if isinstance(msg_id, bool) or not isinstance(msg_id, (str, int)):
        return Rejected(None, INVALID_REQUEST, "Invalid Request: id must be a string or an integer")
    if suspicious and isinstance(msg_id, str) and _SURROGATE.search(msg_id):
        return Rejected(None, INVALID_REQUEST, "Invalid Request: the id holds a lone surrogate (not Unicode text)")
    if not isinstance(method, str):
        return Rejected(None, INVALID_REQUEST, 'Invalid Request: needs a string "method"')
    if message.get("jsonrpc") != "2.0":
        return Rejected(msg_id, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0"')
    if deep and depth_exceeds(message):
        return Rejected(msg_id, INVALID_REQUEST,
                        f"Invalid Request: nested more than {MAX_JSON_DEPTH} levels deep")
    if suspicious and _SURROGATE.search(method):
        return Rejected(msg_id, METHOD_NOT_FOUND, f"Method not found: {shown(method)}")
    params = message.get("params")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        return Rejected(msg_id, INVALID_PARAMS, "Invalid params: params must be an object")
    if suspicious:
        where = lone_surrogate_at(params, "params")
        if where is not None:
            return Rejected(msg_id, INVALID_PARAMS,
                            f"Invalid params: {where} holds a lone surrogate, which is not Unicode text")
    return Request(msg_id, method, params)


def encode(message: Any) -> bytes:
    """One output line. Raises ``ValueError`` for NaN/Infinity (a bug of ours, never sent)."""
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate from our own side (input never carries one): replace it, write valid UTF-8.
        return text.encode("utf-8", "replace") + b"\n"


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error object (``data`` only when there is some)."""
    body: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return body


def error(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The error response to request ``msg_id``."""
    return {"jsonrpc": "2.0", "id": msg_id, "error": error_object(code, message, data)}


def read_peer_message(value: Any) -> Request | Notification | Response | None:
    """What a server we are a client of said, leniently: ``None`` for anything that is no JSON-RPC message.

    A client trusts its peer more than a server trusts the world: params that are
    not an object read as empty, and a message with both a method and an id is a
    server-initiated request whatever else it holds.
    """
    if not isinstance(value, dict):
        return None
    method = value.get("method")
    if method is None:
        if "id" not in value:
            return None
        error_body = value.get("error")
        return Response(value["id"], value.get("result"),
                        (error_body if isinstance(error_body, dict) else {"code": 0, "message": str(error_body)})
                        if "error" in value else None)
    if not isinstance(method, str):
        return None
    params = value.get("params")
    params = params if isinstance(params, dict) else {}
    if "id" in value:
        return Request(value["id"], method, params)
    return Notification(method, params)
