"""The Codex adapter in this process, against a real ``codex app-server``.

For paths that need the adapter's state in reach (see
:func:`harness.codex.recorded.routes.stale_steer`). The agent's Codex home gets the
scripted provider; its MCP server entry points at this store's home, where no
app runs (the scripted rules of these paths call no tools).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import AsyncIterator

from peerwire.codex.adapter import CodexProvider
from peerwire.registry import AgentRow
from peerwire.store import Store

from harness.codex.home import ScriptedProvider
from harness.codex.install import locate_codex
from harness.codex.lab import MODEL_KEY_VALUE, project_agent
from harness.model.rules import ModelScript
from harness.model.server import ScriptedModel
from harness.codex.workspace import FixtureWorkspace


@dataclass(frozen=True)
class InProcess:
    provider: CodexProvider
    store: Store
    requester: AgentRow
    recipient: AgentRow
    token: str
    """The recipient's session credential (it is in its config.toml; never in a fixture)."""
    codex_home: Path
    workspace: Path


@asynccontextmanager
async def inprocess_adapter(root: Path, script: ModelScript) -> AsyncIterator[InProcess]:
    codex = locate_codex()
    model = ScriptedModel(script, log_path=root / "model-requests.jsonl").start()
    (root / "core").mkdir(parents=True, exist_ok=True)
    store = Store(root / "core" / "peerwire.db")
    requester, _ = store.register_agent("A", "codex")
    recipient, token = store.register_agent("B", "codex")
    codex_home = root / "B" / "codex_home"
    codex_home.mkdir(parents=True)
    workspace = FixtureWorkspace.create(root / "B" / "workspace", agent="B")
    projection = project_agent(codex_home, workspace.path, core_home=root / "core", token=token,
                               base_url=model.base_url("B"))
    provider = CodexProvider(store, lambda *_: None, root / "core" / "codex")
    try:
        await provider.attach(recipient, codex=str(codex.executable), codex_home=str(codex_home),
                              cwd=str(workspace.path), env={**codex.child_env(), ScriptedProvider.env_key: MODEL_KEY_VALUE})
        yield InProcess(provider, store, requester, recipient, token, codex_home, workspace.path)
    finally:
        await provider.close()
        projection.restore()
        model.stop()
        store.close()
