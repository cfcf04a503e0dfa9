"""The secret scan: planted canaries are found, redacted in place and listed by name only."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from harness.lab.reference import ReferenceLab
from harness.acceptance.run import write_run_report
from harness.evidence import stored
from harness.model.rules import ModelScript
from harness.report import SecretScan, load_report, write_report
from harness.evidence.secrets import Finding, TokenLedger
from peerwire.control import ControlClient
from tests.evidence.exchange import ROLLOUT_A, run_description, task_exchange

CANARY = "canary-7f3a9c1e-do-not-leak"
SESSION_TOKEN = "pw-session-Zq8vN3kP0aL2"
AUTH_TOKEN = "eyJhbGciOi.auth-canary.sig"


def every_byte(folder: Path) -> bytes:
    """Every byte of every file, compressed ones (a report's text evidence) as they were written."""
    return b"".join(stored.read_bytes(p) for p in sorted(folder.rglob("*")) if p.is_file())


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    root = tmp_path / "artifacts"
    task_exchange().write(root / "task")
    return root


def test_an_environment_canary_in_an_artifact_and_the_run_is_redacted(tmp_path, artifacts, monkeypatch):
    monkeypatch.setenv("PEERWIRE_TEST_API_TOKEN", CANARY)
    rollout = artifacts / "task" / "rollouts" / "A" / ROLLOUT_A
    rollout.write_text(rollout.read_text(encoding="utf-8").replace("Wall time", f"Wall time {CANARY}", 1),
                       encoding="utf-8")
    run = run_description()
    run["scenarios"][0]["outputs"]["A"].append(f"the key is {CANARY}")
    folder = write_report(tmp_path / "reports", run, artifacts)  # default scan: this process's environment
    assert CANARY.encode() not in every_byte(folder)
    report = load_report(folder)
    scan = report["secret_scan"]
    assert "PEERWIRE_TEST_API_TOKEN" in scan["scanned"] and scan["clean"] is True
    assert {(f["name"], f["location"]) for f in scan["findings"] if f["name"] == "PEERWIRE_TEST_API_TOKEN"} == {
        ("PEERWIRE_TEST_API_TOKEN", f"artifacts/task/rollouts/A/{ROLLOUT_A}"),
        ("PEERWIRE_TEST_API_TOKEN", "report.json"),
    }
    rollout = stored.read_bytes(folder / "artifacts/task/rollouts/A" / ROLLOUT_A).decode()
    assert "[redacted:PEERWIRE_TEST_API_TOKEN]" in rollout
    assert report["scenarios"][0]["outputs"][1]["text"] == "the key is [redacted:PEERWIRE_TEST_API_TOKEN]"
    # The redacted rollout still parses, and its hash is of the redacted copy.
    lines = rollout.splitlines()
    assert all(json.loads(line) for line in lines)
    md = (folder / "report.md").read_text(encoding="utf-8")
    assert "PEERWIRE_TEST_API_TOKEN" in md and CANARY not in md


def test_auth_home_values_and_session_tokens_are_secrets(tmp_path, artifacts):
    auth_home = tmp_path / "codex-auth"
    auth_home.mkdir()
    (auth_home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": None,
                                                     "tokens": {"access_token": AUTH_TOKEN, "id": "short"}}))
    export_path = artifacts / "task" / "core-export.json"
    document = json.loads(export_path.read_text(encoding="utf-8"))
    document["records"][0]["body"] = f"token {SESSION_TOKEN} and {AUTH_TOKEN}"
    export_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")
    scan = SecretScan.collect({}, auth_home=auth_home, extra={"peerwire session token of A": SESSION_TOKEN})
    assert scan.names == ["auth.json:tokens.access_token", "peerwire session token of A"]  # "short" is too short
    folder = write_report(tmp_path / "reports", run_description(), artifacts, secrets=scan)
    data = every_byte(folder)
    assert SESSION_TOKEN.encode() not in data and AUTH_TOKEN.encode() not in data
    names = {f["name"] for f in load_report(folder)["secret_scan"]["findings"]}
    assert names == {"auth.json:tokens.access_token", "peerwire session token of A"}


def test_values_are_found_in_their_json_escaped_form(tmp_path):
    secret = 'pa"ss\\wörd-123'
    target = tmp_path / "x.json"
    target.write_text(json.dumps({"v": f"<{secret}>"}), encoding="utf-8")  # ensure_ascii: \" \\ \u00f6
    findings = SecretScan({"DB_PASSWORD": secret}).redact_tree(tmp_path)
    assert findings == [Finding("DB_PASSWORD", "x.json", 1)]
    assert json.loads(target.read_text()) == {"v": "<[redacted:DB_PASSWORD]>"}


def test_only_secret_looking_names_and_long_enough_values_are_collected():
    environ = {"OPENAI_API_KEY": "sk-long-enough-value", "GITHUB_TOKEN": "short", "HOME": "/home/someone-long",
               "AUTHORIZATION_HEADER": "Bearer abcdefgh", "PEERWIRE_SESSION_ID": "pw-token-value-1",
               "DB_PASSWORD": "hunter2!!"}
    scan = SecretScan.collect(environ)
    assert scan.names == ["AUTHORIZATION_HEADER", "DB_PASSWORD", "OPENAI_API_KEY", "PEERWIRE_SESSION_ID"]


def test_a_longer_secret_containing_a_shorter_one_is_redacted_whole():
    findings: list[Finding] = []
    scan = SecretScan({"SHORT_KEY": "abcdefgh", "LONG_TOKEN": "abcdefgh-ijklmnop"})
    out = scan.redact_text("x abcdefgh-ijklmnop y abcdefgh", "t", findings)
    assert out == "x [redacted:LONG_TOKEN] y [redacted:SHORT_KEY]"
    assert findings == [Finding("LONG_TOKEN", "t", 1), Finding("SHORT_KEY", "t", 1)]


def test_an_unparsable_auth_file_is_one_secret(tmp_path):
    (tmp_path / "auth.json").write_text("not json but a credential-12345\n")
    assert SecretScan.collect({}, auth_home=tmp_path).secrets == {"auth.json": "not json but a credential-12345"}


def test_a_clean_report_says_so(tmp_path, artifacts):
    folder = write_report(tmp_path / "reports", run_description(), artifacts, secrets=SecretScan({"X_TOKEN": "absent-value"}))
    scan = load_report(folder)["secret_scan"]
    assert scan == {"scanned": ["X_TOKEN"], "findings": [], "clean": True}


def test_every_session_token_the_run_issued_is_redacted(tmp_path, artifacts):
    """A token planted in an artifact is found from the run's ledger alone: no variable names it."""
    ledgers = tmp_path / "run-home" / "tokens"
    TokenLedger(ledgers, "task.attached").add("A", "pw-token-of-A-0123456789")
    TokenLedger(ledgers, "task.attached").add("peer", SESSION_TOKEN)
    TokenLedger(ledgers, "other.background").add("B", "pw-token-of-B-9876543210")
    (ledgers / "torn.tokens.jsonl").write_text('{"agent": "C", "token": "pw-torn-half-writ')  # writer died
    log = artifacts / "task" / "core" / "app.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(f"attach env PEERWIRE_SESSION_ID={SESSION_TOKEN}\n"
                   '{"agent": "C", "token": "pw-torn-half-writ', encoding="utf-8")
    export_path = artifacts / "task" / "core-export.json"
    document = json.loads(export_path.read_text(encoding="utf-8"))
    document["records"][0]["body"] = "the other run's token: pw-token-of-B-9876543210"
    export_path.write_text(json.dumps(document, ensure_ascii=False), encoding="utf-8")

    folder, error = write_run_report(tmp_path / "reports", run_description(), artifacts, None, ledgers=ledgers)

    assert error is None
    data = every_byte(folder)
    for token in (SESSION_TOKEN, "pw-token-of-B-9876543210", "pw-torn-half-writ"):
        assert token.encode() not in data
    scan = load_report(folder)["secret_scan"]
    assert {"peerwire session token of task.attached/A", "peerwire session token of task.attached/peer",
            "peerwire session token of other.background/B"} <= set(scan["scanned"])
    assert {f["name"] for f in scan["findings"]} >= {"peerwire session token of task.attached/peer",
                                                      "peerwire session token of other.background/B"}
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in ledgers.glob("*.tokens.jsonl")
               if p.name != "torn.tokens.jsonl")
    assert stat.S_IMODE(ledgers.stat().st_mode) == 0o700


def test_the_lab_records_every_token_the_core_issues(tmp_path):
    """The ledger holds exactly the tokens the running core accepts, written as they were issued."""
    ledger = TokenLedger(tmp_path / "tokens", "lab")
    script = ModelScript(name="none", rules={}, holds=frozenset())
    with ReferenceLab(tmp_path / "lab", script, agents=(), attach=False, token_ledger=ledger) as lab:
        lab.register("peer")
        lab.register("other", aliases=["o"])
        tokens = TokenLedger.read_all(tmp_path / "tokens")
        assert sorted(tokens) == ["peerwire session token of lab/other", "peerwire session token of lab/peer"]
        for name, token in tokens.items():
            assert ControlClient(lab.home, token).call("whoami")["agent"]["name"] == name.rsplit("/", 1)[1]


def test_the_scan_sees_secrets_added_after_it_first_ran():
    """The scan builds its patterns once for speed; a secret added later is still found."""
    scan = SecretScan({"FIRST_TOKEN": "first-secret-value-0001"})
    findings: list[Finding] = []
    assert scan.redact_text("a first-secret-value-0001 b", "x", findings) == "a [redacted:FIRST_TOKEN] b"
    assert scan.redact_text("nothing here", "x", findings) == "nothing here"
    scan.secrets["SECOND_TOKEN"] = "second-secret-value-0002"
    text = scan.redact_text('{"k": "second-secret-value-0002", "j": "first-secret-value-0001"}', "y", findings)
    assert text == '{"k": "[redacted:SECOND_TOKEN]", "j": "[redacted:FIRST_TOKEN]"}'
    assert [(f.name, f.location) for f in findings] == [("FIRST_TOKEN", "x"), ("FIRST_TOKEN", "y"),
                                                        ("SECOND_TOKEN", "y")]
