"""One scenario run in its own process: ``python -m harness.acceptance.worker TASK RESULT``.

The acceptance run starts one worker per scenario run (through its job), so
each scenario has a process of its own to own its job, its subreaper role
and its signal handling. ``TASK`` is a JSON file naming the scenario file,
the mode and the :class:`~harness.acceptance.execution.RunSettings`; the
result (the report's scenario entry) is written to ``RESULT``. Exit status:
0 when every check passed, 1 otherwise, 128 + N on signal N. A task that says
``"verdict": "stdin"`` reads the capability probe's verdict from standard input
before its owners attach (:mod:`.gate`); a run the verdict rules out writes
``{"skipped": {"missing", "why"}}`` and exits 0.

A worker started by the runner watches its lifeline
(:mod:`harness.process.lifeline`): should the runner die without tearing down,
SIGKILL included, the worker gets SIGTERM, which closes its scenario's job, and
exits without finishing the scenario.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.codex.install import CodexInstallation
from harness.private import write_private
from harness.process import lifeline

from .execution import RunSettings, run_scenario
from .gate import RunSkipped, read_verdict
from .scenario import load_scenario


def settings_to_json(settings: RunSettings) -> dict[str, Any]:
    return {
        "codex": {"executable": str(settings.codex.executable), "version": settings.codex.version,
                  "source": settings.codex.source},
        "homes_root": str(settings.homes_root), "artifacts_root": str(settings.artifacts_root),
        "keep_home": settings.keep_home, "approve_tools": settings.approve_tools, "provider": settings.provider,
        "auth_home": str(settings.auth_home) if settings.auth_home else None,
        "token_ledgers": str(settings.token_ledgers) if settings.token_ledgers else None,
        "driver": settings.driver,
        "capabilities": None if settings.capabilities is None else list(settings.capabilities),
        "persona": settings.persona, "max_requests": settings.max_requests,
        "trust_workspaces": settings.trust_workspaces,
        "acp_agents": {name: list(command) for name, command in settings.acp_agents.items()},
    }


def settings_from_json(data: dict[str, Any]) -> RunSettings:
    codex = data["codex"]
    return RunSettings(
        codex=CodexInstallation(Path(codex["executable"]), codex["version"], codex["source"]),
        homes_root=Path(data["homes_root"]), artifacts_root=Path(data["artifacts_root"]),
        keep_home=data["keep_home"], approve_tools=data["approve_tools"], provider=data["provider"],
        auth_home=Path(data["auth_home"]) if data["auth_home"] else None,
        token_ledgers=Path(data["token_ledgers"]) if data.get("token_ledgers") else None,
        driver=data["driver"],
        capabilities=None if data.get("capabilities") is None else tuple(data["capabilities"]),
        persona=data.get("persona"), max_requests=data.get("max_requests"),
        trust_workspaces=data.get("trust_workspaces", True),
        acp_agents={name: tuple(command) for name, command in (data.get("acp_agents") or {}).items()},
    )


def main(argv: list[str] | None = None) -> int:
    task_path, result_path = (sys.argv[1:] if argv is None else argv)[:2]
    # Started by a runner: should it die, SIGTERM ends this scenario's job (see run_scenario).
    lifeline.watch()
    task = json.loads(Path(task_path).read_text(encoding="utf-8"))
    scenario = load_scenario(task["scenario"])
    if task.get("pair"):
        scenario = replace(scenario, pair=tuple(task["pair"]))  # the pair the selection ran it as
    verdict = read_verdict(sys.stdin.buffer) if task.get("verdict") == "stdin" else None
    try:
        result = run_scenario(scenario, task["mode"], settings_from_json(task["settings"]), handle_signals=True,
                              trial=task.get("trial"), verdict=verdict)
    except RunSkipped as skipped:
        write_private(Path(result_path), json.dumps({"skipped": skipped.to_json()}))
        return 0
    write_private(Path(result_path), json.dumps(result, ensure_ascii=False))
    return 0 if result["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
