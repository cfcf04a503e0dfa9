"""A binding: the abstract mailbox operations of the ``mailbox`` profile, mapped onto one server's own tools.

Messaging servers differ in their surface: this contract's seven tools bind the
sender and the inbox to the caller's session; others take a ``sender_name``
argument and read an inbox by name. The ``mailbox`` profile judges what matters
about messaging whatever the surface, so it speaks only this vocabulary:

* :meth:`Binding.register` a participant (its own session, where the surface has sessions);
* :meth:`Binding.send` as that participant; :meth:`Binding.send_claiming` as that
  participant while naming another as the sender (a forgery attempt);
* :meth:`Binding.inbox` to read a participant's unacknowledged mail, oldest first;
  :meth:`Binding.inbox_of` to try to read another's; :meth:`Binding.ack` and
  :meth:`Binding.ack_of` likewise;
* where the surface has them: :meth:`Binding.wait`, :meth:`Binding.register_twin`
  (a second participant of the same name), :meth:`Binding.crash` (SIGKILL whatever
  writes, then bring it back on the same state).

An operation the surface cannot express raises :class:`Unsupported` with the
reason; the requirements that need it are reported *not applicable, because …*,
never passed. Every operation returns what the surface said (:class:`Outcome`),
so a check can judge a refusal as well as a success, and :meth:`Binding.exchange`
gives the lines behind it as evidence.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Unsupported(Exception):
    """The surface cannot express this operation; the message says why (it becomes the "because")."""


@dataclass(frozen=True)
class Mail:
    """One piece of mail as its reader sees it: the surface's id, who it says sent it, and the body."""

    id: str
    sender: str
    body: str


@dataclass(frozen=True)
class Outcome:
    """What the surface answered: ``ok`` with an id (a send) or mail (a read), else the error it gave."""

    ok: bool
    id: str | None = None
    error: str | None = None
    mail: tuple[Mail, ...] = ()
    raw: Any = field(default=None, compare=False)


@dataclass(frozen=True)
class Participant:
    """A registered participant: its name and whatever the binding needs to act as it (a session, a handle)."""

    name: str
    handle: Any = field(default=None, compare=False)


class Binding(ABC):
    """One server's surface in the ``mailbox`` profile's vocabulary. Subclass it, or the seven-tool binding.

    The runner calls :meth:`open` once with a fresh directory the binding owns, then
    the operations, then :meth:`close`. A binding is constructed with no arguments
    (``--binding module:Class``); settings come from its own environment variables.
    """

    label: str = "server"
    """How reports name the implementation (a column of the results matrix)."""

    @abstractmethod
    def open(self, workdir: Path) -> None:
        """Start the server (and whatever it needs) in ``workdir``; return once it takes calls."""

    @abstractmethod
    def close(self) -> None:
        """Stop everything the binding started; nothing may outlive it."""

    @abstractmethod
    def register(self, name: str) -> Participant:
        """A new participant named ``name``, ready to send and read."""

    @abstractmethod
    def send(self, sender: Participant, to: str, body: str) -> Outcome:
        """``sender`` sends ``body`` to the participant named ``to``; ``ok`` means the surface accepted it."""

    @abstractmethod
    def send_claiming(self, caller: Participant, claimed: str, to: str, body: str) -> Outcome:
        """``caller`` sends ``body`` to ``to`` while naming ``claimed`` as the sender, by whatever the surface
        offers (an argument, a field); a surface that derives the sender from the session still gets the
        attempt (an extra argument), so a lenient one that honours it is caught."""

    @abstractmethod
    def inbox(self, reader: Participant) -> Outcome:
        """Every piece of mail ``reader`` has not acknowledged, oldest first."""

    @abstractmethod
    def inbox_of(self, caller: Participant, owner: str) -> Outcome:
        """``caller`` tries to read the inbox of the participant named ``owner``."""

    @abstractmethod
    def ack(self, reader: Participant, mail: list[Mail]) -> Outcome:
        """``reader`` acknowledges ``mail`` (read with :meth:`inbox`): it is no longer unacknowledged."""

    @abstractmethod
    def ack_of(self, caller: Participant, owner: str, mail: Mail) -> Outcome:
        """``caller`` tries to acknowledge ``mail`` of the participant named ``owner``."""

    def wait(self, reader: Participant, timeout_s: float) -> Outcome:
        """Wait up to ``timeout_s`` for mail to ``reader``; ``ok`` and ``id == "woke"`` when mail came."""
        raise Unsupported("the surface has no way to wait for mail")

    def register_twin(self, name: str) -> Participant:
        """A second participant with the name of an existing one."""
        raise Unsupported("the surface keeps names unique")

    def crash(self) -> None:
        """SIGKILL whatever writes the server's state, mid-flight, and bring it back on the same state."""
        raise Unsupported("the binding cannot crash the server")

    def exchange(self, participant: Participant | None = None, limit: int = 20) -> list[dict[str, Any]]:
        """The last lines exchanged with the server (for a participant's session, where sessions differ)."""
        return []
