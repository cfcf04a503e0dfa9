"""A deliberately broken MCP server: the reference behind a wrapper that breaks one rule.

    python mutant_server.py MUTATION -- SERVER_CMD...

The wrapper starts SERVER_CMD, relays newline-delimited JSON-RPC between its
own stdio and the server's, and applies one mutation on the way. Each mutation
is a realistic bug of one class; the contract suite must notice each one, and
``test_mutants.py`` checks that it fails exactly the requirement the mutation
breaks. Standard library only, so it starts fast.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from typing import Any, Callable

SPOOF_KEYS = ("sender", "from")
DEFAULT_LIMIT = 50
MAX_LENGTHS = {"target": 256, "request_id": 128, "name_prefix": 64, "provider": 32}
"""The input schemas' maxLength bounds, as the max-length-exclusive mutant gets them wrong."""


class Relay:
    """Relays messages both ways; mutations see each request and each response."""

    def __init__(self, argv: list[str]):
        self.server = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.pending: dict[str, tuple[dict, float]] = {}  # JSON id -> (request, when it was sent)
        self.out_lock = threading.Lock()
        self.memory: dict[str, Any] = {}  # what a mutation remembers across calls
        self.request_started = 0.0  # when the request a response answers was sent

    def to_client(self, message: Any) -> None:
        self.write(sys.stdout.buffer, message)

    def to_server(self, message: Any) -> None:
        assert self.server.stdin is not None
        self.write(self.server.stdin, message)

    def write(self, stream, message: Any) -> None:
        if isinstance(message, bytes):
            data = message
        else:
            try:
                data = json.dumps(message, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate stays the \\ud800 escape it came as
                data = json.dumps(message).encode()
        with self.out_lock:
            stream.write(data.rstrip(b"\n") + b"\n")
            stream.flush()


def _arguments(message: dict) -> dict | None:
    if message.get("method") != "tools/call":
        return None
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    return arguments if isinstance(arguments, dict) else None


def _tool(request: dict | None) -> str | None:
    params = request.get("params") if isinstance(request, dict) and request.get("method") == "tools/call" else None
    return params.get("name") if isinstance(params, dict) else None


def _structured(message: dict) -> dict | None:
    result = message.get("result")
    if isinstance(result, dict) and isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    return None


def _set_structured(message: dict, structured: dict) -> None:
    message["result"]["structuredContent"] = structured
    message["result"]["content"] = [{"type": "text", "text": json.dumps(structured, ensure_ascii=False)}]


def _tool_error(relay: Relay, request: dict, code: str, message: str) -> None:
    """Answer a tools/call with a tool error without asking the server."""
    structured = {"error": {"code": code, "message": message}}
    relay.to_client({"jsonrpc": "2.0", "id": request["id"], "result": {
        "content": [{"type": "text", "text": f"{code}: {message}"}], "structuredContent": structured,
        "isError": True}})


# -- mutations: (relay, message) -> message to pass on, or None to drop ------------------

def unicode_rewritten(relay: Relay, request: dict) -> dict:
    """Normalises message text (NFKC) and line breaks before the server sees it."""
    arguments = _arguments(request)
    if arguments and isinstance(arguments.get("message"), str):
        text = unicodedata.normalize("NFKC", arguments["message"])
        arguments["message"] = text.replace("\r\n", "\n").replace("\r", "\n")
    return request


def sender_honoured(relay: Relay, request: dict) -> dict:
    """Accepts a sender/from argument (silently dropping it) instead of rejecting the call."""
    arguments = _arguments(request)
    if arguments:
        for key in SPOOF_KEYS:
            arguments.pop(key, None)
    return request


def notification_answered(relay: Relay, request: dict) -> dict:
    """Answers every notification with an empty result."""
    if isinstance(request, dict) and "method" in request and "id" not in request:
        relay.to_client({"jsonrpc": "2.0", "id": None, "result": {}})
    return request


def limit_ignored(relay: Relay, request: dict) -> dict:
    """Drops receive_messages' limit: every read returns everything, any limit is accepted."""
    arguments = _arguments(request)
    if arguments and request["params"].get("name") == "receive_messages":
        arguments.pop("limit", None)
    return request


def ack_ignored(relay: Relay, request: dict) -> dict:
    """Drops receive_messages' ack_cursor: nothing is ever acknowledged."""
    arguments = _arguments(request)
    if arguments and request["params"].get("name") == "receive_messages":
        arguments.pop("ack_cursor", None)
    return request


def task_exposed_twice(relay: Relay, response: dict, request: dict | None) -> dict:
    """Lists every task record a read returns as new work, answered and acknowledged ones too."""
    structured = _structured(response)
    if _tool(request) == "receive_messages" and structured is not None and "records" in structured:
        structured["new_work"] = [r["request_id"] for r in structured["records"] if r.get("kind") == "task"]
        known = {c["request_id"]: c["claim_id"] for c in structured.get("claims", [])}
        structured["claims"] = [{"request_id": rq, "claim_id": known.get(rq, f"cl_{rq}")}
                                for rq in structured["new_work"]]
        _set_structured(response, structured)
    return response


def work_listed_once(relay: Relay, response: dict, request: dict | None) -> dict:
    """Lists a task as new work on its first listing only: an answer the caller never saw loses it."""
    structured = _structured(response)
    if _tool(request) == "receive_messages" and structured is not None and "claims" in structured:
        seen = relay.memory.setdefault("listed", set())
        structured["claims"] = [c for c in structured["claims"] if c["claim_id"] not in seen]
        seen.update(c["claim_id"] for c in structured["claims"])
        structured["new_work"] = [c["request_id"] for c in structured["claims"]]
        _set_structured(response, structured)
    return response


def claim_renamed(relay: Relay, response: dict, request: dict | None) -> dict:
    """Lists a task again under a fresh claim_id each time, as if each read claimed it anew."""
    structured = _structured(response)
    if _tool(request) == "receive_messages" and structured is not None and "claims" in structured:
        count = relay.memory["renamed"] = relay.memory.get("renamed", 0) + 1
        for claim in structured["claims"]:
            claim["claim_id"] = f"{claim['claim_id']}-{count}"
        _set_structured(response, structured)
    return response


def is_error_dropped(relay: Relay, response: dict, request: dict | None) -> dict:
    """Drops isError from tool errors: a failure looks like a success."""
    result = response.get("result")
    if isinstance(result, dict) and result.get("isError") is True:
        del result["isError"]
    return response


# -- the bug classes: interoperability, claims under concurrency, bounds, texts -----------------

def error_branch_dropped(relay: Relay, response: dict, request: dict | None) -> dict:
    """Advertises output schemas that describe only successes, so strict clients refuse every tool error."""
    result = response.get("result")
    if isinstance(request, dict) and request.get("method") == "tools/list" and isinstance(result, dict):
        for tool in result.get("tools", []):
            schema = tool.get("outputSchema")
            if isinstance(schema, dict) and isinstance(schema.get("oneOf"), list):
                defs = schema.get("$defs", {})
                success = dict(schema["oneOf"][0])
                ref = success.pop("$ref", "")
                if ref.startswith("#/$defs/"):  # an object schema at the root, as MCP requires
                    success = {**defs[ref[len("#/$defs/"):]], **success}
                tool["outputSchema"] = {**success, **({"$defs": defs} if defs else {})}
    return response


def racy_claim(relay: Relay, response: dict, request: dict | None) -> dict:
    """Claims in two steps (check, then take): reads of one mailbox that overlap in time each claim its tasks.

    The sessions of one caller share a log (by home and credential) of their
    reads' time spans and claims; a read that overlapped another lists the
    tasks both hold under a claim of its own, as a second take would make.
    """
    structured = _structured(response)
    if _tool(request) != "receive_messages" or structured is None or "claims" not in structured:
        return response
    started, ended = relay.request_started, time.time()
    caller = os.environ.get("PEERWIRE_HOME", "") + "\0" + os.environ.get("PEERWIRE_SESSION_ID", "")
    log = os.path.join(tempfile.gettempdir(), "racy-claim-" + hashlib.sha256(caller.encode()).hexdigest()[:16])
    with open(log, "a+", encoding="utf-8") as shared:
        fcntl.flock(shared, fcntl.LOCK_EX)
        shared.seek(0)
        others = [json.loads(line) for line in shared if line.strip()]
        raced = {rid for other in others
                 if other["pid"] != os.getpid() and other["started"] < ended and started < other["ended"]
                 for rid in other["new_work"]}
        for claim in structured["claims"]:
            if claim["request_id"] in raced:
                claim["claim_id"] = f"{claim['claim_id']}-taken-again-{os.getpid()}"
        shared.write(json.dumps({"pid": os.getpid(), "started": started, "ended": ended,
                                 "new_work": structured["new_work"]}) + "\n")
    _set_structured(response, structured)
    return response


def has_more_at_limit(relay: Relay, response: dict, request: dict | None) -> dict:
    """Computes has_more as "the page is full": with exactly limit records waiting it says more are."""
    structured = _structured(response)
    if _tool(request) == "receive_messages" and structured is not None and "records" in structured:
        limit = (request["params"].get("arguments") or {}).get("limit", DEFAULT_LIMIT)
        if len(structured["records"]) == limit:
            structured["has_more"] = True
            _set_structured(response, structured)
    return response


def max_length_exclusive(relay: Relay, request: dict) -> dict | None:
    """Refuses a string exactly as long as its maxLength: ``len(value) >= maxLength`` where ``>`` was meant."""
    arguments = _arguments(request)
    for name, limit in MAX_LENGTHS.items():
        value = (arguments or {}).get(name)
        if isinstance(value, str) and len(value) == limit:
            _tool_error(relay, request, "invalid_argument", f"{name} is too long (at most {limit} characters)")
            return None
    return request


def nul_dropped(relay: Relay, request: dict) -> dict:
    """Drops NUL characters from task and reply messages, as a store whose text columns cannot hold them would."""
    arguments = _arguments(request)
    if arguments and _tool(request) in ("followup_task", "reply") and isinstance(arguments.get("message"), str):
        arguments["message"] = arguments["message"].replace("\0", "") or arguments["message"]
    return request


def _trim_names(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _trim_names(v) for k, v in value.items()}
        if isinstance(out.get("name"), str):
            out["name"] = out["name"].strip()
        if isinstance(out.get("aliases"), list):
            out["aliases"] = [a.strip() if isinstance(a, str) else a for a in out["aliases"]]
        return out
    if isinstance(value, list):
        return [_trim_names(v) for v in value]
    return value


def names_trimmed(relay: Relay, response: dict, request: dict | None) -> dict:
    """Shows agent names and aliases trimmed (list_agents, receipts, records), as a display layer would."""
    structured = _structured(response)
    if structured is not None and not response["result"].get("isError") and _trim_names(structured) != structured:
        _set_structured(response, _trim_names(structured))
    return response


def cursor_snapshot(relay: Relay, response: dict, request: dict | None) -> dict:
    """Treats a cursor as a snapshot: replaying it returns only what its first read returned."""
    structured = _structured(response)
    arguments = (request or {}).get("params", {}).get("arguments") or {}
    if _tool(request) != "receive_messages" or structured is None or "cursor" not in arguments:
        return response
    key = f"snapshot:{arguments['cursor']}"
    if key not in relay.memory:
        relay.memory[key] = [r.get("record_id") for r in structured.get("records", [])]
    else:
        structured["records"] = [r for r in structured.get("records", []) if r.get("record_id") in relay.memory[key]]
        structured["has_more"] = False
        _set_structured(response, structured)
    return response


def text_mirror_dropped(relay: Relay, response: dict, request: dict | None) -> dict:
    """Returns successful results as structuredContent only, without the text mirror (a SHOULD)."""
    result = response.get("result")
    if _tool(request) and isinstance(result, dict) and not result.get("isError"):
        result["content"] = []
    return response

# -- wire mutations: (relay, raw line) -> the line to pass on, or None to drop it ----------------

def surrogate_exit(relay: Relay, raw: bytes) -> bytes | None:
    """Crashes (exit 1) on a line holding a lone surrogate, as an escape or as raw bytes."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        os._exit(1)
    except (ValueError, RecursionError):
        return raw
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be UTF-8
    except UnicodeEncodeError:
        os._exit(1)
    return raw


def deep_silent(relay: Relay, raw: bytes) -> bytes | None:
    """Drops any line nested more than 100 levels deep: the error dies unseen."""
    return None if raw.count(b"[") + raw.count(b"{") > 100 else raw


def nan_echoed(relay: Relay, raw: bytes) -> bytes | None:
    """Accepts NaN/Infinity and echoes the params back: stdout is no longer JSON."""
    if b"NaN" not in raw and b"Infinity" not in raw:
        return raw
    try:
        message = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(message, dict) and "id" in message:
        relay.to_client({"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message.get("params")}})
        return None
    return raw


def batch_refused(relay: Relay, raw: bytes) -> bytes | None:
    """Refuses every batch, whatever revision the client negotiated."""
    if raw.lstrip().startswith(b"["):
        relay.to_client({"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no batches"}})
        return None
    return raw


def cancel_answered(relay: Relay, request: dict) -> dict:
    """Answers a cancelled request anyway (with an error) when the client cancels it."""
    if request.get("method") == "notifications/cancelled" and isinstance(request.get("params"), dict):
        relay.to_client({"jsonrpc": "2.0", "id": request["params"].get("requestId"),
                         "error": {"code": -32800, "message": "request cancelled"}})
    return request


def cancel_ignored(relay: Relay, request: dict) -> dict | None:
    """Never passes notifications/cancelled on: a cancelled receive keeps waiting and claims."""
    return None if request.get("method") == "notifications/cancelled" else request


def discover_silent(relay: Relay, request: dict) -> dict | None:
    """Drops server/discover: a probing client waits for an answer that never comes."""
    return None if request.get("method") == "server/discover" else request


def odd_id_unanswered(relay: Relay, request: dict) -> dict | None:
    """Drops requests whose id is a negative integer or a string that is not ASCII."""
    msg_id = request.get("id")
    if isinstance(msg_id, int) and not isinstance(msg_id, bool) and msg_id < 0:
        return None
    if isinstance(msg_id, str) and not msg_id.isascii():
        return None
    return request


def float_internal(relay: Relay, request: dict) -> dict | None:
    """Answers -32603 to a tool call with an integral float argument (limit: 5.0)."""
    arguments = _arguments(request)
    if arguments and any(isinstance(v, float) and v.is_integer() for v in arguments.values()) and "id" in request:
        relay.to_client({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": "float"}})
        return None
    return request


def fraction_truncated(relay: Relay, request: dict) -> dict:
    """Truncates every fractional number argument of a tool call to an integer (timeout_ms 12345.6 -> 12345)."""
    arguments = _arguments(request)
    for key, value in (arguments or {}).items():
        if isinstance(value, float) and not value.is_integer():
            arguments[key] = int(value)
    return request


def strict_ignored(relay: Relay, request: dict) -> dict:
    """Drops send_message's and followup_task's strict argument, as a server that predates it would."""
    arguments = _arguments(request)
    if arguments:
        arguments.pop("strict", None)
    return request


OVERSIZE_BYTES = 1024 * 1024


def oversize_closes(relay: Relay, raw: bytes) -> bytes | None:
    """A line over 1 MiB overruns the server's reader and takes the session down: that call and every call
    in flight on it fail app_unavailable, as when one hop's line limit was another's connection limit."""
    if len(raw) <= OVERSIZE_BYTES:
        return raw
    try:
        big = json.loads(raw)
    except ValueError:
        big = {}
    ids = [json.loads(key) for key, (request, _) in relay.pending.items() if request.get("method") == "tools/call"]
    for msg_id in [*ids, big.get("id") if isinstance(big, dict) else None]:
        if msg_id is not None:
            _tool_error(relay, {"id": msg_id}, "app_unavailable", "the app closed the connection")
    relay.pending.clear()
    return None


def hung_unbounded(relay: Relay, response: dict, request: dict | None) -> dict | None:
    """Never answers a call the app did not answer: no time bound, so a hung app hangs the client too."""
    structured = _structured(response)
    if isinstance(structured, dict) and (structured.get("error") or {}).get("code") == "app_not_responding":
        return None
    return response


class EmptyWaitCancels:
    """A receive whose timed wait ends empty closes every task this session claimed: the relay replies to each
    (status failed) before it passes the empty page on, so the caller's own reply later finds it answered."""

    PREFIX = "mutant-close-"

    @classmethod
    def response(cls, relay: Relay, response: dict, request: dict | None) -> dict | None:
        claimed: set = relay.memory.setdefault("claimed", set())
        msg_id = response.get("id")
        if isinstance(msg_id, str) and msg_id.startswith(cls.PREFIX):
            waiting, held = relay.memory["closing"]
            waiting.discard(msg_id)
            return held if not waiting else None  # the empty page goes on once every task is closed
        if _tool(request) != "receive_messages":
            return response
        structured = _structured(response) or {}
        claimed.update(c.get("request_id") for c in structured.get("claims") or [] if isinstance(c, dict))
        arguments = _arguments(request) or {}
        if not (structured.get("timed_out") and not structured.get("records") and claimed
                and arguments.get("timeout_ms", 0)):
            return response
        ids = {f"{cls.PREFIX}{n}-{_nonce()}" for n in range(len(claimed))}
        relay.memory["closing"] = (set(ids), response)
        for close_id, request_id in zip(sorted(ids), sorted(claimed)):
            relay.to_server({"jsonrpc": "2.0", "id": close_id, "method": "tools/call", "params": {
                "name": "reply", "arguments": {"request_id": request_id, "status": "failed",
                                               "message": "closed: the wait ended empty"}}})
        claimed.clear()
        return None


def _nonce() -> str:
    return os.urandom(4).hex()


class CheckThenSubscribe:
    """A wait (wait_agent, or receive_messages with a timeout) checks the mailbox, and only a moment later starts
    waiting: a record admitted in between is already there when it does, and is not signalled. The relay checks
    with a wait_agent of timeout 0, waits LOST_WINDOW_S, then passes the wait on; an answer that comes back at
    once after that (the record admitted in the window) is held until the wait's timeout."""

    LOST_WINDOW_S = 0.05
    AT_ONCE_S = 0.1
    PROBE = "mutant-check-"

    @classmethod
    def request(cls, relay: Relay, request: dict) -> dict | None:
        arguments = _arguments(request) or {}
        timeout = arguments.get("timeout_ms", 60000 if _tool(request) == "wait_agent" else 0)
        if _tool(request) not in ("wait_agent", "receive_messages") or not isinstance(timeout, int) or timeout <= 0:
            return request
        threading.Thread(target=cls._check_then_wait, args=(relay, request, timeout), daemon=True).start()
        return None

    @classmethod
    def _check_then_wait(cls, relay: Relay, request: dict, timeout_ms: int) -> None:
        probe_id = cls.PROBE + _nonce()
        checked = threading.Event()
        relay.memory.setdefault("probes", {})[probe_id] = checked
        relay.to_server({"jsonrpc": "2.0", "id": probe_id, "method": "tools/call",
                         "params": {"name": "wait_agent", "arguments": {"timeout_ms": 0}}})
        checked.wait(30)
        if not relay.memory.get(probe_id + ":woke"):
            time.sleep(cls.LOST_WINDOW_S)  # the await between the check and the subscription
            relay.memory.setdefault("subscribed", {})[json.dumps(request.get("id"))] = (time.monotonic(), timeout_ms)
        relay.to_server(request)

    @classmethod
    def response(cls, relay: Relay, response: dict, request: dict | None) -> dict | None:
        msg_id = response.get("id")
        if isinstance(msg_id, str) and msg_id.startswith(cls.PROBE):
            relay.memory[msg_id + ":woke"] = (_structured(response) or {}).get("woke") is True
            relay.memory["probes"].pop(msg_id).set()
            return None
        since = relay.memory.get("subscribed", {}).pop(json.dumps(msg_id), None)
        if since is None or time.monotonic() - since[0] > cls.AT_ONCE_S:
            return response
        deadline = since[0] + since[1] / 1000
        threading.Timer(max(0.0, deadline - time.monotonic()), relay.to_client, args=(response,)).start()
        return None


class SerialCalls:
    """Runs one tools/call at a time: the next is not even read until the previous one is answered."""

    turn = threading.Semaphore(1)

    @classmethod
    def request(cls, relay: Relay, request: dict) -> dict:
        if request.get("method") == "tools/call" and "id" in request:
            cls.turn.acquire()
        return request

    @classmethod
    def response(cls, relay: Relay, response: dict, request: dict | None) -> dict:
        if isinstance(request, dict) and request.get("method") == "tools/call":
            cls.turn.release()
        return response


class IdReused:
    """Serves a request under an id still in flight as a call of its own, never refusing it (a server that keeps
    its calls in a map by id and lets the second overwrite the first); answers go back under the reused id."""

    live: set[str] = set()
    aliases: dict[str, Any] = {}
    lock = threading.Lock()

    @classmethod
    def request(cls, relay: Relay, request: dict) -> dict:
        if "id" not in request or not isinstance(request.get("method"), str):
            return request
        key = json.dumps(request["id"])
        with cls.lock:
            if key not in cls.live:
                cls.live.add(key)
                return request
            alias = f"reused-{len(cls.aliases)}"
            cls.aliases[json.dumps(alias)] = request["id"]
        return {**request, "id": alias}

    @classmethod
    def response(cls, relay: Relay, response: dict, request: dict | None) -> dict:
        key = json.dumps(response.get("id"))
        with cls.lock:
            if key in cls.aliases:
                return {**response, "id": cls.aliases.pop(key)}
            cls.live.discard(key)
        return response


LINE_MUTATIONS: dict[str, Callable[[Relay, bytes], bytes | None]] = {
    "surrogate-exit": surrogate_exit,
    "deep-silent": deep_silent,
    "nan-echo": nan_echoed,
    "batch-refused": batch_refused,
    "oversize-closes": oversize_closes,
}

REQUEST_MUTATIONS: dict[str, Callable[[Relay, dict], dict | None]] = {
    "unicode": unicode_rewritten,
    "sender-honoured": sender_honoured,
    "notification-answered": notification_answered,
    "limit-ignored": limit_ignored,
    "ack-ignored": ack_ignored,
    "max-length-exclusive": max_length_exclusive,
    "nul-dropped": nul_dropped,
    "cancel-answered": cancel_answered,
    "cancel-ignored": cancel_ignored,
    "discover-silent": discover_silent,
    "odd-id-unanswered": odd_id_unanswered,
    "float-internal": float_internal,
    "fraction-truncated": fraction_truncated,
    "serial-calls": SerialCalls.request,
    "strict-ignored": strict_ignored,
    "id-reused": IdReused.request,
    "check-then-subscribe": CheckThenSubscribe.request,
}
RESPONSE_MUTATIONS: dict[str, Callable[[Relay, dict, dict | None], dict]] = {
    "task-twice": task_exposed_twice,
    "work-listed-once": work_listed_once,
    "claim-renamed": claim_renamed,
    "no-iserror": is_error_dropped,
    "error-branch-dropped": error_branch_dropped,
    "racy-claim": racy_claim,
    "has-more-at-limit": has_more_at_limit,
    "names-trimmed": names_trimmed,
    "cursor-snapshot": cursor_snapshot,
    "text-mirror-dropped": text_mirror_dropped,
    "serial-calls": SerialCalls.response,
    "hung-unbounded": hung_unbounded,
    "id-reused": IdReused.response,
    "empty-wait-cancels": EmptyWaitCancels.response,
    "check-then-subscribe": CheckThenSubscribe.response,
}
STARTUP_MUTATIONS = {"stdout-log"}
BUFFERED_MUTATIONS = {"answers-buffered"}
"""answers-buffered: the server's answers are queued in memory for the client, however many it leaves unread."""
SHUTDOWN_MUTATIONS = {"stdin-held"}
"""stdin-held: after the client closes stdin, the server lives on (stdin is never passed on as closed)."""
MUTATIONS = sorted(set(LINE_MUTATIONS) | set(REQUEST_MUTATIONS) | set(RESPONSE_MUTATIONS) | STARTUP_MUTATIONS
                   | SHUTDOWN_MUTATIONS | BUFFERED_MUTATIONS)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in MUTATIONS or argv[1] != "--":
        sys.stderr.write(f"usage: mutant_server.py {{{','.join(MUTATIONS)}}} -- SERVER_CMD...\n")
        return 2
    mutation, server_argv = argv[0], argv[2:]
    relay = Relay(server_argv)
    if mutation in BUFFERED_MUTATIONS:
        queued: list[Any] = []
        ready = threading.Condition()

        def deliver(message: Any) -> None:  # not under the relay's lock: the requests keep flowing meanwhile
            data = message if isinstance(message, bytes) else json.dumps(message, ensure_ascii=False).encode()
            sys.stdout.buffer.write(data.rstrip(b"\n") + b"\n")
            sys.stdout.buffer.flush()

        def enqueue(message: Any) -> None:
            with ready:
                queued.append(message)
                ready.notify()

        def drain() -> None:
            while True:
                with ready:
                    ready.wait_for(lambda: queued)
                    message = queued.pop(0)
                deliver(message)

        relay.to_client = enqueue  # type: ignore[method-assign]
        threading.Thread(target=drain, daemon=True).start()
    if mutation in STARTUP_MUTATIONS:
        relay.to_client(b"mutant server: starting up (a log line on stdout)")
    mutate_line = LINE_MUTATIONS.get(mutation)
    mutate_request = REQUEST_MUTATIONS.get(mutation)
    mutate_response = RESPONSE_MUTATIONS.get(mutation)

    def server_to_client() -> None:
        assert relay.server.stdout is not None
        for raw in relay.server.stdout:
            try:
                message = json.loads(raw)
            except ValueError:
                relay.to_client(raw)
                continue
            request = None
            if isinstance(message, dict) and "method" not in message:
                request, relay.request_started = relay.pending.pop(json.dumps(message.get("id")), (None, 0.0))
            if mutate_response is not None and isinstance(message, dict):
                message = mutate_response(relay, message, request)
                if message is None:
                    continue  # the mutation swallowed it
            relay.to_client(message)

    pump = threading.Thread(target=server_to_client, daemon=True)
    pump.start()
    for raw in sys.stdin.buffer:
        if mutate_line is not None:
            raw = mutate_line(relay, raw)
            if raw is None:
                continue
        try:
            message = json.loads(raw)
        except (ValueError, RecursionError):
            relay.to_server(raw)
            continue
        if isinstance(message, dict) and "method" in message and "id" in message:
            relay.pending[json.dumps(message["id"])] = (message, time.time())
        if mutate_request is not None and isinstance(message, dict):
            message = mutate_request(relay, message)
            if message is None:
                continue  # the mutation answered it
        relay.to_server(message)
    if mutation in SHUTDOWN_MUTATIONS:
        threading.Event().wait(120)  # the client has gone; this server does not notice
    assert relay.server.stdin is not None
    relay.server.stdin.close()
    pump.join()
    return relay.server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
