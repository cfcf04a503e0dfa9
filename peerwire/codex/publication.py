"""What becomes of the tasks bound to a Codex turn: captured, published, uncertain, or owed.

A bound turn's end is turned into its tasks' replies here, in the order the
contract needs: the terminal evidence is captured (persisted) before the
reply is published, and a turn whose end cannot be judged leaves its tasks
uncertain, announced and never replayed. A capture or publication the store
refuses (a full disk) is *owed*: nothing is lost with it and nothing else
waits on it; it is tried again on every receive (:meth:`Publication.pay`)
and at start-up, from the store where the capture made it.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import PeerwireError
from ..providers import Committed
from ..registry_rules import AgentRow
from ..store import Store
from .outcome import outcome_of

log = logging.getLogger("peerwire.codex")


class Publication:
    """The turn outcomes of one app's Codex owners, from a turn's end to the requester's mailbox."""

    def __init__(self, store: Store, committed: Committed):
        self.store = store
        self.committed = committed
        self._owed: dict[str, tuple[dict[str, Any], str]] = {}
        """Outcomes whose capture the store refused: binding id -> (outcome, recipient agent id)."""
        self._unpublished = False
        """Whether a captured outcome's publication was refused (the store holds it, state captured)."""

    def turn_ended(self, agent: AgentRow, turn: dict[str, Any], items: list[dict[str, Any]]) -> None:
        """``agent``'s turn ended (as turn/completed reported it, with its assistant items): answer its tasks."""
        found = outcome_of(turn, items, agent.name)
        for binding in self.store.bindings.find(state="accepted", turn_id=turn["id"]):
            if found is None:
                try:
                    self.uncertain(binding["request_id"], f"turn {turn['id']} ended with status "
                                   f"{turn.get('status')!r}, which this peerwire does not know",
                                   binding_id=binding["binding_id"])
                except PeerwireError as exc:  # still accepted: uncertain at the next start-up
                    log.error("binding %s: turn %s's unknown status not recorded (%s)", binding["binding_id"],
                              turn["id"], exc.message)
                continue
            outcome = found.evidence()
            outcome["text"] = outcome.pop("body")
            self._owed[binding["binding_id"]] = (outcome, agent.agent_id)
        self.pay()

    def pay(self) -> None:
        """Capture and publish every outcome still owed; cheap when none is (called on every receive)."""
        for binding_id, (outcome, agent_id) in list(self._owed.items()):
            try:
                if self.store.bindings.capture_outcome(binding_id, outcome) == "captured":
                    self._publish(binding_id, outcome, self.store.registry.agent(agent_id))
            except PeerwireError as exc:
                log.error("the outcome of binding %s is owed (%s); it is published at the next receive",
                          binding_id, exc.message)
                continue
            del self._owed[binding_id]
        if self._unpublished:
            self._unpublished = False
            for binding in self.store.bindings.find(state="captured"):
                self._publish(binding["binding_id"], binding["outcome"], self.store.registry.agent(binding["agent_id"]))

    def recover(self) -> None:
        """At start-up: publish what was captured before the app stopped; observations it lost are uncertain."""
        self._unpublished = True
        self.pay()
        for binding in self.store.bindings.find(state="accepted"):
            self.uncertain(binding["request_id"], "observation of the turn was lost when the app stopped",
                           binding_id=binding["binding_id"])

    def owner_gone(self, agent_id: str, generation: int, reason: str) -> None:
        """An owner can observe its turns no more: the tasks bound to them are uncertain."""
        for binding in self.store.bindings.find(state="accepted"):
            if binding["agent_id"] == agent_id and binding["generation"] == generation:
                self.uncertain(binding["request_id"], f"{reason} before turn {binding['turn_id']} completed",
                               binding_id=binding["binding_id"])

    def uncertain(self, request_id: str, reason: str, *, binding_id: str | None = None) -> None:
        """The task may or may not have reached the turn: recorded, announced to its requester, never replayed."""
        receipt = self.store.bindings.make_uncertain(request_id, reason, binding_id=binding_id)
        self.committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])

    def _publish(self, binding_id: str, outcome: dict[str, Any], agent: AgentRow) -> None:
        sender = agent if outcome["attributed_to_recipient"] else None
        try:
            receipt = self.store.bindings.publish_outcome(binding_id, sender, outcome["reply_status"], outcome["text"],
                                                          code=outcome.get("code"))
        except PeerwireError as exc:
            self._unpublished = True  # captured: published from the store at the next receive
            log.error("the reply of binding %s is captured but not published (%s); it is published at the "
                      "next receive", binding_id, exc.message)
            return
        if receipt is not None:
            self.committed(receipt["recipient"]["agent_id"], receipt["interaction_id"])
