"""Writing ``reports/<run-id>/``: artifacts, ``report.json``, ``report.md``, ``report.html``, ``junit.xml``,
then the secret scan.

Layout::

    <out_dir>/<run-id>/                 0700
        report.json                     0600  (validated against contracts/report.schema.json)
        report.md                       0600
        report.html                     0600  (self-contained; open it in a browser)
        junit.xml                       0600  (one test case per check)
        artifacts/<scenario>/...        0700 folders, 0600 files; text evidence stored as <name>.gz
                                        (harness.evidence.stored), cited by <name>
        artifacts/model-bodies.jsonl.gz the run-level store of every scenario run's model request bodies
                                        and of the rollouts' long strings (.store: tool lists, prompts,
                                        inputs and instructions, each once)

The report is assembled in a hidden sibling folder and renamed into place at the
end, so a reader never sees half a report. Before the rename the secret scan
redacts every scanned value from the artifacts and from the report itself and
then re-checks the whole folder.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jsonschema

from harness.evidence import stored

from . import html, markdown
from harness.private import private_dir, write_private

from .artifacts import copy_artifacts, manifest
from .junit import junit_xml
from harness.evidence.scenario import ScenarioEvidence

from .scenario import scenario_section
from .store import STORE, gather_bodies, keep_long_strings, keep_tool_lists
from harness.evidence.secrets import Finding, SecretScan
from harness.resources import contract_file
from peerwire.schema_pattern import validator_class

SCHEMA_PATH = contract_file("report.schema.json")
REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_HTML = "report.html"
JUNIT_XML = "junit.xml"
ARTIFACTS = "artifacts"
CAPABILITIES = "capabilities"
"""The folder of the run's artifacts that holds the capability probe's evidence (not a scenario's)."""
COUNTING = ("Counts are characters (Unicode code points) and words (runs of non-whitespace); "
            "they are not model tokens.")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
# Re-scan rounds after writing; one is enough unless redaction itself creates a match.
_VERIFY_ROUNDS = 3


class ReportError(ValueError):
    """The run description cannot be reported (bad run id, unsafe artifacts folder)."""


@functools.cache
def _validator() -> jsonschema.protocols.Validator:
    schema = report_schema()
    cls = validator_class()  # the schema's draft (2020-12), with ECMA-262 patterns
    cls.check_schema(schema)
    return cls(schema)


def prepare() -> None:
    """Build the schema validator now (it takes a while), so that writing a report later need not: the
    acceptance runner calls this while its scenario runs go."""
    _validator()


def report_schema() -> dict[str, Any]:
    """The JSON Schema of ``report.json`` (``contracts/report.schema.json``)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate_report(report: Mapping[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` (the most relevant error) unless ``report`` is valid."""
    error = jsonschema.exceptions.best_match(_validator().iter_errors(report))
    if error is not None:
        raise error


def write_report(out_dir: str | Path, run: Mapping[str, Any], artifacts_root: str | Path, *,
                 secrets: SecretScan | None = None) -> Path:
    """Write the report of ``run`` to ``out_dir/<run_id>/`` and return that folder.

    ``run`` is the runner's result (see ``harness.report`` for its shape);
    ``artifacts_root/<scenario artifacts_dir>`` holds each scenario's evidence.
    ``secrets`` defaults to :meth:`SecretScan.collect` over this process's
    environment; pass one built with the auth home and the agents' session tokens.

    Raises :class:`ReportError` for an unsafe run id or artifacts folder,
    ``FileExistsError`` when the report already exists (reports are never
    overwritten) and ``jsonschema.ValidationError`` when the report would not
    match its schema (nothing is left behind then).
    """
    out_dir, artifacts_root = Path(out_dir), Path(artifacts_root)
    run_id = str(run.get("run_id", ""))
    if not _RUN_ID.fullmatch(run_id):
        raise ReportError(f"run id {run_id!r} is not a plain folder name")
    scan = secrets if secrets is not None else SecretScan.collect()
    return staged_report(out_dir / run_id, lambda work: _assemble(work, run, artifacts_root, scan))


def staged_report(final: Path, build: Callable[[Path], Any]) -> Path:
    """Build a report in a hidden sibling of ``final`` (0700) and rename it into place.

    A reader never sees half a report, and a failing ``build`` leaves nothing.
    Raises ``FileExistsError`` when ``final`` exists: reports are never overwritten.
    """
    if final.exists():
        raise FileExistsError(f"report {final} already exists")
    private_dir(final.parent)
    work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        work.chmod(0o700)
        build(work)
        work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return final


def _assemble(work: Path, run: Mapping[str, Any], artifacts_root: Path, scan: SecretScan) -> None:
    copied: list[Path] = []
    excluded: list[str] = []
    scenarios_in = list(run.get("scenarios") or [])
    dirs = []
    for scenario in scenarios_in:
        relative = _safe_relative(str(scenario.get("artifacts_dir") or scenario["name"]))
        dirs.append(relative)
        files, skipped = copy_artifacts(artifacts_root / relative, work / ARTIFACTS / relative)
        copied += files
        excluded += [f"{ARTIFACTS}/{relative}/{p}" for p in skipped]
    if (artifacts_root / CAPABILITIES).is_dir():  # the capability probe's evidence, when the runner made one
        files, skipped = copy_artifacts(artifacts_root / CAPABILITIES, work / ARTIFACTS / CAPABILITIES)
        copied += files
        excluded += [f"{ARTIFACTS}/{CAPABILITIES}/{p}" for p in skipped]
    copied = gather_bodies(work / ARTIFACTS, copied)
    findings = scan.redact_tree(work, copied)
    sections = []
    for scenario, relative in zip(scenarios_in, dirs):
        loaded = ScenarioEvidence.load(work / ARTIFACTS / relative)
        sections.append(scenario_section(scenario, loaded, artifacts_dir=f"{ARTIFACTS}/{relative}/",
                                         codex_version=run.get("codex_version"), provider=run.get("provider")))
    # Read whole above; stored compressed from here on (the manifest lists the stored files), the rollouts'
    # long strings once in the run-level store.
    copied = stored.compress_all(keep_long_strings(work / ARTIFACTS, copied))
    checks = [c for s in sections for c in s["checks"]]
    report: dict[str, Any] = {
        "report_version": 1,
        "run": {
            "run_id": run["run_id"],
            "started_at": run.get("started_at"),
            "finished_at": run.get("finished_at"),
            "codex_version": run.get("codex_version"),
            "provider": run.get("provider"),
            # An empty shard passes (its share of the plan was nothing); an empty run does not.
            "passed": (bool(sections) or bool(run.get("shard"))) and all(s["passed"] for s in sections)
            and not run.get("interrupted"),
            "totals": {"scenarios": len(sections), "scenarios_failed": sum(not s["passed"] for s in sections),
                       "checks": len(checks), "checks_failed": sum(c["verdict"] == "fail" for c in checks),
                       "checks_skipped": sum(c["verdict"] == "skip" for c in checks)},
            **({"codex_capabilities": run["codex_capabilities"]} if run.get("codex_capabilities") else {}),
            **{key: run[key] for key in ("suite", "shard", "interrupted") if run.get(key) is not None},
            **({key: run[key] for key in ("usage", "trials", "workspace_trust", "agent_kinds")
                if run.get(key) is not None}),
        },
        "counting": COUNTING,
        "scenarios": sections,
        STORE: keep_tool_lists(sections),
        "artifacts": [a.to_json() for a in manifest(work, copied)],
        "excluded": excluded,
    }
    finish_report(work, report, scan, findings, copied)


def finish_report(work: Path, report: dict[str, Any], scan: SecretScan, findings: list[Finding],
                  copied: list[Path]) -> None:
    """Redact, validate and write ``report`` (JSON, Markdown, HTML, JUnit) into ``work``, then prove the
    folder clean: re-scan it, and should a secret turn up anyway, redact it and record it.

    ``findings`` are what redacting the artifacts (``copied``) already found.
    Raises ``jsonschema.ValidationError`` for a report that breaks its schema.
    """
    report = scan.redact_value(report, REPORT_JSON, findings)
    report["secret_scan"] = {"scanned": scan.names, "findings": [f.to_json() for f in _merge(findings)],
                             "clean": True}
    validate_report(report)
    for _ in range(_VERIFY_ROUNDS):
        _write(work, report)
        late = scan.redact_tree(work)
        if not late:
            return
        # Should not happen (everything was redacted before writing); record it all the same.
        findings += late
        report = json.loads((work / REPORT_JSON).read_text(encoding="utf-8"))
        report["secret_scan"]["findings"] = [f.to_json() for f in _merge(findings)]
        report["artifacts"] = [a.to_json() for a in manifest(work, copied)]
    report["secret_scan"]["clean"] = False
    _write(work, report)


def _write(work: Path, report: dict[str, Any]) -> None:
    # For machines: compact (read it with jq or python -m json.tool); the pages are for people.
    write_private(work / REPORT_JSON, json.dumps(report, ensure_ascii=False, separators=(",", ":")) + "\n")
    write_private(work / REPORT_MD, markdown.render(report))
    write_private(work / REPORT_HTML, html.render(report, work))
    write_private(work / JUNIT_XML, junit_xml(report))


def _merge(findings: list[Finding]) -> list[Finding]:
    merged: dict[tuple[str, str], Finding] = {}
    for f in findings:
        key = (f.name, f.location)
        merged[key] = Finding(f.name, f.location, f.occurrences + (merged[key].occurrences if key in merged else 0))
    return list(merged.values())


def _safe_relative(path: str) -> str:
    trimmed = path.rstrip("/")
    parts = Path(trimmed).parts
    if not parts or Path(trimmed).is_absolute() or any(p in ("..", ".") for p in parts):
        raise ReportError(f"artifacts folder {path!r} must be a relative path inside the artifacts root")
    return Path(*parts).as_posix()


def load_report(path: str | Path) -> dict[str, Any]:
    """A report's ``report.json``, given the report folder or the file itself."""
    path = Path(path)
    if path.is_dir():
        path = path / REPORT_JSON
    return json.loads(path.read_text(encoding="utf-8"))
