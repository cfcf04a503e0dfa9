"""The seven-tool messaging contract as a ``mailbox`` binding: the sender and the inbox are the caller's session.

Works for any server of this contract given its command and provisioner (the
reference's by default). Acknowledgement is by position: :meth:`ack` moves the
reader's acknowledgement to the cursor of its last read. Attempts on another's
inbox use what a caller could get hold of: the other's cursor (a position in
*its* mailbox), and an extra argument naming it, both from the caller's own
session; the sender is claimed with an extra ``sender`` argument.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

from ..interface import Caller, Provisioner, adapt, load_class
from ..layout import REFERENCE_SERVER_CMD
from .vocabulary import Binding, Mail, Outcome, Participant
from .sessions import Session, error_text

REFERENCE_PROVISIONER = "harness.contract.reference:ReferenceProvisioner"


class SevenToolBinding(Binding):
    """``server_cmd`` and ``provisioner`` (``module:Class``) as ``peerwire-harness contract`` takes them."""

    def __init__(self, server_cmd: Sequence[str] | None = None, provisioner: str | None = None):
        self.argv = list(server_cmd or REFERENCE_SERVER_CMD)
        self.provisioner_spec = provisioner or REFERENCE_PROVISIONER
        self.label = "reference" if server_cmd is None else Path(self.argv[-1]).name
        self._provisioner: Provisioner | None = None
        self._sessions: dict[int, Session] = {}
        self._cursors: dict[int, list[str]] = {}
        self._names: dict[int, str] = {}
        self._workdir: Path | None = None
        self._count = 0

    def open(self, workdir: Path) -> None:
        self._workdir = workdir
        self._provisioner = adapt(load_class(self.provisioner_spec)(workdir / "provisioner"))
        (workdir / "provisioner").mkdir(parents=True, exist_ok=True)
        self._provisioner.start()

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()
        if self._provisioner is not None:
            self._provisioner.stop()
            self._provisioner = None

    def _session(self, caller: Caller) -> Session:
        assert self._provisioner is not None and self._workdir is not None
        self._count += 1
        env = {**os.environ, **self._provisioner.caller_env(caller)}
        session = Session(self.argv, env, self._workdir / f"server-{self._count}.stderr")
        self.server_info = session.server_info
        return session

    def register(self, name: str) -> Participant:
        assert self._provisioner is not None
        caller = self._provisioner.register(name)
        participant = Participant(name, handle=len(self._sessions) + 1)
        self._sessions[participant.handle] = self._session(caller)
        self._names[participant.handle] = name
        # A first, empty read: the position before any mail, which an attempt on this inbox may try to reuse.
        self._read(participant, {"limit": 1})
        return participant

    register_twin = register

    def _read(self, participant: Participant, arguments: dict[str, Any]) -> tuple[bool, Any]:
        error, value = self._sessions[participant.handle].call("receive_messages", {"timeout_ms": 0, **arguments})
        if not error and isinstance(value, dict) and value.get("cursor"):
            self._cursors.setdefault(participant.handle, []).append(value["cursor"])
        return error, value

    def send(self, sender: Participant, to: str, body: str) -> Outcome:
        error, value = self._sessions[sender.handle].call("send_message", {"target": to, "message": body})
        if error:
            return Outcome(False, error=error_text(value), raw=value)
        return Outcome(True, id=str(value.get("interaction_id")), raw=value)

    def send_claiming(self, caller: Participant, claimed: str, to: str, body: str) -> Outcome:
        error, value = self._sessions[caller.handle].call(
            "send_message", {"target": to, "message": body, "sender": claimed})
        return Outcome(False, error=error_text(value), raw=value) if error else Outcome(True, raw=value)

    def inbox(self, reader: Participant) -> Outcome:
        mail: list[Mail] = []
        cursor = None
        for _ in range(1000):
            error, value = self._read(reader, {"limit": 100, **({"cursor": cursor} if cursor else {})})
            if error:
                return Outcome(False, error=error_text(value), raw=value)
            mail += [Mail(str(r["record_id"]), str(r["sender"]["name"]), r["body"]) for r in value["records"]]
            cursor = value["cursor"]
            if not value["has_more"]:
                break
        return Outcome(True, mail=tuple(mail))

    def inbox_of(self, caller: Participant, owner: str) -> Outcome:
        mail: list[Mail] = []
        errors = []
        for arguments in self._foreign_attempts(owner, "cursor"):
            error, value = self._sessions[caller.handle].call("receive_messages", {"timeout_ms": 0, **arguments})
            if error:
                errors.append(error_text(value))
            else:
                mail += [Mail(str(r["record_id"]), str(r["sender"]["name"]), r["body"]) for r in value["records"]]
        return Outcome(bool(mail) or not errors, mail=tuple(mail), error="; ".join(errors) or None)

    def _foreign_attempts(self, owner: str, key: str) -> list[dict[str, Any]]:
        handles = [h for h, cursors in self._cursors.items() if self._names.get(h) == owner and cursors]
        # Reading from the owner's first position would show all its mail; acknowledging up to its last, all of it.
        attempts: list[dict[str, Any]] = [{key: self._cursors[h][0 if key == "cursor" else -1]} for h in handles]
        attempts.append({"agent": owner})
        return attempts

    def ack(self, reader: Participant, mail: list[Mail]) -> Outcome:
        cursors = self._cursors.get(reader.handle) or []
        if not cursors:
            return Outcome(False, error="nothing read yet")
        error, value = self._sessions[reader.handle].call("receive_messages", {"ack_cursor": cursors[-1],
                                                                                "limit": 1, "timeout_ms": 0})
        return Outcome(False, error=error_text(value), raw=value) if error else Outcome(True, raw=value)

    def ack_of(self, caller: Participant, owner: str, mail: Mail) -> Outcome:
        errors = []
        accepted = False
        for arguments in self._foreign_attempts(owner, "ack_cursor"):
            error, value = self._sessions[caller.handle].call("receive_messages",
                                                              {"timeout_ms": 0, "limit": 1, **arguments})
            if error:
                errors.append(error_text(value))
            else:
                accepted = True
        return Outcome(accepted, error="; ".join(errors) or None)

    def wait(self, reader: Participant, timeout_s: float) -> Outcome:
        error, value = self._sessions[reader.handle].call("wait_agent", {"timeout_ms": int(timeout_s * 1000)},
                                                          timeout_s=timeout_s + 60)
        if error:
            return Outcome(False, error=error_text(value), raw=value)
        return Outcome(True, id="woke" if value.get("woke") else "timed out", raw=value)

    def crash(self) -> None:
        assert self._provisioner is not None
        self._provisioner.crash([s.pid for s in self._sessions.values()])

    def exchange(self, participant: Participant | None = None, limit: int = 20) -> list[dict[str, Any]]:
        if participant is not None and participant.handle in self._sessions:
            return self._sessions[participant.handle].exchange(limit)
        return []

