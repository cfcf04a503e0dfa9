"""A live Codex lab: a core app, the scripted model and attached Codex agents.

The lab brings up, in one directory:

* the scripted model (in-process, loopback, one route per agent), deciding only
  from what Codex sends it;
* the reference core (``peerwire app`` as a real subprocess) with its Codex
  adapter;
* one private ``CODEX_HOME`` and one fixture Git workspace per agent, its
  config projected (scripted provider, the peerwire MCP server with the agent's
  session token, tool approval, workspace trust);
* each agent registered with provider ``codex`` and attached: the app starts
  the agent's ``codex app-server`` owner and its thread.

The runner drives it through the app's operator operations (``prompt``,
``await_turn``) so the adapter sees every turn. Tests use it for live adapter
paths; the acceptance runner wraps it with run homes, process jobs and reports.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from peerwire.contract import TOOL_ORDER
from peerwire.control import ControlClient
from peerwire.home import Home

from .codex_home import AgentSettings, PeerwireServer, Projection, ScriptedProvider
from .codex_install import CodexInstallation, locate_codex
from .model_rules import ModelScript, load_script
from .provisioner import AppProcess
from .scripted_model import ScriptedModel
from .workspace import FixtureWorkspace

MODEL_KEY_VALUE = "scripted-model-has-no-key"


@dataclass
class LabAgent:
    name: str
    agent_id: str
    token: str
    codex_home: Path
    workspace: Path
    projection: Projection
    owner: dict[str, Any] = field(default_factory=dict)


def peerwire_command() -> list[str]:
    """How Codex launches ``peerwire mcp serve`` (this interpreter, so the same install)."""
    return [sys.executable, "-m", "peerwire"]


class CodexLab:
    def __init__(
        self,
        root: Path,
        script: ModelScript | Path,
        agents: Sequence[str] = ("A", "B"),
        *,
        codex: CodexInstallation | None = None,
        approve_tools: bool = True,
        attach: bool = True,
    ):
        self.root = Path(root)
        self.script = script if isinstance(script, ModelScript) else load_script(script)
        self.agent_names = list(agents)
        self.codex = codex or locate_codex()
        self.approve_tools = approve_tools
        self.attach_on_start = attach
        self.home = Home(self.root / "core")
        self.model = ScriptedModel(self.script, log_path=self.root / "artifacts" / "model-requests.jsonl")
        self.app: AppProcess | None = None
        self.agents: dict[str, LabAgent] = {}

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> "CodexLab":
        self.root.mkdir(parents=True, exist_ok=True)
        self.model.start()
        self.app = AppProcess.start(self.home, env=self.child_env())
        for name in self.agent_names:
            self.agents[name] = self._provision(name)
        if self.attach_on_start:
            for name in self.agent_names:
                self.attach(name)
        return self

    def stop(self) -> None:
        if self.app is not None:
            self.app.terminate()
            self.app = None
        for agent in self.agents.values():
            agent.projection.restore()
        self.model.stop()

    def __enter__(self) -> "CodexLab":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def child_env(self) -> dict[str, str]:
        """The environment of everything the app starts: Codex first on PATH, the model key set."""
        env = self.codex.child_env(os.environ)
        env[ScriptedProvider.env_key] = MODEL_KEY_VALUE
        return env

    def _provision(self, name: str) -> LabAgent:
        out = self.control().call("register_agent", {"name": name, "provider": "codex", "source": "lab"})
        base = self.root / "agents" / name
        codex_home = base / "codex_home"
        codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        workspace = FixtureWorkspace.create(base / "workspace", agent=name)
        command = peerwire_command()
        settings = AgentSettings(
            workspace=workspace.path,
            peerwire=PeerwireServer(command=command[0], args=(*command[1:], "mcp", "serve"), home=self.home.path,
                                    session_id=out["session_token"],
                                    approve_tools=tuple(TOOL_ORDER) if self.approve_tools else None),
            provider=ScriptedProvider(base_url=self.model.base_url(name)),
        )
        projection = Projection(codex_home, settings).apply()
        return LabAgent(name, out["agent"]["agent_id"], out["session_token"], codex_home, workspace.path,
                        projection)

    # -- operator operations --------------------------------------------------------------

    def control(self) -> ControlClient:
        return ControlClient(self.home)

    def attach(self, name: str, *, resume: bool = False) -> dict[str, Any]:
        agent = self.agents[name]
        agent.owner = self.control().call("attach_codex", {
            "agent_id": agent.agent_id, "codex": str(self.codex.executable), "codex_home": str(agent.codex_home),
            "cwd": str(agent.workspace), "env": {ScriptedProvider.env_key: MODEL_KEY_VALUE}, "resume": resume,
        }, wait_s=60)
        return agent.owner

    def detach(self, name: str) -> dict[str, Any]:
        return self.control().call("detach_codex", {"agent_id": self.agents[name].agent_id}, wait_s=30)

    def prompt(self, name: str, text: str) -> str:
        return self.control().call("prompt", {"agent_id": self.agents[name].agent_id, "text": text},
                                   wait_s=30)["turn_id"]

    def await_turn(self, name: str, turn_id: str, timeout_s: float = 60) -> dict[str, Any]:
        return self.control().call("await_turn", {"agent_id": self.agents[name].agent_id, "turn_id": turn_id,
                                                  "timeout_ms": int(timeout_s * 1000)}, wait_s=timeout_s)

    def owner(self, name: str) -> dict[str, Any] | None:
        agent_id = self.agents[name].agent_id
        for owner in self.control().call("owners")["owners"]:
            if owner["agent_id"] == agent_id:
                return owner
        return None

    def as_agent(self, name: str) -> ControlClient:
        """Call tools as an agent (what its MCP server does), e.g. to inspect its mailbox."""
        return ControlClient(self.home, self.agents[name].token)

    def trace(self, ident: str) -> dict[str, Any]:
        return self.control().call("trace", {"id": ident})

    def transcript(self, name: str, generation: int = 1) -> Path:
        return self.home.path / "codex" / f"{name}.g{generation}.appserver.jsonl"

    def rollouts(self, name: str) -> list[Path]:
        return sorted((self.agents[name].codex_home / "sessions").rglob("rollout-*.jsonl"))
