"""The contract suite: conformance tests for the messaging tool contract.

It runs against any MCP messaging server launched as a command over stdio
(``--server-cmd``), provisioned through a :class:`harness.contract.interface.Provisioner`.
Requirements live in ``contracts/requirements.toml``, cases in
``contracts/cases/``; the suite's own Python tests in
:mod:`harness.contract.suite`. :mod:`harness.contract.plugin` wires it into
pytest and ``python runner.py contract`` runs it.
"""
