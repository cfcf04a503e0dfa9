"""Mode attached_tui, live: B's real Codex TUI under tmux, attached to the app-server its owner delivers through.

The owner starts ``codex app-server --listen unix://SOCKET`` (through
:mod:`peerwire.codex.listen_bridge`) and opens no thread; the TUI
(``codex --remote unix://SOCKET``) starts one; the owner observes it
(``thread/started``), subscribes and only then delivers. The TUI's screen
(``tmux capture-pane``) shows the task and B's answer; the runner never types
into the composer.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from harness.lab.driver import CoreRefused
from harness.lab.reference import ReferenceLab
from harness.lab.recorded import routes
from harness.codex.tui import tmux_path
from harness.contract.manifest import requirement

pytestmark = pytest.mark.codex


@pytest.fixture
def lab(tmp_path: Path):
    tmux_path()  # a missing tmux fails here, naming the set-up step
    with ReferenceLab(tmp_path, routes.model_script(), agents=("A", "B"), attach=False, tui=True) as lab:
        yield lab


def transcript(lab: ReferenceLab) -> list[dict]:
    return [json.loads(line) for line in lab.transcript("B").read_text().splitlines()]


@requirement("tui:attached:same-thread")
def test_the_owner_delivers_into_the_thread_the_tui_started(lab):
    task = lab.as_agent("A").call("followup_task", {"target": "B", "message": "[idle] What is six times seven?"})
    owner = lab.attach("B")
    lines = transcript(lab)
    started = [entry["message"]["params"]["thread"]["id"] for entry in lines
               if entry["dir"] == "received" and entry["message"].get("method") == "thread/started"]
    sent = [entry["message"] for entry in lines if entry["dir"] == "sent"]
    methods = [m.get("method") for m in sent]
    # the owner opened no thread: it adopted the TUI's, subscribing before anything was delivered
    assert started == [owner["thread_id"]] and "thread/start" not in methods
    resume = methods.index("thread/resume")
    assert sent[resume]["params"]["threadId"] == owner["thread_id"]
    assert methods.index("turn/start") > resume
    reply = routes.await_reply(lab, task["request_id"])
    (binding,) = lab.trace(task["request_id"])["bindings"]
    assert binding["thread_id"] == owner["thread_id"] and reply["body"].startswith("Answer: 42")


@requirement("tui:attached:exchange-on-screen")
def test_the_exchange_is_on_the_tui_screen_and_nothing_is_typed(lab):
    lab.attach("B")
    out = routes.idle_start(lab)
    screen = lab.tui.wait_for_text("B", ["[idle] What is six times seven?", "Answer: 42 — “quoted”"], 30)
    assert out["request_id"] in screen  # the task item's request id is shown too
    # the runner only started the TUI and read its screen: no send-keys, no paste
    verbs = {command[0] for command in lab.tui.commands}
    assert verbs == {"new-session", "capture-pane"}, verbs


def test_an_owner_whose_tui_never_starts_a_thread_delivers_nothing_and_detaches_cleanly(tmp_path: Path):
    with ReferenceLab(tmp_path, routes.model_script(), agents=("A", "B"), attach=False) as lab:
        agent = lab.agents["B"]
        socket = tmp_path / "B.sock"
        if len(os.fsencode(socket)) > 100:  # a Unix socket path has ~100 bytes
            socket = Path(tempfile.mkdtemp(prefix="pw-")) / "B.sock"
        task = lab.as_agent("A").call("followup_task", {"target": "B", "message": "[idle] Anyone there?"})
        answer = lab.core.attach(agent.caller, codex=str(lab.codex.executable), codex_home=agent.codex_home,
                                 workspace=agent.workspace, env=lab.child_env(), listen=socket)
        assert answer["thread_id"] is None and answer["listen"] == str(socket)
        assert lab.owner("B") is None  # not an owner until it adopted a thread
        # a second attach while it waits is refused; so is a listening owner that would resume
        with pytest.raises(CoreRefused, match="already has an owner"):
            lab.core.attach(agent.caller, codex=str(lab.codex.executable), codex_home=agent.codex_home,
                            workspace=agent.workspace, env=lab.child_env())
        detached = lab.detach("B")
        assert detached["detached"] == "before its TUI started a thread" and detached["name"] == "B"
        with pytest.raises(CoreRefused, match="cannot resume"):
            lab.core.attach(agent.caller, codex=str(lab.codex.executable), codex_home=agent.codex_home,
                            workspace=agent.workspace, env=lab.child_env(), listen=socket, resume=True)
        sent = [json.loads(line)["message"] for line in lab.transcript("B").read_text().splitlines()
                if json.loads(line)["dir"] == "sent"]
        assert {m.get("method") for m in sent} <= {"initialize", "initialized"}, sent
        assert lab.trace(task["request_id"])["bindings"] == []


LAUNCH_KEYS = {"model", "model_provider", "model_providers", "approval_policy", "sandbox_mode", "projects", "features",
               "web_search", "model_reasoning_effort"}


def _config(lab: ReferenceLab, name: str) -> dict:
    import tomllib

    return tomllib.loads((lab.agents[name].codex_home / "config.toml").read_text(encoding="utf-8"))


def test_the_launch_settings_last_only_until_the_tui_is_attached(lab):
    """An interactive start-up projects the launch settings (model provider, approvals, workspace trust) so the TUI
    and its owner's app-server read the same ones, and restores them once the owner adopted the TUI's thread; the
    registration of the core's MCP server stays. A later generation is a background launch: it takes the settings
    on its command line and writes none of them into the config."""
    import psutil

    codex_home = lab.agents["B"].codex_home
    assert not LAUNCH_KEYS & set(_config(lab, "B")) and "peerwire" in _config(lab, "B")["mcp_servers"]
    owner = lab.attach("B")
    # attached: nothing of the launch is left, no sidecar of it either, and nothing the user changed was in the way
    assert not LAUNCH_KEYS & set(_config(lab, "B")), _config(lab, "B")
    assert not [p.name for p in codex_home.iterdir() if "peerwire-launch" in p.name]
    assert lab.agents["B"].launch_conflicts == []
    # the TUI's thread runs on what was projected at its start: the scripted model answers it
    first = routes.idle_start(lab)
    assert first["reply"]["body"].startswith("Answer: 42")
    lab.detach("B")
    later = lab.attach("B", resume=True)
    assert later["thread_id"] == owner["thread_id"] and later["generation"] == owner["generation"] + 1
    assert not LAUNCH_KEYS & set(_config(lab, "B"))
    command = " ".join(psutil.Process(later["pid"]).cmdline())
    assert 'approval_policy="never"' in command and "model_providers.scripted=" in command, command
    recalled = routes.await_reply(lab, lab.as_agent("A").call(
        "followup_task", {"target": "B", "message": "[recall] what did you answer before?"})["request_id"])
    assert recalled["body"] == "recalled from my history"
