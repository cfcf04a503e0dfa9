"""The ACP provider: automatic delivery into agents that speak the Agent Client Protocol.

* :mod:`.client` — the wire: the ACP client of one agent process (``opencode
  acp``, ...) on the generic stdio peer, and the session Protocol a recorded
  exchange also speaks;
* :mod:`.adapter` — :class:`~.adapter.AcpProvider`, the app's provider: owners,
  prompts, cancellation, the declared limits (no inject, no steer);
* :mod:`.turns` — one prompt turn and what its answer means for its tasks (pure rules);
* :mod:`.opencode` — a private, offline home for OpenCode as an ACP agent.

What each agent kind can do is a table in ``contracts/capabilities.json``.
"""

from peerwire.acp.client import AcpClient, AcpSession, AgentExited, decline_agent_request, redact_credentials

__all__ = ["AcpClient", "AcpSession", "AgentExited", "decline_agent_request", "redact_credentials"]
