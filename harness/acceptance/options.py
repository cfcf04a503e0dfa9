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
from dataclasses import dataclass
from pathlib import Path

from harness.codex.install import project_root
from harness.codex.home import AUTH_FILE
from harness.process.run_home import default_runs_root
from harness.shards import DEFAULT_DURATIONS, Shard, ShardError

from .driver import REFERENCE, load_driver
from .scenario import MODES, PROVIDERS, SCENARIOS_DIR

AUTH_HOME_ENV = "PEERWIRE_CODEX_AUTH_HOME"
MAX_WORKERS = 2


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python runner.py",
        description="Run the acceptance scenarios against two real Codex agents and write a private report.")
    p.add_argument("--scenario", action="append", default=[], metavar="NAME",
                   help="run only this scenario or scenario group (repeatable; default: all)")
    p.add_argument("--mode", choices=MODES, help="run only this owner mode (default: every mode a scenario declares)")
    p.add_argument("--keep-home", action="store_true", help="keep run homes of passing scenarios too")
    p.add_argument("--runs-root", type=Path, help=f"where run homes are created (default: {default_runs_root()})")
    p.add_argument("--report-dir", type=Path, help="where reports/<run-id>/ is written (default: reports/)")
    p.add_argument("--codex", metavar="PATH", help="the Codex CLI to drive (default: $PEERWIRE_CODEX, "
                                                   "else the pinned install)")
    p.add_argument("--expected-version", metavar="V", help="fail unless the Codex CLI reports this version "
                                                         "(default: the version package.json pins)")
    p.add_argument("--approve-tools", action=argparse.BooleanOptionalAction, default=None,
                   help="approve exactly the messaging tools in the agents' config "
                        "(default: on with the scripted model, off with a real provider)")
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
                        "`runner.py report merge`")
    p.add_argument("--durations", type=Path, metavar="FILE",
                   help=f"recorded durations to balance shards by (default: {DEFAULT_DURATIONS.parent.name}/"
                        f"{DEFAULT_DURATIONS.name} when present)")
    p.add_argument("--workers", type=int, default=MAX_WORKERS, choices=range(1, MAX_WORKERS + 1),
                   help=f"scenarios run in parallel (at most {MAX_WORKERS})")
    p.add_argument("--driver", default=REFERENCE, metavar="MODULE:CLASS",
                   help="the core under test, as its acceptance driver (default: the reference core; "
                        "see contracts/README.md)")
    return p


def parse(argv: Sequence[str], environ: Mapping[str, str] | None = None) -> Options:
    """Options from ``argv`` and ``environ`` (default: ours).

    Raises :class:`UsageError` for a real provider without an authorized home
    (the variable unset, or the home without its credential file).
    argparse's own errors exit with status 2, as usual.
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
    auth_home = None
    if args.provider != "scripted":
        value = environ.get(AUTH_HOME_ENV)
        if not value:
            raise UsageError(f"--provider {args.provider} needs {AUTH_HOME_ENV} naming an authorized Codex home "
                             f"(one holding {AUTH_FILE}); it is copied into the private agent homes only")
        auth_home = Path(value).expanduser().absolute()
        if not (auth_home / AUTH_FILE).is_file():
            raise UsageError(f"{AUTH_HOME_ENV}={value} holds no {AUTH_FILE}: not an authorized Codex home")
    return Options(
        scenarios=tuple(args.scenario), mode=args.mode, keep_home=args.keep_home,
        runs_root=args.runs_root or default_runs_root(),
        report_dir=args.report_dir or project_root() / "reports",
        codex=args.codex, expected_version=args.expected_version,
        approve_tools=args.approve_tools if args.approve_tools is not None else args.provider == "scripted",
        provider=args.provider, auth_home=auth_home, scenarios_dir=args.scenarios_dir, workers=args.workers,
        driver=args.driver,
        junit=args.junit.absolute() if args.junit else None,
        shard=shard, durations=args.durations,
    )
