"""The Minecraft bridge end to end: flying-squid 1.12.0 (MC 1.21.4, offline) with the bridge plugin, the Rust
relay, the Rust MCP server and the official Python MCP client, with mineflayer 4.39.0 bots that join, chat, dig,
die and quit. Every tool and every event (pushed as resources/updated and pulled with poll_events), the
whitelist, a wrong token, relay and MCP-server restarts with the events counted, and two MCP servers with
different subscriptions. Peers come from scripts/install-peers; a missing one fails."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from conftest import HttpServer, cargo_bin, error, ok
from mcp import Client
from minecraft_world import EVENT_TYPES, GAME_TOKEN, MCP_TOKEN, MCP_TOKEN_READONLY, Bots, Game, Relay, mcp_server

pytestmark = [
    pytest.mark.anyio,
    # Pushed events are resources/updated after resources/subscribe: the legacy era's mechanism, on purpose.
    pytest.mark.filterwarnings("ignore:resources/subscribe is removed"),
]


class Pushed:
    """Collects resources/updated notifications (pushed events) by URI."""

    def __init__(self) -> None:
        self.updated: dict[str, int] = {}

    async def __call__(self, message: Any) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/resources/updated":
            uri = str(root.params.uri)
            self.updated[uri] = self.updated.get(uri, 0) + 1


@asynccontextmanager
async def client_of(url: str, pushed: Pushed | None = None) -> AsyncIterator[Client]:
    async with Client(url, mode="legacy", cache=None, read_timeout_seconds=60, message_handler=pushed) as client:
        yield client


def game_event(ev: dict[str, Any]) -> dict[str, Any]:
    """The GameEvent inside one poll_events entry."""
    data = ev["data"]
    assert {"eventType", "timestamp", "data"} <= set(data), data
    return data


async def pull(client: Client, stream: str, since: int = 0) -> tuple[list[dict[str, Any]], int]:
    """Every event of a stream after `since` (following `more`), and the next cursor."""
    events: list[dict[str, Any]] = []
    while True:
        page = await ok(client, "poll_events", {"stream": stream, "since": since, "limit": 500})
        events += [game_event(e) for e in page["events"]]
        since = page["next_since"]
        if not page["more"]:
            return events, since


async def wait_events(client: Client, stream: str, pred: Any, timeout: float = 30) -> list[dict[str, Any]]:
    """Polls a stream until `pred(events)` holds."""
    with anyio.fail_after(timeout):
        while True:
            events, _ = await pull(client, stream)
            if pred(events):
                return events
            await anyio.sleep(0.1)


async def wait_ready(client: Client, timeout: float = 30) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            st = await ok(client, "status", {})
            if st.get("connected") and st.get("games"):
                return st
            await anyio.sleep(0.1)


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[Relay, Game]]:
    relay = Relay().start()
    game = Game(relay.url)
    try:
        game.wait_linked()
        yield relay, game
        # flying-squid kicks a player when it fails to encode a packet for them (see adapters/flying-squid/compat.js).
        log = game.proc.tail(100_000)
        assert "Disconnecting client because error" not in log, log[-4000:]
    finally:
        game.stop()
        relay.stop()


async def test_every_tool_and_event_pushed_and_pulled(world: tuple[Relay, Game]) -> None:
    relay, game = world
    server = mcp_server(relay.url, client_id="tools")
    bots = Bots(game.port)
    pushed = Pushed()
    try:
        async with client_of(server.mcp_url, pushed) as client:
            await wait_ready(client)
            for ty in EVENT_TYPES:
                await client.subscribe_resource(f"minecraft://events/{ty}")

            spawn = bots.request("join", name="alice")
            assert (await ok(client, "get_online_players", {}))["players"] == ["alice"]

            info = await ok(client, "get_player_info", {"player": "alice"})
            assert info["name"] == "alice" and info["uuid"]
            assert info["health"] == 20 and info["foodLevel"] == 20 and info["gameMode"] == "survival"
            assert info["location"]["world"] == "minecraft:overworld"
            assert round(info["location"]["x"]) == round(spawn["position"]["x"])

            server_info = await ok(client, "get_server_info", {})
            assert server_info["version"] == "1.21.4" and server_info["onlinePlayers"] == 1
            assert server_info["maxPlayers"] == 20 and server_info["weather"] == "clear"
            assert 0 <= server_info["timeOfDay"] < 24000 and server_info["tps"] > 0
            await ok(client, "execute_command", {"command": "weather rain"})
            assert (await ok(client, "get_server_info", {}))["weather"] == "rain"

            x, y, z = (int(spawn["position"][k]) for k in ("x", "y", "z"))
            world_info = await ok(client, "get_world_info", {"x": x, "y": y, "z": z, "radius": 2})
            assert world_info["blocks"], "superflat ground around the spawn"
            assert all(b["type"].startswith("minecraft:") and b["type"] != "minecraft:air" for b in world_info["blocks"])
            assert any(e.get("name") == "alice" for e in world_info["entities"]), world_info["entities"]
            too_far = await error(client, "get_world_info", {"x": x, "y": y, "z": z, "radius": 17})
            assert "radius" in too_far["message"]

            sent = await ok(client, "send_message", {"message": "hello from the bridge"})
            assert sent["success"] is True
            await ok(client, "send_message", {"message": "just for alice", "target": "alice"})
            with anyio.fail_after(10):
                while not (bots.saw("alice", "hello from the bridge") and bots.saw("alice", "just for alice")):
                    await anyio.sleep(0.05)
            missing = await error(client, "send_message", {"message": "x", "target": "nobody"})
            assert missing["code"] == "PLAYER_NOT_FOUND"

            moved = await ok(client, "teleport_player", {"player": "alice", "x": x + 5, "y": y + 3, "z": z - 4})
            assert moved["success"] is True
            assert moved["location"]["x"] == x + 5 and moved["location"]["z"] == z - 4
            with anyio.fail_after(10):
                while abs(bots.request("state", name="alice")["position"]["x"] - (x + 5)) > 1:
                    await anyio.sleep(0.1)
            # Back to where the world info was read, to dig there.
            await ok(client, "teleport_player", {"player": "alice", "x": x + 0.5, "y": y, "z": z + 0.5})
            assert (await error(client, "teleport_player", {"player": "nobody", "x": 0, "y": 5, "z": 0}))["code"] == "PLAYER_NOT_FOUND"

            assert (await ok(client, "give_item", {"player": "alice", "item": "diamond", "quantity": 3}))["success"] is True
            assert (await ok(client, "give_item", {"player": "alice", "item": "minecraft:diamond", "quantity": "2"}))["success"] is True
            with anyio.fail_after(10):
                while {"name": "diamond", "count": 5} not in bots.request("state", name="alice")["items"]:
                    await anyio.sleep(0.1)

            daytime = await ok(client, "execute_command", {"command": "time query daytime"})
            assert daytime["success"] is True and any(line.startswith("It is ") for line in daytime["output"])
            said = await ok(client, "execute_command", {"command": "say bridge says hi"})
            assert said["success"] is True
            with anyio.fail_after(10):
                while not bots.saw("alice", "bridge says hi"):
                    await anyio.sleep(0.05)

            # The events: chat, dig, death (a whitelisted kill), quit.
            await anyio.sleep(0.5)  # let the teleport settle before digging under the bot
            bots.request("chat", name="alice", text="hello world")
            dug = bots.request("dig", name="alice")
            killed = await ok(client, "execute_command", {"command": "kill alice"})
            assert killed["success"] is True and any("Killed" in line for line in killed["output"]), killed
            with anyio.fail_after(10):
                while "alice" not in bots.deaths:
                    await anyio.sleep(0.05)
            bots.request("quit", name="alice")

            expected = {
                "player_join": {"player": "alice"},
                "player_chat": {"player": "alice", "message": "hello world"},
                "block_break": {"player": "alice", "blockType": dug["blockType"]},
                "player_death": {"player": "alice"},
                "player_quit": {"player": "alice"},
            }
            for ty, fields in expected.items():
                events = await wait_events(client, ty, lambda evs, f=fields: any(f.items() <= e["data"].items() for e in evs))
                event = next(e for e in events if fields.items() <= e["data"].items())
                assert event["eventType"] == ty and event["timestamp"] > 0
                if ty in ("player_join", "player_quit"):
                    assert event["data"]["uuid"] == info["uuid"]
                if ty in ("player_death", "block_break"):
                    assert set(event["data"]["location"]) >= {"world", "x", "y", "z"}
                if ty == "block_break":
                    assert {event["data"]["location"][k] for k in ("x", "y", "z")} == set(dug["location"].values()) or \
                        [event["data"]["location"][k] for k in ("x", "y", "z")] == [dug["location"][k] for k in ("x", "y", "z")]
                if ty == "player_death":
                    assert event["data"]["cause"]
            with anyio.fail_after(10):
                while any(pushed.updated.get(f"minecraft://events/{ty}", 0) == 0 for ty in EVENT_TYPES):
                    await anyio.sleep(0.05)
            assert all(pushed.updated[f"minecraft://events/{ty}"] >= 1 for ty in EVENT_TYPES), pushed.updated
    finally:
        bots.stop()
        server.stop()


async def test_unwhitelisted_command_is_refused_and_never_runs(world: tuple[Relay, Game]) -> None:
    relay, game = world
    server = mcp_server(relay.url, client_id="whitelist")
    bots = Bots(game.port)
    try:
        async with client_of(server.mcp_url) as client:
            await wait_ready(client)
            bots.request("join", name="bob")
            # Not whitelisted: the game refuses them (INVALID_COMMAND, the error's code).
            for command in ["say forbidden words", "op bob", "xsay bridge x", "say bridge x ; op bob\u0000"]:
                refused = await error(client, "execute_command", {"command": command})
                assert refused.get("code") == "INVALID_COMMAND", (command, refused)
            # A second line or an oversize command: refused before they leave the MCP server, or by the game.
            for command in ["say bridge ok\nsay forbidden two", "say bridge " + "x" * 300]:
                refused = await error(client, "execute_command", {"command": command})
                assert refused["code"] in ("E_INVALID_ARGUMENT", "INVALID_COMMAND"), (command, refused)
            # A whitelisted command afterwards is seen by the bot; the refused ones never were.
            said = await ok(client, "execute_command", {"command": "say bridge marker"})
            assert said["success"] is True, said
            deadline = time.monotonic() + 20
            while not bots.saw("bob", "bridge marker") and time.monotonic() < deadline:
                await anyio.sleep(0.05)
            assert bots.saw("bob", "bridge marker"), f"bob saw only {bots.messages}; say gave {said}; game log:\n{game.proc.tail(60)}"
            assert not bots.saw("bob", "forbidden")
            assert not any("xxxxxxxx" in t for _, t in bots.messages)
            bots.request("quit", name="bob")
    finally:
        bots.stop()
        server.stop()


async def test_wrong_tokens_are_refused(world: tuple[Relay, Game]) -> None:
    relay, _ = world
    # The upgrade itself: 401 before any WebSocket exists.
    with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as s:
        s.sendall(
            b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Authorization: Bearer not-a-token\r\n\r\n"
        )
        assert s.recv(64).startswith(b"HTTP/1.1 401"), "a wrong token is refused with 401"
    # A game with a wrong token never links and says why.
    bad_game = Game(relay.url, token="wrong-" + GAME_TOKEN, name="intruder")
    try:
        deadline = time.monotonic() + 20
        while "HTTP 401" not in bad_game.proc.tail(400) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "HTTP 401" in bad_game.proc.tail(400), "the plugin logs the refusal"
        assert not any(line.startswith("linked") for line in bad_game.proc.seen)
        assert "intruder" not in str(relay.health())
    finally:
        bad_game.stop()
    # An MCP server with a wrong token stays unlinked and its status says so.
    server = mcp_server(relay.url, token="wrong-" + MCP_TOKEN, client_id="intruder")
    try:
        async with client_of(server.mcp_url) as client:
            # Its status says the relay refused it (401), once it has dialled.
            deadline = time.monotonic() + 20
            st = await ok(client, "status", {})
            while "401" not in str(st) and time.monotonic() < deadline:
                await anyio.sleep(0.1)
                st = await ok(client, "status", {})
            assert st["connected"] is False
            assert "401" in str(st), st
            refused = await error(client, "get_online_players", {})
            assert refused["code"] in ("CONNECTION_ERROR", "AUTH_FAILED"), refused
    finally:
        server.stop()


async def test_read_only_token_may_not_run_commands(world: tuple[Relay, Game]) -> None:
    relay, _ = world
    server = mcp_server(relay.url, token=MCP_TOKEN_READONLY, client_id="reader")
    try:
        async with client_of(server.mcp_url) as client:
            await wait_ready(client)
            assert "players" in await ok(client, "get_online_players", {})
            denied = await error(client, "execute_command", {"command": "say bridge nope"})
            assert denied["code"] == "PERMISSION_DENIED", denied
    finally:
        server.stop()


async def test_two_mcp_servers_each_get_exactly_their_subscriptions(world: tuple[Relay, Game]) -> None:
    relay, game = world
    chat_only = mcp_server(relay.url, client_id="chat-only", events="player_chat")
    joins_and_digs = mcp_server(relay.url, client_id="joins-digs", events="player_join,block_break")
    bots = Bots(game.port)
    try:
        async with client_of(chat_only.mcp_url) as a, client_of(joins_and_digs.mcp_url) as b:
            await wait_ready(a)
            await wait_ready(b)
            bots.request("join", name="carol")
            for i in range(3):
                bots.request("chat", name="carol", text=f"sub-{i}")
            for dx in (1, -1):
                bots.request("dig", name="carol", dx=dx)
            bots.request("chat", name="carol", text="sub-end")
            chats = await wait_events(a, "player_chat", lambda evs: any(e["data"]["message"] == "sub-end" for e in evs))
            digs = await wait_events(b, "block_break", lambda evs: sum(e["data"]["player"] == "carol" for e in evs) >= 2)
            await anyio.sleep(1)  # anything that should not arrive has had time to
            assert [e["data"]["message"] for e in chats] == ["sub-0", "sub-1", "sub-2", "sub-end"]
            assert len([e for e in digs if e["data"]["player"] == "carol"]) == 2
            joins, _ = await pull(b, "player_join")
            assert [e["data"]["player"] for e in joins] == ["carol"]
            for ty in EVENT_TYPES:
                if ty != "player_chat":
                    assert (await pull(a, ty))[0] == [], f"chat-only got {ty}"
                if ty not in ("player_join", "block_break"):
                    assert (await pull(b, ty))[0] == [], f"joins-digs got {ty}"
            bots.request("quit", name="carol")
    finally:
        bots.stop()
        chat_only.stop()
        joins_and_digs.stop()


def epoch_of(status: dict[str, Any]) -> Any:
    return next((v for k, v in status.items() if "epoch" in k.lower()), None)


async def test_relay_and_mcp_server_restarts_lose_no_events() -> None:
    """Chat lines flow while the relay and then the MCP server restart; every one arrives (counted by
    content), in order of first arrival."""
    relay = Relay().start()
    game = Game(relay.url, name="restarts")
    bots = Bots(game.port)
    servers = [mcp_server(relay.url, client_id="restarts", events="player_chat")]
    received: list[str] = []  # every delivery, duplicates included
    sent: list[str] = []
    sent_at: list[float] = []

    def chat(n: int) -> None:
        for _ in range(n):
            text = f"count-{len(sent)}"
            sent.append(text)
            bots.request("chat", name="dave", text=text)
            sent_at.append(time.monotonic())
            time.sleep(0.02)

    async def read_all(client: Client, cursor: int) -> int:
        """Reads the chat stream from `cursor` until every line sent so far has arrived."""
        with anyio.fail_after(40):
            while not set(sent) <= set(received):
                events, cursor = await pull(client, "player_chat", cursor)
                received.extend(e["data"]["message"] for e in events)
                await anyio.sleep(0.1)
        return cursor

    try:
        game.wait_linked()
        bots.request("join", name="dave")
        async with client_of(servers[0].mcp_url) as client:
            first = await wait_ready(client)
            chat(20)
            cursor = await read_all(client, 0)

            # 1. The relay goes away (SIGTERM: it lets MCP servers ack what they were sent) and comes back while a
            # bot keeps chatting: the plugin keeps the lines in its outbox and resends what the new relay lacks;
            # the MCP server resumes with its old epoch and gets the new relay's backlog.
            chatter = threading.Thread(target=chat, args=(80,))
            chatter.start()
            time.sleep(0.3)
            down = time.monotonic()
            relay.stop(signal.SIGTERM)
            time.sleep(1.0)  # away long enough for the game to queue lines and fail a redial or two
            relay.start()
            up = time.monotonic()
            chatter.join()
            during = sum(down <= t <= up for t in sent_at)
            assert during > 0, "some lines were said while the relay was away"
            with anyio.fail_after(20):
                while True:
                    st = await ok(client, "status", {})
                    if st.get("connected") and epoch_of(st) != epoch_of(first):
                        break
                    await anyio.sleep(0.05)
            chat(20)
            cursor = await read_all(client, cursor)

        # 2. The MCP server goes away; chat goes on, queued at the relay under its client id; a new MCP server
        # with the same id resumes that queue.
        servers[0].stop()
        chat(20)
        servers.append(mcp_server(relay.url, client_id="restarts", events="player_chat"))
        async with client_of(servers[1].mcp_url) as client:
            await wait_ready(client)
            chat(20)
            await read_all(client, 0)

        firsts = list(dict.fromkeys(received))
        print(f"restarts: sent {len(sent)} chat lines ({during} while the relay restarted), received {len(firsts)} distinct "
              f"({len(received) - len(firsts)} replayed twice)")
        assert sorted(set(sent) - set(received)) == [], "lost events"
        assert firsts == sent, "order"
    finally:
        bots.stop()
        for s in servers:
            s.stop()
        game.stop()
        relay.stop()


async def test_two_games_are_addressed_by_name() -> None:
    relay = Relay().start()
    games = [Game(relay.url, name="survival"), Game(relay.url, name="creative")]
    server = mcp_server(relay.url, client_id="two-games")
    bots = Bots(games[1].port)
    try:
        for g in games:
            g.wait_linked()
        async with client_of(server.mcp_url) as client:
            with anyio.fail_after(20):
                while sorted((await ok(client, "status", {})).get("games", [])) != ["creative", "survival"]:
                    await anyio.sleep(0.1)
            unnamed = await error(client, "get_online_players", {})
            assert unnamed["code"] == "INVALID_COMMAND", unnamed
            bots.request("join", name="erin")
            assert (await ok(client, "get_online_players", {"game": "creative"}))["players"] == ["erin"]
            assert (await ok(client, "get_online_players", {"game": "survival"}))["players"] == []
            joins = await wait_events(client, "player_join", lambda evs: any(e["data"]["player"] == "erin" for e in evs))
            assert [e for e in joins if e["data"]["player"] == "erin"]
            bots.request("quit", name="erin")
    finally:
        bots.stop()
        server.stop()
        for g in games:
            g.stop()
        relay.stop()


async def test_embedded_relay_serves_a_game_on_one_machine() -> None:
    """Without --minecraft-relay-url the MCP server runs the relay in-process on MINECRAFT_RELAY_HOST:MINECRAFT_RELAY_PORT."""
    port = Relay().port
    server = HttpServer.start(
        [str(cargo_bin("mcp-bridges")), "minecraft"],
        env={"MINECRAFT_RELAY_HOST": "127.0.0.1", "MINECRAFT_RELAY_PORT": str(port), "MINECRAFT_AUTH_TOKEN": GAME_TOKEN},
    )
    game = Game(f"ws://127.0.0.1:{port}", name="embedded")
    bots = Bots(game.port)
    try:
        game.wait_linked()
        async with client_of(server.mcp_url) as client:
            await wait_ready(client)
            bots.request("join", name="frank")
            bots.request("chat", name="frank", text="one machine")
            assert (await ok(client, "get_online_players", {}))["players"] == ["frank"]
            await wait_events(client, "player_chat", lambda evs: any(e["data"]["message"] == "one machine" for e in evs))
            bots.request("quit", name="frank")
    finally:
        bots.stop()
        game.stop()
        server.stop()
