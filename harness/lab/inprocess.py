"""The Codex adapter in this process, against a real ``codex app-server``.

For delivery routes that need the adapter's state in reach (see
:func:`harness.lab.recorded.routes.stale_steer`). The agent's Codex home gets the
scripted provider; its MCP server entry points at this store's home, where no
app runs (the scripted rules of these routes call no tools).
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

from peerwire import profiles
from peerwire.codex.adapter import CodexProvider
from peerwire.home import HOME_ENV, SESSION_ENV
from peerwire.registry_rules import AgentRow

from harness.codex.home import MODEL_KEY_VALUE, ScriptedProvider, project_agent
from harness.codex.install import CodexInstallation, locate_codex
from harness.codex.launch import private_home
from harness.model.rules import ModelScript
from harness.model.server import ScriptedModel
from harness.codex.workspace import FixtureWorkspace
from harness.evidence.layout import MODEL_REQUESTS


@dataclass(frozen=True)
class InProcess:
    provider: CodexProvider
    requester: AgentRow
    recipient: AgentRow
    token: str
    """The recipient's session credential (it is in its config.toml; never in a fixture)."""
    codex_home: Path
    workspace: Path

    @property
    def store(self) -> Any:
        """The adapter's own store (white-box: tests read the reference core's state through it)."""
        return self.provider.store


@asynccontextmanager
async def inprocess_adapter(root: Path, script: ModelScript,
                            codex: CodexInstallation | None = None) -> AsyncIterator[InProcess]:
    """The adapter attached to agent B's owner, driving ``codex`` (default: the pinned Codex)."""
    codex = codex or locate_codex()
    model = ScriptedModel(script, log_path=root / MODEL_REQUESTS).start()
    provider = CodexProvider.in_process(root / "core")
    store = provider.store
    requester, _ = store.registry.register_agent("A", "codex")
    recipient, token = store.registry.register_agent("B", "codex")
    codex_home = root / "B" / "codex_home"
    codex_home.mkdir(parents=True)
    workspace = FixtureWorkspace.create(root / "B" / "workspace", agent="B")
    server = [sys.executable, "-m", "peerwire", "mcp", "serve", "--profile", profiles.MESSAGING]
    projection = project_agent(codex_home, workspace.path, server=server,
                               server_env={HOME_ENV: str(root / "core"), SESSION_ENV: token},
                               base_url=model.base_url("B"))
    try:
        await provider.attach(recipient, codex=str(codex.program), codex_home=str(codex_home),
                              cwd=str(workspace.path), env={**codex.child_env(), **private_home(root / "B" / "home"),
                                   ScriptedProvider.env_key: MODEL_KEY_VALUE})
        yield InProcess(provider, requester, recipient, token, codex_home, workspace.path)
    finally:
        await provider.close()
        projection.restore()
        model.stop()
        store.close()
