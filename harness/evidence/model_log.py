"""The model request log, read back: the one reader of its format.

The scripted model and, in front of a real provider, the recording proxy write
it alike (:mod:`harness.model.log`): one JSON object a line, ``request`` (seq,
agent, path, headers without credentials, body as Codex sent it), ``response``
(seq, rule or upstream status, outcome, emitted items, error) and ``release`` records. The checks read each
request's input and what was emitted; the probe the same for one route; the
report the tool schema each model was actually offered — the ``tools`` entry of
type ``namespace`` named ``mcp__peerwire`` in each request body — and a
per-request summary (agent, matched rule, outcome).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.names import TOOL_NAMESPACES
from harness.evidence import stored
from harness.evidence import chat_requests as chat
from harness.evidence.model_bodies import BodyError, expand, values_for


@dataclass
class ModelRequest:
    """One model request and its answer (``rule``/``outcome`` ``None`` until answered)."""

    seq: int
    agent: str | None
    line: int
    body: dict[str, Any]
    rule: str | None = None
    outcome: str | None = None
    error: str | None = None
    response_line: int | None = None
    received_at: float | None = None
    """When the request arrived (Unix seconds); ``answered_at`` when its answer was finished."""
    answered_at: float | None = None
    items: tuple[dict[str, Any], ...] = ()
    """What the model emitted in answer (``response`` record's ``items``)."""
    path: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def wire(self) -> str:
        """``chat`` for a Chat Completions request (OpenCode's), else ``responses`` (Codex's)."""
        return "chat" if chat.is_chat(self.path) else "responses"

    def input_items(self) -> list[dict[str, Any]]:
        """The request's ``input`` items, in order: a chat request's messages as Responses items (the view the
        scripted model's rules read, every MCP server counted), so one reader serves both wires."""
        body = self.body
        if self.wire == "chat":
            body = chat.responses_view(body, chat.servers_of(TOOL_NAMESPACES))
        return [item for item in body.get("input") or [] if isinstance(item, dict)]

    @property
    def session_id(self) -> str | None:
        """OpenCode's session (``ses_…``) a chat request belongs to (its ``x-session-id`` header)."""
        return chat.session_of(self.headers)

    @property
    def turn_id(self) -> str | None:
        """The Codex turn this request belongs to (Codex sends it in ``client_metadata``)."""
        metadata = self.body.get("client_metadata")
        return metadata.get("turn_id") if isinstance(metadata, dict) else None

    @property
    def thread_id(self) -> str | None:
        """The Codex thread this request belongs to: ``client_metadata`` names it, directly or in
        its ``x-codex-turn-metadata`` (the first request of a turn has only the latter)."""
        if self.wire == "chat":
            return self.session_id  # OpenCode's session is the conversation a Codex thread is
        metadata = self.body.get("client_metadata")
        if not isinstance(metadata, dict):
            return None
        if metadata.get("thread_id"):
            return str(metadata["thread_id"])
        try:
            turn = json.loads(metadata.get("x-codex-turn-metadata") or "")
        except (TypeError, ValueError):
            return None
        return str(turn["thread_id"]) if isinstance(turn, dict) and turn.get("thread_id") else None

    def namespace(self, name: str | None = None) -> dict[str, Any] | None:
        """The ``tools`` entry of namespace ``name`` (default: the first of the core's, whichever profile
        it serves), or ``None`` when the model was not offered it."""
        names = TOOL_NAMESPACES if name is None else (name,)
        for tool in self.body.get("tools") or []:
            if isinstance(tool, dict) and tool.get("type") == "namespace" and tool.get("name") in names:
                return tool
        return None


@dataclass
class ToolSchemaSeen:
    """One distinct version of a namespace's tools as an agent's model saw it."""

    agent: str
    namespace: str
    sha256: str
    tools: list[dict[str, Any]]
    requests: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"agent": self.agent, "namespace": self.namespace, "sha256": self.sha256,
                "tool_names": [t.get("name") for t in self.tools], "tools": self.tools,
                "requests": self.requests}


class ModelRequestLog:
    """The requests of one model request log file, by sequence number."""

    def __init__(self, requests: list[ModelRequest], problems: list[str]):
        self.requests = requests
        self.problems = problems

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, expected: bool = True) -> "ModelRequestLog":
        """Read a log; a missing file is an empty log, unreadable lines become ``problems``.

        A missing file is a problem only when the log was ``expected`` (every run keeps one now; a report
        of a real-provider run made before the recording proxy has none).
        """
        path = Path(path)
        if not stored.exists(path):
            return cls([], [f"{path.name}: missing"] if expected else [])
        with stored.open_text(path, errors="replace") as handle:
            return cls.parse(handle, name=path.name, values=values_for(path))

    @classmethod
    def parse(cls, lines: Iterable[str], *, name: str = "log",
              values: Mapping[str, Any] | None = None) -> "ModelRequestLog":
        """Read the log's lines; unreadable ones become ``problems`` (named ``<name>:<line>``).

        A request stored compacted (:mod:`harness.evidence.model_bodies`) is expanded whole from ``values`` and
        checked against its digest; one that cannot be is a problem, and its body is left empty."""
        requests: dict[int, ModelRequest] = {}
        problems: list[str] = []
        for number, raw in enumerate(lines, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:
                problems.append(f"{name}:{number}: not JSON")
                continue
            event, seq = record.get("event"), record.get("seq")
            if event == "request" and isinstance(seq, int):
                if "body_sha256" in record:
                    try:
                        record["body"] = expand(record.get("body"), values or {}, expected=record["body_sha256"])
                    except BodyError as error:
                        problems.append(f"{name}:{number}: {error}")
                        record["body"] = {}
                body = record.get("body") if isinstance(record.get("body"), dict) else {}
                headers = record.get("headers") if isinstance(record.get("headers"), dict) else {}
                requests[seq] = ModelRequest(seq, record.get("agent"), number, body,
                                             received_at=_seconds(record.get("at")), path=str(record.get("path") or ""),
                                             headers=headers)
            elif event == "response" and seq in requests:
                request = requests[seq]
                request.rule, request.outcome = record.get("rule"), record.get("outcome")
                request.error, request.response_line = record.get("error"), number
                request.answered_at = _seconds(record.get("at"))
                request.items = tuple(item for item in record.get("items") or () if isinstance(item, dict))
        return cls(sorted(requests.values(), key=lambda r: r.seq), problems)

    def agents(self) -> list[str]:
        return sorted({r.agent for r in self.requests if r.agent})

    def tool_schemas(self, namespace: str | None = None) -> list[ToolSchemaSeen]:
        """Each distinct ``namespace`` tool list per agent, with the requests that carried it.

        Requests without the namespace are not listed here; see
        :meth:`requests_without`.
        """
        seen: dict[tuple[str, str], ToolSchemaSeen] = {}
        for request in self.requests:
            entry = request.namespace(namespace)
            if entry is None or not request.agent:
                continue
            tools = list(entry.get("tools") or [])
            digest = hashlib.sha256(json.dumps(tools, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
            key = (request.agent, digest)
            if key not in seen:
                seen[key] = ToolSchemaSeen(request.agent, str(entry.get("name")), digest, tools)
            seen[key].requests.append(request.seq)
        return list(seen.values())

    def requests_without(self, namespace: str | None = None) -> list[int]:
        """Sequence numbers of requests whose model was not offered ``namespace``."""
        return [r.seq for r in self.requests if r.namespace(namespace) is None]

    def reasoning(self, agent: str) -> list[dict[str, Any]]:
        """The distinct ``model`` and ``reasoning`` values the agent's requests carried."""
        out: list[dict[str, Any]] = []
        for request in self.requests:
            if request.agent != agent:
                continue
            value = {"model": request.body.get("model"), "reasoning": request.body.get("reasoning")}
            if value not in out:
                out.append(value)
        return out

    def summary(self) -> list[dict[str, Any]]:
        return [{"seq": r.seq, "agent": r.agent, "rule": r.rule, "outcome": r.outcome, "error": r.error,
                 "line": r.line} for r in self.requests]


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
