"""The ``peerwire`` command line: the same app path and receipts as MCP.

Every command takes ``--json``. A failure exits non-zero and prints the same
error code an MCP client would see (``code: message`` on stderr, or the error
object with ``--json``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Sequence

from . import profiles
from .control import ControlClient
from .errors import EXIT_STATUS, Code, PeerwireError
from .home import HOME_ENV, SESSION_ENV, Home, unusable
from .limits import DEFAULT_WAIT_TIMEOUT_MS

EXIT_ERROR = 1
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--home", help=f"the core's home directory (default ${HOME_ENV})")
    common.add_argument("--json", action="store_true", help="print machine-readable JSON")
    caller = argparse.ArgumentParser(add_help=False, parents=[common])
    caller.add_argument("--session", help=f"the caller's session token (default ${SESSION_ENV})")

    p = argparse.ArgumentParser(prog="peerwire", description="Agent-to-agent messaging core")
    sub = p.add_subparsers(dest="command", required=True)

    app = sub.add_parser("app", parents=[common], help="run the app that owns a home (foreground)")
    app.add_argument("--accept-store-loss", action="store_true",
                     help="serve a store that is missing, another home's, or holds fewer records than this home "
                          "receipted (the loss is recorded and `status` lists it); without it such a store is "
                          "refused (store_damaged)")

    home = sub.add_parser("home", help="manage a home").add_subparsers(dest="home_command", required=True)
    home.add_parser("init", parents=[common], help="create a home and its store")

    agent = sub.add_parser("agent", help="the agent registry").add_subparsers(dest="agent_command", required=True)
    reg = agent.add_parser("register", parents=[common], help="register an agent; prints its session token once")
    reg.add_argument("name")
    reg.add_argument("--provider", default="manual", help="manual (default), codex or acp")
    reg.add_argument("--alias", action="append", default=[], dest="aliases")
    reg.add_argument("--provider-session", dest="provider_session_id",
                     help="the provider's session id (registering it again is a re-registration)")
    reg.add_argument("--collab-root", action="store_true",
                     help="make this agent the root (/root) of the collaboration tree (provider codex only: "
                          "the collaboration tools are Codex's native collaboration)")
    agent.add_parser("list", parents=[common], help="every registered agent")
    for verb, enable in (("enable", True), ("disable", False)):
        sp = agent.add_parser(verb, parents=[common], help=f"{verb} an agent by agent_id")
        sp.add_argument("agent_id")
        sp.set_defaults(enabled=enable)

    att = agent.add_parser("attach", parents=[common],
                           help="start a codex agent's owner (codex app-server) so tasks reach it automatically")
    att.add_argument("agent", help="name or agent_id of an agent registered with --provider codex")
    att.add_argument("--codex-home", required=True, help="the agent's CODEX_HOME (its config runs peerwire mcp serve)")
    att.add_argument("--cwd", required=True, help="the agent's workspace")
    att.add_argument("--codex", default="codex", help="the codex executable (default: codex on PATH)")
    att.add_argument("--resume", action="store_true", help="resume the agent's known thread (a new generation)")
    att.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="set in the app-server's environment (repeatable), e.g. its model provider's key variable")
    att.add_argument("--capabilities", metavar="NAME,...",
                     help="use only these delivery capabilities, comma-separated ('' for none; default: what the "
                          "Codex version has), e.g. those a capability probe proved")
    att.add_argument("--listen", metavar="SOCKET",
                     help="also listen on this Unix socket for a Codex TUI (codex --remote unix://SOCKET); the owner "
                          "adopts the thread the TUI starts and delivers nothing before")
    acp = agent.add_parser("attach-acp", parents=[common],
                           help="start an ACP agent (e.g. opencode acp) as the owner of an agent registered with "
                                "--provider acp, so tasks reach it automatically")
    acp.add_argument("agent", help="name or agent_id of an agent registered with --provider acp")
    acp.add_argument("--cwd", required=True, help="the agent's workspace")
    acp.add_argument("--session-token-env", default=SESSION_ENV, metavar="NAME",
                     help="the variable holding the agent's session token, given to its MCP server "
                          "(default %(default)s)")
    acp.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                     help="set in the agent's environment (repeatable): its private home, its model key variable")
    acp.add_argument("--unset", action="append", default=[], metavar="NAME",
                     help="remove from the agent's environment (repeatable)")
    acp.add_argument("--resume", action="store_true", help="load the agent's known session (a new generation)")
    acp.add_argument("acp_command", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                     help="the agent's ACP command, after --, e.g. -- opencode acp")
    det = agent.add_parser("detach", parents=[common], help="stop a codex or ACP agent's owner")
    det.add_argument("agent")
    agent.add_parser("owners", parents=[common], help="attached codex owners and their active turns")
    awt = agent.add_parser("await-turn", parents=[common], help="wait until one turn of an attached agent completed")
    awt.add_argument("agent")
    awt.add_argument("turn_id")
    awt.add_argument("--wait", type=float, default=DEFAULT_WAIT_TIMEOUT_MS / 1000, metavar="SECONDS",
                     help="how long to wait (default %(default)s)")
    rev = agent.add_parser("revoke", parents=[common], help="revoke every session token of an agent")
    rev.add_argument("agent")

    prompt = sub.add_parser("prompt", parents=[common], help="an operator's message: a new turn on an idle codex agent")
    prompt.add_argument("agent")
    body = prompt.add_mutually_exclusive_group(required=True)
    body.add_argument("--text")
    body.add_argument("--stdin", action="store_true")
    prompt.add_argument("--wait", type=float, metavar="SECONDS", help="wait this long for the turn to complete")

    for name, help_text in (("send", "send information"), ("task", "assign a task (followup_task)")):
        sp = sub.add_parser(name, parents=[caller], help=help_text)
        sp.add_argument("--to", "--target", required=True, dest="target", help="name, alias or agent_id")
        sp.add_argument("--strict", action="store_true",
                        help="fail (target_not_sendable) instead of falling back to an enabled agent "
                             "that is not sendable")
        body = sp.add_mutually_exclusive_group(required=True)
        body.add_argument("--body")
        body.add_argument("--stdin", action="store_true", help="read the body from standard input")
        sp.add_argument("--run-id")
        _idempotency_key(sp)

    msg = sub.add_parser("message", help="read the caller's mailbox").add_subparsers(dest="message_command",
                                                                                    required=True)
    rcv = msg.add_parser("receive", parents=[caller], help="receive a batch (receive_messages)")
    rcv.add_argument("--cursor")
    rcv.add_argument("--ack", dest="ack_cursor")
    rcv.add_argument("--limit", type=int)
    rcv.add_argument("--timeout-ms", type=int)
    wait = msg.add_parser("wait", parents=[caller], help="wait for mailbox activity (wait_agent)")
    wait.add_argument("--timeout-ms", type=int)

    rep = sub.add_parser("reply", parents=[caller], help="reply to a task you received")
    rep.add_argument("request_id")
    rep.add_argument("--status", required=True, choices=["done", "blocked", "failed"])
    _idempotency_key(rep)
    body = rep.add_mutually_exclusive_group(required=True)
    body.add_argument("--message")
    body.add_argument("--stdin", action="store_true")

    intr = sub.add_parser("interrupt", parents=[caller], help="interrupt an agent's active turn")
    intr.add_argument("target")

    peers = sub.add_parser("peers", parents=[caller], help="list_agents as the caller sees it")
    peers.add_argument("--prefix", dest="name_prefix")

    changes = sub.add_parser("await-change", parents=[common],
                             help="wait until the core commits a change after MARK; prints the new mark")
    changes.add_argument("--mark", type=int, help="the mark an earlier call printed (none: answer at once)")
    changes.add_argument("--wait", type=float, default=0.0, metavar="SECONDS", help="how long to wait (default 0)")

    trace = sub.add_parser("trace", parents=[common], help="every delivery stage of one interaction or request")
    trace.add_argument("id")

    exp = sub.add_parser("export", parents=[common],
                         help="the home's evidence export (contracts/export.schema.json): from its running app, "
                              "or read-only from a stopped home")
    exp.add_argument("--out", metavar="FILE", help="write the export to FILE (mode 0600) instead of stdout")

    mcp = sub.add_parser("mcp", help="the MCP server").add_subparsers(dest="mcp_command", required=True)
    serve = mcp.add_parser("serve", help="serve the messaging tools on stdio (reads PEERWIRE_HOME, PEERWIRE_SESSION_ID)")
    serve.add_argument("--profile", choices=profiles.ALL, default=profiles.MESSAGING,
                       help="messaging: the peer contract (default); collab: the parent/child tree")
    return p


def _idempotency_key(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--idempotency-key", metavar="KEY",
                        help="make a retry safe: the same caller with the same key gets the first call's receipt "
                             "and nothing is admitted again (the MCP callId of a CLI call)")


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        try:
            return _run(args)
        except OSError as exc:  # a file of the home that the checks could not foresee
            raise unusable(exc) from None
    except PeerwireError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": exc.to_dict()}, ensure_ascii=False))
        else:
            hint = f" (peerwire trace {exc.details['entry_id']})" if exc.details.get("entry_id") else ""
            print(f"peerwire: {exc.code.value}: {exc.message}{hint}", file=sys.stderr)
        return EXIT_STATUS.get(exc.code, EXIT_ERROR)
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace) -> int:
    if args.command == "mcp":
        from .mcp_server import serve_stdio

        return serve_stdio(args.profile)
    if args.command == "app":
        from .app import run_app

        return run_app(Home.from_env(args.home), accept_store_loss=args.accept_store_loss)
    home = Home.from_env(args.home)
    if args.command == "home":
        home.prepare()
        existed = home.exists()
        store = home.open_store()
        out: dict[str, Any] = {"home": str(home.path), "created": not existed,
                               "schema_version": store.database.schema_version, "node_id": store.database.node_id}
        store.close()
        return _print(args, out, f"home {'created' if not existed else 'ready'}: {home.path}")

    admin = ControlClient(home)
    if args.command == "export":
        return _export(admin, home, args.out)
    if args.command == "agent":
        if args.agent_command == "register":
            out = admin.call("register_agent", {"name": args.name, "provider": args.provider,
                                                "aliases": args.aliases, "source": "cli",
                                                "collab_root": args.collab_root,
                                                "provider_session_id": args.provider_session_id})
            if out.get("warning"):
                print(f"peerwire: warning: {out['warning']}", file=sys.stderr)
            text = (f"registered {out['agent']['name']} ({out['agent']['agent_id']})\n"
                    f"session token (shown once; use as {SESSION_ENV}):\n{out['session_token']}")
            return _print(args, out, text)
        if args.agent_command == "list":
            out = admin.call("agents")
            return _print(args, out, _agent_table(out["agents"]))
        if args.agent_command == "attach":
            out = admin.call("attach_codex", {"agent_id": _agent_id(admin, args.agent), "codex": args.codex,
                                              "codex_home": os.path.abspath(args.codex_home),
                                              "cwd": os.path.abspath(args.cwd), "resume": args.resume,
                                              "env": _assignments(args.env),
                                              **({"capabilities": [c for c in args.capabilities.split(",") if c]}
                                                 if args.capabilities is not None else {}),
                                              **({"listen": os.path.abspath(args.listen)} if args.listen else {})},
                             wait_s=60)
            return _print(args, out, f"attached {out['name']}: generation {out['generation']}, " + (
                f"thread {out['thread_id']}" if out.get("thread_id") else
                f"awaiting the thread a Codex TUI starts on unix://{out.get('listen')}"))
        if args.agent_command == "attach-acp":
            command = args.acp_command[1:] if args.acp_command[:1] == ["--"] else args.acp_command
            token = os.environ.get(args.session_token_env)
            if not command or not token:
                raise PeerwireError(Code.INVALID_ARGUMENT, "attach-acp needs the agent's ACP command after -- and "
                                    f"its session token in ${args.session_token_env}")
            env: dict[str, str | None] = {**_assignments(args.env), **{name: None for name in args.unset}}
            out = admin.call("attach_acp", {"agent_id": _agent_id(admin, args.agent), "command": command,
                                            "cwd": os.path.abspath(args.cwd), "session_token": token, "env": env,
                                            "resume": args.resume}, wait_s=90)
            return _print(args, out, f"attached {out['name']}: generation {out['generation']}, "
                                     f"ACP session {out['session_id']}")
        if args.agent_command == "detach":
            agent_id = _agent_id(admin, args.agent)
            provider = next((a["provider"] for a in admin.call("agents")["agents"] if a["agent_id"] == agent_id), None)
            out = admin.call("detach_acp" if provider == "acp" else "detach_codex", {"agent_id": agent_id}, wait_s=30)
            return _print(args, out, f"detached {out['name']} (generation {out['generation']})")
        if args.agent_command == "revoke":
            out = admin.call("revoke_sessions", {"agent_id": _agent_id(admin, args.agent)})
            return _print(args, out, f"revoked {out['revoked']} session token(s) of {out['agent']['name']}")
        if args.agent_command == "await-turn":
            out = _await_turn(admin, _agent_id(admin, args.agent), args.turn_id, args.wait)
            return _print(args, out, f"turn {out['turn_id']} {out['status']}")
        if args.agent_command == "owners":
            out = admin.call("owners")
            return _print(args, out, "\n".join(f"{o['name']:<20} generation {o['generation']} thread {o['thread_id']} "
                                               f"active turn {o['active_turn'] or '-'}" for o in out["owners"])
                          or "(no owners)")
        out = admin.call("set_agent", {"agent_id": args.agent_id, "enabled": args.enabled})
        return _print(args, out, f"{out['agent']['name']}: enabled={out['agent']['enabled']}")
    if args.command == "prompt":
        text = sys.stdin.read() if args.stdin else args.text
        agent_id = _agent_id(admin, args.agent)
        out = admin.call("prompt", {"agent_id": agent_id, "text": text}, wait_s=30)
        if args.wait:
            out = _await_turn(admin, agent_id, out["turn_id"], args.wait)
            return _print(args, out, f"turn {out['turn_id']} {out['status']}")
        return _print(args, out, f"turn {out['turn_id']} started")
    if args.command == "await-change":
        out = admin.call("await_change", {"mark": args.mark, "timeout_ms": int(args.wait * 1000)}, wait_s=args.wait)
        return _print(args, out, f"mark {out['mark']}{' (timed out)' if out['timed_out'] else ''}")
    if args.command == "trace":
        out = admin.call("trace", {"id": args.id})
        return _print(args, out, _trace_text(out))

    token = args.session or os.environ.get(SESSION_ENV)
    client = ControlClient(home, token)
    meta: dict[str, Any] = {"via": "cli"}
    if getattr(args, "idempotency_key", None):
        meta["call_id"] = args.idempotency_key
    if args.command in ("send", "task"):
        body = sys.stdin.read() if args.stdin else args.body
        if getattr(args, "run_id", None):
            meta["run_id"] = args.run_id
        if args.strict:
            meta["strict"] = True
        op = "send_message" if args.command == "send" else "followup_task"
        out = client.call(op, {"target": args.target, "message": body}, meta=meta)
        text = f"{out['kind']} {out['interaction_id']} admitted for {out['recipient']['name']}"
        if out.get("request_id"):
            text += f" (request {out['request_id']})"
        return _print(args, out, text)
    if args.command == "message":
        if args.message_command == "receive":
            call = {k: v for k, v in (("cursor", args.cursor), ("ack_cursor", args.ack_cursor),
                                      ("limit", args.limit), ("timeout_ms", args.timeout_ms)) if v is not None}
            out = client.call("receive_messages", call, meta=meta, wait_s=(args.timeout_ms or 0) / 1000)
            return _print(args, out, _records_text(out))
        call = {"timeout_ms": args.timeout_ms} if args.timeout_ms is not None else {}
        wait_s = (args.timeout_ms if args.timeout_ms is not None else DEFAULT_WAIT_TIMEOUT_MS) / 1000
        out = client.call("wait_agent", call, meta=meta, wait_s=wait_s)
        return _print(args, out, f"woke={out['woke']} reason={out['wake_reason']}")
    if args.command == "reply":
        body = sys.stdin.read() if args.stdin else args.message
        out = client.call("reply", {"request_id": args.request_id, "status": args.status, "message": body},
                          meta=meta)
        return _print(args, out, f"reply {out['interaction_id']} admitted for {out['recipient']['name']}")
    if args.command == "interrupt":
        out = client.call("interrupt_agent", {"target": args.target}, meta=meta)
        return _print(args, out, f"interrupt requested (was {out['previous_status']})")
    if args.command == "peers":
        call = {"name_prefix": args.name_prefix} if args.name_prefix else {}
        out = client.call("list_agents", call, meta=meta)
        return _print(args, out, _agent_table(out["agents"]))
    raise PeerwireError(Code.INVALID_ARGUMENT, f"unknown command {args.command}")


def _await_turn(admin: ControlClient, agent_id: str, turn_id: str, wait_s: float) -> dict:
    return admin.call("await_turn", {"agent_id": agent_id, "turn_id": turn_id, "timeout_ms": int(wait_s * 1000)},
                      wait_s=wait_s)


def _assignments(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise PeerwireError(Code.INVALID_ARGUMENT, f"--env takes NAME=VALUE, not {pair!r}")
        out[name] = value
    return out


def _export(admin: ControlClient, home: Home, out: str | None) -> int:
    """The running app's export when it answers; a stopped home is read from its store, read-only."""
    from . import export

    try:
        document = admin.call("export", wait_s=30)
    except PeerwireError as error:
        if error.code is not Code.APP_UNAVAILABLE:
            raise
        document = export.of_home(home)
    text = json.dumps(document, ensure_ascii=False, indent=1) + "\n"
    if out is None:
        sys.stdout.write(text)
        return 0
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


def _agent_id(admin: ControlClient, ident: str) -> str:
    """An agent_id from a name or agent_id (operator commands; the newest row of a name)."""
    rows = [a for a in admin.call("agents")["agents"] if ident in (a["agent_id"], a["name"], a.get("path"))]
    if not rows:
        raise PeerwireError(Code.UNKNOWN_TARGET, f"no agent named {ident!r}")
    if len({a["identity_key"] for a in rows}) > 1:
        raise PeerwireError(Code.AMBIGUOUS_TARGET, f"{ident!r} names several agents; use an agent_id",
                            {"candidates": [a["agent_id"] for a in rows]})
    return rows[-1]["agent_id"]


def _print(args: argparse.Namespace, out: Any, text: str) -> int:
    print(json.dumps(out, ensure_ascii=False, indent=2) if args.json else text)
    return 0


def _agent_table(agents: list[dict]) -> str:
    if not agents:
        return "(no agents)"
    rows = [f"{a['name']:<20} {a['agent_id']}  {a['provider']:<7} {a['status']:<10} "
            f"{'sendable' if a['sendable'] else 'not sendable'}" for a in agents]
    return "\n".join(rows)


def _records_text(out: dict) -> str:
    lines = []
    for r in out["records"]:
        head = f"[{r['seq']}] {r['kind']} from {r['sender']['name']} ({r['record_id']})"
        if r.get("request_id"):
            head += f" request {r['request_id']}"
        if r.get("status"):
            head += f" status {r['status']}"
        lines += [head, r["body"], ""]
    lines.append(f"cursor: {out['cursor']}" + ("  (more)" if out["has_more"] else ""))
    if out.get("claims"):
        lines.append("new work: " + ", ".join(f"{c['request_id']} (claim {c['claim_id']})" for c in out["claims"]))
    return "\n".join(lines)


def _trace_text(out: dict) -> str:
    lines = []
    if out.get("rejected"):
        request = out["rejected"]
        lines.append(f"rejected request {request['entry_id']}: {request['op']} via {request['via']} "
                     f"{json.dumps(request['summary'], ensure_ascii=False, sort_keys=True)}")
        for st in out["stages"]:
            detail = json.dumps(st["detail"], ensure_ascii=False, sort_keys=True)
            lines.append(f"  {st['at']}  {st['stage']:<20} {detail}")
    for ix in out["interactions"]:
        lines.append(f"{ix['kind']} {ix['record_id']}  {ix['sender']['name']} -> {ix['recipient']['name']}  "
                     f"state {ix['state']}")
        for st in ix["stages"]:
            detail = json.dumps(st["detail"], ensure_ascii=False, sort_keys=True)
            lines.append(f"  {st['at']}  {st['stage']:<20} {detail}")
    for b in out.get("bindings", []):
        lines.append(f"binding {b['binding_id']} generation {b['generation']} thread {b['thread_id']} "
                     f"turn {b['turn_id']} state {b['state']}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
