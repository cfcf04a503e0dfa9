"""A stand-in for a real provider: the scripted model behind one base URL, for every scenario at once.

A real-provider run (``runner.py --provider openai``) leaves the model to the
user's own ``config.toml``: one provider, one ``base_url``, every agent of
every scenario. To run that whole path offline, the stand-in serves the
Responses API at ``<base>/v1/responses`` and plays every scenario's rules.
Which scenario and agent a request is for it reads from the request itself,
as it reads everything: Codex tells the model its working directory (the
``<cwd>`` of the environment context in the input), and each agent's fixture
workspace lies at ``.../scenarios/<scenario>.<mode...>/agents/<agent>/workspace``
in its run home. A collaboration child works in its root's workspace and is
answered with its root's rules, as on the scripted route.

    python -m harness.acceptance.standin --port-file F --log FILE [--scenarios-dir DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.model.rules import Decision, ModelScript, read_input
from harness.model.server import serve_until_signalled, serving_options

from .scenario import SCENARIOS_DIR, discover

_WORKSPACE = re.compile(r"/scenarios/(?P<scenario>[^/.]+)\.[^/]*/agents/(?P<agent>[^/]+)/workspace\b")


class StandInScript:
    """Every scenario's :class:`ModelScript`, chosen per request from the workspace Codex reports in it."""

    def __init__(self, scripts: Mapping[str, ModelScript]):
        self.scripts = dict(scripts)
        self.name = "stand-in provider"
        self.holds = frozenset(hold for script in self.scripts.values() for hold in script.holds)
        self.rules: dict[str, Any] = {}

    @property
    def agents(self) -> list[str]:
        return sorted({f"{name}/{agent}" for name, script in self.scripts.items() for agent in script.agents})

    def agent_of(self, body: Mapping[str, Any]) -> str | None:
        """``<scenario>/<agent>`` from the request's environment context, or None when it names no workspace."""
        for item in read_input(body):
            found = _WORKSPACE.search(item.text)
            if found and found.group("scenario") in self.scripts:
                return f"{found.group('scenario')}/{found.group('agent')}"
        return None

    def decide(self, agent: str, body: Mapping[str, Any]) -> Decision | None:
        scenario, _, name = agent.partition("/")
        script = self.scripts.get(scenario)
        return script.decide(name, body) if script is not None else None


def stand_in(scenarios_dir: Path) -> StandInScript:
    """The stand-in for the acceptance scenarios in ``scenarios_dir``."""
    return StandInScript({scenario.name: scenario.script for scenario in discover(scenarios_dir)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.acceptance.standin", description=__doc__.split("\n")[0])
    parser.add_argument("--scenarios-dir", type=Path, default=SCENARIOS_DIR)
    options = serving_options(parser).parse_args(argv)
    return serve_until_signalled(stand_in(options.scenarios_dir), options)


if __name__ == "__main__":
    sys.exit(main())
