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
paths; the acceptance runner wraps it with run homes, process jobs and reports:
given a :class:`~harness.process.jobs.Job`, the lab starts the app through it, so the
app, the app-servers it spawns and their MCP servers all end with the job.

Real-provider mode (``auth_home``): the scripted model is not started, the
user's ``config.toml`` (their provider) and ``auth.json`` are copied from the
authorized home into each private agent home (auth 0600), and the projection
leaves the provider settings as the user had them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Sequence

from peerwire import export
from peerwire.contract import PROFILES
from peerwire.control import ControlClient
from peerwire.errors import Code, PeerwireError
from peerwire.home import Home

from harness.codex.home import AgentSettings, PeerwireServer, Projection, ScriptedProvider
from harness.codex.install import CodexInstallation, locate_codex
from harness.process.jobs import Job
from harness.model.rules import ModelScript, load_script
from harness.process.app import AppProcess, Spawn
from harness.model.server import ScriptedModel
from harness.codex.workspace import FixtureWorkspace
from harness.report.secrets import TokenLedger

MODEL_KEY_VALUE = "scripted-model-has-no-key"
AUTH_FILE = "auth.json"
"""The credential file of an authorized Codex home: copied into agent homes, never into artifacts."""


@dataclass
class LabAgent:
    name: str
    agent_id: str
    token: str
    codex_home: Path
    workspace: Path
    projection: Projection
    owner: dict[str, Any] = field(default_factory=dict)


def project_agent(codex_home: Path, workspace: Path, *, core_home: Path, token: str, base_url: str | None,
                  profile: str = "messaging", approve_tools: bool = True) -> Projection:
    """Project one agent's Codex home: the peerwire MCP server as that agent, and the model.

    ``base_url`` is the agent's scripted-model route; ``None`` keeps the user's own
    (real) provider settings.
    """
    command = peerwire_command()
    settings = AgentSettings(
        workspace=workspace,
        peerwire=PeerwireServer(command=command[0], args=(*command[1:], "mcp", "serve", "--profile", profile),
                                home=core_home, session_id=token,
                                approve_tools=tuple(PROFILES[profile][1]) if approve_tools else None),
        provider=ScriptedProvider(base_url=base_url) if base_url is not None else None,
    )
    return Projection(codex_home, settings).apply()


def peerwire_command() -> list[str]:
    """How Codex launches ``peerwire mcp serve`` (this interpreter, so the same install)."""
    return [sys.executable, "-m", "peerwire"]


class CodexLab:
    """Brings up the lab in ``root`` (see the module docs); a context manager.

    ``job``: start the core app through it (the acceptance runner's way);
    without one the app is a plain subprocess in its own session.
    ``auth_home``: opt into the real provider configured there (see the module
    docs); the scripted model then stays down. ``attachments`` lists every
    owner the lab attached, in order (generation, thread id, pid).
    """

    def __init__(
        self,
        root: Path,
        script: ModelScript | Path,
        agents: Sequence[str] = ("A", "B"),
        *,
        codex: CodexInstallation | None = None,
        approve_tools: bool = True,
        attach: bool = True,
        job: Job | None = None,
        auth_home: Path | None = None,
        profile: str = "messaging",
        token_ledger: TokenLedger | None = None,
    ):
        self.root = Path(root)
        self.script = script if isinstance(script, ModelScript) else load_script(script)
        self.agent_names = list(agents)
        self.codex = codex or locate_codex()
        self.approve_tools = approve_tools
        self.attach_on_start = attach
        # messaging: the peer contract; collab: the first agent is the root (/root) of a tree
        self.profile = profile
        self.job = job
        self.auth_home = Path(auth_home) if auth_home is not None else None
        # Every session token the core issues to this lab, kept for the report's secret scan.
        self.token_ledger = token_ledger
        self.home = Home(self.root / "core")
        self.model = ScriptedModel(self.script, log_path=self.root / "artifacts" / "model-requests.jsonl")
        self.app: AppProcess | None = None
        self.agents: dict[str, LabAgent] = {}
        self.attachments: list[dict[str, Any]] = []

    @property
    def scripted(self) -> bool:
        """Whether the agents talk to the scripted model (not a real provider)."""
        return self.auth_home is None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> "CodexLab":
        self.root.mkdir(parents=True, exist_ok=True)
        if self.scripted:
            self.model.start()
        self.app = AppProcess.start(self.home, env=self.child_env(),
                                    spawn=None if self.job is None else spawn_through(self.job))
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
            # Edits made to an agent's config during the run are kept; those that clash are reported.
            for conflict in agent.projection.restore():
                print(f"peerwire: {agent.codex_home / 'config.toml'}: {conflict}", file=sys.stderr)
        if self.scripted:
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
        if self.scripted:
            env[ScriptedProvider.env_key] = MODEL_KEY_VALUE
        return env

    def _provision(self, name: str) -> LabAgent:
        collab_root = self.profile == "collab" and name == self.agent_names[0]
        out = self._register({"name": name, "provider": "codex", "source": "lab", "collab_root": collab_root})
        base = self.root / "agents" / name
        codex_home = base / "codex_home"
        codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.auth_home is not None:
            copy_authorization(self.auth_home, codex_home)
        workspace = FixtureWorkspace.create(base / "workspace", agent=name)
        projection = project_agent(codex_home, workspace.path, core_home=self.home.path, token=out["session_token"],
                                   base_url=self.model.base_url(name) if self.scripted else None,
                                   profile=self.profile, approve_tools=self.approve_tools)
        return LabAgent(name, out["agent"]["agent_id"], out["session_token"], codex_home, workspace.path,
                        projection)

    # -- operator operations --------------------------------------------------------------

    def control(self) -> ControlClient:
        return ControlClient(self.home)

    def register(self, name: str, *, provider: str = "manual", aliases: Sequence[str] = ()) -> dict[str, Any]:
        """Register a peer without a Codex owner (e.g. to make a name ambiguous); returns its agent row."""
        return self._register({"name": name, "provider": provider, "aliases": list(aliases),
                               "source": "lab"})["agent"]

    def _register(self, args: dict[str, Any]) -> dict[str, Any]:
        out = self.control().call("register_agent", args)
        if self.token_ledger is not None:
            self.token_ledger.add(args["name"], out["session_token"])
        return out

    def attach(self, name: str, *, resume: bool = False) -> dict[str, Any]:
        agent = self.agents[name]
        env = {ScriptedProvider.env_key: MODEL_KEY_VALUE} if self.scripted else {}
        agent.owner = self.control().call("attach_codex", {
            "agent_id": agent.agent_id, "codex": str(self.codex.executable), "codex_home": str(agent.codex_home),
            "cwd": str(agent.workspace), "env": env, "resume": resume,
        }, wait_s=60)
        self.attachments.append({"agent": name, "generation": agent.owner["generation"],
                                 "thread_id": agent.owner["thread_id"], "pid": agent.owner["pid"],
                                 "resume": resume})
        if self.job is not None:
            # A milestone: the app-server and its MCP server exist now; the job
            # remembers them even if they later leave the app's process tree.
            self.job.observe()
        return agent.owner

    def detach(self, name: str) -> dict[str, Any]:
        return self.control().call("detach_codex", {"agent_id": self.agents[name].agent_id}, wait_s=30)

    def prompt(self, name: str, text: str) -> str:
        return self.control().call("prompt", {"agent_id": self.agents[name].agent_id, "text": text},
                                   wait_s=30)["turn_id"]

    def await_turn(self, name: str, turn_id: str, timeout_s: float = 60) -> dict[str, Any]:
        return self.control().call("await_turn", {"agent_id": self.agents[name].agent_id, "turn_id": turn_id,
                                                  "timeout_ms": int(timeout_s * 1000)}, wait_s=timeout_s)

    def await_change(self, mark: int | None, timeout_s: float) -> dict[str, Any]:
        """The core's change mark, once it differs from ``mark`` or ``timeout_s`` passed."""
        return self.control().call("await_change", {"mark": mark, "timeout_ms": int(max(0.0, timeout_s) * 1000)},
                                   wait_s=timeout_s)

    def await_core(self, predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """Re-check ``predicate`` after each committed change of the core until it holds.

        Event-driven: it blocks on the core's commits, never on a timer; fails
        after ``timeout_s`` naming ``what``.
        """
        deadline = time.monotonic() + timeout_s
        mark = self.await_change(None, 0)["mark"]  # taken before looking: nothing slips between
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what} did not happen within {timeout_s:.0f}s")
            mark = self.await_change(mark, remaining)["mark"]

    def owner(self, name: str) -> dict[str, Any] | None:
        agent_id = self.agents[name].agent_id
        for owner in self.control().call("owners")["owners"]:
            if owner["agent_id"] == agent_id:
                return owner
        return None

    def as_agent(self, name: str) -> ControlClient:
        """Call tools as an agent (what its MCP server does), e.g. to inspect its mailbox."""
        return ControlClient(self.home, self.agents[name].token)

    def export(self) -> dict[str, Any] | None:
        """The core's evidence export (``contracts/export.schema.json``): the running app's, or, once it
        stopped, read from its home without starting it. ``None`` when no core ever ran in the lab."""
        if self.app is not None:
            return self.control().call("export", wait_s=30)
        try:
            return export.of_home(self.home)
        except PeerwireError as error:
            if error.code is Code.HOME_MISSING:
                return None
            raise

    def trace(self, ident: str) -> dict[str, Any]:
        return self.control().call("trace", {"id": ident})

    def transcript(self, name: str, generation: int = 1) -> Path:
        return self.home.path / "codex" / f"{name}.g{generation}.appserver.jsonl"

    def rollouts(self, name: str) -> list[Path]:
        return sorted((self.agents[name].codex_home / "sessions").rglob("rollout-*.jsonl"))


def copy_authorization(auth_home: Path, codex_home: Path) -> None:
    """Copy an authorized home's ``config.toml`` (kept as the user wrote it) and
    ``auth.json`` (mode 0600) into a private agent home.

    Raises FileNotFoundError when ``auth_home`` has no ``auth.json``: a real
    provider run without credentials would only fail later, less clearly.
    """
    auth = auth_home / AUTH_FILE
    if not auth.is_file():
        raise FileNotFoundError(f"{auth_home} holds no {AUTH_FILE}: it is not an authorized Codex home")
    target = codex_home / AUTH_FILE
    # Created 0600 before any byte is written: the credential is never readable by others.
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out, auth.open("rb") as src:
        shutil.copyfileobj(src, out)
    os.chmod(target, 0o600)
    config = auth_home / "config.toml"
    if config.is_file():
        shutil.copyfile(config, codex_home / "config.toml")


def spawn_through(job: Job) -> Spawn:
    """Start the core app as a process of ``job``: the job ends it, and what it starts, when closed."""
    def spawn(argv: list[str], env: dict[str, str], stderr: IO[bytes]) -> subprocess.Popen:
        return job.spawn(argv, name="peerwire-app", env=env, stdout=subprocess.PIPE, stderr=stderr).popen
    return spawn
