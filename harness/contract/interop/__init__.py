"""Interoperability: the official MCP clients against the server under test.

A strict client validates every ``structuredContent`` it receives, tool errors
included, against the tool's advertised ``outputSchema``; a server whose
schemas describe only successes is unusable for it at the first error. So
the suite runs the official clients themselves, with one :class:`~.plan.Plan`
of calls (every tool, successes and each error the contract lets an inert
client provoke) that :mod:`~.clients` hands to each of them: the MCP Python
SDK, the MCP TypeScript SDK (``@modelcontextprotocol/sdk``) and the MCP
Inspector's CLI (``@modelcontextprotocol/inspector-cli``), both pinned in
``package.json`` and installed by ``npm ci``.
"""
