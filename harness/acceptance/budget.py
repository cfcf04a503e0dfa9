"""``--max-requests``: at most N model requests per agent per scenario run, then the run stops cleanly.

A real provider bills every request, and a model that loops (waits, receives
nothing, waits again) can make many. Codex writes a ``token_count`` event to
the agent's rollout after each model response; :class:`RequestBudget` watches
the agents' rollouts while the steps run and, once an agent's count reaches
the cap, halts the lab (:meth:`~harness.lab.live.CodexLab.halt`: every agent
detached, so no further request is made, and the waiting step ends). The run then collects and judges as
usual; its ``max-requests`` check fails naming the cap and the agent.

The watch re-reads only what was appended to each rollout since its last
look, a few times a second: the rollouts are Codex's files, with no change
signal of their own.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

from harness.lab.live import CodexLab
from harness.evidence.usage import is_model_response

_LOOK_EVERY_S = 0.2


class RequestBudget:
    """Watches ``lab``'s agents' rollouts for ``cap`` model requests each (see the module docs)."""

    def __init__(self, lab: CodexLab, cap: int, *, on_hit: Callable[[str], None] | None = None):
        self.lab = lab
        self.cap = cap
        self.counts: dict[str, int] = {}
        self.hit: str | None = None
        """The first agent that reached the cap, if any."""
        self._offsets: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="request-budget", daemon=True)
        self._on_hit = on_hit

    def __enter__(self) -> "RequestBudget":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.look()  # the final count, for the check

    def look(self) -> str | None:
        """Count new ``token_count`` events; returns the agent that reached the cap (first time only)."""
        for name in list(self.lab.agents):
            for rollout in self.lab.rollouts(name):
                self.counts[name] = self.counts.get(name, 0) + self._new_responses(rollout)
        if self.hit is None:
            self.hit = next((name for name, count in self.counts.items() if count >= self.cap), None)
            return self.hit
        return None

    def _new_responses(self, rollout: Path) -> int:
        offset = self._offsets.get(rollout, 0)
        with rollout.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
        complete = data[:data.rfind(b"\n") + 1]  # a line Codex is still writing is read next time
        self._offsets[rollout] = offset + len(complete)
        return sum(_is_response(line) for line in complete.splitlines())

    def _watch(self) -> None:
        while not self._stop.wait(_LOOK_EVERY_S):
            agent = self.look()
            if agent is not None:
                if self._on_hit is not None:
                    self._on_hit(agent)
                self.lab.halt(f"{agent} reached the cap of {self.cap} model requests")
                return

    def summary(self) -> dict[str, Any]:
        return {"cap": self.cap, "counts": dict(self.counts), "hit": self.hit}


def _is_response(line: bytes) -> bool:
    if b'"token_count"' not in line:
        return False
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and is_model_response(record.get("type"), record.get("payload") or {})
