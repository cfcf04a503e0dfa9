"""Provider adapters: how the app delivers into an agent's runtime.

``manual`` has no adapter: its agents read with ``receive_messages`` and answer
with ``reply``. Other providers plug in an object with this interface; the app
calls it only after the interaction is committed.
"""

from __future__ import annotations

from typing import Any, Protocol

from .errors import Code, PeerwireError
from .registry import KNOWN_PROVIDERS, AgentRow


class Provider(Protocol):
    name: str

    async def deliver(self, recipient: AgentRow, record: dict[str, Any]) -> None:
        """Make a committed information, reply or notice visible to ``recipient``."""

    async def dispatch(self, recipient: AgentRow) -> None:
        """Give the recipient's pending tasks a dispatch opportunity."""

    async def interrupt(self, target: AgentRow) -> dict[str, Any]:
        """Interrupt the target's active turn, or raise ``not_active``/``unsupported``."""


class ManualProvider:
    """No runtime to push into: records wait in the mailbox for receive."""

    name = "manual"

    async def deliver(self, recipient: AgentRow, record: dict[str, Any]) -> None:
        return None

    async def dispatch(self, recipient: AgentRow) -> None:
        return None

    async def interrupt(self, target: AgentRow) -> dict[str, Any]:
        raise PeerwireError(
            Code.UNSUPPORTED,
            f"agent {target.name!r} uses the manual provider, which has no turn to interrupt",
            {"target": target.ref, "previous_status": target.status},
        )


def require_known(provider: str, providers: dict[str, Provider]) -> Provider:
    """The adapter for ``provider``; ``unknown_provider`` when there is none."""
    adapter = providers.get(provider)
    if adapter is None:
        known = ", ".join(sorted(set(KNOWN_PROVIDERS) | set(providers)))
        raise PeerwireError(
            Code.UNKNOWN_PROVIDER,
            f"no delivery adapter for provider {provider!r} (known: {known}); nothing was sent",
            {"provider": provider},
        )
    return adapter
