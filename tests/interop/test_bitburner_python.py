"""The Bitburner bridge through the official Python MCP client (PyPI `mcp`), in both protocol eras and over both
transports, against the fake game: the test double of Bitburner's Remote API described in
docs/protocols/bitburner.md (crates/bitburner-fake; its `fake-game` program). Like the real
game it is the WebSocket client: it connects to the bridge and only answers."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import HttpServer, cargo_bin, error, ok
from mcp import Client, StdioServerParameters

ERAS = ["legacy", "2026-07-28"]
TRANSPORTS = ["stdio", "http"]
SCRIPT = "export async function main(ns){ ns.hack('n00dles'); }"

pytestmark = [pytest.mark.anyio]

class FakeGame:
    """The fake-game program: JSON events on its stdout, commands on its stdin."""

    def __init__(self, url: str, *, version: str = "3.0", origin: str | None = None) -> None:
        argv = [str(cargo_bin("bitburner-fake", "fake-game")), "--connect", url, "--version", version]
        if origin is not None:
            argv += ["--origin", origin]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put({"event": "exit"})

    def next_event(self, timeout: float = 20) -> dict[str, Any]:
        event = self.events.get(timeout=timeout)
        self.seen.append(event)
        return event

    async def wait_for(self, kind: str) -> dict[str, Any]:
        while True:
            event = await anyio.to_thread.run_sync(self.next_event)
            if event["event"] == kind:
                return event
            if event["event"] == "exit":
                raise AssertionError(f"fake game exited while waiting for {kind}: {self.seen}")

    def requests(self) -> list[dict[str, Any]]:
        """Every request frame received so far (drains pending events)."""
        while True:
            try:
                self.next_event(timeout=0)
            except queue.Empty:
                break
        return [json.loads(e["frame"]) for e in self.seen if e["event"] == "request"]

    def command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def bridge_bin() -> Path:
    return cargo_bin("mcp-bridges")


@pytest.fixture(scope="module")
def save_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="bitburner-saves-") as d:
        yield Path(d)


@pytest.fixture(scope="module")
def bridge_http(bridge_bin: Path, save_dir: Path) -> Iterator[HttpServer]:
    argv = [str(bridge_bin), "bitburner", "--bitburner-game-port", "0", "--bitburner-save-dir", str(save_dir)]
    with HttpServer.start(argv) as server:
        yield server


@pytest.fixture
def connect(bridge_bin: Path, save_dir: Path, request: pytest.FixtureRequest):
    """`async with connect(transport, era) as client:` a client of a bridge."""

    @asynccontextmanager
    async def open_client(transport: str, era: str) -> AsyncIterator[Client]:
        if transport == "stdio":
            target: object = StdioServerParameters(
                command=str(bridge_bin),
                args=["bitburner", "--stdio", "--bitburner-game-port", "0"],
                env={"NO_COLOR": "1", "BITBURNER_SAVE_DIR": str(save_dir)},
            )
        else:
            target = request.getfixturevalue("bridge_http").mcp_url
        async with Client(target, mode=era, cache=None, read_timeout_seconds=30) as client:
            yield client

    return open_client


@asynccontextmanager
async def game_for(client: Client, **kwargs: Any) -> AsyncIterator[FakeGame]:
    """Starts a fake game connected to the bridge behind `client` and waits until the bridge has taken it."""
    status = await ok(client, "status", {})
    before = status["connections_total"]
    game = FakeGame(status["listen"], **kwargs)
    try:
        await game.wait_for("connected")
        with anyio.fail_after(20):
            while True:
                status = await ok(client, "status", {})
                if status["connected"] and status["connections_total"] > before:
                    break
                await anyio.sleep(0.01)
        yield game
    finally:
        game.stop()


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_every_tool(connect, transport: str, era: str, save_dir: Path) -> None:
    async with connect(transport, era) as client, game_for(client):
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"list_files", "read_file", "write_file", "delete_file", "get_all_files", "calculate_ram",
                "get_netscript_definitions", "get_all_servers", "get_file_metadata", "get_all_file_metadata",
                "get_save_file", "status", "poll_events", "run_script", "get_script_logs", "kill_script",
                "get_server_state"} == tools

        written = await ok(client, "write_file", {"filename": "/lib/hack.js", "content": SCRIPT})
        assert written["filename"] == "lib/hack.js" and written["server"] == "home"
        await ok(client, "write_file", {"filename": "notes.txt", "content": ""})
        assert (await ok(client, "list_files", {}))["files"] == ["notes.txt", "lib/hack.js"]
        read = await client.call_tool("read_file", {"filename": "lib/hack.js", "server": "home"})
        assert read.content[0].text == SCRIPT
        assert read.structured_content["total_bytes"] == len(SCRIPT) and "content" not in read.structured_content
        assert (await ok(client, "read_file", {"filename": "notes.txt"}))["total_bytes"] == 0
        all_files = await client.call_tool("get_all_files", {})
        assert all_files.structured_content["files"][0] == {"filename": "lib/hack.js", "bytes": len(SCRIPT), "included": True}
        assert SCRIPT in all_files.content[0].text
        assert (await ok(client, "calculate_ram", {"filename": "lib/hack.js"}))["ram_gb"] == 1.7
        defs = await client.call_tool("get_netscript_definitions", {"strip_exports": True})
        assert "interface NS" in defs.content[0].text and "export " not in defs.content[0].text
        servers = await ok(client, "get_all_servers", {})
        assert servers["servers"][0] == {"hostname": "home", "has_admin_rights": True, "purchased_by_player": True}
        meta = await ok(client, "get_file_metadata", {"filename": "notes.txt"})
        assert meta["filename"] == "notes.txt" and meta["mtime"] > 0
        assert (await ok(client, "get_all_file_metadata", {}))["count"] == 2
        save = await ok(client, "get_save_file", {})
        saved = Path(save["path"])
        assert saved.parent == save_dir and saved.read_bytes()[:2] == b"\x1f\x8b"
        assert (await ok(client, "delete_file", {"filename": "notes.txt"}))["deleted"] is True
        gone = await error(client, "read_file", {"filename": "notes.txt"})
        assert gone["code"] == "E_REMOTE"
        assert gone["message"] == "File does not exist. Filename: notes.txt"
        status = await ok(client, "status", {})
        assert status["connected"] is True and status["game_version"] == "3.0 or newer"

        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"bitburner://definitions/NetscriptDefinitions.d.ts", "bitburner://files/home/lib/hack.js"} <= uris
        resource = await client.read_resource("bitburner://files/home/lib/hack.js")
        assert resource.contents[0].text == SCRIPT


def is_status_probe(frame: dict[str, Any]) -> bool:
    """A request the `status` tool sends to learn what the game supports, not one a tool call asked for."""
    probe_file = frame.get("params", {}).get("filename") == "mcp-bridges-probe.txt"
    return frame["method"] == "getAllServers" or (frame["method"] == "getFileMetadata" and probe_file)


def tool_requests(game: FakeGame) -> list[dict[str, Any]]:
    return [f for f in game.requests() if not is_status_probe(f)]


@pytest.mark.parametrize("era", ERAS)
async def test_rejected_calls_send_nothing(connect, era: str) -> None:
    async with connect("http", era) as client, game_for(client) as game:
        # `status` (polled by game_for) probes the game's version with getAllServers / getFileMetadata; the
        # fake game may report those frames after this line, so they are left out of the count.
        before = len(tool_requests(game))
        cases = [
            ("read_file", {"filename": ""}, "E_INVALID_ARGUMENT"),
            ("read_file", {"filename": "../x.js"}, "E_INVALID_ARGUMENT"),
            ("read_file", {"filename": "has space.js"}, "E_INVALID_ARGUMENT"),
            ("write_file", {"filename": "a.exe", "content": "x"}, "E_INVALID_ARGUMENT"),
            ("write_file", {"filename": "a.js", "content": "x" * 1_000_001}, "E_TOO_LARGE"),
            ("write_file", {"filename": "a.js", "content": "x", "method": "runScript"}, "E_INVALID_ARGUMENT"),
            ("list_files", {"server": "   "}, "E_INVALID_ARGUMENT"),
        ]
        for tool, args, code in cases:
            err = await error(client, tool, args)
            assert err["code"] == code, (tool, err)
        # A valid call afterwards brings the first frame since: nothing was sent for the rejected ones.
        await ok(client, "list_files", {})
        while is_status_probe(frame := json.loads((await game.wait_for("request"))["frame"])):
            pass
        assert frame["method"] == "getFileNames", frame
        assert len(tool_requests(game)) == before + 1


async def test_a_drop_fails_the_call_in_flight(connect) -> None:
    async with connect("http", "2026-07-28") as client, game_for(client) as game:
        game.command("mute")
        # The request goes through the bridge, not the fake's stdin: without this wait the game could answer it.
        await game.wait_for("muted")
        result: dict[str, Any] = {}

        async def read() -> None:
            result.update(await error(client, "read_file", {"filename": "a.js"}))

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await game.wait_for("request")
            game.command("close")
        assert result["code"] == "E_DISCONNECTED"
        assert "Options → Remote API" in result["hint"]


async def test_a_foreign_origin_is_refused(connect) -> None:
    async with connect("http", "legacy") as client:
        status = await ok(client, "status", {})
        game = FakeGame(status["listen"], origin="https://evil.example")
        try:
            event = await game.wait_for("error")
            assert "403" in event["message"]
        finally:
            game.stop()


async def test_an_old_game_is_detected_by_asking(connect) -> None:
    async with connect("http", "legacy") as client, game_for(client, version="2.6"):
        status = await ok(client, "status", {})
        assert status["methods"]["getAllServers"] == "yes"
        assert status["methods"]["getFileMetadata"] == "no"
        assert status["game_version"] == "2.6 to 2.8.x"
        err = await error(client, "get_all_file_metadata", {})
        assert err["code"] == "E_UNSUPPORTED" and "Unknown message received" in err["message"]


def test_port_in_use_says_so(bridge_bin: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [str(bridge_bin), "bitburner", "--bitburner-game-port", str(port)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode != 0
    assert re.search(rf"port {port} .*already in use", proc.stderr), proc.stderr
    assert "--bitburner-game-port / BITBURNER_GAME_PORT" in proc.stderr and "bitburner-filesync" in proc.stderr


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_resources_list_comes_in_pages_the_client_follows(connect, transport: str, era: str) -> None:
    """A home with more files than one resources/list page holds (500): each page within it, `nextCursor` to the
    next, every file listed once."""
    async with connect(transport, era) as client, game_for(client):
        for i in range(510):
            await ok(client, "write_file", {"filename": f"many/{i}.txt", "content": "x"})
        pages = [await client.list_resources()]
        while pages[-1].next_cursor is not None:
            assert len(pages) < 100, "resources/list never ends"
            pages.append(await client.list_resources(cursor=pages[-1].next_cursor))
        assert [len(p.resources) <= 500 for p in pages] == [True, True], [len(p.resources) for p in pages]
        uris = [str(r.uri) for p in pages for r in p.resources]
        assert len(uris) == len(set(uris)), "no resource twice"
        assert {f"bitburner://files/home/many/{i}.txt" for i in range(510)} <= set(uris)
