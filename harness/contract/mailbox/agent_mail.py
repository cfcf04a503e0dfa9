"""``mcp-agent-mail`` 0.1.0 (PyPI) as a ``mailbox`` binding.

Its surface names the sender by argument (``send_message(sender_name=…)``) and
reads an inbox by name (``fetch_inbox(agent_name=…)``); acknowledgement is an
extended tool (``call_extended_tool("acknowledge_message", …)``). Its inbox
lists a participant's mail newest first, acknowledged or not, so this binding
reads it oldest first and leaves acknowledged mail in it: the profile judges
acknowledgement by what the surface answers, not by mail disappearing.

It needs packages this project's own environment cannot hold (it pins an MCP
SDK of another major version), so it runs in a virtualenv of its own: set
``PEERWIRE_AGENT_MAIL_PYTHON`` to that environment's interpreter (the tests
make one, see ``tests/contract/test_mailbox_profile.py``). Offline: its model
features are turned off and its model price list is read from its own package.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

from .vocabulary import Binding, Mail, Outcome, Participant, Unsupported
from .sessions import Session, error_text

VERSION = "0.1.0"
PYTHON_ENV = "PEERWIRE_AGENT_MAIL_PYTHON"
SERVE = "from mcp_agent_mail.app import build_mcp_server; build_mcp_server().run()"
INBOX_LIMIT = 1000


class AgentMailBinding(Binding):
    label = f"mcp-agent-mail {VERSION}"
    by_design = {
        "mailbox:sender:unforgeable": "send_message takes the sender as an argument (sender_name), so any caller can "
                                      "send as any registered agent",
        "mailbox:inbox:isolated-read": "fetch_inbox reads any agent's inbox by its name (agent_name)",
        "mailbox:inbox:isolated-ack": "acknowledge_message acknowledges for any agent named by argument (agent_name)",
    }

    def __init__(self, python: str | None = None):
        self.python = python or os.environ.get(PYTHON_ENV)
        if not self.python:
            raise ValueError(f"set {PYTHON_ENV} to the Python of a virtualenv with mcp-agent-mail=={VERSION}")
        self._session: Session | None = None
        self._workdir: Path | None = None
        self._project = ""
        self._launches = 0

    def _env(self, workdir: Path) -> dict[str, str]:
        return {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
                "DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'mail.sqlite3'}",
                "STORAGE_ROOT": str(workdir / "archive"), "HOME": str(workdir),
                "LLM_ENABLED": "false", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "TOOLS_LOG_ENABLED": "false"}

    def _launch(self) -> None:
        assert self._workdir is not None
        self._launches += 1
        self._session = Session([str(self.python), "-c", SERVE], self._env(self._workdir),
                                self._workdir / f"server-{self._launches}.stderr")
        # Its serverInfo names the MCP framework's version, not the package's: report the package's.
        self.server_info = {"name": "mcp-agent-mail", "version": VERSION, "reported": self._session.server_info}

    def open(self, workdir: Path) -> None:
        self._workdir = workdir
        self._project = "peerwire-mailbox-profile"  # any string names a project; no path of this machine in reports
        self._launch()
        self._call("ensure_project", {"human_key": self._project})

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
        assert self._session is not None
        return self._session.call(tool, arguments)

    def register(self, name: str) -> Participant:
        error, value = self._call("register_agent", {"project_key": self._project, "program": "peerwire",
                                                      "model": "none", "name": name})
        if error:
            raise RuntimeError(f"register_agent {name!r}: {error_text(value)}")
        return Participant(str(value.get("name", name)))

    def register_twin(self, name: str) -> Participant:
        raise Unsupported("its names are unique: registering a name again updates that agent")

    def _send(self, sender_name: str, to: str, body: str) -> Outcome:
        error, value = self._call("send_message", {"project_key": self._project, "sender_name": sender_name,
                                                   "to": [to], "subject": "mailbox profile", "body_md": body})
        if error:
            return Outcome(False, error=error_text(value), raw=value)
        deliveries = value.get("deliveries") or [] if isinstance(value, dict) else []
        ids = [str(d["payload"]["id"]) for d in deliveries if isinstance(d, dict) and "payload" in d]
        return Outcome(True, id=ids[0] if ids else None, raw=value)

    def send(self, sender: Participant, to: str, body: str) -> Outcome:
        return self._send(sender.name, to, body)

    def send_claiming(self, caller: Participant, claimed: str, to: str, body: str) -> Outcome:
        # The surface's own way: the sender is an argument, and the caller names another.
        return self._send(claimed, to, body)

    def _read(self, owner: str) -> Outcome:
        error, value = self._call("fetch_inbox", {"project_key": self._project, "agent_name": owner,
                                                  "include_bodies": True, "limit": INBOX_LIMIT})
        if error:
            return Outcome(False, error=error_text(value), raw=value)
        items = value.get("result", value) if isinstance(value, dict) else value
        mail = [Mail(str(m["id"]), str(m.get("from", "")), m.get("body_md", "")) for m in items or []]
        return Outcome(True, mail=tuple(reversed(mail)))

    def inbox(self, reader: Participant) -> Outcome:
        return self._read(reader.name)

    def inbox_of(self, caller: Participant, owner: str) -> Outcome:
        return self._read(owner)

    def _ack(self, owner: str, mail: Mail) -> Outcome:
        error, value = self._call("call_extended_tool", {
            "tool_name": "acknowledge_message",
            "arguments": {"project_key": self._project, "agent_name": owner, "message_id": int(mail.id)}})
        return Outcome(False, error=error_text(value), raw=value) if error else Outcome(True, raw=value)

    def ack(self, reader: Participant, mail: list[Mail]) -> Outcome:
        outcomes = [self._ack(reader.name, m) for m in mail]
        failed = [o for o in outcomes if not o.ok]
        return failed[0] if failed else Outcome(True)

    def ack_of(self, caller: Participant, owner: str, mail: Mail) -> Outcome:
        return self._ack(owner, mail)

    def crash(self) -> None:
        assert self._session is not None
        os.killpg(self._session.pid, signal.SIGKILL)
        self._session.close()
        self._launch()

    def exchange(self, participant: Participant | None = None, limit: int = 20) -> list[dict[str, Any]]:
        return self._session.exchange(limit) if self._session is not None else []
