"""What the contract suite needs from an implementation under test: a provisioner.

This module is the whole interface: a :class:`Caller` value, the
:class:`Provisioner` protocol and its capability names. It imports nothing but
the standard library, so an implementation's provisioner depends on it alone,
never on peerwire's core. ``contracts/README.md`` has a complete, runnable
example.

The vocabulary assumes no design. A provisioner creates a home, makes the
implementation ready to take calls and registers managed callers; the suite
then launches the server command once per caller, adding
:meth:`Provisioner.caller_env` to its own environment. Whether the
implementation has an app or daemon, or its server processes open the store
themselves, is its own business: :meth:`Provisioner.crash` kills *whatever
writes* its state, with SIGKILL, mid-write, and brings it back; a design that
has something to make unavailable (an app, a daemon, a database server)
declares the capability ``unavailable`` and implements
:meth:`~Provisioner.make_unavailable` / :meth:`~Provisioner.make_available`.
For the collaboration profile the suite registers the tree's root
(``register(..., collab_root=True)``) on a provisioner of its own per case.
The suite names the class ``module:Class`` (``--provisioner``) and constructs
it with one argument, a fresh directory the provisioner owns.

A provisioner written for the first version of this interface (``restart``,
``stop_app``, ``start_app``) still works: :func:`adapt` maps it.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any, Protocol, Sequence

UNAVAILABLE = "unavailable"
"""Capability: the implementation has something that can be made unavailable (make_unavailable/make_available)."""
HANG = "hang"
"""Capability: the implementation has something that can hang, alive but silent (the hooks freeze/thaw)."""
AGENT_STATES = "agent-states"
"""Capability: agents can be disabled or made not sendable (the hook set_agent)."""
CAPABILITIES = (UNAVAILABLE, HANG, AGENT_STATES)
HOOKED: dict[str, tuple[str, ...]] = {HANG: ("freeze", "thaw"), AGENT_STATES: ("set_agent",)}
"""Capabilities a provisioner offers by having their hooks (:class:`OptionalHooks`), declared or not."""
DEFAULT_AGENT_KINDS = ("manual",)


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
    """The contract between the suite and an implementation under test.

    Class attributes, read before any instance exists:

    ``capabilities``: what the design has beyond the required methods, from
    :data:`CAPABILITIES` (default: none). ``agent_kinds``: the providers
    :meth:`register` accepts (default: ``("manual",)``); the suite checks every
    kind with turns (all but ``manual``) where a requirement concerns them, such
    as ``interrupt_agent`` on an agent with no active turn.
    """

    capabilities: frozenset[str]
    agent_kinds: tuple[str, ...]

    def start(self) -> None:
        """Create a fresh home and make the implementation ready; return once it accepts calls."""

    def register(self, name: str, *, provider: str = "manual", aliases: tuple[str, ...] = (),
                 collab_root: bool = False) -> Caller:
        """Register a managed caller and return its credential.

        Registering a name twice creates two distinct agents (that is how the
        suite provokes ``ambiguous_target``). A ``manual`` agent receives with
        ``receive_messages``, replies with ``reply`` and has no turn to
        interrupt; an agent of another kind in :attr:`agent_kinds` is registered
        with no live runtime, so it has no active turn. ``collab_root``: make it
        the root (``/root``) of this home's collaboration tree; only the suite's
        collab cases pass it, each on a provisioner of its own (one tree a
        home). An implementation without the collaboration profile need not
        accept it: run with ``--profiles messaging``.
        """

    def caller_env(self, caller: Caller) -> dict[str, str]:
        """Environment variables the server command needs to act as ``caller``."""

    def stranger_env(self) -> dict[str, str]:
        """Environment for a caller the implementation does not know: the right home, an unknown credential."""

    def crash(self, server_pids: Sequence[int]) -> None:
        """Crash the implementation as a power-preserving crash would, then bring it back on the same state.

        Kill with SIGKILL, no clean-up, every process that writes its state:
        its app or daemon if it has one, and those of ``server_pids`` (the
        server processes the suite launched for this home, one per session,
        each leading its own process group) that write, which is all of them
        in a design where each session opens the store itself. The suite calls
        this while calls are in flight: that is the point. Return once the
        implementation accepts calls again (start what must run, on the same
        home); the suite relaunches the server processes that died.
        """

    def make_unavailable(self) -> None:
        """Capability ``unavailable``: stop what callers depend on (gracefully), keeping the home, so that
        every operation fails promptly with ``app_unavailable``."""

    def make_available(self) -> None:
        """Capability ``unavailable``: undo :meth:`make_unavailable` on the same home."""

    def stop(self) -> None:
        """Stop everything gracefully and release the home."""


def capabilities_of(cls: type) -> frozenset[str]:
    """A provisioner class's capabilities: those it declares, those whose hooks it has (:data:`HOOKED`), and
    ``unavailable`` for a first-version class (``stop_app``/``start_app``) that declares none."""
    hooked = {name for name, hooks in HOOKED.items() if all(callable(getattr(cls, h, None)) for h in hooks)}
    declared = getattr(cls, "capabilities", None)
    if declared is not None:
        return frozenset(declared) | hooked
    legacy = all(callable(getattr(cls, name, None)) for name in ("stop_app", "start_app"))
    return frozenset({UNAVAILABLE} if legacy else set()) | hooked


def agent_kinds_of(cls: type) -> tuple[str, ...]:
    """The agent kinds (providers) a provisioner class registers."""
    return tuple(getattr(cls, "agent_kinds", None) or DEFAULT_AGENT_KINDS)


class _FirstVersion:
    """A provisioner of the first interface (``restart``, ``stop_app``, ``start_app``) in today's vocabulary.

    Its ``restart`` killed the app "as a crash would": that is its crash, and
    its server processes, which wrote nothing in that design, are left alone.
    """

    def __init__(self, inner: Any):
        self._inner = inner
        self.capabilities = capabilities_of(type(inner))
        self.agent_kinds = agent_kinds_of(type(inner))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def crash(self, server_pids: Sequence[int]) -> None:
        self._inner.restart()

    def make_unavailable(self) -> None:
        self._inner.stop_app()

    def make_available(self) -> None:
        self._inner.start_app()


def adapt(provisioner: Any) -> Provisioner:
    """``provisioner`` in today's vocabulary: itself when it has ``crash``, else a first-version adapter."""
    if callable(getattr(provisioner, "crash", None)):
        return provisioner
    if callable(getattr(provisioner, "restart", None)):
        return _FirstVersion(provisioner)
    raise TypeError(f"{type(provisioner).__name__} has neither crash(server_pids) nor restart(): see "
                    "harness.contract.interface.Provisioner")


class OptionalHooks(Protocol):
    """What a provisioner may also offer; a requirement that needs a missing hook is not selected, naming the
    capability it lacks (:data:`HOOKED`).

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
    wrong otherwise.

    A module that is not importable is looked for in the current directory last, as ``python -m`` would
    find it: peerwire installed as a tool (pipx, uvx) runs from an environment of its own.
    """
    module_name, sep, class_name = spec.partition(":")
    if not sep or not module_name or not class_name:
        raise ValueError("use module:Class")
    try:
        module = _import(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    found = getattr(module, class_name, None)
    if not isinstance(found, type):
        raise ValueError(f"{module_name} has no {class_name}")
    return found


def _import(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        # Only when the module itself is missing (a dependency it lacks is its own error), and only once.
        if exc.name != module_name.partition(".")[0] or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)  # last: the project's modules never shadow installed ones
        return importlib.import_module(module_name)
