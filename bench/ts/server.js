// The TypeScript side of mcp-bench: the same `noop` tool as bench/src/bin/noop-server.rs (no arguments,
// returns {} as structured content and "{}" as text, read-only), on the official SDK.
//
//   node server.js --stdio
//   node server.js --http --port N [--stateful]
//
// HTTP follows the SDK's own recommendations for speed: stateless (a fresh server and transport per request,
// which the SDK requires in that mode) with JSON responses instead of SSE. `--stateful` keeps one session per
// client instead, still with JSON responses. Only the protocol goes to stdout; diagnostics go to stderr.

import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";

const EMPTY = Object.freeze({});

function noopServer() {
  const server = new McpServer({ name: "noop-ts", version: "0.1.0" });
  server.registerTool(
    "noop",
    {
      description: "Does nothing and returns {}; for measuring protocol overhead.",
      inputSchema: {},
      outputSchema: {},
      annotations: { readOnlyHint: true, idempotentHint: true },
    },
    async () => ({ content: [{ type: "text", text: "{}" }], structuredContent: EMPTY }),
  );
  return server;
}

function parseArgs(argv) {
  const args = { mode: "stdio", port: 3000, stateful: false };
  for (let i = 0; i < argv.length; i++) {
    switch (argv[i]) {
      case "--stdio": args.mode = "stdio"; break;
      case "--http": args.mode = "http"; break;
      case "--stateful": args.stateful = true; break;
      case "--port": args.port = Number(argv[++i]); break;
      default:
        console.error(`unknown argument ${argv[i]}; usage: server.js --stdio | --http --port N [--stateful]`);
        process.exit(2);
    }
  }
  return args;
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString("utf8")));
      } catch (e) {
        reject(e);
      }
    });
    req.on("error", reject);
  });
}

function sendError(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

async function handleStateless(req, res) {
  if (req.method !== "POST") return sendError(res, 405, "method not allowed (stateless server)");
  const body = await readJson(req);
  const server = noopServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}

function statefulHandler() {
  const sessions = new Map();
  return async (req, res) => {
    const id = req.headers["mcp-session-id"];
    const existing = typeof id === "string" ? sessions.get(id) : undefined;
    if (existing) {
      const body = req.method === "POST" ? await readJson(req) : undefined;
      return existing.handleRequest(req, res, body);
    }
    if (req.method !== "POST") return sendError(res, 400, "no valid session");
    const body = await readJson(req);
    if (!isInitializeRequest(body)) return sendError(res, 400, "no valid session");
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: (sid) => sessions.set(sid, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await noopServer().connect(transport);
    await transport.handleRequest(req, res, body);
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.mode === "stdio") {
    await noopServer().connect(new StdioServerTransport());
    return;
  }
  const handle = args.stateful ? statefulHandler() : handleStateless;
  // noDelay: the Nagle trap the Rust core avoids too (it sets TCP_NODELAY on every accepted socket, crates/core/src/net.rs):
  // without it a small response written in two segments waits for the client's delayed ACK.
  const http = createServer({ noDelay: true, keepAlive: true }, (req, res) => {
    const path = (req.url ?? "").split("?")[0];
    if (path !== "/mcp") return sendError(res, 404, "not found");
    handle(req, res).catch((e) => {
      console.error("request failed:", e);
      if (!res.headersSent) sendError(res, 500, "internal error");
    });
  });
  http.listen(args.port, "127.0.0.1", () => console.error(`noop-ts listening on http://127.0.0.1:${args.port}/mcp`));
  const stop = () => http.close(() => process.exit(0));
  process.on("SIGINT", stop);
  process.on("SIGTERM", stop);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
