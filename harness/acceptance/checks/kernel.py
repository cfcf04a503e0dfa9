"""The judging kernel: a check's spec, its verdict, the evidence it cites, and how a judgement is applied.

A judgement reads a run's :class:`~harness.acceptance.observations.Observations`,
cites what it relied on in an :class:`Evidence`, and returns its summary when it
passes or raises :class:`Failed` otherwise; evidence it collected before failing
is kept in the verdict. Something the run did not record at all (a label, a
record) fails the check too, saying what is missing. A judgement that needs a
capability or a trace an agent's kind lacks (``obs.require``) raises
:class:`~harness.acceptance.observations.Skipped`: its verdict is ``skip``,
naming the agent, its kind and what it lacks; a skip is never counted as a pass,
and a run with skips passes only on the checks that did pass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from harness.evidence.rollouts import RolloutLine

from harness.evidence.acp_history import AcpLine

from ..observations import EvidenceMissing, Observations, ScreenLine, Skipped, TranscriptLine


class Failed(AssertionError):
    """A check's verdict is fail; the message is its summary."""


def require(condition: Any, summary: str) -> None:
    if not condition:
        raise Failed(summary)


@dataclass
class Evidence:
    """What a verdict rests on, by source (the report links each entry)."""

    records: list[str] = field(default_factory=list)
    rollout: list[str] = field(default_factory=list)
    model_requests: list[int] = field(default_factory=list)
    appserver: list[str] = field(default_factory=list)
    acp: list[str] = field(default_factory=list)
    """Lines of an ACP agent's transcript (``acp/<agent>.g<n>.acp.jsonl:<line>``), raw or read as its history."""
    screen: list[str] = field(default_factory=list)
    """Lines of an attached TUI's screen capture (``tui/<agent>.screen.txt:<line>``)."""
    content: dict[str, str] | None = None
    """A labelled content assessment (see :func:`assess_content`), reported beside the verdict, never part
    of it."""

    def assess(self, label: str, expected: str, said: str) -> str:
        """Grade whether ``said`` states ``expected`` and keep it as this verdict's content assessment."""
        self.content = {"label": label, "grade": assess_content(expected, said)}
        return self.content["grade"]

    def cite(self, *items: Any) -> None:
        for item in items:
            if item is None:
                continue
            if isinstance(item, AcpLine):
                _add(self.acp, str(item.at))
            elif isinstance(item, TranscriptLine) and item.ref.startswith("acp/"):
                _add(self.acp, item.ref)
            elif isinstance(item, RolloutLine):
                _add(self.rollout, str(item.at))
            elif isinstance(item, TranscriptLine):
                _add(self.appserver, item.ref)
            elif isinstance(item, ScreenLine):
                _add(self.screen, item.ref)
            elif isinstance(item, int):
                _add(self.model_requests, item)
            elif isinstance(item, str):
                _add(self.records, item)
            else:
                raise TypeError(f"cannot cite {item!r}")

    def as_dict(self) -> dict[str, list[Any]]:
        return {"records": self.records, "rollout": self.rollout, "model_requests": self.model_requests,
                "appserver": self.appserver, **({"acp": self.acp} if self.acp else {}),
                **({"screen": self.screen} if self.screen else {})}


def normalised(text: str) -> str:
    """Text compared for meaning, not form: case folded, punctuation dropped, whitespace collapsed."""
    kept = "".join(ch if ch.isalnum() or ch.isspace() else " " for ch in text.casefold())
    return " ".join(kept.split())


def assess_content(expected: str, said: str) -> str:
    """``exact`` when ``said`` contains ``expected`` byte for byte, ``normalised`` when it does once both are
    :func:`normalised`, else ``missing``."""
    if expected in said:
        return "exact"
    return "normalised" if normalised(expected) in normalised(said) else "missing"


def _add(bucket: list[Any], value: Any) -> None:
    if value not in bucket:
        bucket.append(value)


@dataclass(frozen=True)
class Verdict:
    id: str
    passed: bool
    summary: str
    evidence: Evidence
    skipped: Mapping[str, str] | None = None
    """A skip: ``agent``, its ``kind`` and the ``capability`` it lacks (``passed`` is then False)."""

    @property
    def failed(self) -> bool:
        """Neither passed nor skipped."""
        return not self.passed and self.skipped is None

    @property
    def verdict(self) -> str:
        return "skip" if self.skipped is not None else "pass" if self.passed else "fail"

    def as_dict(self) -> dict[str, Any]:
        out = {"id": self.id, "verdict": self.verdict, "summary": self.summary, "evidence": self.evidence.as_dict()}
        if self.skipped is not None:
            out["skipped"] = dict(self.skipped)
        if self.evidence.content is not None:
            out["content"] = dict(self.evidence.content)
        return out


@dataclass(frozen=True)
class CheckSpec:
    """One declared verdict: its id, the judgement to apply and that judgement's parameters."""

    id: str
    check: str
    params: Mapping[str, Any]
    mode: str | None = None

    def applies(self, mode: str) -> bool:
        return self.mode in (None, mode)


Judgement = Callable[[Observations, Mapping[str, Any], Evidence], str]


def judgements(*functions: Judgement) -> dict[str, Judgement]:
    """A registry of judgements, each under its function's name (the ``check`` a scenario names)."""
    return {function.__name__: function for function in functions}


def merge(*registries: Mapping[str, Judgement]) -> dict[str, Judgement]:
    """One registry from several; a name two of them define is an error, never a silent override."""
    out: dict[str, Judgement] = {}
    for registry in registries:
        clash = set(out) & set(registry)
        if clash:
            raise ValueError(f"judgements defined twice: {sorted(clash)}")
        out.update(registry)
    return out


def judge(spec: CheckSpec, observations: Observations, registry: Mapping[str, Judgement]) -> Verdict:
    """Apply one declared check with the judgement ``registry`` names; never raises for a failing or unjudgeable
    run."""
    evidence = Evidence()
    try:
        summary = registry[spec.check](observations, spec.params, evidence)
        return Verdict(spec.id, True, summary, evidence)
    except Failed as failure:
        return Verdict(spec.id, False, str(failure), evidence)
    except EvidenceMissing as missing:
        return Verdict(spec.id, False, f"not recorded: {missing}", evidence)
    except Skipped as skip:
        return Verdict(spec.id, False, f"skipped: {skip}", evidence,
                       {"agent": skip.agent, "kind": skip.kind, "capability": skip.capability})
