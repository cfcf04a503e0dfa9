"""The real-provider path end to end, offline: ``runner.py --provider openai`` against a stand-in provider.

Everything a real run does happens here (the auth home named by the environment, its ``config.toml`` and
``auth.json`` copied into private agent homes, the projection approving exactly the core's tools with
Codex's competing tools off, the preflight, every scenario that declares the openai provider, the model
and effort read from the rollouts, the report and its secret scan). Only the network differs: the user's
provider ``base_url`` points at a stand-in (:mod:`harness.acceptance.standin`) that plays every scenario's
rules on one route, telling scenario and agent apart by the workspace Codex reports in each request.

Every change runs the path with a covering selection: ``modes`` (an attached run, and a background run whose
new generation resumes with the user's provider) and ``lifecycle`` (an agent that asks no model, a turn
interrupted with a request in flight). Every scenario that declares the provider runs in the full tier.
"""

from __future__ import annotations

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


def user_config(port: int) -> str:
    return (f'model = "standin-large"\nmodel_provider = "standin"\nmodel_reasoning_effort = "medium"\n\n'
            f'[model_providers.standin]\nname = "Stand-in provider"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
            f'wire_api = "responses"\nenv_key = "{KEY_ENV}"\nrequest_max_retries = 0\nstream_max_retries = 0\n')


OPENAI = [s.name for s in discover() if "openai" in s.providers]
COVERING = ["modes", "lifecycle"]


@pytest.mark.codex
@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.parametrize("scenarios", [pytest.param(COVERING, id="covering"),
                                       pytest.param(OPENAI, id="every", marks=pytest.mark.full)])
def test_openai_scenarios_pass_through_the_real_provider_path(scenarios: list[str], tmp_path: Path) -> None:
    assert len(OPENAI) >= 6 and set(COVERING) <= set(OPENAI)
    auth_home = tmp_path / "auth-home"
    auth_home.mkdir()
    with ScriptedModel(stand_in(ROOT / "scenarios"), log_path=tmp_path / "standin.jsonl") as provider:  # type: ignore[arg-type]
        (auth_home / "config.toml").write_text(user_config(provider.port), encoding="utf-8")
        (auth_home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": KEY}), encoding="utf-8")
        before = {p.name: p.read_bytes() for p in auth_home.iterdir()}
        env = {**os.environ, AUTH_HOME_ENV: str(auth_home), KEY_ENV: KEY}
        # Two scenario runs at a time: the test's load stays about one more test worker's.
        run = subprocess.run([sys.executable, str(ROOT / "runner.py"), "--provider", "openai", "--workers", "2",
                              *[f"--scenario={name}" for name in scenarios], "--runs-root", str(tmp_path / "runs"), "--report-dir", str(tmp_path / "reports")],
                             cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-4000:]
    # the user's home is never changed
    assert {p.name: p.read_bytes() for p in auth_home.iterdir()} == before

    (report_dir,) = (tmp_path / "reports").iterdir()
    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
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
        assert names == {"mcp__peerwire"}, names  # no multi_agent namespace
        assert not any(tool.get("type") == "web_search" for tool in request["body"]["tools"])
        assert request["body"]["model"] == "standin-large"
        assert "authorization" not in request["headers"]
