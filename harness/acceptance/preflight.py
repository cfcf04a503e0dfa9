"""What a run needs before any agent starts, checked all at once: :func:`preflight`.

A real-provider run costs money and time, and a missing piece found by the
first agent (no credential, no model, tools refused under approval policy
``never``) fails every scenario the same unclear way. The preflight names
every missing piece, one line each, so a user fixes them in one go:

* the auth home: :data:`~harness.acceptance.options.AUTH_HOME_ENV` names an
  existing directory;
* ``auth.json`` in it;
* the model: its ``config.toml`` names one (``model``), and the provider that
  model runs on is defined when it is not a built-in one;
* the route: the run's recording proxy can stand in front of that provider
  (its ``base_url`` is known and Codex lets a run move it);
* the tool approvals: the projection approves exactly the core's tools (a run
  without them has every tool call refused);
* the Codex version: the CLI found is the one expected.

Nothing here reads the credential's content or writes anything.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from harness.codex.launch import RouteError, provider_route
from harness.names import AUTH_FILE, CONFIG_NAME

BUILTIN_PROVIDERS = ("openai", "oss", "ollama", "lmstudio")
"""Provider ids Codex defines itself; any other ``model_provider`` needs its ``[model_providers.<id>]``."""


def preflight(*, provider: str, auth_home_env: str, environ: Mapping[str, str], approve_tools: bool,
              codex_problem: str | None) -> list[str]:
    """Every problem that would stop the run, one line each (empty: ready).

    ``codex_problem``: why the Codex CLI could not be used (not found, another version), or None."""
    problems: list[str] = []
    if provider != "scripted":
        problems += _auth_home(auth_home_env, environ)
    if not approve_tools:
        problems.append("tool approvals: off (--no-approve-tools): the agents run under approval_policy "
                        "\"never\", so Codex would refuse every messaging tool call; drop --no-approve-tools")
    if codex_problem:
        problems.append(f"Codex version: {codex_problem}")
    return problems


def _auth_home(variable: str, environ: Mapping[str, str]) -> list[str]:
    value = environ.get(variable)
    if not value:
        return [f"auth home: {variable} is not set; name an authorized Codex home (one where `codex login` "
                f"wrote {AUTH_FILE}); it is copied into private agent homes only, never changed"]
    home = Path(value).expanduser()
    if not home.is_dir():
        return [f"auth home: {variable}={value} is not a directory"]
    problems = []
    if not (home / AUTH_FILE).is_file():
        problems.append(f"{AUTH_FILE}: {home / AUTH_FILE} is missing; run `CODEX_HOME={home} codex login` "
                        f"(or put an API key login there)")
    config_path = home / CONFIG_NAME
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        return [*problems, f"model: {config_path} cannot be read: {error}"]
    model = config.get("model")
    if not isinstance(model, str) or not model:
        problems.append(f"model: {config_path} names no model; set model = \"...\" (and model_reasoning_effort to "
                        f"bound the cost)")
    provider_id = config.get("model_provider", "openai")
    if provider_id not in BUILTIN_PROVIDERS and provider_id not in (config.get("model_providers") or {}):
        problems.append(f"model: {config_path} uses model_provider {provider_id!r} but defines no "
                        f"[model_providers.{provider_id}]")
        return problems
    try:
        provider_route(home)
    except RouteError as error:
        problems.append(f"provider: {error}")
    return problems
