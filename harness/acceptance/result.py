"""A scenario run's result: the report's scenario entry, built in one place.

:func:`scenario_result` builds it from a run that got as far as judging;
:func:`unfinished_result` from one whose worker never returned (it died, or the
run was stopped before it began). Both give the same shape, which
``contracts/report.schema.json`` describes under ``scenarios``.
"""

from __future__ import annotations

from typing import Any

from harness.evidence.identity import DEFAULT_PAIR
from harness.evidence.usage import LABEL as USAGE_LABEL, total as usage_total

from .checks import Evidence, Verdict


def scenario_result(*, name: str, mode: str, persona: str | None, provider: str, trial: int | None,
                    description: str, key: str, verdicts: list[Verdict], wall_s: float, pair: str | None = None,
                    phases: list[dict[str, Any]] | None = None, agents: dict[str, Any] | None = None,
                    prompts: dict[str, list[str]] | None = None, tool_calls: list[dict[str, Any]] | None = None,
                    outputs: dict[str, list[str]] | None = None, usage: dict[str, dict[str, Any]] | None = None,
                    probe: dict[str, Any] | None = None, home: str | None = None) -> dict[str, Any]:
    """The scenario entry of a report. ``usage`` is per agent (:mod:`harness.evidence.usage`); ``home`` is
    the run home kept for a failed run; ``pair`` the agents' kinds (``codex,opencode``; two Codex: none).
    A run passes when no check failed and one passed at least: a skipped check is neither."""
    passed = any(verdict.passed for verdict in verdicts) and not any(verdict.failed for verdict in verdicts)
    result: dict[str, Any] = {
        "name": name, "mode": mode, "persona": persona, "provider": provider, "trial": trial,
        "pair": None if pair in (None, DEFAULT_PAIR) else pair,
        "description": description, "passed": passed, "wall_s": round(wall_s, 3),
        "phases": list(phases or []),
        "agents": dict(agents or {}),
        "inputs": {"prompts": dict(prompts or {})},
        "runner_tool_calls": list(tool_calls or []),
        "outputs": dict(outputs or {}),
        "checks": [verdict.as_dict() for verdict in verdicts],
        "usage": {"label": USAGE_LABEL, "agents": dict(usage or {}), "totals": usage_total(dict(usage or {}))},
        "artifacts_dir": f"{key}/",
    }
    if probe is not None:
        result["probe"] = probe
    if home is not None and not passed:
        result["home"] = home
    return result


def unfinished_result(*, name: str, mode: str, persona: str | None, provider: str, trial: int | None,
                      description: str, key: str, why: str, wall_s: float, pair: str | None = None) -> dict[str, Any]:
    """The entry of a scenario run that returned no result of its own: one failed ``steps-completed`` check
    saying ``why``."""
    return scenario_result(name=name, mode=mode, persona=persona, provider=provider, trial=trial, pair=pair,
                           description=description, key=key, wall_s=wall_s,
                           verdicts=[Verdict("steps-completed", False, why, Evidence())])
