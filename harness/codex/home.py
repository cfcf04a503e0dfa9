"""Project a run's settings into an agent's `$CODEX_HOME/config.toml`, then undo it.

A run's settings come in two parts (see :mod:`harness.codex.launch`):

* ``registration``: the peerwire MCP server with its tool approvals, for the
  whole run (every launch and thread of the agent needs it);
* ``launch``: the model provider (the scripted model, or the user's own pointed
  at the run's recording proxy; :data:`None` leaves the user's as it is), a
  no-prompt approval policy and the sandbox, Codex's competing tools off, and
  trust for the agent's fixture workspace. Only an interactive start-up
  projects them, and only until its attachment checks pass; a background
  launch takes them on its command line.

A projection adds its part(s) and keeps every other entry, comment and format
of the user's file (tomlkit round-trip). Afterwards the file is restored: byte for
byte when nobody touched it during the run, otherwise key by key (see
:mod:`harness.codex.config_merge`): projected values the user did not change go
back to their originals, the user's edits stay, and a key both changed is kept
as the user left it and reported as a :class:`~harness.codex.config_merge.Conflict`.

Crash safety: before the projected file is written, the original is copied
to `config.toml.peerwire-backup`, the projected text to
`config.toml.peerwire-projected`, and a marker `config.toml.peerwire-projection`
(JSON: owner process, whether an original existed, its SHA-256) is written
beside them (a ``launch`` projection's are ``config.toml.peerwire-launch-*``,
so it can lie over the run's registration). The marker is removed last on restore, so a marker found later
means a projection whose process died before restoring; the next projection
(or `recover_interrupted`) restores the original first, the same key-by-key way,
an interrupted launch projection before the registration under it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import Table

from peerwire import profiles
from peerwire.contract import PROFILES

from harness.names import AUTH_FILE, CONFIG_NAME, PEERWIRE_SERVER_NAME, SERVER_NAMES

from .config_merge import Conflict, merge

BACKUP_SUFFIX = ".peerwire-backup"
PROJECTED_SUFFIX = ".peerwire-projected"
MARKER_SUFFIX = ".peerwire-projection"
LAUNCH_INFIX = "-launch"
REGISTRATION, LAUNCH = "registration", "launch"
BOTH = (REGISTRATION, LAUNCH)
"""The parts of a projection (see the module docs); a throwaway home (the capability probe) takes both at once."""
Key = tuple[str, ...]
"""A setting's key path in ``config.toml``: ``("features", "multi_agent")``."""
KEPT_ORIGINAL_SUFFIX = ".peerwire-original"
"""Where the original goes when the user's current file cannot be merged (left for them to merge by hand)."""
COMPETING_FEATURES = {"multi_agent": ("features", "multi_agent", False), "web_search": (None, "web_search", "disabled")}
"""Codex features that offer a model tools competing with the core's (its own spawn_agent and wait_agent, web
search), each with the config key and value that turn it off; a run projects them off unless a scenario asks."""


class ProjectionError(Exception):
    """The projection cannot be applied or an interrupted one cannot be recovered."""


class PeerwireEntryConflict(ProjectionError):
    """`[mcp_servers.peerwire]` already exists and launches something else.

    Nothing was written. `existing` is the user's entry as plain data,
    `wanted` the launch this run needs (command, args, env).
    """

    def __init__(self, config_path: Path, existing: Mapping[str, Any], wanted: Mapping[str, Any],
                 name: str = PEERWIRE_SERVER_NAME):
        super().__init__(
            f"{config_path}: [mcp_servers.{name}] already launches something else "
            f"({json.dumps(existing, sort_keys=True)}); "
            f"refusing to replace it with {json.dumps(wanted, sort_keys=True)}"
        )
        self.config_path = config_path
        self.existing = dict(existing)
        self.wanted = dict(wanted)


class ProjectionInUse(ProjectionError):
    """Another live process holds a projection of this CODEX_HOME."""


@dataclass(frozen=True)
class ScriptedProvider:
    """Codex talks to the scripted model at `base_url` (the agent's route).

    Retries are off so a failed or unexpected request fails the turn once.
    `env_key` names the environment variable Codex reads the API key from;
    the runner sets it to a dummy value. `reasoning_effort` is sent as
    `model_reasoning_effort` so rollouts record an effort.
    """

    base_url: str
    model: str = "peerwire-scripted"
    provider_id: str = "scripted"
    env_key: str = "PEERWIRE_SCRIPTED_MODEL_KEY"
    reasoning_effort: str | None = "low"

    def table(self) -> dict[str, Any]:
        """Its ``[model_providers.<provider_id>]`` table."""
        return {"name": "peerwire scripted model", "base_url": self.base_url, "wire_api": "responses",
                "env_key": self.env_key, "request_max_retries": 0, "stream_max_retries": 0}


@dataclass(frozen=True)
class ProxiedProvider:
    """The user's own provider, its requests sent to ``base_url`` (the agent's route on the run's recording
    proxy) by the setting ``key`` (``openai_base_url``, or its ``[model_providers.<id>]`` ``base_url``); the
    model and everything else stay as the user set them."""

    key: Key
    base_url: str


@dataclass(frozen=True)
class PeerwireServer:
    """The messaging core's MCP server launch registered as `[mcp_servers.peerwire]`.

    `env` is what the server needs to act as the agent (for the reference core
    its home and the agent's session credential). `approve_tools`: when set,
    exactly these tools get `approval_mode = "approve"` (without it Codex
    0.171.0 refuses MCP calls under approval policy `never`).
    """

    command: str
    env: Mapping[str, str]
    args: tuple[str, ...] = ("mcp", "serve")
    tool_timeout_sec: int = 70
    approve_tools: tuple[str, ...] | None = None
    name: str = PEERWIRE_SERVER_NAME
    """The ``[mcp_servers.<name>]`` key (see :data:`SERVER_NAMES`)."""

    def launch(self) -> dict[str, Any]:
        """The fields that say where the server points (compared on conflict)."""
        return {
            "command": self.command,
            "args": list(self.args),
            "env": dict(self.env),
        }


@dataclass(frozen=True)
class AgentSettings:
    """Everything projected for one agent.

    `provider=None` leaves `model`, `model_provider` and `[model_providers]`
    exactly as the user set them; a :class:`ProxiedProvider` changes only where
    the user's provider sends its requests.
    """

    workspace: str | os.PathLike[str]
    peerwire: PeerwireServer
    provider: ScriptedProvider | ProxiedProvider | None = None
    native_tools: tuple[str, ...] = ()
    """The :data:`COMPETING_FEATURES` left as configured; the others are turned off."""
    trust_workspace: bool = True
    """False only for the untrusted start-up diagnostic: the workspace gets no trust entry (and nothing
    answers a trust prompt either)."""


def launch_values(settings: AgentSettings) -> dict[Key, Any]:
    """The launch settings of ``settings``, each by its key path, in the order they are projected: the one list a
    projection writes and a background launch's command line carries (:func:`harness.codex.launch.cli_overrides`)."""
    values: dict[Key, Any] = {}
    provider = settings.provider
    if isinstance(provider, ScriptedProvider):
        values[("model",)] = provider.model
        values[("model_provider",)] = provider.provider_id
        if provider.reasoning_effort is not None:
            values[("model_reasoning_effort",)] = provider.reasoning_effort
        values[("model_providers", provider.provider_id)] = provider.table()
    elif isinstance(provider, ProxiedProvider):
        values[provider.key] = provider.base_url
        # Codex compresses a ChatGPT login's request bodies (zstd); sent plain, the proxy's log can read them.
        values[("features", "enable_request_compression")] = False
    # The run has no one to answer prompts: never ask. Shell commands of a real model stay in the workspace.
    values[("approval_policy",)] = "never"
    values[("sandbox_mode",)] = "workspace-write"
    for feature, (table, key, off) in COMPETING_FEATURES.items():
        if feature not in settings.native_tools:
            values[(table, key) if table else (key,)] = off
    if settings.trust_workspace:
        values[("projects", os.fspath(Path(settings.workspace).resolve()), "trust_level")] = "trusted"
    return values


def render_config(original: str, settings: AgentSettings, *, config_path: Path = Path(CONFIG_NAME),
                  parts: Sequence[str] = BOTH) -> str:
    """The projected config text for `original` (empty string: no file), with the ``parts`` of `settings` asked for.

    Raises `PeerwireEntryConflict` when the user's `[mcp_servers.peerwire]`
    launches something else (registration), `ProjectionError` when `original` is not TOML.
    """
    try:
        document = tomlkit.parse(original)
    except TOMLKitError as error:
        raise ProjectionError(f"{config_path}: not valid TOML: {error}") from error

    if REGISTRATION in parts:
        wanted = settings.peerwire.launch()
        name = settings.peerwire.name
        servers = document.get("mcp_servers")
        existing = servers.get(name) if servers is not None else None
        if existing is not None:
            entry = existing.unwrap() if hasattr(existing, "unwrap") else existing
            if not isinstance(entry, dict):
                entry = {"value": entry}
            # Only where it points matters; timeouts and tool approvals are ours to set.
            launch = {key: entry[key] for key in ("command", "args", "env", "url") if key in entry}
            if launch != wanted:
                raise PeerwireEntryConflict(config_path, entry, wanted, name)
    if LAUNCH in parts:
        for path, value in launch_values(settings).items():
            _put_path(document, path, value)
    if REGISTRATION in parts:
        _put_table(document, "mcp_servers", settings.peerwire.name, _peerwire_table(settings.peerwire))
    return tomlkit.dumps(document)


def _put_path(document: tomlkit.TOMLDocument, path: Key, value: Any) -> None:
    """Set one launch setting: a top-level key, ``[table].key``, a table ``[table.name]`` (a mapping), or
    ``[table.name].key``, which goes into the user's ``[table.name]`` when there is one."""
    if len(path) == 1:
        document[path[0]] = value
    elif len(path) == 2 and isinstance(value, Mapping):
        _put_table(document, path[0], path[1], _table(value))
    elif len(path) == 2:
        _put_value(document, path[0], path[1], value)
    elif len(path) == 3:
        parent = document.get(path[0])
        existing = parent.get(path[1]) if isinstance(parent, Table) else None
        if isinstance(existing, Table):
            existing[path[2]] = value
        else:
            _put_table(document, path[0], path[1], _table({path[2]: value}))
    else:
        raise ProjectionError(f"no way to project the setting {'.'.join(path)}")


def _peerwire_table(server: PeerwireServer) -> Table:
    launch = server.launch()
    entry = _table({"command": launch["command"], "args": launch["args"]})
    env = tomlkit.inline_table()
    env.update(launch["env"])
    entry["env"] = env
    entry["tool_timeout_sec"] = server.tool_timeout_sec
    if server.approve_tools is not None:
        tools = tomlkit.table(is_super_table=True)
        for tool in server.approve_tools:
            tools[tool] = _table({"approval_mode": "approve"})
        entry["tools"] = tools
    return entry


def _put_table(document: tomlkit.TOMLDocument, parent_name: str, key: str, table: Table) -> None:
    if parent_name not in document:
        # A super table renders only its children's [parent.key] headers.
        document[parent_name] = tomlkit.table(is_super_table=True)
    elif isinstance(document[parent_name], Table):
        # Added inside a user's table, ours may be followed by the user's
        # next table: end it with a blank line like the user's file has.
        last = table
        while nested := [value for value in last.values() if isinstance(value, Table)]:
            last = nested[-1]
        last.add(tomlkit.nl())
    parent = document[parent_name]
    if not isinstance(parent, Table):
        raise ProjectionError(f"`{parent_name}` in config.toml is not a table")
    parent[key] = table


def _put_value(document: tomlkit.TOMLDocument, table: str | None, key: str, value: Any) -> None:
    """Set a top-level ``key`` or ``[table].key``, keeping the rest of the user's table."""
    if table is None:
        document[key] = value
        return
    if table not in document:
        document[table] = tomlkit.table()
    if not isinstance(document[table], Table):
        raise ProjectionError(f"`{table}` in config.toml is not a table")
    document[table][key] = value


def _table(values: Mapping[str, Any]) -> Table:
    table = tomlkit.table()
    table.update(values)
    return table


# -- applying and undoing --------------------------------------------------------


class Projection:
    """The projection of `settings` into `codex_home`, as a context manager.

    `apply()` (or entering the context) first recovers an interrupted earlier
    projection, then backs up the original `config.toml` and writes the
    projected one; `restore()` (or leaving the context, also on error) puts
    the original back — byte for byte if the file was not touched during the
    run, key by key otherwise (see the module docs) — and then removes the
    sidecars. `recovered` tells whether an interrupted projection was undone
    first; `conflicts` lists what the last restore kept as the user left it.
    Nothing is written when `render_config` refuses (conflict, invalid TOML).
    """

    def __init__(self, codex_home: str | os.PathLike[str], settings: AgentSettings, *, parts: Sequence[str] = BOTH):
        self.codex_home = Path(codex_home)
        self.settings = settings
        self.parts = tuple(parts)
        # A launch projection lies over the run's registration, with sidecars of its own.
        self.launch_only = self.parts == (LAUNCH,)
        self.config_path = self.codex_home / CONFIG_NAME
        self.recovered = False
        self.conflicts: list[Conflict] = []
        self._applied = False

    def __enter__(self) -> Projection:
        return self.apply()

    def __exit__(self, *exc_info: object) -> None:
        self.restore()

    def apply(self) -> Projection:
        if self._applied:
            raise ProjectionError(f"{self.config_path}: projection already applied")
        self.codex_home.mkdir(parents=True, exist_ok=True)
        self.recovered = recover_interrupted(self.codex_home, launch_only=self.launch_only)
        original = self.config_path.read_bytes() if self.config_path.exists() else None
        try:
            original_text = original.decode("utf-8") if original is not None else ""
        except UnicodeDecodeError as error:
            raise ProjectionError(f"{self.config_path}: not UTF-8: {error}") from error
        projected = render_config(original_text, self.settings, config_path=self.config_path, parts=self.parts)

        backup, projected_copy, marker = _sidecars(self.config_path, launch=self.launch_only)
        if original is not None:
            _write_atomic(backup, original)
        _write_atomic(projected_copy, projected.encode("utf-8"))
        _write_atomic(
            marker,
            json.dumps(
                {
                    "pid": os.getpid(),
                    "process_started_at": psutil.Process().create_time(),
                    "projected_at": time.time(),
                    "original": "present" if original is not None else "absent",
                    "sha256": hashlib.sha256(original).hexdigest() if original is not None else None,
                }
            ).encode("utf-8"),
        )
        _write_atomic(self.config_path, projected.encode("utf-8"), like=self.config_path)
        self._applied = True
        return self

    def restore(self) -> list[Conflict]:
        """Undo `apply()`; returns the conflicts kept as the user left them (none when nothing is applied)."""
        if not self._applied:
            return []
        self.conflicts = _restore_from_sidecars(self.config_path, launch=self.launch_only)
        self._applied = False
        return self.conflicts


def recover_interrupted(codex_home: str | os.PathLike[str], *, launch_only: bool = False) -> bool:
    """Restore the original config of a projection whose process died before
    restoring it (key by key, as :meth:`Projection.restore`); returns whether there was one.

    An interrupted launch projection is undone first, then (unless
    ``launch_only``) the projection under it. Raises `ProjectionInUse` if the
    marker's process is still alive and `ProjectionError` if the backup is
    missing or does not match the marker (then nothing is touched: the files
    are left for a human to inspect).
    """
    config_path = Path(codex_home) / CONFIG_NAME
    recovered = False
    for launch in ((True,) if launch_only else (True, False)):
        marker = _sidecars(config_path, launch=launch)[-1]
        if not marker.exists():
            continue
        record = json.loads(marker.read_text(encoding="utf-8"))
        if _alive(record):
            raise ProjectionInUse(f"{config_path}: projected by live process {record.get('pid')}")
        _restore_from_sidecars(config_path, record, launch=launch)
        recovered = True
    return recovered


def _restore_from_sidecars(config_path: Path, record: Mapping[str, Any] | None = None, *,
                           launch: bool = False) -> list[Conflict]:
    backup, projected_copy, marker = _sidecars(config_path, launch=launch)
    if record is None:
        record = json.loads(marker.read_text(encoding="utf-8"))
    original: bytes | None = None
    if record.get("original") == "present":
        if not backup.exists():
            raise ProjectionError(
                f"{config_path}: projection marker present but backup {backup.name} is missing"
            )
        original = backup.read_bytes()
        if hashlib.sha256(original).hexdigest() != record.get("sha256"):
            raise ProjectionError(f"{config_path}: backup {backup.name} does not match the projection marker")
    projected = projected_copy.read_bytes() if projected_copy.exists() else None
    current = config_path.read_bytes() if config_path.exists() else None
    conflicts: list[Conflict] = []
    if projected is None or current == projected:
        # Untouched during the run (or projected before the copy was kept): the original, byte for byte.
        _put_back(config_path, original)
    else:
        conflicts = _merge_back(config_path, original, projected, current)
    backup.unlink(missing_ok=True)
    projected_copy.unlink(missing_ok=True)
    # Last: while the marker exists, a crash here is still recoverable.
    marker.unlink()
    return conflicts


def _put_back(config_path: Path, original: bytes | None) -> None:
    if original is not None:
        _write_atomic(config_path, original, like=config_path)
    else:
        config_path.unlink(missing_ok=True)


def _merge_back(config_path: Path, original: bytes | None, projected: bytes, current: bytes | None) -> list[Conflict]:
    """The user edited (or removed) the file during the run: undo only what they left alone."""
    try:
        if current is None:
            raise ValueError("config.toml was removed during the run")
        merged, conflicts = merge((original or b"").decode("utf-8"), projected.decode("utf-8"),
                                  current.decode("utf-8"))
    except (TOMLKitError, UnicodeDecodeError, ValueError) as error:
        # Nothing to merge into: the file stays as the user left it, the original beside it.
        kept = config_path.with_name(config_path.name + KEPT_ORIGINAL_SUFFIX)
        note = f"{config_path}: not valid TOML after the run ({error}); left as it is"
        if original is not None:
            _write_atomic(kept, original)
            note += f", the original before the run is in {kept.name}"
        return [Conflict("", None, None, None, note=note)]
    if original is None and not tomlkit.parse(merged):
        config_path.unlink()  # nothing of the user's is left in a file that did not exist before
    else:
        _write_atomic(config_path, merged.encode("utf-8"), like=config_path)
    return conflicts


def _sidecars(config_path: Path, *, launch: bool = False) -> tuple[Path, Path, Path]:
    """The backup of the original, the projected text, and the marker (removed last); a launch projection's own."""
    infix = LAUNCH_INFIX if launch else ""
    return tuple(config_path.with_name(config_path.name + suffix.replace(".peerwire", ".peerwire" + infix))
                 for suffix in (BACKUP_SUFFIX, PROJECTED_SUFFIX, MARKER_SUFFIX))  # type: ignore[return-value]


def _alive(record: Mapping[str, Any]) -> bool:
    pid = record.get("pid")
    if not isinstance(pid, int) or not psutil.pid_exists(pid):
        return False
    try:
        # Same pid but a later start time: the pid was reused by another process.
        return abs(psutil.Process(pid).create_time() - float(record.get("process_started_at", 0))) < 0.01
    except psutil.Error:
        return False


def _write_atomic(path: Path, data: bytes, *, like: Path | None = None) -> None:
    mode = like.stat().st_mode & 0o7777 if like is not None and like.exists() else None
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


MODEL_KEY_VALUE = "scripted-model-has-no-key"
"""The API key an agent hands the scripted model: a dummy, so a projected home holds no real credential."""


def agent_settings(workspace: Path, *, server: Sequence[str], server_env: Mapping[str, str],
                   provider: ScriptedProvider | ProxiedProvider | None, profile: str = profiles.MESSAGING,
                   approve_tools: bool = True, native_tools: Sequence[str] = (),
                   trust_workspace: bool = True) -> AgentSettings:
    """One agent's settings: the core's MCP server (``server`` with ``server_env``, acting as the agent,
    registered under its profile's name), exactly the profile's tools approved, Codex's competing features off
    (but ``native_tools``) and the model ``provider`` (``None``: the user's own, as set); the workspace trusted
    unless ``trust_workspace`` is False (the untrusted start-up diagnostic)."""
    return AgentSettings(
        workspace=workspace,
        peerwire=PeerwireServer(command=server[0], args=tuple(server[1:]), env=dict(server_env),
                                approve_tools=tuple(PROFILES[profile][1]) if approve_tools else None,
                                name=SERVER_NAMES[profile]),
        provider=provider,
        native_tools=tuple(native_tools),
        trust_workspace=trust_workspace,
    )


def project_agent(codex_home: Path, workspace: Path, *, server: Sequence[str], server_env: Mapping[str, str],
                  base_url: str | None, profile: str = profiles.MESSAGING, approve_tools: bool = True,
                  native_tools: Sequence[str] = (), trust_workspace: bool = True) -> Projection:
    """Project both parts of :func:`agent_settings` into a throwaway Codex home (the capability probe, in-process
    labs); ``base_url`` is the agent's scripted-model route, ``None`` keeps the user's own provider settings."""
    settings = agent_settings(workspace, server=server, server_env=server_env,
                              provider=ScriptedProvider(base_url=base_url) if base_url is not None else None,
                              profile=profile, approve_tools=approve_tools, native_tools=native_tools,
                              trust_workspace=trust_workspace)
    return Projection(codex_home, settings).apply()


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
    config = auth_home / CONFIG_NAME
    if config.is_file():
        shutil.copyfile(config, codex_home / CONFIG_NAME)
