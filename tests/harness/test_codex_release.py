"""Installing other Codex releases into the release cache, with the real npm and registry.

The failure cases use real npm too: a registry on a closed loopback port, a
release that does not exist, a PATH without npm. Each must end in one line
that says what to fix, and leave no half install behind.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from harness.codex.install import (CACHE_ENV, CodexInstallError, CodexReleaseError, cache_root, install_release,
                                   pinned_executable)
from tests.conftest import OLDER_RELEASE
from tests.patience import RUN_S

needs_npm = pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed")


def leftovers(cache: Path) -> list[str]:
    """What an install left in the cache besides lock files."""
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) if cache.exists() else []


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_cache_is_chosen_by_variable_then_xdg_then_home(tmp_path: Path) -> None:
    assert cache_root({CACHE_ENV: str(tmp_path / "c"), "XDG_CACHE_HOME": "/x"}) == tmp_path / "c"
    assert cache_root({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "peerwire" / "codex"
    assert cache_root({CACHE_ENV: "", "XDG_CACHE_HOME": ""}) == Path.home() / ".cache" / "peerwire" / "codex"


@pytest.mark.parametrize("version", ["latest", "^0.160.0", "0.160", "0.160.1 ", "../0.160.1"])
def test_only_one_exact_version_is_installed(tmp_path: Path, version: str) -> None:
    with pytest.raises(CodexInstallError, match="not one exact Codex version"):
        install_release(version, cache=tmp_path / "cache")
    assert leftovers(tmp_path / "cache") == []


def test_without_npm_the_error_says_so(tmp_path: Path) -> None:
    with pytest.raises(CodexReleaseError) as failure:
        install_release("0.160.1", cache=tmp_path / "cache", environ={"PATH": str(tmp_path / "empty")})
    assert "npm is not on PATH" in str(failure.value) and "\n" not in str(failure.value)
    assert leftovers(tmp_path / "cache") == []


@needs_npm
def test_an_unreachable_registry_is_named(tmp_path: Path) -> None:
    registry = f"http://127.0.0.1:{closed_port()}/"
    environ = {**os.environ, "npm_config_registry": registry, "npm_config_fetch_retries": "0",
               "npm_config_cache": str(tmp_path / "npm-cache")}  # nothing cached to fall back on
    with pytest.raises(CodexReleaseError) as failure:
        install_release("0.160.1", cache=tmp_path / "cache", environ=environ)
    message = str(failure.value)
    assert f"{registry} is unreachable" in message and "ECONNREFUSED" in message and "\n" not in message
    assert leftovers(tmp_path / "cache") == []


@needs_npm
def test_a_release_that_does_not_exist_is_named(tmp_path: Path) -> None:
    with pytest.raises(CodexReleaseError) as failure:
        install_release("0.0.1-not-a-release", cache=tmp_path / "cache")
    message = str(failure.value)
    assert "Codex 0.0.1-not-a-release is not a published release of @openai/codex" in message
    assert "\n" not in message
    assert leftovers(tmp_path / "cache") == []


@pytest.mark.skipif(sys.platform == "win32", reason="the stand-in executable is a POSIX shell script")
def test_a_cached_install_of_another_version_is_replaced(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    fake = pinned_executable(cache / "9.9.9")
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho codex-cli 1.0.0\n")
    fake.chmod(0o755)
    said: list[str] = []
    with pytest.raises(CodexReleaseError, match="npm is not on PATH"):
        install_release("9.9.9", cache=cache, environ={"PATH": str(tmp_path / "empty")}, progress=said.append)
    assert "is broken; reinstalling" in said[0]
    assert not (cache / "9.9.9").exists()


@pytest.mark.codex
def test_the_cached_release_is_reused_without_npm(older_codex, tmp_path: Path) -> None:
    said: list[str] = []
    again = install_release(OLDER_RELEASE, cache=older_codex.executable.parents[2].parent,
                            environ={"PATH": str(tmp_path / "empty")}, progress=said.append)
    assert again.executable == older_codex.executable and again.version == OLDER_RELEASE
    assert said == [f"Codex {OLDER_RELEASE}: cached in {older_codex.executable.parents[2]}"]
    assert "release cache" in again.source


@pytest.mark.codex
@needs_npm
def test_concurrent_installs_of_one_release_install_it_once(older_codex, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    said: list[str] = []
    found: list[object] = []

    def install() -> None:
        found.append(install_release(OLDER_RELEASE, cache=cache, progress=said.append))

    threads = [threading.Thread(target=install) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=RUN_S)
    assert len(found) == 2 and found[0] == found[1]
    assert sum("installing" in line for line in said) == 1 and sum("cached" in line for line in said) == 1
    assert leftovers(cache) == [OLDER_RELEASE]
    assert found[0].version == OLDER_RELEASE  # type: ignore[attr-defined]
    shutil.rmtree(cache)  # a second copy of a release is ~170 MB; pytest would keep it with the tmp dirs
