"""What each agent's model was asked for, as its Codex rollouts record it: :func:`usage_of`.

Codex writes an ``event_msg`` of type ``token_count`` after every model
response, with that response's usage (``info.last_token_usage``: input,
cached input, output and reasoning output tokens) as the provider reported
it, and a ``turn_context`` per turn with the model and reasoning effort it
asked for. The counts here are those numbers summed, *token counts as Codex
recorded them*, never computed by peerwire: a scripted model reports its own
stand-in usage, a real provider its billing counts. A rollout that records no
effort gives :data:`~harness.evidence.rollouts.UNVERIFIED`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .rollouts import UNVERIFIED, RolloutLine

LABEL = "token counts as Codex recorded them in the agents' rollouts (token_count events), summed per agent"
COUNTS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def is_model_response(record_type: str | None, payload: Mapping[str, Any]) -> bool:
    """Whether a rollout record is Codex's count of one model response (a ``token_count`` event with usage;
    one without is a rate-limit update)."""
    return (record_type == "event_msg" and payload.get("type") == "token_count"
            and isinstance((payload.get("info") or {}).get("last_token_usage"), Mapping))


def usage_of(lines: Iterable[RolloutLine]) -> dict[str, Any]:
    """One agent's model requests (responses Codex counted), token counts and the models and efforts its
    turns asked for, from its rollout lines."""
    requests = 0
    totals = dict.fromkeys(COUNTS, 0)
    models: list[str] = []
    efforts: list[str] = []
    for line in lines:
        payload = line.payload if isinstance(line.payload, Mapping) else {}
        if line.record_type == "turn_context":
            for value, seen in ((payload.get("model"), models), (payload.get("effort"), efforts)):
                if isinstance(value, str) and value and value not in seen:
                    seen.append(value)
        elif is_model_response(line.record_type, payload):
            last = payload["info"]["last_token_usage"]
            requests += 1
            for key in COUNTS:
                value = last.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    totals[key] += value
    return {"model_requests": requests, **totals, "models": models or [UNVERIFIED],
            "reasoning_efforts": efforts or [UNVERIFIED]}


def total(agents: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """The sums over agents (or scenario runs) of the request and token counts."""
    return {key: sum(int(entry.get(key) or 0) for entry in agents.values())
            for key in ("model_requests", *COUNTS)}
