"""What the acceptance runner needs from a messaging core: the acceptance driver interface.

The runner drives a core through the contract suite's provisioner interface
(:class:`~harness.contract.interface.Provisioner`: a home, its app, registered
callers and their environment), extended with what live agents need: attach a
Codex-provider agent to a Codex home and a workspace (or an ACP agent by its
command, :meth:`AcceptanceDriver.attach_acp`), prompt it, await its
turn, call a tool as it, await the core's next change, and hand over the
evidence — the export (``contracts/export.schema.json``) and the core's own
artifacts. ``contracts/README.md`` describes it for another core's maintainer.

A driver class is named ``module:Class`` (``runner.py --driver``) and
constructed as ``Driver(root, env=..., spawn=...)``: ``root`` a fresh directory
it owns; ``env`` the environment of every process the core starts (the Codex CLI
first on PATH, the scripted model's key); ``spawn`` how to start the core's
long-running processes, so the run's process job owns them (``None``: a plain
subprocess); ``spawn(argv, env, stderr, stdin_pipe=True)`` gives a stdio child such
as ``codex app-server`` a stdin pipe, inside the job. :data:`REFERENCE` drives peerwire's reference core; a second,
minimal driver in the tests adapts the reference's command line.

This module imports nothing from a core.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from harness.contract.interface import Caller, Provisioner, load_class

REFERENCE = "harness.lab.reference:ReferenceDriver"
"""The driver of peerwire's reference core (the default)."""


class CoreRefused(Exception):
    """The core answered an operation or a tool call with an error: ``error`` is its error object
    (``code``, ``message``, optional ``details``), as a tool result would carry it."""

    def __init__(self, error: Mapping[str, Any]):
        self.error = dict(error)
        self.code = str(self.error.get("code"))
        super().__init__(f"{self.code}: {self.error.get('message', '')}")


class AcceptanceDriver(Provisioner, Protocol):
    """A provisioner that also owns live agents (see the module docs)."""

    def server_command(self, profile: str) -> list[str]:
        """The MCP server a Codex agent launches for tool ``profile`` (``messaging`` or ``collab``); it runs
        with :meth:`caller_env` of the agent's caller added to its environment."""

    def attach(self, caller: Caller, *, codex: str, codex_home: Path, workspace: Path, env: Mapping[str, str],
               resume: bool = False, capabilities: Sequence[str] | None = None,
               listen: Path | None = None) -> dict[str, Any]:
        """Give a ``codex``-provider caller a live owner: the core starts ``codex app-server`` with
        ``CODEX_HOME=codex_home`` in ``workspace`` (``env`` added), opening a thread, or with ``resume``
        resuming the caller's known one as a new generation. Returns ``generation``, ``thread_id``, ``pid``.

        ``capabilities``: the delivery capabilities the runner's live probe proved for this Codex
        (``peerwire/codex/capabilities.py`` names them); the owner must not use others. ``None``: not probed.

        ``listen`` (mode ``attached_tui``): the app-server also listens on this Unix socket for a Codex TUI;
        the owner opens no thread but adopts the one the TUI starts, and ``thread_id`` is None until then
        (the runner watches :meth:`owner` for it). Only called when the probe enabled ``attached_tui``."""

    def attach_acp(self, caller: Caller, *, command: Sequence[str], cwd: Path, env: Mapping[str, str | None],
                   resume: bool = False) -> dict[str, Any]:
        """Give an ``acp``-provider caller a live owner: the core starts the agent's ACP ``command`` in ``cwd``
        (``env`` overlays the core's environment; a ``None`` value removes a variable) and opens a session that
        hands it the core's MCP server, acting as the caller; ``resume`` loads the caller's known session as a
        new generation. Returns ``generation``, ``thread_id`` (the ACP session id), ``pid``. Optional: the runner
        asks for it only when a run starts an ACP agent (``runner.py --agents``), and says so when a driver
        lacks it. Starting an ACP agent may take a while (a cold OpenCode migrates its database): wait long."""

    def detach(self, caller: Caller) -> dict[str, Any]:
        """Stop the caller's owner, whichever its provider; returns at least its ``generation``. Turns it had in
        flight become uncertain."""

    def owner(self, caller: Caller) -> dict[str, Any] | None:
        """The caller's live owner (``generation``, ``thread_id``, ``active_turn``, ``pid``), ``None`` without one."""

    def prompt(self, caller: Caller, text: str) -> str:
        """An operator's message to an idle owner: a new turn; returns its turn id."""

    def await_turn(self, caller: Caller, turn_id: str, timeout_s: float) -> dict[str, Any]:
        """Wait until the turn completed; returns ``turn_id`` and ``status`` (completed, interrupted, failed)."""

    def call_tool(self, caller: Caller, tool: str, arguments: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
        """Call a messaging tool as ``caller`` (as its MCP server would); its result, or :class:`CoreRefused`
        with the tool's error."""

    def await_change(self, mark: Any, timeout_s: float) -> Any:
        """The core's change mark once it differs from ``mark`` (``None``: at once), or after ``timeout_s``.

        Observers re-read what they watch after each return; it is a signal, never a diff."""

    def export(self) -> dict[str, Any] | None:
        """The evidence export (``contracts/export.schema.json``), while the core runs and after it stopped;
        ``None`` when no core ever ran here."""

    def collect(self, destination: Path) -> None:
        """Copy the core's own artifacts into a scenario's artifacts folder: each owner generation's
        app-server transcript as ``appserver/<agent>.g<generation>.appserver.jsonl`` (and its
        ``.stderr.log``), each ACP owner generation's transcript as ``acp/<agent>.g<generation>.acp.jsonl``
        (and its ``.stderr.log``), and the app's log as ``core/app.log``. Missing ones are skipped."""


def load_driver(spec: str) -> type[AcceptanceDriver]:
    """The driver class ``module:Class`` names; ``ValueError`` saying what is wrong otherwise."""
    try:
        return load_class(spec)
    except ValueError as error:
        raise ValueError(f"driver {spec!r}: {error}") from None
