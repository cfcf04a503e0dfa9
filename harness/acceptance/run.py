"""A whole acceptance run: ``python runner.py`` without a command.

The run owns one locked run home (``<runs root>/<run id>/``): each scenario
run gets its own run home under ``scenarios/`` and writes its artifacts to
``artifacts/<scenario>.<mode>/``. A live probe (:mod:`harness.codex.capability_probe`,
its evidence in ``artifacts/capabilities/``) establishes which delivery
capabilities the selected Codex has while the first scenario runs start up:
their owners attach only once its verdict is in (:mod:`.gate`), a scenario
that requires a capability the probe did not enable is skipped, naming it,
and the owners of the others may use only the proven ones. Scenario runs execute in worker processes
(:mod:`.worker`, four at a time unless ``--workers`` says otherwise), all started through one
:class:`~harness.process.jobs.Job` that adopts orphans, so SIGINT or SIGTERM to the
runner ends every worker and everything they started, and nothing outlives
the runner however it ends.

A runner killed outright cannot tear down: its workers notice through their
lifelines and end their own jobs, and the next run removes the run home the
dead runner left (:func:`~harness.process.run_home.sweep_stale`), saying so in
one line.

At the end the report is written to ``<report dir>/<run id>/`` (through
``harness.report.write_report``) and its path printed. Exit status: 0 when
every check of every scenario passed, 1 when any failed (or the report could
not be written), 2 for a usage or setup error, 128 + N on signal N (SIGINT, SIGTERM,
SIGHUP). A signal ends every process of the run at once, and the run still writes its
report: what finished, and each scenario run it stopped or never started, failed with
why, under ``run.interrupted``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from harness.capabilities import table_rows as capability_table

from harness.codex.capability_probe import REPORT_NAME, CapabilityReport
from harness.evidence.usage import LABEL as USAGE_LABEL, total as usage_total
from harness.codex.install import PINNED, CodexInstallError, CodexInstallation, locate_codex
from harness.private import private_dir, unwritable, write_private
from harness.process.jobs import Job, JobClosedError, install_signal_handlers
from harness.process.lifeline import Lifeline
from harness.model.personas import applies as persona_applies, select_personas
from harness.model.probe import mail_forms
from harness.model.rules import ScenarioError
from harness.process.run_home import RunHome, RunHomeError, new_run_id, sweep_stale
from harness.resources import packages_root
from harness.shards import ShardError, load_durations, plan

from . import trials
from .execution import RunSettings
from .gate import Verdict, VerdictBoard
from .options import AUTH_HOME_ENV, Options, UsageError, parse
from .preflight import preflight
from .result import unfinished_result
from .scenario import Scenario, discover, select
from .worker import settings_to_json

# Workers get this long to tear their own jobs down on SIGTERM before SIGKILL.
RUN_GRACE_S = 20.0
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""What ends a run: a terminal's Ctrl-C, CI cancellation or ``timeout``, a closed terminal."""
UNFINISHED = "unfinished"
"""Marks (until the report) a scenario run that returned no result of its own: why it did not finish."""


def main(argv: Sequence[str], *, stderr: TextIO | None = None) -> int:
    err = stderr if stderr is not None else sys.stderr
    try:
        options = parse(argv)
        selection = select(discover(options.scenarios_dir), names=options.scenarios, mode=options.mode,
                           provider=options.provider, pairs=options.pairs)
        personas = tuple(None if p is None else p.name for p in select_personas(options.personas))
        options = replace(options, personas=personas)
    except (UsageError, ScenarioError, ValueError) as error:
        print(f"runner: {error}", file=err)
        return 2
    # Before any run home: a report that cannot be written would cost the whole run its verdict.
    for option, folder in (("--report-dir", options.report_dir),
                           ("--junit", options.junit.parent if options.junit is not None else None)):
        if folder is not None and (why := unwritable(folder)) is not None:
            print(f"runner: {option} {folder}: {why}; no scenario was run", file=err)
            return 2
    codex, codex_problem = None, None
    try:
        codex = locate_codex(options.codex, expected_version=options.expected_version or PINNED)
    except CodexInstallError as error:
        codex_problem = str(error)
    problems = preflight(provider=options.provider, auth_home_env=AUTH_HOME_ENV, environ=os.environ,
                         approve_tools=options.approve_tools, codex_problem=codex_problem)
    if problems:
        print(f"runner: preflight for provider {options.provider}: {len(problems)} problem"
              f"{'s' if len(problems) > 1 else ''}, no agent was started", file=err)
        for problem in problems:
            print(f"  {problem}", file=err)
        return 2
    if not selection.runs:
        print("runner: no scenario to run" + "".join(f"\n  skipped {why}" for why in selection.skipped), file=err)
        return 2
    for why in selection.skipped:
        print(f"runner: skipped {why}", file=err)
    runs, shard = selection.runs, None
    if options.shard is not None:
        try:
            runs, shard = shard_runs(selection.runs, options)
        except ShardError as error:
            print(f"runner: {error}", file=err)
            return 2
        print(f"runner: shard {options.shard}: {len(runs)} of {shard['plan_cases']} scenario runs "
              f"({shard['durations_known']} with recorded durations; plan {shard['plan_sha256'][:12]})", file=err)
    try:
        return _run(options, runs, codex, err, shard=shard)
    except RunHomeError as error:
        print(f"runner: {error}", file=err)
        return 2


def shard_runs(runs: list[tuple[Scenario, str]], options: Options) -> tuple[list[tuple[Scenario, str]], dict[str, Any]]:
    """This shard's runs (``options.shard``) and what its report records of the plan (:mod:`harness.shards`).

    Cases are the runs' identity slugs; the plan is computed from the whole
    selection, so every shard started with the same options agrees on it.
    """
    assert options.shard is not None
    keys = [scenario.key(mode) for scenario, mode in runs]
    split = plan(keys, options.shard.count, load_durations(options.durations, "acceptance"))
    mine = [run for run, key in zip(runs, keys) if split.assignment[key] == options.shard.index]
    return mine, split.describe(options.shard, order=keys)


def suite_identity(scenarios_dir: Path) -> dict[str, str]:
    """Which acceptance suite runs: peerwire's version and a digest of every scenario file (name and bytes).

    Shards of one run have equal identities; a merge refuses others.
    """
    digest = hashlib.sha256()
    for path in sorted(Path(scenarios_dir).glob("*.toml")):
        digest.update(path.name.encode("utf-8") + b"\0" + path.read_bytes() + b"\0")
    return {"name": "peerwire acceptance", "version": metadata.version("peerwire"),
            "scenarios_sha256": digest.hexdigest()}


def _run(options: Options, runs: list[tuple[Scenario, str]], codex: Any, err: TextIO, *,
         shard: dict[str, Any] | None = None) -> int:
    stale = sweep_stale(options.runs_root)
    if stale:
        print(f"runner: removed {len(stale)} stale run home{'s' if len(stale) > 1 else ''} whose runner died: "
              + "; ".join(f"{home.run_id} (pid {home.pid}, started {home.started_at})" for home in stale),
              file=err)
    run_id = new_run_id()
    started_at = _now()
    began = time.monotonic()
    repeats = options.trials * len(options.personas)
    print(f"runner: run {run_id}: {len(trial_runs(runs, options))} scenario runs with Codex {codex.version} ({codex.source}), "
          f"provider {options.provider}"
          + (f" ({len(runs)} × {len(options.personas)} personas × {options.trials} trials)" if repeats > 1 else ""),
          file=err)
    with RunHome(options.runs_root, run_id=run_id, keep=options.keep_home) as home, \
            Job("acceptance", grace=RUN_GRACE_S, adopt_orphans=True) as job:
        # A signal ends every process of the run at once; the run then reports what it has, marked interrupted.
        interrupted: list[int] = []
        restore = install_signal_handlers(job, signals=STOP_SIGNALS, on_stop=interrupted.append)
        board = VerdictBoard()
        prober = ThreadPoolExecutor(max_workers=1, thread_name_prefix="probe")
        try:
            # An empty shard has nothing to run and nothing to probe for; it still reports, so a merge sees it.
            probing = prober.submit(_probe_and_post, codex, job, home.artifacts / "capabilities", err, board) \
                if runs else None
            prober.submit(_prepare_report_writer)  # after the probe, while the runs go: not on the run's tail
            settings = RunSettings(codex=codex, homes_root=home.path / "scenarios", artifacts_root=home.artifacts,
                                   keep_home=options.keep_home, approve_tools=options.approve_tools,
                                   provider=options.provider, auth_home=options.auth_home,
                                   token_ledgers=home.path / "tokens", driver=options.driver,
                                   max_requests=options.max_requests, trust_workspaces=options.trust_workspaces,
                                   acp_agents=dict(options.acp_agents))
            planned = trial_runs(runs, options)
            outcomes = _run_all(planned, settings, job, home.path / "tasks", options.workers, board,
                                order=longest_first(planned, _durations(options))) if runs else []
            capabilities = probing.result() if probing is not None else None
        finally:
            prober.shutdown(wait=True)
            restore()
        results = [r for r in outcomes if "skipped" not in r]
        unfinished = [r["artifacts_dir"].rstrip("/") for r in results if r.pop(UNFINISHED, None)]
        skipped = list(dict.fromkeys(r["skipped"]["run"] for r in outcomes if "skipped" in r))
        if interrupted:
            # A capability probe the signal cut short rules runs out for what it never had the time to prove:
            # those runs did not finish, they were not skipped.
            unfinished += [run for run in skipped if run not in unfinished]
            outcomes, skipped = [r for r in outcomes if "skipped" not in r], []
        for outcome in (r for r in outcomes if "skipped" in r):
            print(f"runner: skipped {outcome['key']}: needs capability {', '.join(outcome['skipped']['missing'])} "
                  f"({outcome['skipped']['why']})", file=err)
        if shard is not None:
            shard["skipped"] = skipped
        elif runs and not results and not interrupted:
            home.mark_failed("no scenario can run with this Codex")
            print(f"runner: no selected scenario can run with Codex {codex.version}; the evidence is kept in "
                  f"{home.path}", file=err)
            return 2
        failed = [r for r in results if not r["passed"]]
        if failed:
            home.mark_failed(f"{len(failed)} scenario runs failed")
        stopped_by = signal.Signals(interrupted[0]).name if interrupted else None
        if stopped_by:
            home.mark_failed(f"interrupted by {stopped_by}")
        rates = trials.pass_rates(results, options.trials, options.min_pass_rate)
        run = {"run_id": run_id, "started_at": started_at, "finished_at": _now(), "codex_version": codex.version,
               "provider": options.provider, "scenarios": results,
               "workspace_trust": "projected" if options.trust_workspaces else "off (untrusted start-up diagnostic)",
               "codex_capabilities": capabilities.run_summary() if capabilities else None,
               "suite": suite_identity(options.scenarios_dir), "shard": shard,
               "agent_kinds": capability_table(kind for choice in options.pairs for kind in choice.pair),
               "usage": {"label": USAGE_LABEL, "totals": usage_total({str(i): r.get("usage", {}).get("totals", {})
                                                                      for i, r in enumerate(results)}),
                         "max_requests": options.max_requests},
               "trials": rates if options.trials > 1 or options.min_pass_rate < 1 else None,
               "interrupted": {"signal": stopped_by, "unfinished": unfinished,
                               "finished": [r["artifacts_dir"].rstrip("/") for r in results
                                            if r["artifacts_dir"].rstrip("/") not in unfinished]}
               if stopped_by else None}
        report, report_error = write_run_report(options.report_dir, run, home.artifacts, options.auth_home,
                                                ledgers=home.path / "tokens")
        if report_error:
            home.mark_failed("the report could not be written")
        if options.junit is not None:
            write_junit(options.junit, report, run)
    _summary(results, time.monotonic() - began, report, report_error, err)
    if stopped_by:
        print(f"runner: interrupted by {stopped_by}: {len(results) - len(unfinished)} of {len(results)} scenario runs "
              f"finished; the report has what ran", file=err)
        return 128 + interrupted[0]
    if run["trials"] is not None:
        print(trials.describe(rates), file=err)
        return 0 if rates["met"] and not report_error else 1
    return 0 if not failed and not report_error else 1


def trial_runs(runs: list[tuple[Scenario, str]], options: Options) -> list[tuple[Scenario, str, str | None, int | None]]:
    """Every (scenario, mode) under every selected persona, ``--trials`` times (trial numbers from 1 when
    there is more than one trial, else None)."""
    numbers: list[int | None] = list(range(1, options.trials + 1)) if options.trials > 1 else [None]
    personas = select_personas(options.personas)
    return [(scenario, mode, persona.name if persona else None, trial) for trial in numbers for persona in personas
            for scenario, mode in runs if persona_applies(persona, scenario.name, scenario.profile)]


def longest_first(runs: Sequence[tuple[Scenario, str, str | None, int | None]],
                  durations: dict[str, float]) -> list[int]:
    """The order to start ``runs`` in (indices): the longest first by their recorded ``durations`` (keyed by
    ``name.mode``, as shards are balanced), so no long run starts last and alone; a run with no recorded
    duration (a new scenario, another pair of agent kinds) counts as the longest. Ties keep their order."""
    longest = max(durations.values(), default=0.0)

    def expected(index: int) -> float:
        scenario, mode = runs[index][0], runs[index][1]
        return durations.get(scenario.key(mode), longest + 1.0)

    return sorted(range(len(runs)), key=lambda index: -expected(index))


def _durations(options: Options) -> dict[str, float]:
    try:
        return load_durations(options.durations, "acceptance")
    except ShardError:
        return {}  # only the order of the runs is at stake here: as given


def _prepare_report_writer() -> None:
    try:
        from harness.report.writer import prepare
        prepare()
    except Exception:  # noqa: BLE001 - writing the report says what is wrong, with the evidence kept
        pass


def _probe_and_post(codex: CodexInstallation, job: Job, evidence: Path, err: TextIO,
                    board: VerdictBoard) -> CapabilityReport | None:
    """Probe (see :func:`probe_capabilities`) and post the verdict to every run that waits for it."""
    report = None
    try:
        report = probe_capabilities(codex, job, evidence, err)
    finally:
        board.post(Verdict.of(report.run_summary() if report is not None else None))
    return report


def probe_capabilities(codex: CodexInstallation, job: Job, evidence: Path, err: TextIO) -> CapabilityReport | None:
    """Detect and probe the capabilities of ``codex`` in a process of ``job``; None when the probe broke."""
    print(f"runner: probing Codex {codex.version}: connection, attachment and input on a throwaway home", file=err)
    evidence.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = evidence / "probe.log"
    with log.open("wb") as out:
        try:
            probe = job.spawn([sys.executable, "-m", "harness.codex.capability_probe", "--codex", str(codex.executable),
                               "--expected-version", codex.version, "--version-read", codex.version, str(evidence)],
                              name="capability probe", env=_worker_env(), stdout=subprocess.DEVNULL, stderr=out)
            status = probe.popen.wait()
        except JobClosedError:
            return None
    report_path = evidence / REPORT_NAME
    if status != 0 or not report_path.is_file():
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:]
        print(f"runner: the capability probe failed (status {status}){': ' + tail[0] if tail else ''}", file=err)
        return None
    report = CapabilityReport.from_json(json.loads(report_path.read_text(encoding="utf-8")))
    print(f"runner: Codex {codex.version} capabilities: {report.summary()}", file=err)
    return report


def _run_all(runs: list[tuple[Scenario, str, str | None, int | None]], settings: RunSettings, job: Job, tasks: Path,
             workers: int, board: VerdictBoard, *, order: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """Every run's result, in the order of ``runs``, or for a run its Codex cannot serve ``{"key", "skipped":
    {"run", "missing", "why"}}``: such a run is not started once the verdict is in, and stops before its
    owners attach if it started before. Runs start in ``order`` (indices into ``runs``; default: as given)."""
    tasks.mkdir(mode=0o700, exist_ok=True)
    results: dict[int, dict[str, Any]] = {}
    lock = threading.Lock()

    def one(index: int, scenario: Scenario, mode: str, persona: str | None, trial: int | None) -> None:
        run_settings = replace(settings, persona=persona)
        key = scenario.key(mode, persona=persona, provider=settings.provider, trial=trial)
        missing = board.verdict.missing(scenario.needs(mode)) if board.verdict is not None else []
        if missing:
            result = {"key": key, "skipped": {"run": scenario.key(mode), "missing": missing,
                                              "why": board.verdict.why_not(missing[0])}}  # type: ignore[union-attr]
        else:
            result = run_in_worker(scenario, mode, run_settings, job, tasks, trial=trial, board=board)
        with lock:
            results[index] = result

    pool = ThreadPoolExecutor(max_workers=min(workers, len(runs)), thread_name_prefix="scenario")
    try:
        futures = [pool.submit(one, i, *runs[i]) for i in (order if order is not None else range(len(runs)))]
        for future in futures:
            future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return [results[i] for i in sorted(results)]


def run_in_worker(scenario: Scenario, mode: str, settings: RunSettings, job: Job, tasks: Path, *,
                  trial: int | None = None, board: VerdictBoard | None = None) -> dict[str, Any]:
    """Run one scenario in a worker process of ``job``; a worker that dies yields a failed result.

    With a ``board``, the worker's owners wait for the capability probe's verdict, which the board writes to
    the worker's standard input (:mod:`.gate`)."""
    key = scenario.key(mode, persona=settings.persona, provider=settings.provider, trial=trial)
    task, result_path = tasks / f"{key}.task.json", tasks / f"{key}.result.json"
    task.write_text(json.dumps({"scenario": str(scenario.path.absolute()), "mode": mode, "trial": trial,
                                "pair": list(scenario.pair), "settings": settings_to_json(settings),
                                "verdict": "stdin" if board is not None else None}), encoding="utf-8")
    began = time.monotonic()
    # The worker watches its end of the lifeline: if this process dies, even by
    # SIGKILL, the worker ends its scenario's job instead of carrying on alone.
    lifeline = Lifeline()
    try:
        worker = job.spawn([sys.executable, "-m", "harness.acceptance.worker", str(task), str(result_path)],
                           name=f"worker {key}", env={**_worker_env(), **lifeline.env()},
                           pass_fds=(lifeline.fd,), stdin=subprocess.PIPE if board is not None else subprocess.DEVNULL)
        lifeline.handed_over()
        if board is not None:
            board.hand(worker.popen.stdin)  # type: ignore[arg-type]
        status = worker.popen.wait()
    except JobClosedError:
        status = None  # the run is being torn down
    finally:
        lifeline.cut()
    if result_path.is_file():
        result = json.loads(result_path.read_text(encoding="utf-8"))
        return {"key": key, "skipped": {"run": scenario.key(mode), **result["skipped"]}} if "skipped" in result \
            else result
    why = "not started: the run was stopped" if status is None else f"the worker exited with status {status}"
    return {UNFINISHED: why} | unfinished_result(name=scenario.name, mode=mode, persona=settings.persona, provider=settings.provider,
                             pair=",".join(scenario.pair),
                             trial=trial, description=scenario.description, key=key, why=why,
                             wall_s=time.monotonic() - began)


def write_run_report(report_dir: Path, run: dict[str, Any], artifacts_root: Path,
                     auth_home: Path | None, *, ledgers: Path | None = None) -> tuple[Path, str | None]:
    """Write the report; returns its folder and, if the report writer failed, why.

    The secret scan covers the environment, the auth home and every session
    token in the run's token ``ledgers``.

    The report writer (``harness.report``) is the normal path. Should it be
    missing or refuse the run, the run's result and artifacts are still kept:
    ``run.json`` and ``artifacts/`` are written plainly to the same folder.
    """
    try:
        from harness.evidence.secrets import SecretScan
        from harness.report import write_report
    except ImportError as error:
        return _write_plain(report_dir, run, artifacts_root), f"no report writer ({error})"
    try:
        scan = SecretScan.collect(auth_home=auth_home, ledgers=ledgers)
        return write_report(report_dir, run, artifacts_root, secrets=scan), None
    except Exception as error:  # the run's evidence must survive a report bug
        return _write_plain(report_dir, run, artifacts_root), f"{type(error).__name__}: {error}"


def write_junit(path: Path, report: Path, run: dict[str, Any]) -> None:
    """The verdicts as JUnit XML at ``path`` (``--junit``): the report's own ``junit.xml``, or, when the
    report writer failed, the same document made from the run's result (the verdicts are the same; only
    evidence problems are missing)."""
    from harness.report.junit import write_junit as write

    written = report / "junit.xml"
    if written.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(written, path)
    else:
        write(path, {"run": run, "scenarios": run["scenarios"]})


def _write_plain(report_dir: Path, run: dict[str, Any], artifacts_root: Path) -> Path:
    folder = private_dir(report_dir / f"{run['run_id']}.unreported")
    write_private(folder / "run.json", json.dumps(run, indent=1, ensure_ascii=False))
    if artifacts_root.is_dir():
        shutil.copytree(artifacts_root, folder / "artifacts", dirs_exist_ok=True)
    return folder


def _summary(results: list[dict[str, Any]], wall_s: float, report: Path, report_error: str | None,
             err: TextIO) -> None:
    print("", file=err)
    for result in results:
        checks = result["checks"]
        passed = sum(check["verdict"] == "pass" for check in checks)
        skipped = sum(check["verdict"] == "skip" for check in checks)
        print(f"  {'PASS' if result['passed'] else 'FAIL'}  {result['name']:<22} {result['mode']:<10} "
              f"{result['wall_s']:6.1f}s  checks {passed}/{len(checks)}"
              + (f" ({skipped} skipped)" if skipped else "") + (f"  {result['pair']}" if result.get("pair") else ""),
              file=err)
        for check in checks:
            if check["verdict"] == "fail":
                print(f"        {check['id']}: {check['summary']}", file=err)
        if result.get("probe"):
            probe = result["probe"]
            print(f"        probe: {'success' if probe['success'] else 'FAILED'} ({probe['requests']} model requests, "
                  f"{mail_forms(probe)})", file=err)
        if result.get("home"):
            print(f"        kept: {result['home']}", file=err)
    ok = sum(result["passed"] for result in results)
    print(f"runner: {ok}/{len(results)} scenario runs passed in {wall_s:.1f}s", file=err)
    if report_error:
        print(f"runner: the report writer failed ({report_error}); run.json and artifacts kept in {report}",
              file=err)
    print(f"report: {report}", file=err)


def _worker_env() -> dict[str, str]:
    # Workers import this project's packages whatever the current directory.
    env = dict(os.environ)
    root = str(packages_root())
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
