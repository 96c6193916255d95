// An MCP client on the official TypeScript SDK (@modelcontextprotocol/sdk, installed by scripts/install-peers):
// the client the Inspector and most hosts embed. Driven by tests/interop/ts_client.py.
//
//   node ts_client.cjs '{"stdio": {"command": "...", "args": [...], "env": {...}}}'
//   node ts_client.cjs '{"http": "http://127.0.0.1:PORT/mcp"}'
//
// Connects, lists the tools (as hosts do; it is what arms the SDK's outputSchema validation of every call), then
// reads one JSON request per line on stdin and answers one JSON line on stdout:
//   {"op": "list"}                              -> {"tools": [...]}
//   {"op": "call", "tool": T, "arguments": A}   -> {"result": <CallToolResult>} or {"thrown": {code, message}}
//   {"op": "resources", "cursor": C}            -> {"result": <ListResourcesResult>} (one page; C optional)
// A thrown error is what a host would show instead of the tool's result: the tests fail on it.
// MCP_TS_SDK_NODE_MODULES names the node_modules that holds the SDK.
"use strict";

const path = require("node:path");
const readline = require("node:readline");

const nodeModules = process.env.MCP_TS_SDK_NODE_MODULES;
if (!nodeModules) {
  console.error("MCP_TS_SDK_NODE_MODULES is not set");
  process.exit(2);
}
const sdk = (p) => require(path.join(nodeModules, "@modelcontextprotocol/sdk/dist/cjs", p));
// `"sdk": "v2"` in the target: the SDK's v2 client (@modelcontextprotocol/client, installed with the Inspector),
// the one that speaks both eras; `"era"` is "legacy" or a version it pins (e.g. "2026-07-28").
const target0 = JSON.parse(process.argv[2] || "{}");
const v2 = target0.sdk === "v2";
const v2mod = (p) => require(path.join(nodeModules, "@modelcontextprotocol/client", p));
const { Client } = v2 ? v2mod("dist/index.cjs") : sdk("client/index.js");
const { StdioClientTransport } = v2 ? v2mod("dist/stdio.cjs") : sdk("client/stdio.js");
const { StreamableHTTPClientTransport } = v2 ? v2mod("dist/index.cjs") : sdk("client/streamableHttp.js");

function thrown(e) {
  return { thrown: { code: e && e.code, message: String(e && e.message ? e.message : e) } };
}

async function main() {
  const target = JSON.parse(process.argv[2]);
  const transport = target.stdio
    ? new StdioClientTransport({
        command: target.stdio.command,
        args: target.stdio.args || [],
        env: { ...process.env, ...(target.stdio.env || {}) },
        stderr: "inherit",
      })
    : new StreamableHTTPClientTransport(new URL(target.http));
  const era = target.era && target.era !== "legacy" ? { mode: { pin: target.era } } : undefined;
  const client = new Client({ name: "mcp-bridges-interop", version: "1.0.0" }, era ? { versionNegotiation: era } : undefined);
  await client.connect(transport);
  let tools = (await client.listTools()).tools;
  const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");
  out({
    ready: true,
    server: client.getServerVersion(),
    protocol: client.getNegotiatedProtocolVersion ? client.getNegotiatedProtocolVersion() : undefined,
  });

  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    if (!line.trim()) continue;
    const req = JSON.parse(line);
    try {
      if (req.op === "list") {
        tools = (await client.listTools()).tools;
        out({ tools });
      } else if (req.op === "call") {
        // Optional: `timeout_ms` (the SDK's own request timeout), `progress: true` (sends a progress token;
        // the answer then says how many progress notifications arrived before the result).
        let progress = 0;
        const options = {};
        if (req.timeout_ms) options.timeout = req.timeout_ms;
        if (req.progress) {
          options.onprogress = () => progress++;
          options.resetTimeoutOnProgress = true;
        }
        const params = { name: req.tool, arguments: req.arguments || {} };
        // v1 takes a result schema before the options; undefined keeps its default.
        const result = await (v2 ? client.callTool(params, options) : client.callTool(params, undefined, options));
        out(req.progress ? { result, progress } : { result });
      } else if (req.op === "resources") {
        out({ result: await client.listResources(req.cursor ? { cursor: req.cursor } : undefined) });
      } else {
        out({ thrown: { code: null, message: `unknown op ${req.op}` } });
      }
    } catch (e) {
      out(thrown(e));
    }
  }
  await client.close();
}

main().catch((e) => {
  process.stdout.write(JSON.stringify(thrown(e)) + "\n");
  process.exit(1);
});
