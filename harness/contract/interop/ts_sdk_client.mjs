// The official MCP TypeScript SDK client (@modelcontextprotocol/sdk, pinned in
// package.json) running a plan of tool calls against a server over stdio.
//
//   node ts_sdk_client.mjs PLAN.json
//
// PLAN: {"sessions": [{"id", "command": [argv...], "env": {...},
//                      "calls": [{"id", "tool", "arguments", "timeout_ms"}]}]}
//
// Each session is one client connected to one server process: connect
// (initialize), tools/list (which makes the SDK cache every tool's output
// schema, so that callTool validates structuredContent against it, as the SDK's
// users get it), then the calls in order. Every outcome is one JSON line on
// stdout: {"session", "call", "accepted": true, "result"} when callTool
// returned, {"session", "call", "accepted": false, "error": {code, message}}
// when it threw (the SDK refused the answer or the server sent a JSON-RPC
// error). A session that cannot connect or list tools is one line with
// "call": null. The judging is the suite's, in Python.
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));

function emit(line) {
  process.stdout.write(JSON.stringify(line) + "\n");
}

function failure(error) {
  return { code: error?.code ?? null, message: String(error?.message ?? error) };
}

for (const session of plan.sessions) {
  const transport = new StdioClientTransport({
    command: session.command[0],
    args: session.command.slice(1),
    env: session.env,
    stderr: "ignore",
  });
  const client = new Client({ name: "peerwire-contract-suite", version: "1" });
  try {
    await client.connect(transport, { timeout: session.connect_timeout_ms });
    const listed = await client.listTools(undefined, { timeout: session.connect_timeout_ms });
    emit({ session: session.id, call: null, accepted: true, tools: listed.tools.map((tool) => tool.name) });
    for (const call of session.calls) {
      try {
        const result = await client.callTool({ name: call.tool, arguments: call.arguments }, undefined,
                                             { timeout: call.timeout_ms });
        emit({ session: session.id, call: call.id, accepted: true, result });
      } catch (error) {
        emit({ session: session.id, call: call.id, accepted: false, error: failure(error) });
      }
    }
  } catch (error) {
    emit({ session: session.id, call: null, accepted: false, error: failure(error) });
  } finally {
    await client.close().catch(() => {});
  }
}
