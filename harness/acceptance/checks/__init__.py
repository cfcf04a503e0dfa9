"""The judgements a scenario's ``[[checks]]`` name, over a run's observations.

Each judgement reads the core's records and evidence rows, the app-server
transcripts, the rollouts and the model request log (:mod:`..observations`),
and cites what it relied on. None of them passes on a final string alone:
where a final answer matters, the judgement first ties it to the records and
the order of events that produced it.

* :mod:`.kernel` — specs, verdicts, evidence, and applying a judgement;
* :mod:`.readings` — what several judgements read the same way;
* the messaging judgements by concern: :mod:`.tools`, :mod:`.delivery`,
  :mod:`.replies`, :mod:`.turns`;
* :mod:`.collab` — the judgements over a collaboration tree;
* :mod:`.tui` — the judgements over an attached TUI (mode ``attached_tui``).

Every scenario also gets the :data:`UNIVERSAL` checks: nothing is delivered
twice, every turn is accounted for, no agent replies twice to one request;
with the scripted model every model request matched a rule and was answered
(:data:`SCRIPTED_ONLY`), with a real provider every model request the
recording proxy carried was answered (:data:`PROVIDER_ONLY`), or, either way,
was cut for a reason the rollouts show.
"""

from __future__ import annotations

from ..observations import Observations
from . import collab, delivery, replies, tools, tui, turns
from .kernel import CheckSpec, Evidence, Failed, Judgement, Verdict, merge, require
from .kernel import judge as _judge


MESSAGING = merge(tools.JUDGEMENTS, delivery.JUDGEMENTS, replies.JUDGEMENTS, turns.JUDGEMENTS)
"""The judgements of the messaging profile's exchanges."""
JUDGEMENTS = merge(MESSAGING, collab.JUDGEMENTS, tui.JUDGEMENTS)
"""Every judgement a scenario can name."""

UNIVERSAL = (
    CheckSpec("delivered-at-most-once", "delivered_at_most_once", {}),
    CheckSpec("turns-accounted-for", "turns_accounted_for", {}),
    CheckSpec("replied-once-per-task", "replied_once_per_task", {}),
)
SCRIPTED_ONLY = (CheckSpec("model-requests-matched-rules", "model_requests_matched_rules", {}),)
PROVIDER_ONLY = (CheckSpec("model-requests-answered", "model_requests_answered", {}),)


def judge(spec: CheckSpec, observations: Observations) -> Verdict:
    """Apply one declared check (see :func:`.kernel.judge`)."""
    return _judge(spec, observations, JUDGEMENTS)


__all__ = ["JUDGEMENTS", "MESSAGING", "PROVIDER_ONLY", "SCRIPTED_ONLY", "UNIVERSAL", "CheckSpec", "Evidence", "Failed", "Judgement",
           "Verdict", "judge", "require"]
