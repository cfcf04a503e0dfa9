"""The contract suite's test modules; run them with ``python runner.py contract``.

Each test verifies exactly one requirement: a case's (``test_cases``) or the one
its ``@requirement`` names. They need the fixtures of
:mod:`harness.contract.fixtures`, which the plugin provides.
"""
