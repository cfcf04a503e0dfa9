"""write_report: layout, modes, schema, hashes and the evidence each scenario carries."""

from __future__ import annotations

import gzip
import hashlib
import html
import json
import re
import stat
from pathlib import Path

import jsonschema
import pytest

from harness.report import ReportError, SecretScan, load_report, report_schema, write_report
from harness.report.store import tool_list
from tests.evidence.exchange import (A_ID, ANSWER, BINDING_ID, CALL_TASK, FINAL_A, PROMPT_A, REPLY_ID, REQUEST_ID,
                                     ROLLOUT_A, ROLLOUT_B, TASK_BODY, TASK_ID, TURN_A, TURN_B, run_description,
                                     task_exchange)

NO_SECRETS = SecretScan({})


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = tmp_path / "artifacts"
    task_exchange(effort_a="low", effort_b=None).write(root / "task")
    return root


def write(tmp_path: Path, artifacts: Path, run: dict | None = None, **kw) -> Path:
    return write_report(tmp_path / "reports", run or run_description(), artifacts, secrets=kw.pop("secrets", NO_SECRETS))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_layout_is_private(tmp_path, artifacts):
    folder = write(tmp_path, artifacts)
    assert folder == tmp_path / "reports" / "run-1"
    assert sorted(p.name for p in folder.iterdir()) == ["artifacts", "junit.xml", "report.html", "report.json", "report.md"]
    for path in [folder, *folder.rglob("*")]:
        assert mode(path) == (0o700 if path.is_dir() else 0o600), path
    assert [p.name for p in (tmp_path / "reports").iterdir()] == ["run-1"]  # no work folder left behind


def test_report_json_matches_its_schema_and_hashes_every_artifact(tmp_path, artifacts):
    folder = write(tmp_path, artifacts)
    report = load_report(folder)
    jsonschema.validate(report, report_schema())
    listed = {a["path"]: a for a in report["artifacts"]}
    on_disk = sorted(p.relative_to(folder).as_posix() for p in (folder / "artifacts").rglob("*") if p.is_file())
    # Text evidence is stored compressed: the manifest lists and hashes the stored files.
    assert sorted(listed) == on_disk == [
        "artifacts/task/appserver/B.g1.appserver.jsonl.gz", "artifacts/task/core-export.json.gz",
        "artifacts/task/model-requests.jsonl.gz", f"artifacts/task/rollouts/A/{ROLLOUT_A}.gz",
        f"artifacts/task/rollouts/B/{ROLLOUT_B}.gz"]
    for path, entry in listed.items():
        data = (folder / path).read_bytes()
        assert entry["sha256"] == hashlib.sha256(data).hexdigest() and entry["bytes"] == len(data)
    # ...and each holds, byte for byte, the file the run wrote.
    for path in listed:
        written = artifacts / path.removeprefix("artifacts/").removesuffix(".gz")
        assert gzip.decompress((folder / path).read_bytes()) == written.read_bytes()


def test_scenario_section_carries_inputs_outputs_models_and_bindings(tmp_path, artifacts):
    report = load_report(write(tmp_path, artifacts))
    assert report["run"]["passed"] is True and report["run"]["codex_version"] == "0.171.0"
    assert "not model tokens" in report["counting"]
    (scenario,) = report["scenarios"]
    (prompt,) = scenario["inputs"]
    assert prompt["text"] == PROMPT_A  # exact, Unicode and line break included
    assert (prompt["characters"], prompt["words"]) == (len(PROMPT_A), len(PROMPT_A.split()))
    assert prompt["rollout"] == [f"rollouts/A/{ROLLOUT_A}:4"]
    (output,) = scenario["outputs"]
    assert output["text"] == FINAL_A and output["rollout"]
    agents = scenario["agents"]
    assert agents["A"]["agent_id"] == A_ID
    assert (agents["A"]["models"], agents["A"]["efforts"]) == (["peerwire-scripted"], ["low"])
    assert agents["B"]["efforts"] == ["unverified"]  # B's rollout omits the effort
    assert [t["turn_id"] for t in agents["A"]["turns"]] == [TURN_A]
    bindings = {b["interaction_id"]: b for b in scenario["bindings"]}
    assert bindings[TASK_ID]["call_id"] == CALL_TASK and bindings[TASK_ID]["source"] == "tool_call"
    assert bindings[REPLY_ID]["binding_id"] == BINDING_ID and bindings[REPLY_ID]["turn_id"] == TURN_B
    assert scenario["binding_summary"] == {"bound": 2, "unbound": 0}
    (schema_a, schema_b) = sorted(scenario["tool_schemas"], key=lambda s: s["agent"])
    assert schema_a["namespace"] == "mcp__peerwire" and schema_a["tool_names"] == ["followup_task"]
    assert schema_a["requests"] == [0, 2, 3] and schema_b["requests"] == [1]
    assert schema_a["sha256"] in report["store"]["tool_lists"], "kept once, in the run-level store"
    assert tool_list(report, schema_a["sha256"])[0]["parameters"]["properties"]["target"] == {"type": "string"}
    assert [r["interaction_id"] for r in scenario["records"]] == [TASK_ID, REPLY_ID]
    assert scenario["problems"] == []


def test_checks_keep_their_evidence_and_missing_evidence_is_named(tmp_path, artifacts):
    checks = [
        {"id": "ok", "verdict": "pass", "summary": "fine",
         "evidence": {"records": [TASK_ID], "rollout": [f"rollouts/B/{ROLLOUT_B}:5"], "model_requests": [1],
                      "appserver": ["appserver/B.g1.appserver.jsonl:1"]}},
        {"id": "cites-nothing-real", "verdict": "fail", "summary": "bad",
         "evidence": {"records": ["ix_ghost"], "rollout": [f"rollouts/B/{ROLLOUT_B}:999", "../../etc/passwd:1"],
                      "model_requests": [42], "appserver": ["appserver/B.g1.appserver.jsonl"]}},
    ]
    report = load_report(write(tmp_path, artifacts, run_description(passed=False, checks=checks)))
    ok, bad = report["scenarios"][0]["checks"]
    assert ok["evidence_problems"] == []
    assert ok["evidence"]["rollout"] == [f"rollouts/B/{ROLLOUT_B}:5"]
    assert bad["evidence_problems"] == [
        "record ix_ghost is not in core-export.json",
        "model request 42 is not in model-requests.jsonl",
        f"rollouts/B/{ROLLOUT_B}:999: the file has 6 lines",
        "../../etc/passwd:1: no such artifact",
        "appserver/B.g1.appserver.jsonl: not <file>:<line>",
    ]
    assert report["run"]["passed"] is False and report["run"]["totals"]["checks_failed"] == 1


def test_report_md_shows_verdicts_texts_and_the_sequence_diagram(tmp_path, artifacts):
    text = (write(tmp_path, artifacts) / "report.md").read_text(encoding="utf-8")
    assert "# peerwire acceptance report run-1" in text and "**PASSED**" in text
    assert "| `task-reply-correlated` | pass |" in text
    assert PROMPT_A in text
    assert f"{len(PROMPT_A)} characters, {len(PROMPT_A.split())} words" in text
    assert "token" not in text.replace("not model tokens", "")
    diagram = text[text.index("```mermaid"):]
    assert diagram.splitlines()[1] == "sequenceDiagram"
    assert "followup_task to B" in diagram and "turn/start rq_000001" in diagram


def test_missing_artifacts_are_problems_not_errors(tmp_path):
    empty = tmp_path / "artifacts"
    (empty / "task").mkdir(parents=True)
    report = load_report(write(tmp_path, empty))
    problems = report["scenarios"][0]["problems"]
    assert "core-export.json: missing" in problems and "rollouts/: no rollout files" in problems
    assert report["scenarios"][0]["bindings"] == [] and report["artifacts"] == []


def test_an_existing_report_is_never_overwritten(tmp_path, artifacts):
    write(tmp_path, artifacts)
    with pytest.raises(FileExistsError):
        write(tmp_path, artifacts)


@pytest.mark.parametrize("run_id", ["", "../escape", "a/b", ".hidden"])
def test_unsafe_run_ids_are_refused(tmp_path, artifacts, run_id):
    with pytest.raises(ReportError):
        write(tmp_path, artifacts, run_description(run_id))
    assert not (tmp_path / "reports").exists()


def test_unsafe_artifacts_dirs_are_refused_and_leave_nothing(tmp_path, artifacts):
    with pytest.raises(ReportError):
        write(tmp_path, artifacts, run_description(artifacts_dir="../outside/"))
    assert list((tmp_path / "reports").iterdir()) == []


def test_a_run_that_breaks_the_schema_leaves_no_report(tmp_path, artifacts):
    run = run_description(checks=[{"id": "x", "verdict": "maybe", "summary": "", "evidence": {}}])
    with pytest.raises(jsonschema.ValidationError):
        write(tmp_path, artifacts, run)
    assert list((tmp_path / "reports").iterdir()) == []


def test_links_and_credential_files_are_not_copied(tmp_path, artifacts):
    (artifacts / "task" / "config.toml").write_text('PEERWIRE_SESSION_ID = "x"\n')
    (artifacts / "task" / "rollouts" / "auth.json").write_text("{}")
    (artifacts / "task" / "link.jsonl").symlink_to(artifacts / "task" / "core-export.json")
    report = load_report(folder := write(tmp_path, artifacts))
    assert sorted(report["excluded"]) == ["artifacts/task/config.toml", "artifacts/task/link.jsonl",
                                          "artifacts/task/rollouts/auth.json"]
    assert not any(p.name in ("config.toml", "auth.json", "link.jsonl") for p in folder.rglob("*"))


def test_report_json_is_plain_utf8_json(tmp_path, artifacts):
    raw = (write(tmp_path, artifacts) / "report.json").read_bytes()
    assert json.loads(raw.decode("utf-8"))["report_version"] == 1
    assert "×".encode() in raw  # Unicode kept, not escaped


def test_a_collaboration_probe_is_reported_with_what_it_means(tmp_path, artifacts):
    run = run_description()
    probe = {"success": True, "requests": 8, "nativeMessageOccurrences": 8, "childQuestionObserved": True,
             "parentReplyObserved": True, "childFinalObserved": True, "finalExact": True}
    run["scenarios"][0]["probe"] = probe
    folder = write(tmp_path, artifacts, run)
    report = load_report(folder)
    jsonschema.validate(report, report_schema())
    reported = report["scenarios"][0]["probe"]
    assert {k: v for k, v in reported.items() if k != "statement"} == probe
    assert "only when it is observed in an actual model input" in reported["statement"]
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert "### Collaboration probe" in markdown and reported["statement"] in markdown
    assert "| `parentReplyObserved` | yes |" in markdown


def test_scenarios_without_a_probe_report_none(tmp_path, artifacts):
    report = load_report(write(tmp_path, artifacts))
    assert "probe" not in report["scenarios"][0]
    assert "Collaboration probe" not in (tmp_path / "reports" / "run-1" / "report.md").read_text(encoding="utf-8")


def test_a_record_the_runner_made_itself_is_explained_as_the_runners(tmp_path):
    """A tool step calls the core directly: its record has no Codex call, and the report says why."""
    exchange = task_exchange()
    task = next(r for r in exchange.export["records"] if r["record_id"] == TASK_ID)
    task["tool_receipt"] = {"via": "operator"}  # no call_id: not a model's call
    exchange.write(tmp_path / "artifacts" / "task")
    run = run_description()
    run["scenarios"][0]["runner_tool_calls"] = [
        {"step": 2, "agent": "A", "tool": "followup_task", "arguments": {"target": "B", "message": TASK_BODY},
         "result": {"interaction_id": TASK_ID, "request_id": REQUEST_ID}, "error": None},
        {"step": 3, "agent": "A", "tool": "send_message", "arguments": {"target": "nobody", "message": "x"},
         "result": None, "error": {"code": "unknown_target", "message": "no agent is named 'nobody'"}}]
    folder = write(tmp_path, tmp_path / "artifacts", run)
    (scenario,) = load_report(folder)["scenarios"]
    bindings = {b["interaction_id"]: b for b in scenario["bindings"]}
    assert bindings[TASK_ID]["unbound"] and bindings[TASK_ID]["origin"] == "runner"
    assert "runner's own tool step 2 (followup_task as A), not by a model" in bindings[TASK_ID]["explanation"]
    assert bindings[REPLY_ID]["origin"] == "peerwire"
    markdown = (folder / "report.md").read_text(encoding="utf-8")
    assert "### The runner's own tool calls" in markdown and "runner's own tool step 2" in markdown
    assert "runner's own tool step 2" in html.unescape((folder / "report.html").read_text(encoding="utf-8"))


def test_an_unbound_record_no_runner_step_claims_is_not_blamed_on_the_runner(tmp_path):
    exchange = task_exchange()
    task = next(r for r in exchange.export["records"] if r["record_id"] == TASK_ID)
    task["tool_receipt"] = {"via": "operator"}
    exchange.write(tmp_path / "artifacts" / "task")
    (scenario,) = load_report(write(tmp_path, tmp_path / "artifacts"))["scenarios"]
    (task_binding,) = [b for b in scenario["bindings"] if b["interaction_id"] == TASK_ID]
    assert task_binding["origin"] == "unknown" and "no runner step claims it" in task_binding["explanation"]


@pytest.mark.parametrize("provider", ["openai", "scripted"])
def test_a_missing_model_log_is_a_problem_with_either_provider(tmp_path, provider):
    """A real provider's requests are logged too (the recording proxy), so no provider excuses a missing log."""
    task_exchange().write(tmp_path / "artifacts" / "task")
    (tmp_path / "artifacts" / "task" / "model-requests.jsonl").unlink()
    run = run_description()
    run["provider"] = provider
    (scenario,) = load_report(write(tmp_path, tmp_path / "artifacts", run))["scenarios"]
    assert "model-requests.jsonl: missing" in scenario["problems"]
    assert scenario["identity"]["provider"] == provider and scenario["model_log"] == "model-requests.jsonl missing"


def test_report_md_shows_every_body_and_tells_two_modes_apart(tmp_path):
    for mode in ("attached", "background"):
        task_exchange().write(tmp_path / "artifacts" / f"task.{mode}")
    run = run_description()
    run["scenarios"] = [{**run["scenarios"][0], "mode": mode, "artifacts_dir": f"task.{mode}/"}
                        for mode in ("attached", "background")]
    text = (write(tmp_path, tmp_path / "artifacts", run) / "report.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## Scenario")]
    assert headings == ["## Scenario `task · attached · scripted` — pass",
                        "## Scenario `task · background · scripted` — pass"]
    assert text.count(TASK_BODY) >= 2 and text.count(f"```text\n{ANSWER}\n```") >= 2
    schema = text[text.index("## Tool schemas"):]
    # Both agents of both runs saw one tool list: named once, with its tools and who saw it; the list itself is
    # kept whole once, in report.json's store, not copied into the page.
    assert "`followup_task`" in schema and len(re.findall(r"sha256 `[0-9a-f]{64}`", schema)) == 1
    assert '"name": "followup_task"' not in text and "store.tool_lists" in schema
    assert schema.count("scripted / ") == 4


def test_a_tool_call_codex_never_ran_is_an_error_in_the_transcript(tmp_path):
    """Codex answers a call to a tool it does not have itself: no MCP completion, only its own output."""
    exchange = task_exchange()
    for line in exchange.rollout_a.lines:
        payload = line["payload"]
        if payload.get("type") == "item_completed" and payload["item"].get("id") == CALL_TASK:
            payload["item"]["id"] = "call_unrelated"
        if payload.get("type") == "function_call_output" and payload.get("call_id") == CALL_TASK:
            payload["output"] = "unsupported call: mcp__peerwirefollowup_task"
    exchange.write(tmp_path / "artifacts" / "task")
    (scenario,) = load_report(write(tmp_path, tmp_path / "artifacts"))["scenarios"]
    (call,) = [e for e in scenario["transcripts"]["A"] if e.get("call_id") == CALL_TASK]
    assert call["error"] == "Codex did not run the call: unsupported call: mcp__peerwirefollowup_task"
    others = [e for e in scenario["transcripts"]["A"] if e["kind"] == "tool_call" and e["call_id"] != CALL_TASK]
    assert others and all(e["error"] is None for e in others), "calls Codex ran and answered are no errors"


def test_the_workspace_trust_of_a_diagnostic_run_is_stated(tmp_path, artifacts):
    plain = load_report(write(tmp_path / "plain", artifacts))
    assert "workspace_trust" not in plain["run"]
    run = {**run_description(), "workspace_trust": "off (untrusted start-up diagnostic)"}
    folder = write(tmp_path / "off", artifacts, run)
    report = load_report(folder)
    jsonschema.validate(report, report_schema())
    assert report["run"]["workspace_trust"] == "off (untrusted start-up diagnostic)"
    assert "- Fixture workspace trust: off (untrusted start-up diagnostic)" in (folder / "report.md").read_text()
    assert "off (untrusted start-up diagnostic)" in (folder / "report.html").read_text()
