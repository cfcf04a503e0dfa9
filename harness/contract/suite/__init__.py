"""The contract suite's test modules; run them with ``python runner.py contract``.

Each test verifies exactly one requirement: a case's (``test_cases``) or the one
its ``@requirement`` names. They need the fixtures of
:mod:`harness.contract.fixtures`, which the plugin provides.

Tests share a home, each with agents of its own (``servers.caller()``, every
name unique), and ``servers.start()`` / ``protocol.start()`` with no caller is a
session shared with other tests (:mod:`harness.contract.isolation`). A test that
changes or may end its session (an initialize variant, stdin closed, hostile
input) says so on its requirement in ``contracts/requirements.toml`` with
``needs = ["fresh-server"]``; one that crashes the implementation, makes it
unavailable or spoils its home with ``needs = ["fresh-home"]``.
"""
