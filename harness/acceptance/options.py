"""The acceptance runner's command line (``python runner.py [OPTIONS]``).

Parsing only: :func:`parse` turns arguments and the environment into
:class:`Options`, or raises :class:`UsageError` with a message for the user.
Real-provider runs are opt-in twice: ``--provider openai`` and the
environment variable :data:`AUTH_HOME_ENV` naming an authorized Codex home.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness import invocation
from harness.process.run_home import default_runs_root
from harness.shards import Shard, ShardError

from harness.lab.driver import REFERENCE, load_driver
from harness.lab.kinds import OPENCODE, KindError, parse_acp_agent, parse_pair
from .scenario import MODES, PROVIDERS, SCENARIOS_DIR, PairChoice

AUTH_HOME_ENV = "PEERWIRE_CODEX_AUTH_HOME"
MAX_WORKERS = 8
DEFAULT_WORKERS = 4
"""Scenario runs at a time by default: a run waits on process start-ups and turns far more than it computes, so
four keep two cores busy (10 runs: 39.7 s with 4 beside 56.6 s with 2, the same CPU, median of 3, load 11-16)."""


class UsageError(ValueError):
    """The command line or environment cannot describe a run."""


@dataclass(frozen=True)
class Options:
    scenarios: tuple[str, ...]
    mode: str | None
    keep_home: bool
    runs_root: Path
    report_dir: Path
    codex: str | None
    expected_version: str | None
    approve_tools: bool
    provider: str
    auth_home: Path | None
    scenarios_dir: Path
    workers: int
    driver: str = REFERENCE
    junit: Path | None = None
    shard: Shard | None = None
    durations: Path | None = None
    trials: int = 1
    min_pass_rate: float = 1.0
    max_requests: int | None = None
    personas: tuple[str | None, ...] = (None,)
    """The scripted model's personas to run every scenario under; ``None``: the scenario's own rules."""
    trust_workspaces: bool = True
    """False: the untrusted start-up diagnostic (``--untrusted-workspace``)."""
    pairs: tuple[PairChoice, ...] = (PairChoice(),)
    """``--agents``: the pairs of agent kinds every selected scenario runs as (default: two Codex agents)."""
    acp_agents: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """``--acp-agent NAME=COMMAND``: the ACP agents a pair may name as ``acp:NAME``."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=invocation.command("accept") if invocation.command() == invocation.PROG else invocation.command(),
        description="Run the acceptance scenarios against two real Codex agents and write a private report.")
    p.add_argument("--scenario", action="append", default=[], metavar="NAME",
                   help="run only this scenario or scenario group (repeatable; default: all)")
    p.add_argument("--mode", choices=MODES, help="run only this owner mode (default: every mode a scenario declares)")
    p.add_argument("--keep-home", action="store_true", help="keep run homes of passing scenarios too")
    p.add_argument("--runs-root", type=Path, help=f"where run homes are created (default: {default_runs_root()})")
    p.add_argument("--report-dir", type=Path, help="where reports/<run-id>/ is written (default: reports/)")
    p.add_argument("--codex", metavar="PATH", help="the Codex CLI to drive (default: $PEERWIRE_CODEX, "
                                                   "else the pinned install in a node_modules: $PEERWIRE_NODE_MODULES, the "
                                                   "current project's, or beside this Python environment)")
    p.add_argument("--expected-version", metavar="V", help="fail unless the Codex CLI reports this version "
                                                         "(default: the version peerwire pins)")
    p.add_argument("--approve-tools", action=argparse.BooleanOptionalAction, default=True,
                   help="approve exactly the core's tools in the agents' private config (default: on; the "
                        "agents run under approval policy \"never\", so without it every tool call is refused)")
    p.add_argument("--provider", choices=PROVIDERS, default="scripted",
                   help=f"the agents' model: the local scripted model (default) or, opt-in, the real provider "
                        f"configured in ${AUTH_HOME_ENV}")
    p.add_argument("--scenarios-dir", type=Path, default=SCENARIOS_DIR, help="where scenario files are read from")
    p.add_argument("--junit", type=Path, metavar="FILE",
                   help="also write the verdicts as JUnit XML to FILE: one test case per check, named by the "
                        "scenario run's identity (a copy of the report's junit.xml)")
    p.add_argument("--shard", metavar="K/N",
                   help="run only shard K of N of the selected scenario runs: every run lands in exactly one "
                        "shard, balanced by recorded durations (see --durations); merge the shards' reports with "
                        f"`{invocation.command('report merge')}`")
    p.add_argument("--durations", type=Path, metavar="FILE",
                   help=f"recorded durations to balance shards by (default: {invocation.DURATIONS_DEFAULT_HELP})")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS, choices=range(1, MAX_WORKERS + 1),
                   help=f"scenarios run in parallel (default {DEFAULT_WORKERS}, at most {MAX_WORKERS})")
    p.add_argument("--untrusted-workspace", action="store_true",
                   help="diagnose untrusted start-up: run the one --scenario given without trusting the fixture "
                        "workspaces (the run never answers a trust prompt; the report states the trust)")
    p.add_argument("--driver", default=REFERENCE, metavar="MODULE:CLASS",
                   help="the core under test, as its acceptance driver (default: the reference core; "
                        "see contracts/README.md)")
    p.add_argument("--trials", type=_positive, default=1, metavar="N",
                   help="run every scenario run N times and report the pass rate of each and of each check")
    p.add_argument("--min-pass-rate", type=_rate, default=1.0, metavar="P",
                   help="exit 0 when every scenario run passed in at least this share of its trials "
                        "(0 to 1; default 1: every trial)")
    p.add_argument("--max-requests", type=_positive, metavar="N",
                   help="stop a scenario run cleanly once any agent made N model requests (its rollouts count "
                        "them); the run fails the max-requests check naming the cap")
    p.add_argument("--agents", action="append", default=[], metavar="A,B[@SCENARIO+...]",
                   help="the kinds of agents A and B, in that order: codex, opencode (the pinned OpenCode on the "
                        "scripted model), or acp:NAME (an --acp-agent); default codex,codex. Repeatable: every "
                        "selected scenario that makes sense for a pair ([scenario] kinds) runs as each pair; "
                        "@SCENARIO+... narrows a pair to those scenarios or groups, e.g. codex,opencode@task-reply-auto")
    p.add_argument("--acp-agent", action="append", default=[], metavar="NAME=COMMAND",
                   help="an ACP agent you installed, run as acp:NAME in --agents: COMMAND starts it speaking ACP on "
                        "stdio (split as a shell would; no shell runs it), with your environment, so it talks to the "
                        "provider you configured for it; the checks that need its model requests are skipped by name")
    p.add_argument("--persona", action="append", default=[], metavar="NAME",
                   help="run under this persona of the scripted model (scenarios/personas/; repeatable; "
                        "'all' for every one)")
    return p


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return number


def _rate(value: str) -> float:
    rate = float(value)
    if not 0 <= rate <= 1:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 1")
    return rate


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Options:
    """Options from ``argv`` and ``environ`` (default: ours).

    What a real provider needs (the authorized home, its credential, the model)
    is checked by :func:`~harness.acceptance.preflight.preflight`, which names
    every missing piece at once; argparse's own errors exit with status 2, as usual.
    """
    environ = os.environ if environ is None else environ
    args = parser().parse_args(list(argv))
    try:
        load_driver(args.driver)
    except ValueError as error:
        raise UsageError(f"--driver: {error}") from None
    try:
        shard = Shard.parse(args.shard) if args.shard is not None else None
    except ShardError as error:
        raise UsageError(str(error)) from None
    if args.untrusted_workspace and len(args.scenario) != 1:
        raise UsageError("--untrusted-workspace is a diagnostic of one scenario: give exactly one --scenario NAME")
    acp_agents, pairs = _agents(args.agents, args.acp_agent, args.provider)
    auth_home = None
    if args.provider != "scripted" and environ.get(AUTH_HOME_ENV):
        auth_home = Path(environ[AUTH_HOME_ENV]).expanduser().absolute()
    return Options(
        scenarios=tuple(args.scenario), mode=args.mode, keep_home=args.keep_home,
        runs_root=args.runs_root or default_runs_root(),
        report_dir=args.report_dir or Path("reports").absolute(),
        codex=args.codex, expected_version=args.expected_version,
        approve_tools=args.approve_tools,
        provider=args.provider, auth_home=auth_home, scenarios_dir=args.scenarios_dir, workers=args.workers,
        driver=args.driver,
        junit=args.junit.absolute() if args.junit else None,
        shard=shard, durations=args.durations,
        trials=args.trials, min_pass_rate=args.min_pass_rate, max_requests=args.max_requests,
        personas=tuple(args.persona) or (None,),
        trust_workspaces=not args.untrusted_workspace,
        pairs=pairs, acp_agents=acp_agents,
    )


def _agents(values: Sequence[str], acp_values: Sequence[str],
            provider: str) -> tuple[dict[str, tuple[str, ...]], tuple[PairChoice, ...]]:
    """``--acp-agent`` and ``--agents`` parsed: the named ACP agents, and each pair with its scenarios."""
    acp_agents: dict[str, tuple[str, ...]] = {}
    try:
        for value in acp_values:
            name, command = parse_acp_agent(value)
            if name in acp_agents:
                raise KindError(f"--acp-agent {name} is given twice")
            acp_agents[name] = command
        pairs = []
        for value in values or ["codex,codex"]:
            kinds, at, narrowed = value.partition("@")
            a, b = parse_pair(kinds, acp_agents)
            if at and not all(narrowed.split("+")):
                raise KindError(f"--agents {value!r}: name scenarios after @, joined by +")
            if OPENCODE in (a.kind, b.kind) and provider != "scripted":
                raise KindError(f"--agents {value}: opencode runs on the scripted model; with provider {provider}, "
                                f"run your own ACP agent with --acp-agent NAME=COMMAND and acp:NAME")
            pairs.append(PairChoice((a.kind, b.kind), tuple(narrowed.split("+")) if narrowed else ()))
    except KindError as error:
        raise UsageError(str(error)) from None
    unused = sorted(set(acp_agents) - {kind[len("acp:"):] for choice in pairs for kind in choice.pair})
    if unused:
        raise UsageError(f"--acp-agent {', '.join(unused)}: no --agents pair runs it (name it as acp:NAME)")
    return acp_agents, tuple(pairs)
