"""The mailbox profile (``peerwire-harness mailbox``) through three bindings, with their verdicts pinned.

* The reference, through the seven-tool binding: every requirement passes.
* ``tests/contract/postbox_server.py`` through the example binding that ``docs/mailbox-profile.md``
  shows (read from the page, so the documented example is the tested one): a surface that names the
  sender and the inbox by argument fails exactly attribution and isolation, labelled findings about
  its design, and the requirements it cannot express are not applicable with their reasons. Each
  bug planted in it (``POSTBOX_MUTANT``) fails exactly the requirement of its class.
* ``mcp-agent-mail`` 0.1.0 from PyPI, in a virtualenv of its own (it pins an MCP SDK of another
  major version than this project's): ``make full``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract.mailbox.profile import requirements
from tests.patience import RUN_S

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "runner.py"
POSTBOX = Path(__file__).resolve().parent / "postbox_server.py"
ALL = {r.id for r in requirements()}
POSTBOX_BY_DESIGN = {"mailbox:sender:unforgeable", "mailbox:inbox:isolated-read", "mailbox:inbox:isolated-ack"}
POSTBOX_NOT_APPLICABLE = {"mailbox:recipient:ambiguous", "mailbox:wait:bounded", "mailbox:wait:wakes"}
AGENT_MAIL_VERSION = "0.1.0"
# mcp-agent-mail 0.1.0: sender and inbox are arguments (findings about its design), and a recipient's name is
# matched ignoring case, so a send to "ANN" reaches "ann"; its names are unique and it has no wait.
AGENT_MAIL_FAILS = POSTBOX_BY_DESIGN | {"mailbox:recipient:exact"}
AGENT_MAIL_NOT_APPLICABLE = POSTBOX_NOT_APPLICABLE
MUTANTS = {
    "lossy": "mailbox:history:no-loss",
    "duplicating": "mailbox:history:no-duplicate",
    "newest-first": "mailbox:history:sender-order",
    "nocase": "mailbox:recipient:exact",
    "volatile": "mailbox:durable:accepted-send",
}


def _mailbox(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict, str]:
    report = tmp_path / "report"
    run = subprocess.run([sys.executable, str(RUNNER), "mailbox", "--report-dir", str(report), *args],
                         capture_output=True, text=True, timeout=RUN_S, env={**os.environ, **(env or {})},
                         cwd=tmp_path)
    assert (report / "compliance.json").exists(), run.stdout[-3000:] + run.stderr[-3000:]
    return run.returncode, json.loads((report / "compliance.json").read_text("utf-8")), run.stdout


def _results(document: dict) -> dict[str, str]:
    return {e["id"]: e["result"] for e in document["requirements"]}


def _example_binding(folder: Path) -> Path:
    page = (ROOT / "docs" / "mailbox-profile.md").read_text("utf-8")
    code = page.split("<!-- example-binding -->\n```python\n", 1)[1].split("```", 1)[0]
    (folder / "postbox_binding.py").write_text(code, "utf-8")
    return folder


def _postbox(tmp_path: Path, mutant: str = "") -> tuple[int, dict, str]:
    folder = _example_binding(tmp_path)
    env = {"POSTBOX_SERVER": str(POSTBOX), "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)]),
           "POSTBOX_MUTANT": mutant}
    return _mailbox(tmp_path, "--binding", "postbox_binding:PostboxBinding", env=env)


@pytest.mark.slow
def test_the_reference_passes_every_requirement_through_the_seven_tools(tmp_path):
    status, document, output = _mailbox(tmp_path)
    assert _results(document) == {rid: "pass" for rid in ALL}, output
    assert status == 0 and document["verdict"]["compliant"]
    assert document["selection"]["profiles"] == ["mailbox"]


def test_the_documented_binding_runs_and_gets_its_pinned_verdicts(tmp_path):
    status, document, output = _postbox(tmp_path)
    expected = {rid: "fail" if rid in POSTBOX_BY_DESIGN else "not applicable" if rid in POSTBOX_NOT_APPLICABLE
                else "pass" for rid in ALL}
    assert _results(document) == expected, output
    assert status == 1
    by_id = {e["id"]: e for e in document["requirements"]}
    for rid in POSTBOX_BY_DESIGN:
        assert by_id[rid]["design_finding"], rid
        assert by_id[rid]["source_group"] == "messaging contract"
        assert by_id[rid]["failures"][0]["exchange"], f"{rid}: a failure without the lines behind it"
    for rid in POSTBOX_NOT_APPLICABLE:
        assert by_id[rid]["because"], rid
    markdown = (tmp_path / "report" / "compliance.md").read_text("utf-8")
    assert "a finding about the design" in markdown and "not MCP's" in markdown
    assert "not applicable — because the surface has no way to wait for mail" in markdown


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_each_planted_bug_fails_exactly_its_class(tmp_path, mutant):
    _, document, output = _postbox(tmp_path, mutant)
    results = _results(document)
    failing = {rid for rid, result in results.items() if result == "fail"} - POSTBOX_BY_DESIGN
    assert MUTANTS[mutant] in failing, output
    # A lost letter is also a body that never comes back, or a durable one gone: same class, other probes.
    allowed = {MUTANTS[mutant]} | ({"mailbox:body:byte-exact", "mailbox:durable:accepted-send"}
                                   if mutant == "lossy" else set())
    assert failing <= allowed, (mutant, failing)


@pytest.fixture(scope="session")
def agent_mail_python() -> str:
    """A virtualenv with mcp-agent-mail, made once and kept in the user's cache."""
    venv = Path.home() / ".cache" / "peerwire" / f"mcp-agent-mail-{AGENT_MAIL_VERSION}"
    python = venv / "bin" / "python"
    if not (venv / ".installed").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=RUN_S)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", f"mcp-agent-mail=={AGENT_MAIL_VERSION}"],
                       check=True, timeout=RUN_S)
        (venv / ".installed").touch()
    return str(python)


@pytest.mark.slow
@pytest.mark.full
def test_mcp_agent_mail_gets_its_pinned_verdicts(tmp_path, agent_mail_python):
    status, document, output = _mailbox(tmp_path, "--binding",
                                        "harness.contract.mailbox.agent_mail:AgentMailBinding",
                                        env={"PEERWIRE_AGENT_MAIL_PYTHON": agent_mail_python})
    expected = {rid: "fail" if rid in AGENT_MAIL_FAILS else "not applicable" if rid in AGENT_MAIL_NOT_APPLICABLE
                else "pass" for rid in ALL}
    assert _results(document) == expected, output
    assert status == 1
    assert document["target"]["server_info"]["name"] == "mcp-agent-mail"
