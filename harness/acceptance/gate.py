"""The capability probe's verdict, handed to scenario runs that started before it was known.

The acceptance runner starts its first scenario runs while the capability probe
(:mod:`harness.codex.capability_probe`) still runs. A run brings up its scripted
model, its core, its agents' registrations, workspaces and projections at once;
only its owners' attach waits for the verdict, because an owner takes the
capabilities its deliveries may use when it attaches: nothing is delivered
before the verdict is in. The runner hands the verdict over as one JSON line
on each worker's standard input the moment it has it (at once to a worker
started later), and a run whose scenario needs a capability the verdict did
not enable stops there, skipped, naming it (:class:`RunSkipped`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from harness.capabilities import Capability

PROBE_FAILED = "the capability probe failed"


@dataclass(frozen=True)
class Verdict:
    """The delivery capabilities the probe enabled, and why each other one is not."""

    enabled: tuple[str, ...]
    not_enabled: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, summary: Mapping[str, Any] | None) -> Verdict:
        """From a capability report's run summary (``CapabilityReport.run_summary``); None: the probe broke."""
        if summary is None:
            return cls((), {})
        return cls(tuple(summary["enabled"]), dict(summary.get("not_enabled") or {}))

    def why_not(self, capability: str) -> str:
        return self.not_enabled.get(capability) or PROBE_FAILED

    def missing(self, needs: Sequence[str]) -> list[str]:
        """Which of ``needs`` (a scenario run's capabilities) the verdict did not enable."""
        return [name for name in needs if name not in self.enabled]

    def to_line(self) -> bytes:
        return json.dumps({"enabled": list(self.enabled), "not_enabled": dict(self.not_enabled)}).encode() + b"\n"

    @classmethod
    def from_line(cls, line: bytes) -> Verdict:
        data = json.loads(line)
        return cls(tuple(data["enabled"]), dict(data["not_enabled"]))


class RunSkipped(Exception):
    """A scenario run needs a capability the verdict did not enable: it ends before any owner attaches."""

    def __init__(self, missing: Sequence[str], why: str):
        super().__init__(f"needs capability {', '.join(missing)} ({why})")
        self.missing = list(missing)
        self.why = why

    def to_json(self) -> dict[str, Any]:
        return {"missing": self.missing, "why": self.why}


def read_verdict(stream: IO[bytes]) -> Callable[[], Verdict]:
    """What a worker waits on: the verdict line its runner writes to ``stream``, read once, when first asked.
    A stream that ends without one (the runner is gone or the probe never finished) is a failed probe."""
    lock, got = threading.Lock(), []

    def verdict() -> Verdict:
        with lock:
            if not got:
                line = stream.readline()
                got.append(Verdict.from_line(line) if line.strip() else Verdict((), {}))
            return got[0]

    return verdict


def gate(verdict: Callable[[], Verdict], needs: Sequence[str]) -> Callable[[], list[str]]:
    """The capabilities a run's owners attach with, once the verdict is in; raises :class:`RunSkipped` when
    the run ``needs`` one it did not enable, and ``ValueError`` at once for a need that is no Codex capability
    (``contracts/capabilities.json``): a misspelt need would otherwise read as a capability the probe lacks."""
    unknown = [name for name in needs if name not in {c.value for c in Capability}]
    if unknown:
        raise ValueError(f"unknown capabilities {unknown} (known: {', '.join(c.value for c in Capability)})")

    def capabilities() -> list[str]:
        known = verdict()
        missing = known.missing(needs)
        if missing:
            raise RunSkipped(missing, known.why_not(missing[0]))
        return list(known.enabled)

    return capabilities


class VerdictBoard:
    """The runner's side: the workers waiting for the verdict, each given it as soon as it is posted."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[IO[bytes]] = []
        self.verdict: Verdict | None = None
        self.posted = threading.Event()

    def hand(self, stream: IO[bytes]) -> None:
        """Give ``stream`` (a worker's standard input) the verdict: now if it is in, else when posted."""
        with self._lock:
            if self.verdict is None:
                self._waiting.append(stream)
                return
        _give(stream, self.verdict)

    def post(self, verdict: Verdict) -> None:
        with self._lock:
            self.verdict = verdict
            waiting, self._waiting = self._waiting, []
        self.posted.set()
        for stream in waiting:
            _give(stream, verdict)


def _give(stream: IO[bytes], verdict: Verdict) -> None:
    try:
        stream.write(verdict.to_line())
        stream.close()
    except (BrokenPipeError, ValueError, OSError):
        pass  # the worker is already gone: its result says why
