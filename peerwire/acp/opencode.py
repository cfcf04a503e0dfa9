"""A private, offline home for OpenCode as an ACP agent (``opencode acp``).

OpenCode reads its configuration and keeps its sessions under the XDG folders
and ``HOME``; :func:`prepare_home` makes all of them private to one agent (under
``root``) and writes a configuration whose only model provider is an
OpenAI-compatible endpoint (the scripted model on loopback, or any such
endpoint). Every setting that keeps start-up off the network is here, each
with its reason; ``docs/opencode.md`` tells the same story with the evidence.

The returned :class:`OpenCodeHome` gives the environment to start the agent
with (``env``: values to set, and ``None`` for variables of the caller's own
environment that must not reach the agent) and its ACP command.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

OPENCODE_VERSION = "1.18.33"
"""The pinned ``opencode-ai`` release (package.json) these settings were established against."""
PROVIDER_PACKAGE = "@ai-sdk/openai-compatible"
"""The provider package OpenCode bundles for an OpenAI-compatible endpoint: it POSTs ``/chat/completions``."""
MCP_TIMEOUT_MS = 75_000
"""A tool call's bound: above the longest wait a tool takes (60 s), below nothing (the MCP SDK default is 60 s)."""

OFFLINE_ENV: Mapping[str, str] = {
    # Observed: without it OpenCode fetches its model catalogue (models.dev) at every start.
    "OPENCODE_DISABLE_MODELS_FETCH": "1",
    # Defensive: no update check is made by `opencode acp`, but the TUI's is on by default.
    "OPENCODE_DISABLE_AUTOUPDATE": "1",
    # Defensive: a language server for a file type it touches would otherwise be downloaded.
    "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
    # Defensive: built-in auth plugins (Copilot, Codex login) stay unloaded; so do external plugins.
    "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    "OPENCODE_PURE": "1",
    # Its Claude Code compatibility reads ~/.claude and project CLAUDE.md files: not this agent's.
    "OPENCODE_DISABLE_CLAUDE_CODE": "1",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
    # A .opencode folder or opencode.json in the workspace would change the agent (and install packages).
    "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
}
"""Environment that keeps OpenCode's start-up off the network (see docs/opencode.md for each)."""

LEAKING_ENV = ("OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR", "OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION",
               "OPENCODE_DB", "OPENCODE_MODELS_URL", "OPENCODE_MODELS_PATH", "OPENCODE_AUTO_SHARE",
               "OPENCODE_ENABLE_EXA", "OPENCODE_EXPERIMENTAL", "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME",
               "OPENCODE_AUTH_CONTENT", "OPENCODE_API_KEY", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
               "XDG_RUNTIME_DIR")
"""Variables of the caller's environment that would point the agent elsewhere: removed from its environment."""

_SUBDIRS = ("home", "config", "data", "cache", "state", "workspace")


@dataclass(frozen=True)
class OpenCodeHome:
    """One agent's private OpenCode home."""

    root: Path
    config_path: Path
    workspace: Path
    env: dict[str, str | None] = field(default_factory=dict)
    """The agent's environment overlay (``attach_acp``'s ``env``): ``None`` removes a variable."""

    def command(self, opencode: str | os.PathLike[str] = "opencode") -> list[str]:
        """The ACP command of this home's agent."""
        return [os.fspath(opencode), "acp"]

    @property
    def data(self) -> Path:
        """Where OpenCode keeps its database (``opencode/opencode.db``) and logs (``opencode/log``)."""
        return self.root / "data"


def config(*, base_url: str, model: str, provider_id: str, api_key_env: str) -> dict[str, Any]:
    """The ``opencode.json`` of an agent whose only model is ``model`` at the OpenAI-compatible ``base_url``."""
    return {
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,            # no git snapshot of the workspace after each step
        "lsp": False,
        "formatter": False,
        "enabled_providers": [provider_id],
        "provider": {provider_id: {
            "npm": PROVIDER_PACKAGE,
            "name": f"{provider_id} (OpenAI-compatible)",
            "options": {"baseURL": base_url, "apiKey": f"{{env:{api_key_env}}}"},
            "models": {model: {"name": model, "tool_call": True, "limit": {"context": 200_000, "output": 32_000}}},
        }},
        "model": f"{provider_id}/{model}",
        "small_model": f"{provider_id}/{model}",
        # Its title agent asks the model for a session title beside every first turn: one request the scripted
        # model would have to answer, and nothing the agents' exchange needs.
        "agent": {"title": {"disable": True}},
        "compaction": {"auto": False},
        "experimental": {"mcp_timeout": MCP_TIMEOUT_MS},
    }


def prepare_home(root: str | os.PathLike[str], *, base_url: str, model: str = "scripted",
                 provider_id: str = "peerwire", api_key_env: str = "PEERWIRE_MODEL_KEY",
                 api_key: str = "scripted-model-key") -> OpenCodeHome:
    """Create ``root`` (0700) with OpenCode's private folders, its configuration and its environment.

    OpenCode installs ``@opencode-ai/plugin`` into every configuration folder
    it reads, from the npm registry, unless the folder already lists it as
    installed: the folder is seeded with that record (and no plugin), so
    nothing is fetched. The workspace (``root/workspace``) is for the caller to
    fill (give it its own Git repository, as for Codex).
    """
    root = Path(root)
    for name in _SUBDIRS:
        (root / name).mkdir(parents=True, exist_ok=True, mode=0o700)
    root.chmod(0o700)
    config_dir = root / "config" / "opencode"
    config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    config_path = config_dir / "opencode.json"
    _write(config_path, config(base_url=base_url, model=model, provider_id=provider_id, api_key_env=api_key_env))
    seeded = {"@opencode-ai/plugin": OPENCODE_VERSION}
    _write(config_dir / "package.json", {"dependencies": seeded})
    _write(config_dir / "package-lock.json", {"lockfileVersion": 3, "packages": {"": {"dependencies": seeded}}})
    (config_dir / "node_modules").mkdir(exist_ok=True, mode=0o700)
    env: dict[str, str | None] = {name: None for name in LEAKING_ENV}
    env.update({"HOME": str(root / "home"), "XDG_CONFIG_HOME": str(root / "config"),
                "XDG_DATA_HOME": str(root / "data"), "XDG_CACHE_HOME": str(root / "cache"),
                "XDG_STATE_HOME": str(root / "state"), **OFFLINE_ENV, api_key_env: api_key})
    return OpenCodeHome(root, config_path, root / "workspace", env)


def _write(path: Path, value: Any) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=2)
        handle.write("\n")
