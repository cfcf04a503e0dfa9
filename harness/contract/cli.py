"""``peerwire-harness contract`` (``python runner.py contract``): run the contract suite and write its reports.

A thin wrapper around pytest with :mod:`harness.contract.plugin`: it runs the
suite in ``harness/contract/suite`` under its own pytest configuration (``suite.ini``),
in parallel with pytest-xdist, and always writes ``compliance.json``,
``compliance.md``, ``junit.xml`` and ``durations.json`` into the report
directory. With ``--shard K/N`` it runs one shard of the selected tests, and
``peerwire-harness report merge`` judges the shards' votes together. Help texts and errors name the
command as it was run (:mod:`harness.invocation`).

Before any test, a pre-flight (:mod:`harness.contract.startup_checks`) checks that the run
can be made at all, and otherwise prints one line naming the cause and the fix. Exit
statuses:

* 0: every selected MUST passes and the baseline holds; 1: not (the verdict, as the
  report states it);
* 2: the implementation could not be started (a missing program, a server that exits
  or never answers ``initialize`` within ``--startup-timeout``, a provisioner that does
  not import or start);
* 3: what the suite runs on is missing (a package of the ``suite`` extra, Node, a
  pinned npm client the selection needs);
* 4: unusable options, or a selection with no requirement in it;
* 128 + N: interrupted by signal N (SIGINT, SIGTERM, SIGHUP: :mod:`harness.contract.interruption`); the report
  has what ran, marked interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

from harness.private import unwritable
from harness import invocation
from harness.process.jobs import Job
from harness.resources import contract_suite_config, packages_root

from . import interruption, startup_checks as preflight, terminal
from .layout import SUITE_DIR
from .report import JSON_NAME
from .stdio import dismiss_reaper




def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=invocation.command("contract"),
        description="Run the messaging contract suite against an MCP server launched over stdio.",
        epilog="Anything after `--` is passed to pytest unchanged.",
    )
    parser.add_argument("--server-cmd", metavar="CMD",
                        help="server command, launched once per managed caller with the provisioner's "
                             "environment (default: peerwire's reference `python -m peerwire mcp serve`)")
    parser.add_argument("--collab-server-cmd", metavar="CMD",
                        help="the collaboration profile's server command (default: the reference's "
                             "`mcp serve --profile collab` when testing the reference; with another --server-cmd "
                             "none, so the collab profile is reported not tested)")
    parser.add_argument("--profiles", metavar="LIST",
                        help="profiles to test, comma-separated: protocol, messaging, collab (default: every "
                             "profile the target offers: protocol alone without a provisioner); e.g. --profiles "
                             "protocol,messaging for a server without the collab profile")
    parser.add_argument("--provisioner", metavar="MODULE:CLASS",
                        help="Provisioner class for the implementation (default: the reference's for the reference "
                             "server; without one, another server is tested on the protocol profile alone: JSON-RPC "
                             "2.0 and MCP, no tool of its own called without --tool-call or --call-tools)")
    parser.add_argument("--call-tools", choices=("none", "read-only"),
                        help="which of the server's own tools the protocol profile may call: none (default) or "
                             "read-only (those tools/list annotates readOnlyHint); a foreign tool may have side effects")
    parser.add_argument("--tool-call", action="append", default=[], metavar="'NAME {JSON}'",
                        help="consent to one call of the server's tool NAME with these arguments (repeatable)")
    parser.add_argument("--startup-timeout", type=float, metavar="S",
                        help="how long a server may take from launch to its first answer (default 90); start-up is "
                             "measured and reported apart, never counted against a call")
    parser.add_argument("--call-timeout", type=float, metavar="S",
                        help="how long one answer may take once the server is up, besides any wait the call asks "
                             "for (default 30)")
    parser.add_argument("--isolation", choices=("shared", "fresh"), default="shared",
                        help="what tests share: shared (default: a home per worker for the tests that leave it "
                             "alone, and shared sessions for tests that only need a caller) or fresh (a home and "
                             "server processes of its own for every test; slower, for comparing verdicts)")
    parser.add_argument("--level", choices=("must", "should", "may"), default="may",
                        help="run requirements up to this level (default: may, i.e. all)")
    parser.add_argument("--requirement", action="append", default=[], metavar="ID",
                        help="run only these requirements (ID, glob or prefix); repeatable")
    parser.add_argument("--baseline", metavar="FILE",
                        help="expected failures, one requirement or case a line with a comment saying why, e.g. "
                             "`wire:batch:2025-03-26  # our SDK drops batches` (docs/contract-suite.md)")
    parser.add_argument("--write-baseline", metavar="FILE",
                        help="write FILE from this run's failures, in the --baseline format (each with why)")
    parser.add_argument("--report-dir", metavar="DIR",
                        help="where to write the reports (default: reports/contract-<UTC time>)")
    parser.add_argument("--shard", metavar="K/N",
                        help="run only shard K of N of the selected tests, balanced by recorded durations; merge "
                             f"the shards' report folders with `{invocation.command('report merge')}`")
    parser.add_argument("--durations", metavar="FILE",
                        help=f"recorded durations to balance shards by (default: {invocation.DURATIONS_DEFAULT_HELP})")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="pytest's own output too: its header, each test's outcome, tracebacks (default: a progress "
                             "line, one line per failing requirement, the verdict)")
    parser.add_argument("--tb", metavar="STYLE", choices=("auto", "long", "short", "line", "native", "no"),
                        help="pytest's traceback style for failing tests (implies pytest's output, as -v does)")
    parser.add_argument("--skip-preflight", action="store_true",
                        help="start the tests without first checking that the server starts and answers initialize, "
                             "that the provisioner starts and that the suite's own clients are installed")
    parser.add_argument("-n", "--workers", default="auto",
                        help="pytest-xdist workers: a number, auto or 0 for none (default: auto, twice the usable "
                             "cores, from 2 to 8: a run mostly waits on start-ups and timed waits)")
    return parser


MAX_AUTO_WORKERS = 8


def auto_workers() -> int:
    """The workers ``--workers auto`` runs: twice the usable cores, from 2 to :data:`MAX_AUTO_WORKERS`.

    Most of a contract run is latency, not computation: servers starting, calls waiting on the app, waits
    that must see real time pass. On 2 cores, in paired runs, four workers took 0.87 of two's wall time
    (median; 0.75 beside two busy loops) for a few percent more CPU time; six took no less than four (each
    worker adds a home and its shared sessions).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(2, min(MAX_AUTO_WORKERS, 2 * cores))


def default_report_dir() -> Path:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    return Path("reports").absolute() / f"contract-{stamp}"


def pytest_arguments(args: argparse.Namespace, report_dir: Path, extra: Sequence[str] = ()) -> list[str]:
    """The pytest command line for ``args`` (public so tests can inspect it)."""
    # The suite's own configuration and root, wherever it runs from: the same options, and node ids
    # (harness/contract/suite/...) that recorded durations and shard merges agree on.
    # The plugins the suite runs on, named, since none loads by itself (see AUTOLOAD_ENV).
    argv = ["-p", "xdist.plugin", "-p", "pytest_timeout", "-p", "harness.contract.plugin", "-p", "no:cacheprovider",
            "--rootdir", str(packages_root()), "-c", str(contract_suite_config()),
            "--level", args.level, "--isolation", args.isolation, "--report-dir", str(report_dir),
            *terminal.quiet_options(getattr(args, "verbose", 0), getattr(args, "tb", None))]
    if args.server_cmd:
        argv += ["--server-cmd", args.server_cmd]
    if args.collab_server_cmd:
        argv += ["--collab-server-cmd", args.collab_server_cmd]
    if args.profiles:
        argv += ["--profiles", args.profiles]
    if args.provisioner:
        argv += ["--provisioner", args.provisioner]
    if args.call_tools:
        argv += ["--call-tools", args.call_tools]
    for call in args.tool_call:
        argv += ["--tool-call", call]
    if args.startup_timeout is not None:
        argv += ["--startup-timeout", str(args.startup_timeout)]
    if args.call_timeout is not None:
        argv += ["--call-timeout", str(args.call_timeout)]
    if args.baseline:
        argv += ["--baseline", str(Path(args.baseline).absolute())]
    if getattr(args, "write_baseline", None):
        argv += ["--write-baseline", str(Path(args.write_baseline).absolute())]
    for pattern in args.requirement:
        argv += ["--requirement", pattern]
    if args.shard:
        argv += ["--shard", args.shard]
    if args.durations:
        argv += ["--shard-durations", str(Path(args.durations).absolute())]
    if args.workers not in ("0", 0):
        # One test at a time per worker: a worker busy with a long requirement holds no queue of short ones.
        workers = auto_workers() if args.workers == "auto" else args.workers
        argv += ["-n", str(workers), "--maxschedchunk", "1"]
    return argv + list(extra) + [str(SUITE_DIR)]


TEARDOWN_GRACE_S = 2.0
"""How long a process the run's own teardown left running gets between SIGTERM and SIGKILL."""

AUTOLOAD_ENV = "PYTEST_DISABLE_PLUGIN_AUTOLOAD"
"""Set for the suite's run: pytest loads no plugin from the environment's entry points, only those named."""


@contextlib.contextmanager
def _environment(changes: Mapping[str, str | None]) -> Iterator[dict[str, str | None]]:
    """Our environment with ``changes`` (None: unset) for the block; yields the values they replaced, which are
    back afterwards."""
    before = {name: os.environ.get(name) for name in changes}

    def put(values: Mapping[str, str | None]) -> None:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    put(changes)
    try:
        yield before
    finally:
        put(before)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(argv or [])
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    args = build_parser().parse_args(argv)
    restore = interruption.install_runner()
    try:
        # Every process the run starts, however deep, is ended with it: orphans re-parent to this process (a
        # child subreaper), and whatever the session's own teardown leaves running the job ends on the way out.
        with Job("contract", grace=TEARDOWN_GRACE_S, adopt_orphans=True) as job:
            try:
                status = _run(args, extra)
            finally:
                dismiss_reaper()
        if job.teardown is not None and (job.teardown.escaped or job.teardown.terminated):
            print(f"{invocation.command('contract')}: ended {len(job.teardown.escaped) + len(job.teardown.terminated)} process(es) the run "
                  "had left running", file=sys.stderr)
        return status
    except KeyboardInterrupt:
        signum = interruption.received() or signal.SIGINT
        print(f"{invocation.command('contract')}: interrupted by {interruption.name(signum)} before any test ran; nothing was judged",
              file=sys.stderr)
        return interruption.exit_status(signum)
    finally:
        restore()


def _run(args: argparse.Namespace, extra: list[str]) -> int:
    if not args.skip_preflight:
        try:
            preflight.check(preflight.plan(
                args.server_cmd, args.provisioner, args.collab_server_cmd, profiles=args.profiles, level=args.level,
                patterns=args.requirement, call_tools=args.call_tools, tool_calls=args.tool_call,
                startup_s=args.startup_timeout, baseline=args.baseline))
        except preflight.PreflightError as exc:
            print(f"{invocation.command('contract')}: {exc}", file=sys.stderr)
            return exc.status
    report_dir = Path(args.report_dir).absolute() if args.report_dir else default_report_dir()
    if (why := unwritable(report_dir)) is not None:
        print(f"contract: --report-dir {report_dir}: {why}; no test was run", file=sys.stderr)
        return 2
    verdict = report_dir / JSON_NAME
    verdict.unlink(missing_ok=True)  # a report left by an earlier run must not speak for this one

    import pytest

    # PYTEST_ADDOPTS belongs to the caller's own pytest session (a CI job's --junitxml, say). Applied here it
    # would redirect or break this run's report; options for this run go after `--`. Nor do the pytest plugins
    # installed beside the suite load: one that reorders tests, reruns failures or reseeds randomness would change
    # what a verdict means. Its workers inherit both; a plugin a run wants goes after `--` (`-p NAME`).
    with _environment({"PYTEST_ADDOPTS": None, AUTOLOAD_ENV: "1"}) as outer:
        if outer["PYTEST_ADDOPTS"]:
            print(f"contract: PYTEST_ADDOPTS ({outer['PYTEST_ADDOPTS']}) is not applied to the contract suite; "
                  "pass pytest options after --", file=sys.stderr)
        status = int(pytest.main(pytest_arguments(args, report_dir, extra)))
    # The report states the exit status the plugin decided; it stands even if some other
    # plugin touched pytest's status after the verdict was set.
    try:
        return int(json.loads(verdict.read_text("utf-8"))["verdict"]["exit_status"])
    except (OSError, ValueError, KeyError):
        if interruption.received() is not None:
            return interruption.exit_status(interruption.received())
        return status  # no report: the run broke before the verdict (a usage error, say)
