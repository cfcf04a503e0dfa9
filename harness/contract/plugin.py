"""The contract suite as a pytest plugin.

``pytest -p harness.contract.plugin --server-cmd "CMD" [--collab-server-cmd "CMD"]
[--profiles messaging,collab] [--level must|should|may] [--requirement ID ...]
[--baseline FILE] [--report-dir DIR] [--provisioner module:Class]``

Given no test paths, the plugin runs the contract suite (``harness/contract/suite``).
Every item verifies one requirement (a case's, or a test's ``@requirement``);
items outside the selection are deselected, baselined ones are marked xfail.
The selection covers the tool profiles the target offers (``--profiles``
narrows it): a profile left out, like a target without a collab server command,
leaves its requirements not tested, and the report says so. Each
item's votes travel in its report (so pytest-xdist workers are fine and the JUnit
XML carries them); the controlling process judges compliance, prints it, writes
``compliance.json``/``compliance.md`` (and ``junit.xml``) into ``--report-dir``
and sets the exit status: 0 exactly when every selected MUST passes and the
baseline holds, 1 otherwise, whatever other plugins do to the status (the
verdict is set last). Run as the suite alone, it leaves nothing in the
current directory: no ``.pytest_cache``, Hypothesis's files in a temporary
directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import stat
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis.configuration import set_hypothesis_home_dir

from harness.contract import schedule
from harness.contract.baseline import Baseline, BaselineError, load_baseline
from harness.contract.cases import CaseError, all_cases
from harness.contract.compliance import Compliance, Result, judge
from harness.contract.fixtures import (  # noqa: F401  (fixtures the plugin provides)
    VOTES_KEY,
    case_app,
    case_sessions,
    contract_target,
    isolation,
    item_info,
    own_servers,
    protocol,
    servers,
    session_pools,
    shared_app,
    tree_servers,
    votes,
)
from harness.contract import census, interruption, terminal
from harness.invocation import DURATIONS_DEFAULT_HELP
from harness.contract.isolation import Isolation
from harness.contract.layout import SUITE_DIR
from harness.contract.limits import DEFAULT_CALL_S, DEFAULT_STARTUP_S, Limits, configure, drain_startups, \
    startup_summary
from harness.contract.manifest import PROFILES, Level, Manifest, ManifestError, Selection, manifest, parse_profiles
from harness.contract.report import JUNIT_NAME, group_junit_by_source, not_tested_summary, reference_only_summary, \
    write_reports
from harness.contract.target import CALL_TOOLS, Target, TargetError
from harness.contract.verdicts import ITEM_PROPERTY, VOTES_PROPERTY, Vote, blocked_votes, decode_votes, encode_votes
from harness.shards import DURATIONS_FILE, Shard, ShardError, load_durations, plan, write_durations

STARTUP_PROPERTY = "contract_startup_ms"
"""Each test item's server start-up times, carried like its votes."""
TEARDOWN_PROPERTY = "contract_teardown_votes"
"""A failed teardown's vote, carried in the teardown report."""
LAUNCH_PROPERTY = "contract_launches"
"""What each test item started (server processes by kind, homes) and shared sessions it closed, carried like its
votes."""

RUN_KEY = pytest.StashKey["ContractRun"]()
RESTORE_SIGNALS = pytest.StashKey[Callable[[], None]]()
SHARD_PLAN = "shard-plan.json"
"""Where a sharded run's collecting processes leave the plan for the controlling one."""


@dataclass
class ContractRun:
    """What the controlling process gathers during a run."""

    manifest: Manifest
    selection: Selection
    baseline: Baseline
    target: Target
    report_dir: Path | None
    shard: Shard | None = None
    durations_file: Path | None = None
    votes: list[Vote] = field(default_factory=list)
    startups: list[float] = field(default_factory=list)
    launches: dict[str, int] = field(default_factory=lambda: dict.fromkeys(census.LAUNCHES, 0))
    closed_early: list[str] = field(default_factory=list)
    isolation: Isolation = Isolation.SHARED
    tests: dict[str, int] = field(default_factory=dict)
    durations: dict[str, float] = field(default_factory=dict)
    compliance: Compliance | None = None
    written: tuple[Path, ...] = ()
    baseline_out: Path | None = None
    """--write-baseline: where to write a baseline of this run's failures."""


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("contract", "messaging contract suite")
    group.addoption("--server-cmd", default=None, metavar="CMD",
                    help="the MCP server command under test, launched once per caller "
                         "(default: peerwire's reference `python -m peerwire mcp serve`)")
    group.addoption("--collab-server-cmd", default=None, metavar="CMD",
                    help="the collaboration profile's server command (default: the reference's "
                         "`... mcp serve --profile collab` when --server-cmd is the reference, else none: "
                         "the collab profile is then not tested)")
    group.addoption("--profiles", default=None, metavar="LIST",
                    help=f"tool profiles to test, comma-separated: {', '.join(PROFILES)} "
                         "(default: every profile the target offers)")
    group.addoption("--provisioner", default=None, metavar="MODULE:CLASS",
                    help="the Provisioner for the implementation (default: the reference's for the reference server; "
                         "without one, another server is tested on the protocol profile alone)")
    group.addoption("--call-tools", default=None, choices=CALL_TOOLS,
                    help="which of the server's own tools the protocol profile may call: none (default) or "
                         "read-only (those tools/list annotates readOnlyHint); a foreign tool may have side effects")
    group.addoption("--tool-call", action="append", default=[], metavar="'NAME {JSON}'",
                    help="consent to one call of the server's own tool NAME with these arguments (repeatable)")
    group.addoption("--startup-timeout", type=float, default=DEFAULT_STARTUP_S, metavar="S",
                    help=f"how long a server may take from launch to its first answer (default {DEFAULT_STARTUP_S:g}); "
                         "start-up is reported apart and never counted against a call")
    group.addoption("--call-timeout", type=float, default=DEFAULT_CALL_S, metavar="S",
                    help=f"how long one answer may take once the server is up, besides any wait the call asks for "
                         f"(default {DEFAULT_CALL_S:g})")
    group.addoption("--isolation", default=Isolation.SHARED.value, choices=[i.value for i in Isolation],
                    help="what tests share: shared (default: one home per test process for the tests that leave "
                         "it alone, and shared sessions for tests that only need a caller; a requirement that "
                         "needs a fresh server or home declares it) or fresh (a home and server processes of "
                         "its own for every test)")
    group.addoption("--level", default="may", choices=("must", "should", "may"),
                    help="run requirements up to this level (default: may, i.e. all)")
    group.addoption("--requirement", action="append", default=[], metavar="ID",
                    help="run only these requirements: an ID, a glob (wire:*) or a prefix (send); repeatable")
    group.addoption("--baseline", default=None, metavar="FILE",
                    help="expected failures, one requirement or case a line with a comment")
    group.addoption("--write-baseline", default=None, metavar="FILE",
                    help="write FILE: a baseline (the --baseline format) of every selected requirement that failed, "
                         "each with why; edit the reasons and pass it with --baseline")
    group.addoption("--report-dir", default=None, metavar="DIR",
                    help="write compliance.json, compliance.md, junit.xml and durations.json here")
    group.addoption("--shard", default=None, metavar="K/N",
                    help="run only shard K of N of the selected items, balanced by recorded durations; a shard's "
                         "compliance.json carries its votes, and `peerwire-harness report merge` judges the shards "
                         "together")
    group.addoption("--shard-durations", default=None, metavar="FILE",
                    help=f"recorded durations to balance shards by (default: {DURATIONS_DEFAULT_HELP})")


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Run as the contract suite alone, keep nothing in the directory it runs from: no ``.pytest_cache``.

    This is ``-p no:cacheprovider``, decided before any plugin is configured.
    """
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        for name in ("cacheprovider", "pytest_cacheprovider", "stepwise", "pytest_stepwise"):
            config.pluginmanager.set_blocked(name)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", schedule.MARKER_HELP)
    if config.args_source is not pytest.Config.ArgsSource.ARGS:
        config.args = [str(SUITE_DIR)]  # no paths given: the plugin means the contract suite
    # Hypothesis keeps caches (and any example database) under its home directory, by default
    # .hypothesis/ in the current directory: give it one in the temporary directory, in every process.
    set_hypothesis_home_dir(hypothesis_home())
    report_dir = config.getoption("--report-dir")
    if report_dir and not config.option.xmlpath:
        config.option.xmlpath = str(Path(report_dir) / JUNIT_NAME)
    try:
        configure(Limits(startup_s=config.getoption("--startup-timeout"), call_s=config.getoption("--call-timeout")))
        target = Target.from_options(config.getoption("--server-cmd"), config.getoption("--provisioner"),
                                     config.getoption("--collab-server-cmd"),
                                     call_tools=config.getoption("--call-tools"),
                                     tool_calls=config.getoption("--tool-call"))
        run = ContractRun(
            manifest=manifest(),
            selection=Selection(level=Level.parse(config.getoption("--level")),
                                patterns=tuple(config.getoption("--requirement")),
                                profiles=target.select_profiles(parse_profiles(config.getoption("--profiles"))),
                                offers=target.offers()),
            baseline=load_baseline(Path(config.getoption("--baseline")) if config.getoption("--baseline") else None),
            target=target,
            report_dir=Path(report_dir) if report_dir else None,
            shard=Shard.parse(config.getoption("--shard")) if config.getoption("--shard") else None,
            durations_file=Path(config.getoption("--shard-durations")) if config.getoption("--shard-durations")
            else None,
            isolation=Isolation(config.getoption("--isolation")),
            baseline_out=Path(config.getoption("--write-baseline")).absolute() if config.getoption("--write-baseline")
            else None,
        )
    except (ManifestError, BaselineError, TargetError, ValueError) as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[RUN_KEY] = run
    if threading.current_thread() is threading.main_thread():
        worker = hasattr(config, "workerinput")
        config.stash[RESTORE_SIGNALS] = interruption.install_worker() if worker else interruption.install_controller()
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ComplianceCollector(run), "contract-compliance")


def pytest_unconfigure(config: pytest.Config) -> None:
    restore = config.stash.get(RESTORE_SIGNALS, None)
    if restore is not None:
        restore()


def hypothesis_home() -> Path:
    """This user's Hypothesis home for contract runs, in the temporary directory.

    It is kept between runs (its caches save each process seconds of start-up:
    Hypothesis indexes Unicode and the project's constants once) and is private
    to the user: made 0700, and not used if someone else owns it.
    """
    uid = os.getuid() if hasattr(os, "getuid") else None
    if uid is not None:
        home = Path(tempfile.gettempdir()) / f"peerwire-contract-hypothesis-{uid}"
        try:
            home.mkdir(mode=0o700, exist_ok=True)
            info = home.lstat()
            if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and not info.st_mode & 0o077:
                return home
        except OSError:
            pass
    return Path(tempfile.mkdtemp(prefix="peerwire-contract-hypothesis-"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    run = config.stash[RUN_KEY]
    keep, drop = [], []
    for item in items:
        info = item_info(item)
        if info is None:
            keep.append(item)
            continue
        item.user_properties.append((ITEM_PROPERTY, json.dumps(info.to_json())))
        if not any(run.selection.includes(run.manifest[r]) for r in info.requirements):
            drop.append(item)
            continue
        reason = run.baseline.comment(info.requirement) or (run.baseline.comment(info.case) if info.case else None)
        if reason:
            item.add_marker(pytest.mark.xfail(reason=f"baseline: {reason}", strict=False))
        keep.append(item)
    if run.shard is not None:
        keep, outside = _shard(run, keep)
        drop += outside
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = schedule.longest_first(keep, _workers(config))


def _workers(config: pytest.Config) -> int:
    """How many processes run the suite: xdist's workers (each worker is told the count), else one."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        return int(workerinput.get("workercount", 1))
    count = getattr(config.option, "numprocesses", None)
    return count if isinstance(count, int) and count > 0 else 1


def _shard(run: ContractRun, items: list[pytest.Item]) -> tuple[list[pytest.Item], list[pytest.Item]]:
    """This shard's items and the others. Every process that collects (each xdist worker, or the one
    process) computes the same plan; it is also written to the report folder, where the controlling
    process reads it for compliance.json."""
    assert run.shard is not None
    keys = [item.nodeid for item in items]
    try:
        split = plan(keys, run.shard.count, load_durations(run.durations_file, "contract"))
    except ShardError as exc:
        raise pytest.UsageError(str(exc)) from None
    if run.report_dir is not None:
        run.report_dir.mkdir(parents=True, exist_ok=True)
        partial = run.report_dir / f".{SHARD_PLAN}.{os.getpid()}"
        partial.write_text(json.dumps(split.describe(run.shard, order=keys), ensure_ascii=False), "utf-8")
        os.replace(partial, run.report_dir / SHARD_PLAN)
    mine = split.assignment
    return ([i for i in items if mine[i.nodeid] == run.shard.index],
            [i for i in items if mine[i.nodeid] != run.shard.index])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    info = item_info(item)
    if info is not None and report.when == "teardown" and report.failed:
        # A teardown that fails (a server that will not stop, a home left in a bad state) is the implementation's
        # failure too: it counts against the requirement, in its own property (the teardown report also repeats
        # the call's votes, which the collector must not count twice).
        vote = Vote(requirement=info.requirement, passed=False, item=info.item, case=info.case, step="teardown",
                    check="the test's teardown completes", detail=_failure_text(report))
        report.user_properties.append((TEARDOWN_PROPERTY, encode_votes([vote])))
        return report
    if info is None or not (report.when == "call" or (report.when == "setup" and not report.passed)):
        return report
    startups = drain_startups()
    if startups:
        report.user_properties.append((STARTUP_PROPERTY, json.dumps([round(ms, 1) for ms in startups])))
    launches, closed = census.drain()
    if launches or closed:
        report.user_properties.append((LAUNCH_PROPERTY, json.dumps({"launches": launches, "closed_early": closed})))
    recorder = item.stash.get(VOTES_KEY, None)
    cast = list(recorder.votes) if recorder is not None else []
    if report.skipped and not hasattr(report, "wasxfail"):
        return report  # skipped: not tested
    failed = report.failed or report.skipped  # a baselined (xfail) item that failed is still a failure
    if failed and all(v.passed for v in cast):
        cast.append(Vote(requirement=info.requirement, passed=False, item=info.item, case=info.case,
                         step=report.when if report.when != "call" else None,
                         check="the test passes", detail=_failure_text(report), exchange=_exchange(item)))
    elif not failed and not any(v.requirement == info.requirement for v in cast):
        cast.append(Vote(requirement=info.requirement, passed=True, item=info.item, case=info.case,
                         check="the test passes"))
    if failed:
        cast += blocked_votes(info, cast)
    encoded = (VOTES_PROPERTY, encode_votes(cast))
    report.user_properties.append(encoded)
    item.user_properties.append(encoded)  # so the JUnit XML (written from the teardown report) carries them
    return report


class ComplianceCollector:
    """The controlling process's half: gathers votes, judges, reports, sets the exit status."""

    def __init__(self, run: ContractRun):
        self.run = run

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            for name, value in report.user_properties:
                if name == TEARDOWN_PROPERTY:
                    self.run.votes.extend(decode_votes(value))
                    self.run.tests["teardown error"] = self.run.tests.get("teardown error", 0) + 1
        if report.when in ("setup", "call"):  # teardown reports repeat the call's votes
            for name, value in report.user_properties:
                if name == VOTES_PROPERTY:
                    self.run.votes.extend(decode_votes(value))
                elif name == STARTUP_PROPERTY:
                    self.run.startups.extend(json.loads(value))
                elif name == LAUNCH_PROPERTY:
                    noted = json.loads(value)
                    for kind, count in noted["launches"].items():
                        self.run.launches[kind] = self.run.launches.get(kind, 0) + count
                    self.run.closed_early += noted["closed_early"]
        self.run.durations[report.nodeid] = self.run.durations.get(report.nodeid, 0.0) + report.duration
        if report.when == "call":
            outcome = "xfailed" if hasattr(report, "wasxfail") and report.skipped else report.outcome
            self.run.tests[outcome] = self.run.tests.get(outcome, 0) + 1
        elif report.when == "setup" and not report.passed:
            outcome = "error" if report.failed else "skipped"
            self.run.tests[outcome] = self.run.tests.get(outcome, 0) + 1

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session):
        # A wrapper that runs last: its code after `yield` runs once every other plugin's
        # sessionfinish has (syrupy's, for one, ORs its status into session.exitstatus), and
        # before the terminal reporter prints the summary. So the status set here is the one the
        # process exits with, and the one the summary and compliance.md state.
        outcome = yield
        run = self.run
        try:
            known_cases = [c.id for c in all_cases()]
        except CaseError:
            known_cases = []
        run.compliance = judge(run.manifest, run.votes, run.selection, run.baseline, known_cases)
        extra: dict = {"startup": {**startup_summary(run.startups), "isolation": run.isolation.value,
                                   "launches": dict(run.launches),
                                   "processes": sum(n for kind, n in run.launches.items() if kind != "home"),
                                   "closed_early": run.closed_early}}
        if run.shard is not None:
            run.compliance = shard_verdict(run.compliance)
            extra |= {"shard": _read_plan(run), "votes": [v.to_json() for v in run.votes]}
        signum = interruption.received()
        if signum is None and session.exitstatus == pytest.ExitCode.INTERRUPTED:
            signum = signal.SIGINT  # a KeyboardInterrupt no handler of ours saw: Ctrl-C where ours are not installed
        if signum is not None:
            run.compliance = run.compliance.interrupted(interruption.name(signum), interruption.exit_status(signum))
        else:
            run.compliance = run.compliance.after_run(int(session.exitstatus))
        if run.report_dir is not None:
            run.written = write_reports(run.report_dir, run.compliance, target=run.target.describe(),
                                        tests=run.tests, extra=extra)
            write_durations(run.report_dir / DURATIONS_FILE, {"contract": run.durations})
            group_junit_by_source(run.report_dir / JUNIT_NAME, run.manifest)
        if run.baseline_out is not None:
            run.baseline_out.write_text(terminal.baseline_text(
                run.compliance.verdicts, target=" ".join(run.target.server_cmd),
                interrupted=run.compliance.interrupted_by), "utf-8")
            run.written = (*run.written, run.baseline_out)
        session.exitstatus = run.compliance.final_status
        return outcome

    def pytest_terminal_summary(self, terminalreporter) -> None:
        compliance = self.run.compliance
        if compliance is None:
            return
        write = terminalreporter.write_line
        terminalreporter.section("contract compliance")
        write(f"scored over the selected profiles: {', '.join(compliance.selection.profiles)}")
        for level, score in compliance.scores.items():
            write(f"{level.name:<6} {score.passed}/{score.total} pass, {score.failed} fail, "
                  f"{score.expected_failures} expected failure, "
                  + (f"{score.blocked} blocked by baselined prerequisites, " if score.blocked else "")
                  + f"{score.not_tested} not tested ({score.score * 100:.1f}%)")
        write(not_tested_summary([{"result": v.result.value, "selected": v.selected,
                                    "deferred": v.requirement.deferred} for v in compliance.verdicts]))
        blocked = [v for v in compliance.verdicts if v.result is Result.BLOCKED]
        if blocked:
            write(f"{len(blocked)} blocked by baselined prerequisites (left out of the exit status): " + "; ".join(
                f"{v.requirement.id} by {', '.join(v.blocked_by)}" for v in blocked))
        for profile, levels in compliance.profile_scores.items():
            tested = profile in compliance.selection.profiles
            write(f"{profile} profile{'' if tested else ' (not selected)'}: " + ", ".join(
                f"{level.name} {score.passed}/{score.total} pass, {score.not_tested} not tested"
                for level, score in levels.items() if score.total))
        for group, levels in (compliance.source_scores or {}).items():
            write(f"by source, {group}: {compliance.source_verdict(group)} ("
                  + ", ".join(f"{level.name} {score.passed}/{score.total} pass"
                              for level, score in levels.items() if score.total) + ")")
        startup = startup_summary(self.run.startups)
        if startup["servers"]:
            write(f"server start-up (launch to first answer, never counted against a call): {startup['servers']} "
                  f"servers, median {startup['median_ms']:.0f} ms, max {startup['max_ms']:.0f} ms")
        write(f"isolation {self.run.isolation.value}: {census.describe(self.run.launches)}"
              + (f"; {len(self.run.closed_early)} shared sessions closed early, first: {self.run.closed_early[0]}"
                 if self.run.closed_early else ""))
        if compliance.reference_only:
            write(reference_only_summary({"reference_only": compliance.reference_only}))
        problems, warnings = compliance.problems, compliance.warnings
        if terminalreporter.config.get_verbosity() < 0:
            # Quiet (the runner's default): a line per failing requirement stands for its problem or warning.
            failed = [v for v in compliance.verdicts if v.selected and v.failures]
            said = tuple(f"{v.requirement.level.name} {v.requirement.id} failed" for v in failed)
            problems = tuple(p for p in problems if not p.startswith(said))
            warnings = tuple(w for w in warnings if not w.startswith(said))
            for line in terminal.failure_lines(failed):
                write(line)
        for problem in problems:
            write(f"FAILS RUN: {problem}")
        for warning in warnings:
            write(f"warning: {warning}")
        for path in self.run.written:
            write(f"report: {path}")
        state = {"compliant": "compliant", "not compliant": "NOT compliant"}.get(compliance.state, compliance.state)
        ran = compliance.coverage()
        # An interrupted run is partial by nature: its state says so, and what ran is in the report.
        narrowed = "" if compliance.interrupted_by or all(n == total for n, total in ran.values()) \
            else " over what ran: " + ", ".join(
            f"{n} of {total} {level.name}s" for level, (n, total) in ran.items() if total)
        write(f"verdict: {state}"
              + (f" by {compliance.interrupted_by}" if compliance.interrupted_by else "") + narrowed
              + f" (exit status {compliance.final_status})" + (f"; {len(blocked)} blocked by baselined prerequisites"
                                                              if blocked else ""))


def shard_verdict(compliance: Compliance) -> Compliance:
    """A shard's own verdict: it fails exactly when a selected MUST failed in it. Requirements left to
    other shards are not tested here, and a baseline entry may pass here yet fail there: both are
    judged when the shards' votes are merged."""
    failed = [v for v in compliance.verdicts
              if v.selected and v.requirement.level is Level.MUST and v.result is Result.FAIL]
    return dataclasses.replace(compliance, problems=tuple(
        f"MUST {v.requirement.id} failed in this shard: {v.failures[0].check}" for v in failed))


def _read_plan(run: ContractRun) -> dict:
    assert run.shard is not None
    path = run.report_dir / SHARD_PLAN if run.report_dir is not None else None
    if path is not None and path.is_file():
        return json.loads(path.read_text("utf-8"))
    # No report folder, or no process collected anything: the shard's place is all that is known.
    return {"index": run.shard.index, "count": run.shard.count, "cases": [], "plan_cases": 0,
            "plan_sha256": "", "plan": {}}


def _exchange(item: pytest.Item) -> list[dict] | None:
    """Every line the test's servers exchanged, whatever its id: what a stranger needs to see a failure."""
    funcargs = getattr(item, "funcargs", {}) or {}
    lines: list[dict] = []
    for name in ("protocol", "servers", "tree_servers", "own_servers"):
        started = funcargs.get(name)
        for index, endpoint in enumerate(getattr(started, "endpoints", ()), start=1):
            lines += [{**entry, "server": index} for entry in endpoint.server.exchange(limit=30)]
    return lines[-60:] or None


def _failure_text(report: pytest.TestReport) -> str:
    """The failure's own message (the assertion), else the tail of the traceback."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return crash.message[:1500]
    text = report.longreprtext or ""
    return text[-1500:]
