"""The real-provider path end to end, offline: ``runner.py --provider openai`` against a stand-in provider.

Everything a real run does happens here (the auth home named by the environment, its ``config.toml`` and
``auth.json`` copied into private agent homes, the registration approving exactly the core's tools with
Codex's competing tools off, the preflight, every scenario that declares the openai provider, each agent's
Codex reaching the provider through the run's recording proxy, the model and effort read from the rollouts,
the report and its secret scan). Only the network differs: the user's provider ``base_url`` points at a
stand-in (:mod:`harness.acceptance.standin`) that plays every scenario's rules on one route, telling
scenario and agent apart by the workspace Codex reports in each request, and keeps its own log of what it
received: the proxies' logs must be exactly that.

Every change runs the path with a covering selection: ``modes`` (an attached run, and a background run whose
new generation resumes with the user's provider) and ``lifecycle`` (an agent that asks no model, a turn
interrupted with a request in flight), and ``collab`` through the recording proxy. Every scenario that
declares the provider runs in the full tier.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.acceptance.options import AUTH_HOME_ENV
from harness.acceptance.scenario import OPT_IN_MODES, discover
from harness.evidence.rollouts import RolloutIndex
from harness.evidence.model_bodies import read_log
from harness.evidence.model_log import ModelRequestLog
from harness.model.server import ScriptedModel
from harness.acceptance.standin import stand_in
from tests.patience import RUN_S

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "STANDIN_PROVIDER_KEY"
KEY = "sk-standin-0123456789abcdef0123456789abcdef"
RUN_TIMEOUT_S = RUN_S


HOP = {"host", "content-length", "connection", "transfer-encoding", "keep-alive"}
"""Headers a connection owns: the proxy's hop to the provider has its own."""


def user_config(port: int) -> str:
    return (f'model = "standin-large"\nmodel_provider = "standin"\nmodel_reasoning_effort = "medium"\n\n'
            f'[model_providers.standin]\nname = "Stand-in provider"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            f'wire_api = "responses"\nenv_key = "{KEY_ENV}"\nrequest_max_retries = 0\nstream_max_retries = 0\n')


def run_against_the_standin(tmp_path: Path, *scenarios: str) -> tuple[subprocess.CompletedProcess, Path, dict]:
    """``runner.py --provider openai`` (only ``scenarios`` when given) with the stand-in as the user's provider;
    the run, its report folder and report. The stand-in's own log is ``standin.jsonl``; the user's home must come
    out unchanged."""
    auth_home = tmp_path / "auth-home"
    auth_home.mkdir()
    with ScriptedModel(stand_in(ROOT / "scenarios"), log_path=tmp_path / "standin.jsonl") as provider:  # type: ignore[arg-type]
        (auth_home / "config.toml").write_text(user_config(provider.port), encoding="utf-8")
        (auth_home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": KEY}), encoding="utf-8")
        before = {p.name: p.read_bytes() for p in auth_home.iterdir()}
        env = {**os.environ, AUTH_HOME_ENV: str(auth_home), KEY_ENV: KEY}
        # Two scenario runs at a time: the test's load stays about one more test worker's.
        run = subprocess.run([sys.executable, str(ROOT / "runner.py"), "--provider", "openai", "--workers", "2",
                              *[f"--scenario={name}" for name in scenarios],
                              "--runs-root", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "reports")],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-4000:]
    # the user's home is never changed
    assert {p.name: p.read_bytes() for p in auth_home.iterdir()} == before
    (report_dir,) = (tmp_path / "reports").iterdir()
    return run, report_dir, json.loads((report_dir / "report.json").read_text(encoding="utf-8"))


def assert_the_proxies_logged_what_the_standin_received(tmp_path: Path, report_dir: Path, report: dict) -> None:
    """Every request the stand-in received is in exactly one scenario run's model request log (the recording
    proxy's), byte for byte (the digest of the body's bytes as each side received them, the whole body, the
    headers but a connection's own), and those logs hold nothing else; no artifact holds the credential."""
    received = [r for _, r in read_log(tmp_path / "standin.jsonl") if r and r.get("event") == "request"]
    proxied = []
    for scenario in report["scenarios"]:
        log = report_dir / scenario["artifacts_dir"] / "model-requests.jsonl"
        records = [r for _, r in read_log(log) if r and r.get("event") == "request"]
        assert records, f"{scenario['identity']}: the recording proxy logged no request"
        proxied += [(scenario["name"], r) for r in records]
        answered = next(c for c in scenario["checks"] if c["id"] == "model-requests-answered")
        assert answered["verdict"] == "pass", answered
    assert len(proxied) == len(received) > 0
    by_bytes = {r["raw_sha256"]: r for r in received}
    assert len(by_bytes) == len(received)  # every request is a distinct body (thread and turn ids differ)
    for scenario, request in proxied:
        twin = by_bytes.pop(request["raw_sha256"])
        assert request["body"] == twin["body"] and request["body_sha256"] == twin["body_sha256"]
        assert twin["agent"] == f"{scenario}/{request['agent']}", (twin["agent"], scenario, request["agent"])
        assert request["path"] == f"/agents/{request['agent']}/responses" and twin["path"] == "/v1/responses"
        mine = {k: v for k, v in request["headers"].items() if k not in HOP}
        assert mine == {k: v for k, v in twin["headers"].items() if k not in HOP}
        assert "authorization" not in request["headers"]
    assert not by_bytes
    for path in [*report_dir.rglob("*"), *(tmp_path / "runs").rglob("*")]:
        if path.is_file() and path.name != "auth.json":
            data = path.read_bytes()
            text = gzip.decompress(data) if path.suffix == ".gz" else data
            assert KEY.encode() not in text, path


@pytest.mark.codex
@pytest.mark.heavy
def test_collab_passes_through_the_recording_proxy_and_its_log_is_what_the_provider_received(tmp_path: Path) -> None:
    """The collaboration scenario with a real provider: its probe reads the recording proxy's log, which holds
    exactly the requests the provider received."""
    _, report_dir, report = run_against_the_standin(tmp_path, "collab")
    (collab,) = report["scenarios"]
    assert collab["identity"]["provider"] == "openai" and collab["passed"]
    assert collab["probe"]["success"] and collab["probe"]["requests"] >= 8, collab["probe"]
    probe = next(c for c in collab["checks"] if c["id"] == "probe-succeeded")
    assert probe["verdict"] == "pass", probe
    assert_the_proxies_logged_what_the_standin_received(tmp_path, report_dir, report)


OPENAI = [s.name for s in discover() if "openai" in s.providers]
COVERING = ["modes", "lifecycle"]


@pytest.mark.codex
@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("scenarios", [pytest.param(COVERING, id="covering"),
                                       pytest.param(OPENAI, id="every", marks=pytest.mark.full)])
def test_openai_scenarios_pass_through_the_real_provider_path(scenarios: list[str], tmp_path: Path) -> None:
    assert len(OPENAI) >= 6 and set(COVERING) <= set(OPENAI)
    _, report_dir, report = run_against_the_standin(tmp_path, *scenarios)
    assert report["run"]["provider"] == "openai" and report["run"]["passed"]
    assert sorted(s["name"] for s in report["scenarios"]) == sorted(
        s.name for s in discover() for m in s.modes if s.name in scenarios and m not in OPT_IN_MODES)
    for scenario in report["scenarios"]:
        assert scenario["identity"]["provider"] == "openai"
        assert scenario["usage"]["totals"]["model_requests"] > 0
        for agent, usage in scenario["usage"]["agents"].items():
            if usage["model_requests"] == 0:
                continue  # an agent the scenario drives with tools alone (lifecycle's A) asks no model
            # the user's model and effort, as the rollouts record them; the counts the provider reported
            assert usage["models"] == ["standin-large"] and usage["reasoning_efforts"] == ["medium"], agent
            assert usage["input_tokens"] > 0 and usage["cached_input_tokens"] > 0
    assert report["run"]["usage"]["totals"]["model_requests"] == sum(
        s["usage"]["totals"]["model_requests"] for s in report["scenarios"])
    assert report["secret_scan"]["clean"]
    assert KEY not in (report_dir / "report.json").read_text(encoding="utf-8")
    assert_the_proxies_logged_what_the_standin_received(tmp_path, report_dir, report)

    # what the provider saw: only the core's tools next to Codex's own shell tools, every request routed
    requests = [r for _, r in read_log(tmp_path / "standin.jsonl") if r and r.get("event") == "request"]
    # Every request answered, or hung up on by Codex for a reason the agents' rollouts show: a turn that
    # was interrupted with a request in flight (interrupt's or lifecycle's B, when the model was asked
    # before the interrupt), or input steered into the turn. Nothing the stand-in answered went missing.
    log = ModelRequestLog.load(tmp_path / "standin.jsonl")
    rollouts = RolloutIndex.load(sorted((report_dir / "artifacts").glob("*/rollouts/*/rollout-*")))
    unanswered = {(r.seq, r.agent, r.outcome, rollouts.why_cut(r.turn_id, r.received_at))
                  for r in log.requests if r.outcome != "answered"}
    assert requests and not log.problems
    assert all(outcome == "disconnected" and why for _, _, outcome, why in unanswered), unanswered
    for request in requests:
        names = {tool.get("name") for tool in request["body"]["tools"] if tool.get("type") == "namespace"}
        # the core's tools of the scenario's profile, and no multi_agent namespace
        assert names in ({"mcp__peerwire"}, {"mcp__collaboration"}), names
        assert not any(tool.get("type") == "web_search" for tool in request["body"]["tools"])
        assert request["body"]["model"] == "standin-large"
        assert "authorization" not in request["headers"]
