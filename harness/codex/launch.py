"""An agent's Codex launch settings, and where a real provider's requests go.

A run gives each agent's Codex two kinds of settings (see :mod:`harness.codex.home`):

* the **registration** of the core's MCP server (its launch, environment and
  tool approvals), written into the agent's ``config.toml`` for the whole run,
  since every launch and every thread needs it;
* the **launch settings**: the model provider (the scripted model's route, or the
  user's provider pointed at the run's recording proxy), the approval policy and
  sandbox, Codex's competing tools turned off, and trust for the fixture
  workspace.

A background launch (an owner the core starts headless, a later generation,
a collaboration child's thread in its root's app-server) takes the launch
settings on its command line (``-c key=value``, :func:`cli_overrides`) through
a launcher the run writes (:func:`write_launcher`): nothing of them is written
into ``config.toml``. An interactive start-up (mode ``attached_tui``: a TUI and
its owner's app-server) projects them into ``config.toml`` instead, so the TUI
and the app-server read the same settings, and restores them once the
attachment checks pass (:class:`~harness.codex.home.Projection`, part
``launch``). :func:`launch_values` is the one list of both.

A real provider is reached through the run's recording proxy
(:mod:`harness.model.proxy`): :func:`provider_route` reads from an authorized
home which provider its ``config.toml`` selects, where that provider's
requests go (its ``base_url``) and which setting moves them to the proxy.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.names import AUTH_FILE, CONFIG_NAME

from .home import AgentSettings, Key, ProxiedProvider, launch_values

OPENAI = "openai"
CHATGPT_BASE_URL = "https://chatgpt.com/backend-api/codex"
API_BASE_URL = "https://api.openai.com/v1"
"""Where Codex's built-in ``openai`` provider sends requests: a ChatGPT login to the first, an API key to the second
(unless ``openai_base_url`` says otherwise)."""
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


class RouteError(ValueError):
    """The authorized home's provider cannot be reached through the recording proxy (the message says why)."""


@dataclass(frozen=True)
class ProviderRoute:
    """A real provider as the run reaches it: its id, where its requests go (``upstream``, its ``base_url``) and
    the setting that points an agent's Codex elsewhere (``key``)."""

    provider_id: str
    upstream: str
    key: Key

    def through(self, base_url: str) -> ProxiedProvider:
        """The agent's provider setting once its requests go to ``base_url`` (its route on the proxy)."""
        return ProxiedProvider(self.key, base_url)


def provider_route(auth_home: Path) -> ProviderRoute:
    """The route of the provider ``auth_home/config.toml`` selects (``model_provider``, default ``openai``).

    A provider of the user's own (``[model_providers.<id>]``) is proxied at its
    ``base_url``; the built-in ``openai`` one at ``openai_base_url`` when set,
    else where Codex sends its login's requests (a ChatGPT login or an API key,
    read from ``auth.json``'s shape, never its values). Codex reserves the
    other built-in providers' settings: :class:`RouteError` says so, as it does
    for a provider without a ``base_url``.
    """
    config_path = auth_home / CONFIG_NAME
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise RouteError(f"{config_path} cannot be read: {error}") from None
    provider_id = str(config.get("model_provider") or OPENAI)
    if provider_id == OPENAI:
        upstream = config.get("openai_base_url") or (CHATGPT_BASE_URL if _chatgpt_login(auth_home) else API_BASE_URL)
        return ProviderRoute(OPENAI, str(upstream), ("openai_base_url",))
    table = (config.get("model_providers") or {}).get(provider_id)
    if not isinstance(table, dict):
        raise RouteError(f"model_provider {provider_id!r} is a built-in provider other than openai, whose base_url "
                         f"Codex does not let a run move to its recording proxy; define it as a provider of your "
                         f"own ([model_providers.<id>] with base_url) in {config_path}")
    if not isinstance(table.get("base_url"), str) or not table["base_url"]:
        raise RouteError(f"[model_providers.{provider_id}] in {config_path} has no base_url, so the run cannot put "
                         f"its recording proxy in front of it")
    return ProviderRoute(provider_id, table["base_url"], ("model_providers", provider_id, "base_url"))


def _chatgpt_login(auth_home: Path) -> bool:
    """Whether ``auth.json`` holds a ChatGPT login (tokens) rather than an API key; only its keys are read."""
    try:
        auth = json.loads((auth_home / AUTH_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(auth, dict):
        return False
    mode = str(auth.get("auth_mode") or "").lower()
    return mode.startswith("chatgpt") or (not mode and bool(auth.get("tokens")) and not auth.get("OPENAI_API_KEY"))


def cli_overrides(settings: AgentSettings) -> list[str]:
    """The launch settings as Codex command-line overrides: ``["-c", "key=value", ...]``.

    A key path is written dotted while its parts are bare keys; from the first
    part that is not (a workspace path), the rest becomes an inline table, since
    a dotted ``-c`` key cannot quote a part."""
    out: list[str] = []
    for path, value in launch_values(settings).items():
        bare = next((i for i, part in enumerate(path) if not _BARE_KEY.fullmatch(part)), len(path))
        if bare == 0:
            raise ValueError(f"launch setting {path!r} has no bare top-level key")
        for part in reversed(path[bare:]):
            value = {part: value}
        out += ["-c", f"{'.'.join(path[:bare])}={_toml(value)}"]
    return out


def _toml(value: Any) -> str:
    """``value`` as a TOML value on one line (strings as basic strings, mappings as inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k if _BARE_KEY.fullmatch(k) else json.dumps(k, ensure_ascii=False)} = {_toml(v)}"
                               for k, v in value.items()) + "}"
    raise TypeError(f"no TOML form for {value!r}")


def private_home(folder: Path) -> dict[str, str]:
    """An agent's own ``HOME``, created empty (0700): the environment its Codex gets instead of the user's home.

    Codex opens each session by running a login shell (its shell snapshot) that sources ``~/.bashrc`` and the
    login profile. With the user's home, the user's dotfiles would shape the agent's environment, cost every
    start whatever they run (a version manager's rehash, say) and differ from machine to machine; the run owns
    everything else of an agent, so it owns this too."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return {"HOME": os.fspath(folder)}


def write_launcher(path: Path, codex: Path | str, overrides: list[str]) -> Path:
    """Write an executable at ``path`` that runs ``codex`` with its arguments, then ``overrides``: what an agent's
    background launches run instead of ``codex``, so their settings never touch its ``config.toml``."""
    path.write_text(
        # -I -S: the launcher needs nothing but os and sys, so the interpreter starts without site (the
        # project's packages, .pth files) and without the environment's PYTHON* settings.
        f"#!{sys.executable} -IS\n"
        f'"""An agent\'s Codex, launched with the run\'s settings as command-line overrides."""\n'
        f"import os\nimport sys\n\n"
        f"CODEX = {os.fspath(codex)!r}\nOVERRIDES = {overrides!r}\n"
        f"os.execv(CODEX, [CODEX, *sys.argv[1:], *OVERRIDES])\n", encoding="utf-8")
    path.chmod(stat.S_IRWXU)
    return path
