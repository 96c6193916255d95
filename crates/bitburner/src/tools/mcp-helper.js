/**
 * mcp-helper.js: runs scripts for the MCP bridge (mcp-bridges bitburner), which the Remote API cannot.
 * Start it once with `run mcp-helper.js`; stop it with `kill mcp-helper.js`.
 *
 * Protocol 1 (docs/protocols/bitburner.md §9): the bridge writes mcp/req-<id>.txt = {v, id, op, args}; this
 * script deletes it, serves it, and writes mcp/res-<id>.txt = {v, id, ok, result | error}. It rewrites
 * mcp/helper.txt = {v, pid, time} on every round, so the bridge knows it is running. Only the four
 * operations below exist: it starts scripts already on a server, it never runs code it is sent.
 */
const V = 1;
const DIR = "mcp/";
const MAX_LOG_LINES = 1000;

/** @param {NS} ns */
export async function main(ns) {
  ns.disableLog("ALL");
  for (;;) {
    ns.write(DIR + "helper.txt", JSON.stringify({ v: V, pid: ns.pid, time: Date.now() }), "w");
    for (const file of ns.ls("home", DIR + "req-")) {
      const name = file.replace(/^\//, "");
      if (!name.startsWith(DIR + "req-") || !name.endsWith(".txt")) continue;
      const id = name.slice((DIR + "req-").length, -".txt".length);
      let answer;
      try {
        const request = JSON.parse(ns.read(name));
        if (request.v !== V) throw new Error(`protocol ${request.v}; this helper speaks ${V}`);
        answer = { v: V, id, ok: true, result: serve(ns, request.op, request.args ?? {}) };
      } catch (e) {
        answer = { v: V, id, ok: false, error: String(e?.message ?? e) };
      }
      ns.rm(name, "home");
      ns.write(DIR + "res-" + id + ".txt", JSON.stringify(answer), "w");
    }
    await ns.sleep(100);
  }
}

/** @param {NS} ns */
function serve(ns, op, args) {
  switch (op) {
    case "run_script": {
      const threads = Math.max(1, Math.floor(Number(args.threads) || 1));
      const pid = ns.exec(String(args.script), String(args.server), threads, ...(args.args ?? []));
      if (!pid) {
        throw new Error(
          `could not start ${args.script} on ${args.server}: the script is missing there, the server lacks ` +
            `the RAM, or you have no root access (the game's log of mcp-helper.js says which)`,
        );
      }
      return { pid, ram_gb: ns.getScriptRam(String(args.script), String(args.server)) * threads };
    }
    case "get_script_logs": {
      const lines = Math.min(MAX_LOG_LINES, Math.max(1, Number(args.max_lines) || 200));
      if (!ns.isRunning(Number(args.pid))) throw new Error(`no script is running with pid ${args.pid}`);
      return { pid: Number(args.pid), lines: ns.getScriptLogs(Number(args.pid)).slice(-lines) };
    }
    case "kill_script":
      return { pid: Number(args.pid), killed: ns.kill(Number(args.pid)) };
    case "get_server_state": {
      const server = String(args.server ?? "home");
      return {
        server,
        money: ns.getServerMoneyAvailable("home"),
        hacking_level: ns.getHackingLevel(),
        max_ram_gb: ns.getServerMaxRam(server),
        used_ram_gb: ns.getServerUsedRam(server),
      };
    }
    default:
      throw new Error(`unknown operation ${op}`);
  }
}
