"""ACP agents in a lab: OpenCode on the run's model, or any ACP agent the user names.

An ACP agent is registered with provider ``acp`` and attached through the
driver's ``attach_acp``: the core starts its ACP command and hands it the
peerwire MCP server in ``session/new``. Each gets a fixture Git workspace of its
own, as a Codex agent does.

* ``opencode``: ``opencode acp`` (the pinned ``opencode-ai``) in a private,
  offline home under the agent's folder (:func:`peerwire.acp.opencode.prepare_home`:
  ``HOME`` and the XDG folders, its configuration, nothing of the user's),
  its model the run's scripted model on the agent's own route (a Chat
  Completions face), so its requests are in the run's model request log.
* ``acp:NAME``: the user's command (``--acp-agent NAME=COMMAND``) with the
  user's own environment, so it talks to the provider the user configured for
  it; the run logs none of its model requests (:data:`harness.capabilities.ANY_ACP`).

Evidence besides the core's (the ACP transcripts come through the driver):
OpenCode's own log, ``opencode/<agent>/<file>.log``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from peerwire.acp.opencode import OPENCODE_VERSION, OpenCodeHome, prepare_home

from harness import npm
from harness.contract.interface import Caller
from harness.evidence.layout import OPENCODE_LOG_DIR
from harness.private import copy_private

from .kinds import OPENCODE, AgentSpec

OPENCODE_ENV = "PEERWIRE_OPENCODE"
"""An OpenCode to run instead of the pinned install (a path, or a name on PATH)."""
OPENCODE_PACKAGE = "opencode-ai"


class OpenCodeNotFound(RuntimeError):
    """No OpenCode to run: neither ``$PEERWIRE_OPENCODE`` nor the pinned install."""


def locate_opencode(environ: Mapping[str, str] | None = None) -> Path:
    """``$PEERWIRE_OPENCODE``, else the pinned ``opencode-ai`` in a ``node_modules`` :mod:`harness.npm` finds
    (its version checked against :data:`~peerwire.acp.opencode.OPENCODE_VERSION`)."""
    environ = os.environ if environ is None else environ
    if environ.get(OPENCODE_ENV):
        return Path(environ[OPENCODE_ENV])
    folder = npm.find(OPENCODE_PACKAGE, environ)
    if folder is None:
        raise OpenCodeNotFound(f"no {OPENCODE_PACKAGE} installed: looked in {npm.where_looked(environ)}; "
                               f"`npm ci` in a peerwire checkout, or `npm install {OPENCODE_PACKAGE}@"
                               f"{OPENCODE_VERSION}`, or set {OPENCODE_ENV}")
    version = json.loads((folder / OPENCODE_PACKAGE / "package.json").read_text(encoding="utf-8")).get("version")
    if version != OPENCODE_VERSION:
        raise OpenCodeNotFound(f"{folder / OPENCODE_PACKAGE} is {version}, peerwire pins {OPENCODE_VERSION} "
                               f"(set {OPENCODE_ENV} to run another)")
    return folder / ".bin" / "opencode"


@dataclass
class AcpLabAgent:
    """An ACP agent of the lab: its caller, workspace, ACP command and environment."""

    name: str
    caller: Caller
    spec: AgentSpec
    workspace: Path
    command: list[str]
    env: dict[str, str | None]
    """Its environment overlay (``None`` removes a variable): an OpenCode home's, or nothing."""
    opencode: OpenCodeHome | None = None
    owner: dict[str, Any] = field(default_factory=dict)

    @property
    def agent_id(self) -> str:
        return self.caller.agent_id

    @property
    def token(self) -> str:
        return self.caller.token

    @property
    def kind(self) -> str:
        return self.spec.kind


def provision(base: Path, name: str, caller: Caller, spec: AgentSpec, workspace: Path, *,
              base_url: str | None) -> AcpLabAgent:
    """The agent's folder ``base``, around its fixture ``workspace`` (made by the lab while the core starts):
    for OpenCode, its private home on ``base_url`` (the agent's route on the run's model)."""
    if spec.kind == OPENCODE:
        if base_url is None:
            raise ValueError("opencode runs on the run's model: it needs the agent's route on it")
        home = prepare_home(base / "opencode", base_url=base_url)
        return AcpLabAgent(name, caller, spec, workspace, home.command(locate_opencode()), dict(home.env), home)
    return AcpLabAgent(name, caller, spec, workspace, list(spec.command), {})


def collect(agent: AcpLabAgent, destination: Path) -> None:
    """OpenCode's own log files into ``destination/opencode/<agent>/`` (nothing for another ACP agent)."""
    if agent.opencode is None:
        return
    for log in sorted((agent.opencode.data / "opencode" / "log").glob("*.log")):
        copy_private(log, destination / OPENCODE_LOG_DIR / agent.name / log.name)
