"""The ``mailbox`` profile's requirements and the checks that judge them through a :class:`Binding`.

Each check drives the binding and records findings: a requirement passes when
it has findings and none failed, fails when one did, and is *not applicable*
when the check needed an operation the surface cannot express
(:class:`Unsupported`: its reason is shown). The histories are judged the
Jepsen way: concurrent senders and readers run first, and the whole history
(every send's outcome, every read) is checked afterwards for lost, duplicated,
misaddressed and reordered messages.
"""

from __future__ import annotations

import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..layout import CONTRACTS_DIR
from .vocabulary import Binding, Mail, Outcome, Participant, Unsupported

REQUIREMENTS_FILE = CONTRACTS_DIR / "mailbox-requirements.toml"
PROFILE = "mailbox"
SENDERS, READERS, PER_SENDER = 3, 2, 6
HISTORY_S = 60.0
"""How long the history's readers may take, after the last send, to see every accepted message."""
WAIT_GRACE_S = 5.0
BODIES = (
    "plain text",
    "e\u0301 \u00e9 \u4e2d\u6587 \U0001f9ea \u05e9\u05dc\u05d5\u05dd \u2028 end",
    "line one\r\nline two\rline three\n",
    "\n leading and trailing white space \t ",
    "punctuation: `code` *stars* _under_ <tag> & \"quotes\" 'single' \\ back\\slash | pipe # hash",
    "x" * 20_000,
)


@dataclass(frozen=True)
class MailboxRequirement:
    id: str
    level: str
    source: str
    behaviour: str


def requirements() -> tuple[MailboxRequirement, ...]:
    data = tomllib.loads(REQUIREMENTS_FILE.read_text("utf-8"))
    return tuple(MailboxRequirement(**entry) for entry in data["requirement"])


@dataclass
class Finding:
    requirement: str
    passed: bool
    check: str
    detail: str = ""
    exchange: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Judgement:
    """Every finding of a run, and the requirements found not applicable with their reasons."""

    findings: list[Finding] = field(default_factory=list)
    not_applicable: dict[str, str] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    """Requirement -> why its check could not finish (an error of the binding or the server)."""

    def record(self, requirement: str, passed: bool, check: str, detail: str = "",
               exchange: list[dict[str, Any]] | None = None) -> None:
        self.findings.append(Finding(requirement, passed, check, detail, list(exchange or [])))


class Profile:
    """Runs every check against one opened binding, in order (the crash last)."""

    def __init__(self, binding: Binding, judgement: Judgement | None = None,
                 progress: Callable[[str], None] | None = None):
        self.binding = binding
        self.judgement = judgement or Judgement()
        self.progress = progress or (lambda _: None)
        self._names: set[str] = set()

    def participant(self, stem: str) -> Participant:
        """A participant with a fresh alphanumeric name (some surfaces strip everything else)."""
        name = stem
        while name in self._names:
            name = f"{stem}{len(self._names)}"
        self._names.add(name)
        return self.binding.register(name)

    @contextmanager
    def judging(self, *ids: str) -> Iterator[None]:
        try:
            yield
        except Unsupported as exc:
            for rid in ids:
                self.judgement.not_applicable.setdefault(rid, str(exc))
        except Exception as exc:  # a check that could not finish: a finding against each requirement it judges
            for rid in ids:
                self.judgement.broken.setdefault(rid, f"{type(exc).__name__}: {exc}")

    def run(self) -> Judgement:
        for check in (self.histories, self.bodies, self.attribution, self.isolation, self.recipients,
                      self.ambiguity, self.acknowledgement, self.waits, self.durability):
            self.progress(check.__name__)
            check()
        return self.judgement

    # -- histories -----------------------------------------------------------------------------------

    def histories(self) -> None:
        ids = ("mailbox:history:no-loss", "mailbox:history:no-duplicate", "mailbox:history:sender-order",
               "mailbox:history:addressed")
        with self.judging(*ids):
            senders = [self.participant(f"sender{i}") for i in range(SENDERS)]
            readers = [self.participant(f"reader{i}") for i in range(READERS)]
            accepted: dict[str, str] = {}  # tag -> addressee
            refused: list[str] = []
            seen: dict[str, list[tuple[str, str]]] = {r.name: [] for r in readers}  # reader -> [(mail id, body)]
            done = threading.Event()

            def send_all(sender: Participant) -> None:
                for i in range(PER_SENDER):
                    reader = readers[i % READERS]
                    tag = f"history {sender.name} {i:03d} to {reader.name}"
                    outcome = self.binding.send(sender, reader.name, tag)
                    if outcome.ok:
                        accepted[tag] = reader.name
                    else:
                        refused.append(f"{tag}: {outcome.error}")

            def read_all(reader: Participant) -> None:
                deadline = None
                while True:
                    outcome = self.binding.inbox(reader)
                    if not outcome.ok:
                        raise RuntimeError(f"{reader.name} could not read its inbox: {outcome.error}")
                    seen[reader.name] += [(m.id, m.body) for m in outcome.mail]
                    if outcome.mail:
                        ack = self.binding.ack(reader, list(outcome.mail))
                        if not ack.ok:
                            raise RuntimeError(f"{reader.name} could not acknowledge: {ack.error}")
                    if done.is_set():
                        deadline = deadline or time.monotonic() + HISTORY_S
                        mine = {t for t, r in accepted.items() if r == reader.name}
                        if mine <= {b for _, b in seen[reader.name]} or time.monotonic() > deadline:
                            return

            with ThreadPoolExecutor(SENDERS + READERS) as pool:
                reading = [pool.submit(read_all, r) for r in readers]
                for future in [pool.submit(send_all, s) for s in senders]:
                    future.result()
                done.set()
                for future in reading:
                    future.result()
            if refused:
                raise RuntimeError(f"{len(refused)} sends refused, e.g. {refused[0]}")
            self._judge_history(accepted, seen, readers[0])

    def _judge_history(self, accepted: dict[str, str], seen: dict[str, list[tuple[str, str]]],
                       witness: Participant) -> None:
        record = self.judgement.record
        exchange = self.binding.exchange(witness)
        total = sum(len(v) for v in seen.values())
        lost = sorted(t for t, reader in accepted.items() if t not in {b for _, b in seen[reader]})
        record("mailbox:history:no-loss", not lost, "every accepted message reaches its addressee",
               f"{len(accepted)} accepted; lost: {lost[:5]}" if lost else f"{len(accepted)} accepted, all read",
               exchange)
        duplicated = []
        misaddressed = []
        reordered = []
        for reader, reads in seen.items():
            ids_of: dict[str, set[str]] = {}
            for mail_id, body in reads:
                ids_of.setdefault(body, set()).add(mail_id)
            duplicated += [f"{b!r} under ids {sorted(i)}" for b, i in ids_of.items() if len(i) > 1]
            misaddressed += [b for b in ids_of if b.startswith("history ") and accepted.get(b, reader) != reader]
            first = list(dict.fromkeys(body for _, body in reads if body in accepted))
            by_sender: dict[str, list[str]] = {}
            for body in first:
                by_sender.setdefault(body.split()[1], []).append(body)
            reordered += [f"{reader} saw {s}'s messages as {[b.split()[2] for b in bodies]}"
                          for s, bodies in by_sender.items() if bodies != sorted(bodies)]
        record("mailbox:history:no-duplicate", not duplicated, "no message reaches an inbox twice",
               f"duplicated: {duplicated[:3]}" if duplicated else f"{total} reads of mail, no duplicate", exchange)
        record("mailbox:history:addressed", not misaddressed, "each message reaches its addressee only",
               f"misaddressed: {misaddressed[:3]}" if misaddressed else "every message reached its addressee only",
               exchange)
        record("mailbox:history:sender-order", not reordered, "one sender's messages read in send order",
               "; ".join(reordered[:3]) if reordered else "every sender's messages in send order", exchange)

    # -- bodies, attribution, isolation --------------------------------------------------------------

    def bodies(self) -> None:
        with self.judging("mailbox:body:byte-exact"):
            sender, reader = self.participant("bodysender"), self.participant("bodyreader")
            for body in BODIES:
                sent = self.binding.send(sender, reader.name, body)
                if not sent.ok:
                    self.judgement.record("mailbox:body:byte-exact", False, "the send is accepted",
                                          f"{body[:60]!r}: {sent.error}", self.binding.exchange(sender))
            read = self._read_all(reader)
            got = [m.body for m in read]
            for body in BODIES:
                self.judgement.record("mailbox:body:byte-exact", body in got, "the body comes back exactly",
                                      f"{body[:60]!r} ({len(body)} characters)" + ("" if body in got else
                                      f"; read back: {[g[:60] for g in got]!r}"), self.binding.exchange(reader))

    def attribution(self) -> None:
        with self.judging("mailbox:sender:unforgeable"):
            victim, forger, reader = (self.participant(n) for n in ("victim", "forger", "attributed"))
            tag = "forged: sent by forger, claiming to be victim"
            attempt = self.binding.send_claiming(forger, victim.name, reader.name, tag)
            read = [m for m in self._read_all(reader) if m.body == tag]
            forged = [m for m in read if m.sender == victim.name]
            detail = (f"the recipient reads it as sent by {victim.name!r}" if forged else
                      f"refused: {attempt.error}" if not attempt.ok else
                      f"accepted, and read as sent by {[m.sender for m in read]}")
            self.judgement.record("mailbox:sender:unforgeable", not forged,
                                  "the recipient never sees another participant as the sender", detail,
                                  self.binding.exchange(forger))

    def isolation(self) -> None:
        with self.judging("mailbox:inbox:isolated-read"):
            owner, sender, snoop = (self.participant(n) for n in ("owner", "ownersender", "snoop"))
            tag = "for the owner's eyes only"
            self._must_send(sender, owner.name, tag)
            peek = self.binding.inbox_of(snoop, owner.name)
            leaked = [m for m in peek.mail if m.body == tag]
            self.judgement.record("mailbox:inbox:isolated-read", not leaked, "another's mail cannot be read",
                                  f"{snoop.name} read {owner.name}'s mail" if leaked else
                                  f"refused: {peek.error}" if peek.error else "nothing of the owner's was shown",
                                  self.binding.exchange(snoop))
        with self.judging("mailbox:inbox:isolated-ack"):
            mine = [m for m in self._read_all(owner) if m.body == tag]
            if not mine:
                raise RuntimeError("the owner cannot read its own mail")
            attempt = self.binding.ack_of(snoop, owner.name, mine[0])
            still = [m for m in self._read_all(owner) if m.body == tag]
            self.judgement.record("mailbox:inbox:isolated-ack", not attempt.ok and bool(still),
                                  "another's mail cannot be acknowledged",
                                  f"{snoop.name} acknowledged {owner.name}'s mail" if attempt.ok else
                                  f"refused ({attempt.error}), and still unacknowledged" if still else
                                  f"refused ({attempt.error}), yet the mail is gone from the owner's inbox",
                                  self.binding.exchange(snoop))

    # -- recipients ----------------------------------------------------------------------------------

    def recipients(self) -> None:
        with self.judging("mailbox:recipient:unknown", "mailbox:recipient:exact"):
            short, long_, sender = self.participant("ann"), self.participant("annie"), self.participant("annsender")
            before = {p.name: len(self._read_all(p)) for p in (short, long_)}
            unknown = self.binding.send(sender, "nobodyhere", "to nobody")
            self.judgement.record("mailbox:recipient:unknown", not unknown.ok, "a send to an unknown name is refused",
                                  f"refused: {unknown.error}" if not unknown.ok else "accepted",
                                  self.binding.exchange(sender))
            for variant in ("an", "anni", "ANN", "Annie", "ann ", " annie", "annie\n"):
                tag = f"to the variant {variant!r}"
                self.binding.send(sender, variant, tag)
                got = {p.name: [m.body for m in self._read_all(p)] for p in (short, long_)}
                wrong = [name for name, bodies in got.items() if tag in bodies]
                self.judgement.record("mailbox:recipient:exact", not wrong,
                                      "a variant of a name reaches no participant",
                                      f"{variant!r} was delivered to {wrong}" if wrong else f"{variant!r}: delivered to "
                                      "neither", self.binding.exchange(sender))
            after = {p.name: len([m for m in self._read_all(p) if m.body == "to nobody"]) for p in (short, long_)}
            self.judgement.record("mailbox:recipient:unknown", not any(after.values()),
                                  "nothing of a send to an unknown name is delivered",
                                  f"inboxes before {before}, delivered 'to nobody': {after}")

    def ambiguity(self) -> None:
        with self.judging("mailbox:recipient:ambiguous"):
            first = self.participant("twin")
            second = self.binding.register_twin(first.name)
            sender = self.participant("twinsender")
            sent = self.binding.send(sender, first.name, "to one of two twins")
            got = [p for p in (first, second) if any(m.body == "to one of two twins" for m in self._read_all(p))]
            self.judgement.record("mailbox:recipient:ambiguous", not sent.ok and not got,
                                  "a send to a shared name is refused",
                                  f"refused: {sent.error}" if not sent.ok and not got else
                                  f"accepted ({len(got)} of the twins got it)", self.binding.exchange(sender))

    # -- acknowledgement, waits, durability ------------------------------------------------------------

    def acknowledgement(self) -> None:
        with self.judging("mailbox:ack:idempotent"):
            sender, reader = self.participant("acksender"), self.participant("ackreader")
            self._must_send(sender, reader.name, "acknowledge me twice")
            mail = [m for m in self._read_all(reader) if m.body == "acknowledge me twice"]
            first = self.binding.ack(reader, mail)
            after_first = self._read_all(reader)
            self.binding.inbox(reader)  # read again, as a reader acknowledging twice would have
            second = self.binding.ack(reader, mail)
            after_second = self._read_all(reader)
            self.judgement.record("mailbox:ack:idempotent", first.ok and second.ok and after_first == after_second,
                                  "a second acknowledgement is accepted and changes nothing",
                                  f"first: {first.error or 'accepted'}; second: {second.error or 'accepted'}; inbox "
                                  f"{'unchanged' if after_first == after_second else 'changed'} by the second",
                                  self.binding.exchange(reader))

    def waits(self) -> None:
        with self.judging("mailbox:wait:bounded", "mailbox:wait:wakes"):
            sender, waiter = self.participant("waitsender"), self.participant("waiter")
            self.binding.ack(waiter, list(self._read_all(waiter)))
            started = time.monotonic()
            idle = self.binding.wait(waiter, 1.0)
            took = time.monotonic() - started
            self.judgement.record("mailbox:wait:bounded", idle.ok and idle.id != "woke" and took < 1.0 + WAIT_GRACE_S,
                                  "a wait with nothing to wake it returns by its timeout",
                                  f"timeout 1 s: returned after {took:.2f} s, {idle.id or idle.error}",
                                  self.binding.exchange(waiter))
            with ThreadPoolExecutor(1) as pool:
                started = time.monotonic()
                waiting = pool.submit(self.binding.wait, waiter, 30.0)
                self._must_send(sender, waiter.name, "wake up")
                woke = waiting.result(timeout=60)
                took = time.monotonic() - started
            self.judgement.record("mailbox:wait:wakes", woke.ok and woke.id == "woke" and took < 15.0,
                                  "a wait wakes when mail arrives",
                                  f"timeout 30 s: returned after {took:.2f} s, {woke.id or woke.error}",
                                  self.binding.exchange(waiter))

    def durability(self) -> None:
        with self.judging("mailbox:durable:accepted-send"):
            sender, reader = self.participant("durablesender"), self.participant("durablereader")
            tags = [f"durable {i}" for i in range(5)]
            for tag in tags:
                self._must_send(sender, reader.name, tag)
            self.binding.crash()
            got = [m.body for m in self._read_all(reader)]
            missing = [t for t in tags if t not in got]
            self.judgement.record("mailbox:durable:accepted-send", not missing,
                                  "accepted mail survives a SIGKILL of whatever writes",
                                  f"missing after the crash: {missing}" if missing else "all 5 accepted messages kept",
                                  self.binding.exchange(reader))

    # -- helpers ---------------------------------------------------------------------------------------

    def _read_all(self, reader: Participant) -> tuple[Mail, ...]:
        outcome = self.binding.inbox(reader)
        if not outcome.ok:
            raise RuntimeError(f"{reader.name} cannot read its own inbox: {outcome.error}")
        return outcome.mail

    def _must_send(self, sender: Participant, to: str, body: str) -> Outcome:
        outcome = self.binding.send(sender, to, body)
        if not outcome.ok:
            raise RuntimeError(f"{sender.name} -> {to}: the send was refused: {outcome.error}")
        return outcome
