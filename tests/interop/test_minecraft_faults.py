"""Issue 22, "prove it": faults with the real flying-squid server (MC 1.21.4) and the project's plugin, the Rust
relay and MCP server as separate processes, mineflayer bots making the events. Each test counts: every chat line
a bot said either reaches the MCP server or is reported lost (`lost_total`), never silently missing. The relay
down for 90 s and back is in `test_minecraft_outage.py`.

- the relay SIGKILLed in the middle of a burst while the MCP server is SIGSTOPped (lagging): what the dead relay
  held is reported as lost, with the count;
- two servers under one name: the second is refused (name_in_use), the first is never kicked, and two servers
  without a name are named after host and port and both link;
- a flood of client ids on one token: at most --clients-per-token queues, least recently used dropped, and a
  returning client told how many events it lost;
- a graceful stop: player_quit for every player online;
- commands over the game's limits refused by the plugin before flying-squid runs them.

Waits outlast every backoff and timeout involved; no assert has a wall-clock upper bound."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import Any

import anyio
import pytest
from conftest import error, ok
from minecraft_faults import ADAPTER, Server, client_of, metrics, rss_kib, say, settle, wait_games
from minecraft_world import MCP_TOKEN_READONLY, Bots, Relay, mcp_server, real_node

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/subscribe is removed")]


async def test_relay_killed_during_a_burst_while_the_mcp_server_lags_reports_every_loss() -> None:
    relay = Relay().start()
    game = Server(relay.url, "burst")
    server = mcp_server(relay.url, client_id="lagging", events="player_chat")
    bots = Bots(game.port)
    sent: list[str] = []
    received: list[str] = []
    try:
        game.wait_linked()
        bots.request("join", name="bert")
        async with client_of(server.mcp_url) as client:
            await wait_games(client, ["burst"])
            say(bots, "bert", sent, 10, "warm")
            cursor, _ = await settle(client, sent, received, 0)

            # The MCP server lags (stopped): the relay queues the burst for it, acknowledging the game.
            os.kill(server.proc.pid, signal.SIGSTOP)
            try:
                say(bots, "bert", sent, 300, "burst")
                deadline = time.monotonic() + 30
                while metrics(relay).get("minecraft_relay_events_received_total", 0) < len(sent) and time.monotonic() < deadline:
                    time.sleep(0.1)
                queued = metrics(relay)["minecraft_relay_events_received_total"]
                relay.stop(signal.SIGKILL)
                say(bots, "bert", sent, 50, "dark")  # said with no relay: the plugin's outbox holds them
                relay.start()
                game.wait_linked(2, timeout=45)
            finally:
                os.kill(server.proc.pid, signal.SIGCONT)
            await wait_games(client, ["burst"])
            say(bots, "bert", sent, 20, "later")
            cursor, st = await settle(client, sent, received, cursor)
        missing = sorted(set(sent) - set(received))
        print(f"relay killed in a burst: sent {len(sent)} (the dead relay had accepted {queued:.0f}), received "
              f"{len(set(received))} distinct, missing {len(missing)}, lost_total {st['lost_total']} "
              f"(in gaps {st['lost_in_gaps']}), epoch changes {st['epoch_changes']}")
        assert len(missing) == st["lost_total"], f"every missing line reported, and only those: {st}"
        assert all(m.startswith(("warm", "burst")) for m in missing), "only what the dead relay held may be lost"
        assert not any(m.startswith(("dark", "later")) for m in missing)
        assert st["epoch_changes"] >= 1, st
    finally:
        bots.stop()
        server.stop()
        game.stop()
        relay.stop()


async def test_two_servers_with_one_name_are_refused_without_a_kick_loop() -> None:
    relay = Relay().start()
    first = Server(relay.url, "twin")
    second = None
    unnamed: list[Server] = []
    try:
        first.wait_linked()
        instance = next(g["instance"] for g in relay.health()["games"] if g["name"] == "twin")
        second = Server(relay.url, "twin")
        # 20 s: the second server's redials (200 ms doubling) are refused each time; the first stays.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            games = relay.health()["games"]
            assert [(g["name"], g["instance"]) for g in games] == [("twin", instance)], games
            time.sleep(0.25)
        refusals = second.log().count("name_in_use")
        print(f"two servers named twin: first linked {first.linked()} time(s), second {second.linked()}, "
              f"second refused {refusals} time(s) in 20 s")
        assert first.linked() == 1, "the first server was never kicked off"
        assert second.linked() == 0
        assert refusals >= 1, second.log()[-2000:]
        assert "is in use by another connected server" in second.log()

        # Without a name, each is named after the host and its port: both link, under different names.
        unnamed = [Server(relay.url, None), Server(relay.url, None)]
        for s in unnamed:
            s.wait_linked()
            assert s.name.endswith(f"-{s.port}"), s.name
        names = sorted(g["name"] for g in relay.health()["games"])
        assert names == sorted(["twin", unnamed[0].name, unnamed[1].name]), names
    finally:
        for s in [first, second, *unnamed]:
            if s:
                s.stop()
        relay.stop()


# Opens MCP links with the `ws` package (the plugin's own): one step per argument.
#   hold:ID    hello as ID and keep the link open      touch:ID  hello as ID, then close
#   closeall   close every held link                   each step prints one JSON line: {step, id, messages}
CLIENTS_JS = r"""
const WebSocket = require(process.env.WS_MODULE)
const [url, token, ...steps] = process.argv.slice(1)
const held = []
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n')
function open (id, waitMs) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { headers: { Authorization: `Bearer ${token}` } })
    const messages = []
    let timer = null
    const done = () => { clearTimeout(timer); resolve({ ws, messages }) }
    ws.on('open', () => ws.send(JSON.stringify({ version: '1.1', type: 'hello', id: 'h-' + id, timestamp: Date.now(),
      source: 'mcp', payload: { clientId: id, subscriptions: ['player_chat'] } })))
    ws.on('message', (raw) => {
      const m = JSON.parse(raw.toString())
      if (m.type === 'heartbeat') return
      messages.push(m)
      if (m.type === 'welcome' || m.type === 'error') { clearTimeout(timer); timer = setTimeout(done, waitMs) }
      if (m.type === 'notice' && m.payload.kind === 'lost') done()
    })
    ws.on('close', done)
    ws.on('error', done)
  })
}
;(async () => {
  for (const step of steps) {
    const [op, id] = step.split(':')
    if (op === 'closeall') {
      for (const ws of held.splice(0)) ws.close()
      await new Promise((resolve) => setTimeout(resolve, 500))
      out({ step: op })
      continue
    }
    const { ws, messages } = await open(id, op === 'return' ? 30000 : 100)
    if (op === 'hold') held.push(ws)
    else ws.close()
    out({ step: op, id, messages: messages.map((m) => ({ type: m.type, payload: m.payload })) })
  }
  for (const ws of held) ws.close()
})()
"""


def run_clients(relay: Relay, token: str, steps: list[str]) -> list[dict[str, Any]]:
    run = subprocess.run(
        [real_node(), "-e", CLIENTS_JS, relay.url, token, *steps],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "WS_MODULE": str(ADAPTER / "node_modules" / "ws")},
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return [json.loads(line) for line in run.stdout.splitlines()]


async def test_a_flood_of_client_ids_stays_bounded_and_evictions_are_reported() -> None:
    relay = Relay().start()
    game = Server(relay.url, "ids")
    server = mcp_server(relay.url, client_id="watcher", events="player_chat")
    bots = Bots(game.port)
    sent: list[str] = []
    received: list[str] = []
    try:
        game.wait_linked()
        bots.request("join", name="ida")
        rss_before = rss_kib(relay.proc.proc.pid)
        # 16 ids of the read-only token held open (its cap), a 17th refused, then all 16 gone.
        steps = [f"hold:c{i}" for i in range(16)] + ["touch:c16", "closeall"]
        results = run_clients(relay, MCP_TOKEN_READONLY, steps)
        welcomed = [r for r in results if r["step"] == "hold" and r["messages"] and r["messages"][0]["type"] == "welcome"]
        assert len(welcomed) == 16, results
        refused = next(r for r in results if r.get("id") == "c16")["messages"]
        assert refused and refused[0]["type"] == "error", refused
        assert refused[0]["payload"]["details"] == {"reason": "too_many_clients", "limit": 16}, refused
        # 10 lines queued for each of the 16 absent clients (and delivered to the watcher on the other token).
        async with client_of(server.mcp_url) as client:
            await wait_games(client, ["ids"])
            say(bots, "ida", sent, 10, "queued")
            _, st = await settle(client, sent, received, 0)
        assert set(sent) <= set(received) and st["lost_total"] == 0, st
        # 84 more ids, one after another: each new one replaces the least recently used absent queue.
        results = run_clients(relay, MCP_TOKEN_READONLY, [f"touch:d{i}" for i in range(84)])
        assert all(r["messages"] and r["messages"][0]["type"] == "welcome" for r in results), [r for r in results if not r["messages"] or r["messages"][0]["type"] != "welcome"][:3]
        m = metrics(relay)
        clients = m['minecraft_relay_token_clients{token="1"}']
        evicted = m["minecraft_relay_queues_evicted_total"]
        evicted_messages = m["minecraft_relay_queue_evicted_messages_total"]
        # c0 (evicted first, with its 10 lines) comes back and is told what it lost.
        back = run_clients(relay, MCP_TOKEN_READONLY, ["return:c0"])[0]["messages"]
        lost = [x["payload"] for x in back if x["type"] == "notice" and x["payload"].get("kind") == "lost"]
        rss_after = rss_kib(relay.proc.proc.pid)
        print(f"client-id flood: 100 ids on one token, {clients:.0f} queues kept (cap 16), {evicted:.0f} evicted holding "
              f"{evicted_messages:.0f} events, 17th live id refused; c0 back told {lost}; relay RSS {rss_before} -> {rss_after} KiB")
        assert clients == 16, m
        assert evicted == 84, m
        assert evicted_messages == 16 * 10, "the 16 first queues held 10 lines each; the later ones none"
        assert lost == [{"kind": "lost", "lost": 10, "reason": "evicted"}], back
        assert m["minecraft_relay_clients_refused_total"] == 1, m
        assert rss_after - rss_before < 64 * 1024, "memory stays bounded"
    finally:
        bots.stop()
        server.stop()
        game.stop()
        relay.stop()


async def test_a_graceful_stop_reports_every_player_online_as_quitting() -> None:
    relay = Relay().start()
    game = Server(relay.url, "stopping")
    server = mcp_server(relay.url, client_id="quits", events="player_quit")
    bots = Bots(game.port)
    try:
        game.wait_linked()
        async with client_of(server.mcp_url) as client:
            await wait_games(client, ["stopping"])
            for name in ("pia", "quinn", "rey"):
                bots.request("join", name=name)
            assert sorted((await ok(client, "get_online_players", {}))["players"]) == ["pia", "quinn", "rey"]
            game.proc.send_signal(signal.SIGTERM)
            stopped = game.proc.wait_for(r"^stopped players=(\d+) unacknowledged=(\d+)", timeout=30)
            assert game.proc.proc.wait(timeout=30) == 0
            with anyio.fail_after(30):
                while True:
                    page = await ok(client, "poll_events", {"stream": "player_quit", "since": 0, "limit": 100})
                    quits = [e["data"]["data"] for e in page["events"] if e["data"].get("eventType") == "player_quit"]
                    if len(quits) >= 3:
                        break
                    await anyio.sleep(0.1)
            await anyio.sleep(1)  # a second report would have arrived by now
            page = await ok(client, "poll_events", {"stream": "player_quit", "since": 0, "limit": 100})
            quits = [e["data"]["data"] for e in page["events"] if e["data"].get("eventType") == "player_quit"]
        print(f"graceful stop: {stopped.group(0)}; player_quit events {[(q['player'], q.get('reason')) for q in quits]}")
        assert sorted(q["player"] for q in quits) == ["pia", "quinn", "rey"], quits
        assert all(q.get("reason") == "server_stopping" for q in quits), quits
        assert stopped.group(1) == "3" and stopped.group(2) == "0"
    finally:
        bots.stop()
        server.stop()
        game.stop()
        relay.stop()


async def test_commands_over_the_games_limits_are_refused_before_flying_squid_runs_them() -> None:
    relay = Relay().start()
    game = Server(relay.url, "limits")
    server = mcp_server(relay.url, client_id="limits")
    bots = Bots(game.port)
    try:
        game.wait_linked()
        async with client_of(server.mcp_url) as client:
            await wait_games(client, ["limits"])
            bots.request("join", name="gus")
            # The give that broke flying-squid's inventory, twice: now two numeric stacks (64 + 2 + nothing lost).
            for _ in range(2):
                given = await ok(client, "execute_command", {"command": "give gus diamond 23"})
                assert given["success"] is True, given
            given = await ok(client, "execute_command", {"command": "give gus minecraft:diamond 20"})
            assert given["success"] is True, given
            with anyio.fail_after(20):
                while True:
                    items = bots.request("state", name="gus")["items"]
                    if sum(i["count"] for i in items if i["name"] == "diamond") == 66:
                        break
                    await anyio.sleep(0.1)
            assert sorted(i["count"] for i in items if i["name"] == "diamond") == [2, 64], items
            info = await ok(client, "get_player_info", {"player": "gus"})
            assert sorted(s["quantity"] for s in info["inventory"] if s["type"] == "minecraft:diamond") == [2, 64], info
            refusals = {}
            for command, field, limit in [
                ("give gus diamond 6401", "count", 6400),
                ("give gus ender_pearl 1601", "count", 1600),
                ("tp gus 0 99999 0", "y", 4096),
                ("tp gus 40000000 64 0", "x", 29999999),
            ]:
                e = await error(client, "execute_command", {"command": command})
                refusals[command] = e
                assert e["code"] == "INVALID_COMMAND", e
                assert e["details"]["reason"] == "over_game_limit", e
                assert (e["details"]["field"], e["details"]["limit"]) == (field, limit), e
            unknown = await error(client, "execute_command", {"command": "give gus no_such_thing 1"})
            assert unknown["details"]["reason"] == "unknown_item", unknown
            # Nothing more was given, and gus never moved out of the world.
            items = bots.request("state", name="gus")["items"]
            assert sum(i["count"] for i in items if i["name"] == "diamond") == 66, items
            assert abs(bots.request("state", name="gus")["position"]["y"]) < 4096
            ranged = await error(client, "give_item", {"player": "gus", "item": "ender_pearl", "quantity": 2000})
            assert ranged["code"] == "INVALID_COMMAND" and ranged["details"]["limit"] == 1600, ranged
        print(f"limits: give 23+23+20 diamonds -> stacks [64, 2]; refused {[(c, r['details']['field'], r['details']['limit']) for c, r in refusals.items()]}")
        assert "Disconnecting client because error" not in game.log()
    finally:
        bots.stop()
        server.stop()
        game.stop()
        relay.stop()
