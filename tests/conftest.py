"""Fixtures shared across test packages: the pinned protocol schema and an older Codex release; the contract suite's
marker; at most two heavy tests at a time (:mod:`tests.heavy`)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from harness.codex.install import CodexInstallation, install_release, locate_codex
from harness.codex.protocol import ProtocolSchema
from harness.contract.schedule import MARKER_HELP

from . import heavy, order

OLDER_RELEASE = "0.120.0"
"""The older Codex the version tests install from npm: the last release without ``thread/inject_items``,
so it has some delivery capabilities and lacks one."""


settings.register_profile("machine-speed-free", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("machine-speed-free")
"""Hypothesis judges no example by how fast the machine made it: no per-example deadline, and no health check
that fails a test because generating its inputs was slow (on a busy machine both fail healthy tests)."""


def pytest_configure(config: pytest.Config) -> None:
    # tests/contract/test_reference_suite.py collects the contract suite's own tests, markers included.
    config.addinivalue_line("markers", MARKER_HELP)
    config.addinivalue_line("markers", heavy.MARKER)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--store-durations", action="store_true",
                     help="record how long each test took into tests/durations.json, the order's source (tests/order.py)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist, longest first, heavy tests spread out (:mod:`tests.order`); one process runs them in
    their collected order (the order matters only to how soon several workers end together)."""
    if not hasattr(config, "workerinput"):
        return
    durations = order.recorded()

    def expected_s(item: pytest.Item) -> float:
        if item.nodeid in durations:
            return durations[item.nodeid]
        long = any(item.get_closest_marker(m) for m in order.LONG_MARKERS)
        return order.GUESS_LONG if long else order.GUESS_SHORT

    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    items[:] = order.schedule(items, expected_s, lambda item: item.get_closest_marker("heavy") is not None,
                              slots=heavy.AT_ONCE, span=order.window(workers))


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.passed or report.when == "call":
        _measured[report.nodeid] = _measured.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if session.config.getoption("--store-durations") and not hasattr(session.config, "workerinput"):
        order.store(order.DURATIONS, _measured)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    if item.get_closest_marker("heavy") is None:
        yield
        return
    worker = int(str(getattr(item.config, "workerinput", {}).get("workerid", "gw0")).removeprefix("gw") or 0)
    with heavy.slot(heavy.slots_folder(item.config), worker):
        yield


@pytest.fixture(scope="session")
def pinned_protocol(tmp_path_factory: pytest.TempPathFactory) -> ProtocolSchema:
    """The app-server schema the pinned Codex generates."""
    return ProtocolSchema.generate(locate_codex(), tmp_path_factory.mktemp("pinned-protocol"))


@pytest.fixture(scope="session")
def older_codex() -> CodexInstallation:
    """:data:`OLDER_RELEASE`, installed into the release cache (``~/.cache/peerwire/codex``) or reused from it."""
    return install_release(OLDER_RELEASE)
