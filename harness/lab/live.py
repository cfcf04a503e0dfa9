"""A live Codex lab: a messaging core, the scripted model and attached Codex agents.

The lab brings up, in one directory:

* the scripted model (in-process, loopback, one route per agent), deciding only
  from what Codex sends it;
* the messaging core under test, through its acceptance driver
  (:mod:`harness.lab.driver`; by default peerwire's reference core,
  ``peerwire app`` as a real subprocess with its Codex adapter);
* one private ``CODEX_HOME`` and one fixture Git workspace per agent, the
  core's MCP server registered in its config (acting as the agent, its tools
  approved) for the whole run, and the agent's launch settings (the model
  provider, no-prompt approvals, workspace trust: :mod:`harness.codex.launch`)
  given to each background launch on its command line, through a launcher the
  lab writes (``agents/<agent>/codex-launch``); an interactive start-up (mode
  ``attached_tui``) projects them into the config instead and restores them as
  soon as the owner adopted the TUI's thread;
* each agent registered with provider ``codex`` and attached: the core starts
  the agent's ``codex app-server`` owner and its thread;
* or, for an agent of another kind (``kinds``, :mod:`harness.lab.kinds`), an
  ACP agent (:mod:`harness.lab.acp_agents`): registered with provider ``acp``,
  its workspace and (OpenCode) private home provisioned, attached through the
  driver's ``attach_acp``.

The runner drives it through the driver (``prompt``, ``await_turn``, tool calls,
the core's change feed and evidence export), so the core's adapter sees every
turn. Tests use it for live delivery routes; the acceptance runner wraps it with
run homes, process jobs and reports: given a
:class:`~harness.process.jobs.Job`, the core's app starts through it, so the app,
the app-servers it spawns and their MCP servers all end with the job.

Real-provider mode (``auth_home``): the scripted model is not started, the
user's ``config.toml`` (their provider) and ``auth.json`` are copied from the
authorized home into each private agent home (auth 0600), and each agent's
Codex reaches the user's provider through the lab's recording proxy
(:mod:`harness.model.proxy`): the launch settings move only the provider's
``base_url`` to the agent's route on it, and the proxy writes the same model
request log the scripted model writes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from peerwire import profiles

from harness.lab import acp_agents
from harness.lab.acp_agents import AcpLabAgent
from harness.lab.driver import REFERENCE, AcceptanceDriver, load_driver
from harness.lab.kinds import CODEX, AgentSpec
from harness.codex.home import (LAUNCH, MODEL_KEY_VALUE, REGISTRATION, AgentSettings, Projection, ProxiedProvider,
                                ScriptedProvider, agent_settings, copy_authorization)
from harness.codex.launch import ProviderRoute, cli_overrides, private_home, provider_route, write_launcher
from harness.codex.install import CodexInstallation, locate_codex
from harness.codex.tui import TuiError, TuiSession
from harness.codex.workspace import FixtureWorkspace
from harness.contract.interface import Caller
from harness.evidence.layout import MODEL_REQUESTS, TUI_DIR, pane_name, screen_name
from harness.model.proxy import RecordingProxy
from harness.model.rules import ModelScript, load_script
from harness.model.server import ScriptedModel
from harness.process.jobs import Job, spawn_through
from harness.evidence.secrets import TokenLedger
from harness.names import CONFIG_NAME

TURN_TIMEOUT_S = 60.0
"""How long the lab, and a scenario step, waits for a turn (or anything else) unless told otherwise."""


class LabHalted(RuntimeError):
    """The lab was halted (:meth:`CodexLab.halt`) while something waited on it."""


LAUNCHER = "codex-launch"
"""The agent's background launches run ``agents/<agent>/codex-launch``: Codex with the launch settings as ``-c``."""


@dataclass
class LabAgent:
    name: str
    caller: Caller
    codex_home: Path
    workspace: Path
    settings: AgentSettings
    registration: Projection
    """The core's MCP server in the agent's config, for the whole run (restored when the lab stops)."""
    launcher: Path
    home_env: dict[str, str]
    """The agent's own ``HOME`` (:func:`~harness.codex.launch.private_home`), added to its Codex's environment."""
    owner: dict[str, Any] = field(default_factory=dict)
    launch_conflicts: list[str] = field(default_factory=list)
    """What restoring an interactive start-up's launch projection kept as the user had changed it."""

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    @property
    def token(self) -> str:
        return self.caller.token


class CodexLab:
    """Brings up the lab in ``root`` (see the module docs); a context manager.

    ``driver``: the core's acceptance driver class, or its ``module:Class``
    name (default: the reference core's); it owns ``root/core``. ``job``: start
    the core's processes through it (the acceptance runner's way); without one
    they are plain subprocesses in sessions of their own. ``auth_home``: opt
    into the real provider configured there (see the module docs); the scripted
    model then stays down. ``attachments`` lists every owner the lab attached,
    in order (generation, thread id, pid).
    ``capabilities``: the only delivery capabilities the owners may use (what
    a live probe proved); None leaves that to the version Codex reports; a
    callable is a probe's verdict still to come, asked for once, before the
    first owner attaches (what it raises ends the start).
    ``kinds``: the kind of each agent (default: Codex for every one).
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
        profile: str = profiles.MESSAGING,
        driver: type[AcceptanceDriver] | str = REFERENCE,
        token_ledger: TokenLedger | None = None,
        capabilities: Sequence[str] | Callable[[], Sequence[str]] | None = None,
        native_tools: Sequence[str] = (),
        trust_workspaces: bool = True,
        tui: bool = False,
        kinds: Mapping[str, AgentSpec] | None = None,
    ):
        self.root = Path(root)
        # A ModelScript, or anything that decides like one (a persona playing a scenario's script).
        self.script = load_script(script) if isinstance(script, (str, Path)) else script
        self.agent_names = list(agents)
        self.kinds = {name: (kinds or {}).get(name, AgentSpec(CODEX)) for name in self.agent_names}
        self.codex = codex or locate_codex()
        self.approve_tools = approve_tools
        self.attach_on_start = attach
        # messaging: the peer contract; collab: the first agent is the root (/root) of a tree
        self.profile = profile
        self.job = job
        self._capabilities_to_come = capabilities if callable(capabilities) else None
        self.capabilities_awaited_s = 0.0
        """How long the start waited for a capability verdict still to come."""
        self.capabilities = None if capabilities is None or callable(capabilities) else list(capabilities)
        # Codex's own features that compete with the core's tools, left on (see harness.codex.home).
        self.native_tools = tuple(native_tools)
        # False: the untrusted start-up diagnostic (no fixture workspace trusted, no trust prompt answered).
        self.trust_workspaces = trust_workspaces
        # Mode attached_tui: each agent's real Codex TUI under tmux, attached to its owner's app-server.
        self.tui: TuiSession | None = None
        self._tui_dir: Path | None = None
        if tui:
            self._tui_dir = Path(tempfile.mkdtemp(prefix="pw-tui-"))  # short: a socket path has ~100 bytes
            self.tui = TuiSession(f"peerwire-{self._tui_dir.name}", self._tui_dir)
        self.auth_home = Path(auth_home) if auth_home is not None else None
        # Every session token the core issues to this lab, kept for the report's secret scan.
        self.token_ledger = token_ledger
        self.model = ScriptedModel(self.script, log_path=self.root / "artifacts" / MODEL_REQUESTS)
        # Real-provider mode: the recording proxy in front of the user's provider (started with the lab).
        self.route: ProviderRoute | None = None
        self.proxy: RecordingProxy | None = None
        make = load_driver(driver) if isinstance(driver, str) else driver
        self.core: AcceptanceDriver = make(self.root / "core", env=self.child_env(),  # type: ignore[call-arg]
                                           spawn=None if job is None else spawn_through(job))
        self.started = False
        self.halted: str | None = None
        self.agents: dict[str, LabAgent | AcpLabAgent] = {}
        self.attachments: list[dict[str, Any]] = []

    @property
    def scripted(self) -> bool:
        """Whether the agents talk to the scripted model (not a real provider)."""
        return self.auth_home is None

    # -- lifecycle ------------------------------------------------------------------

    def start(self) -> "CodexLab":
        """Start the model and the core, then provision and attach the agents side by side: each agent's
        workspace, projection and owner (its app-server, thread and MCP servers) are independent of the
        others'. Agents are registered first, in order (the collaboration root is the first).

        Start-up overlaps where nothing depends on the order: the fixture workspaces are made while the
        core starts, and a capability verdict still to come is awaited only once every agent is
        provisioned, right before the owners attach."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "core").mkdir(exist_ok=True)
        if self.scripted:
            self.model.start()
        else:
            assert self.auth_home is not None
            self.route = provider_route(self.auth_home)
            self.proxy = RecordingProxy(self.route.upstream, log_path=self.root / "artifacts" / MODEL_REQUESTS).start()
        with ThreadPoolExecutor(max_workers=len(self.agent_names) or 1, thread_name_prefix="agent") as pool:
            workspaces = {name: pool.submit(FixtureWorkspace.create, self.root / "agents" / name / "workspace",
                                            agent=name) for name in self.agent_names}
            self.core.start()
            self.started = True
            callers = {name: self._register_agent(name) for name in self.agent_names}

            def provision(name: str) -> None:
                self.agents[name] = self._provision(name, callers[name], workspaces[name].result())

            for future in [pool.submit(provision, name) for name in self.agent_names]:
                future.result()
            self._await_capabilities()
            if self.attach_on_start:
                for attaching in [pool.submit(self.attach, name) for name in self.agent_names]:
                    attaching.result()
        # Attachments are listed in the agents' order, whichever attached first.
        self.attachments.sort(key=lambda a: self.agent_names.index(a["agent"]) if a["agent"] in self.agent_names
                              else len(self.agent_names))
        return self

    def stop(self) -> None:
        if self.tui is not None:
            self._keep_screens()
            self.tui.close()
        if self._tui_dir is not None:
            shutil.rmtree(self._tui_dir, ignore_errors=True)
        if self.started:
            self.core.stop()
            self.started = False
        for agent in self.agents.values():
            if not isinstance(agent, LabAgent):
                continue  # an ACP agent's home is the run's alone: nothing of the user's to restore
            # Edits made to an agent's config during the run are kept; those that clash are reported.
            for conflict in agent.registration.restore():
                print(f"peerwire: {agent.codex_home / CONFIG_NAME}: {conflict}", file=sys.stderr)
        if self.scripted:
            self.model.stop()
        elif self.proxy is not None:
            self.proxy.stop()

    def __enter__(self) -> "CodexLab":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def child_env(self) -> dict[str, str]:
        """The environment of everything the core starts: Codex first on PATH, the model key set."""
        env = self.codex.child_env(os.environ)
        if self.scripted:
            env[ScriptedProvider.env_key] = MODEL_KEY_VALUE
        return env

    def _register_agent(self, name: str) -> Caller:
        collab_root = self.profile == profiles.COLLAB and name == self.agent_names[0]
        return self._register(name, provider=self.kinds[name].provider, collab_root=collab_root)

    def _provision(self, name: str, caller: Caller, workspace: FixtureWorkspace) -> LabAgent | AcpLabAgent:
        base = self.root / "agents" / name
        spec = self.kinds[name]
        if spec.provider != CODEX:
            on_model = spec.on_run_model and self.scripted
            return acp_agents.provision(base, name, caller, spec, workspace.path,
                                        base_url=self.model.base_url(name) if on_model else None)
        codex_home = base / "codex_home"
        codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self.auth_home is not None:
            copy_authorization(self.auth_home, codex_home)
        provider: ScriptedProvider | ProxiedProvider
        if self.scripted:
            provider = ScriptedProvider(base_url=self.model.base_url(name))
        else:
            assert self.route is not None and self.proxy is not None
            provider = self.route.through(self.proxy.base_url(name))
        settings = agent_settings(workspace.path, server=self.core.server_command(self.profile),
                                  server_env=self.core.caller_env(caller), provider=provider, profile=self.profile,
                                  approve_tools=self.approve_tools, native_tools=self.native_tools,
                                  trust_workspace=self.trust_workspaces)
        registration = Projection(codex_home, settings, parts=(REGISTRATION,)).apply()
        launcher = write_launcher(base / LAUNCHER, self.codex.program, cli_overrides(settings))
        return LabAgent(name, caller, codex_home, workspace.path, settings, registration, launcher,
                        private_home(base / "home"))

    # -- driving the core -----------------------------------------------------------------

    def register(self, name: str, *, provider: str = "manual", aliases: Sequence[str] = ()) -> Caller:
        """Register a peer without a Codex owner (e.g. to make a name ambiguous)."""
        return self._register(name, provider=provider, aliases=tuple(aliases))

    def _register(self, name: str, **kwargs: Any) -> Caller:
        caller = self.core.register(name, **kwargs)
        if self.token_ledger is not None:
            self.token_ledger.add(name, caller.token)
        return caller

    def _await_capabilities(self) -> None:
        if self._capabilities_to_come is not None:
            began = time.monotonic()
            try:
                self.capabilities = list(self._capabilities_to_come())  # what it raises ends the start, each time
            finally:
                self.capabilities_awaited_s += time.monotonic() - began
            self._capabilities_to_come = None

    def attach(self, name: str, *, resume: bool = False) -> dict[str, Any]:
        self._await_capabilities()
        agent = self.agents[name]
        if isinstance(agent, AcpLabAgent):
            attach_acp = getattr(self.core, "attach_acp", None)
            if attach_acp is None:
                raise RuntimeError(f"{name} is an ACP agent ({agent.kind}), and the driver "
                                   f"{type(self.core).__name__} cannot attach one (it has no attach_acp)")
            agent.owner = attach_acp(agent.caller, command=agent.command, cwd=agent.workspace, env=agent.env,
                                     resume=resume)
            return self._attached(name, agent.owner, resume)
        env = {**agent.home_env, **({ScriptedProvider.env_key: MODEL_KEY_VALUE} if self.scripted else {})}
        if self._tui_dir is not None and not resume:
            agent.owner = self._attach_interactive(agent, self._tui_dir / f"{name}.sock", env)
        else:
            # A background launch (a later generation of a TUI's agent too): settings on its command line.
            agent.owner = self.core.attach(agent.caller, codex=str(agent.launcher), codex_home=agent.codex_home,
                                           workspace=agent.workspace, env=env, resume=resume,
                                           capabilities=self.capabilities)
        return self._attached(name, agent.owner, resume)

    def _attached(self, name: str, owner: dict[str, Any], resume: bool) -> dict[str, Any]:
        self.attachments.append({"agent": name, "generation": owner["generation"],
                                 "thread_id": owner["thread_id"], "pid": owner["pid"], "resume": resume})
        if self.job is not None:
            # A milestone: the app-server and its MCP server exist now; the job
            # remembers them even if they later leave the app's process tree.
            self.job.observe()
        return owner

    def _attach_interactive(self, agent: LabAgent, socket: Path, env: Mapping[str, str]) -> dict[str, Any]:
        """An interactive start-up: the launch settings projected into the agent's config, so its TUI and its
        owner's app-server read the same ones, the owner started on ``socket`` and the TUI on it; once the
        owner adopted the TUI's thread (the attachment checks passed) the projection is restored, the user's
        edits kept. Nothing of it outlives the start-up, whether it succeeded or not."""
        launch = Projection(agent.codex_home, agent.settings, parts=(LAUNCH,)).apply()
        try:
            self.core.attach(agent.caller, codex=str(self.codex.program), codex_home=agent.codex_home,
                             workspace=agent.workspace, env=env, listen=socket, capabilities=self.capabilities)
            return self._attach_tui(agent, socket, env)
        finally:
            for conflict in launch.restore():
                agent.launch_conflicts.append(str(conflict))
                print(f"peerwire: {agent.codex_home / CONFIG_NAME}: {conflict}", file=sys.stderr)

    def _attach_tui(self, agent: LabAgent, socket: Path, env: Mapping[str, str]) -> dict[str, Any]:
        """Start the agent's TUI on its owner's socket, then wait until the owner adopted the TUI's thread."""
        assert self.tui is not None
        self.tui.start(agent.name, codex=str(self.codex.executable), socket=socket, codex_home=agent.codex_home,
                       workspace=agent.workspace, env=env)

        def adopted() -> dict[str, Any] | None:
            owner = self.owner(agent.name)
            return owner if owner and owner.get("thread_id") else None

        return self.await_core(adopted, TURN_TIMEOUT_S, f"{agent.name}'s owner to adopt the thread its TUI started")

    def _keep_screens(self) -> None:
        """Each TUI's last screen, with its scroll-back, as evidence (``artifacts/tui/<agent>.screen.txt``), and
        whether it was still running (``tui/<agent>.pane.json``): a terminal that stayed on its session."""
        assert self.tui is not None
        folder = self.root / "artifacts" / TUI_DIR
        for name in self.tui.agents:
            try:
                text = self.tui.screen(name)
                pane: dict[str, Any] = self.tui.pane(name)
            except (TuiError, OSError, subprocess.SubprocessError) as error:
                text, pane = f"(no screen: {error})\n", {"alive": None, "error": str(error)}
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            (folder / screen_name(name)).write_text(text, encoding="utf-8")
            (folder / pane_name(name)).write_text(json.dumps({"agent": name, **pane}) + "\n", encoding="utf-8")

    def screen(self, name: str) -> str:
        """What ``name``'s attached TUI shows now, with its scroll-back (mode attached_tui)."""
        if self.tui is None:
            raise RuntimeError("this lab runs no TUI")
        return self.tui.screen(name)

    def detach(self, name: str) -> dict[str, Any]:
        return self.core.detach(self.agents[name].caller)

    def prompt(self, name: str, text: str) -> str:
        return self.core.prompt(self.agents[name].caller, text)

    def await_turn(self, name: str, turn_id: str, timeout_s: float = TURN_TIMEOUT_S) -> dict[str, Any]:
        return self.core.await_turn(self.agents[name].caller, turn_id, timeout_s)

    def call_tool(self, name: str, tool: str, arguments: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """Call a tool as agent ``name`` (what its MCP server does)."""
        return self.core.call_tool(self.agents[name].caller, tool, arguments, timeout_s)

    def await_core(self, predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """Re-check ``predicate`` after each committed change of the core until it holds.

        Event-driven: it blocks on the core's commits, never on a timer; fails
        after ``timeout_s`` naming ``what``.
        """
        deadline = time.monotonic() + timeout_s
        mark = self.core.await_change(None, 0)  # taken before looking: nothing slips between
        while True:
            if self.halted is not None:
                raise LabHalted(f"{what}: the run was stopped ({self.halted})")
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{what} did not happen within {timeout_s:.0f}s")
            mark = self.core.await_change(mark, remaining)

    def halt(self, reason: str) -> None:
        """Stop the run where it stands: every agent's owner is detached (no further model request), and
        any wait of the lab ends at its next look with :class:`LabHalted` naming ``reason``."""
        self.halted = reason
        for name in list(self.agents):
            try:
                if self.owner(name) is not None:
                    self.detach(name)
            except Exception:  # already gone, or the core is stopping: nothing more to stop
                pass

    def owner(self, name: str) -> dict[str, Any] | None:
        return self.core.owner(self.agents[name].caller)

    def export(self) -> dict[str, Any] | None:
        """The core's evidence export (``contracts/export.schema.json``), live or once it stopped."""
        return self.core.export()

    def rollouts(self, name: str) -> list[Path]:
        """The agent's Codex rollouts (an ACP agent has none: its ACP transcript is its history)."""
        agent = self.agents[name]
        if not isinstance(agent, LabAgent):
            return []
        return sorted((agent.codex_home / "sessions").rglob("rollout-*.jsonl"))
