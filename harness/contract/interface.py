"""What the contract suite needs from an implementation under test: a provisioner.

This module is the whole interface: a :class:`Caller` value and the
:class:`Provisioner` protocol. It imports nothing but the standard library,
so an implementation's provisioner depends on it alone, never on peerwire's
core. ``contracts/README.md`` has a complete, runnable example.

A provisioner creates a home, starts the app that owns it, registers managed
callers and restarts the app on demand. The suite then launches the server
command once per caller, adding :meth:`Provisioner.caller_env` to its own
environment. For the collaboration profile it registers the tree's root
(``register(..., collab_root=True)``) on a provisioner of its own per case.
The suite names the class ``module:Class`` (``--provisioner``) and constructs
it with one argument, a fresh directory the provisioner owns.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Caller:
    """A managed caller: a registered agent and its session credential.

    ``token`` is opaque to the suite: it only ever hands the caller back to
    :meth:`Provisioner.caller_env`.
    """

    name: str
    agent_id: str
    token: str
    provider: str = "manual"
    aliases: tuple[str, ...] = ()


class Provisioner(Protocol):
    """The contract between the suite and an implementation under test."""

    def start(self) -> None:
        """Create a fresh home and start the app; return once it accepts calls."""

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = (),
                 collab_root: bool = False) -> Caller:
        """Register a managed caller and return its credential.

        Registering a name twice creates two distinct agents (that is how the
        suite provokes ``ambiguous_target``). A ``manual`` agent receives with
        ``receive_messages``, replies with ``reply`` and has no turn to
        interrupt. ``collab_root``: make it the root (``/root``) of this home's
        collaboration tree; only the suite's collab cases pass it, each on a
        provisioner of its own (one tree a home). An implementation without the
        collaboration profile need not accept it: run with ``--profiles messaging``.
        """

    def caller_env(self, caller: Caller) -> dict[str, str]:
        """Environment variables the server command needs to act as ``caller``."""

    def stranger_env(self) -> dict[str, str]:
        """Environment for a caller the app does not know: the right home, an unknown credential."""

    def restart(self) -> None:
        """Stop the app as a crash would (SIGKILL) and start it again on the same home."""

    def stop_app(self) -> None:
        """Stop the app gracefully but keep its home, so that callers find it unavailable."""

    def start_app(self) -> None:
        """Start the app again on the same home after :meth:`stop_app`."""

    def stop(self) -> None:
        """Stop the app gracefully and release everything."""


class OptionalHooks(Protocol):
    """What a provisioner may also offer; requirements that need a missing hook are reported not tested.

    ``freeze``/``thaw``: hang the app (alive, not answering: the reference
    stops it with SIGSTOP) and let it go on (``call:app-hung:*``).
    ``set_agent``: disable an agent or make it not sendable (``target:disabled:*``,
    ``target:not-sendable:*``); ``None`` leaves a flag as it is.
    """

    def freeze(self) -> None: ...

    def thaw(self) -> None: ...

    def set_agent(self, caller: Caller, *, enabled: bool | None = None, sendable: bool | None = None) -> None: ...


def load_class(spec: str) -> type:
    """The class ``module:Class`` names (how a provisioner or driver is given); ``ValueError`` saying what is
    wrong otherwise."""
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError("use module:Class")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ValueError(f"{module_name} has no {class_name}")
    return found
