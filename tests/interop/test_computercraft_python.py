"""The ComputerCraft bridge (`mcp-bridges computercraft`) through the official Python MCP client (PyPI `mcp`), in
both protocol eras and over both transports. The computers are the shipped Lua client running in ccsim, the CC
shim written from the facts in docs/protocols/computercraft.md (crates/computercraft/tests/support/ccsim;
run as the `ccsim` example), linked to the bridge over real loopback WebSockets."""

from __future__ import annotations

import queue
import subprocess
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import HttpServer, cargo_bin, error, ok
from mcp import Client, StdioServerParameters

ERAS = ["legacy", "2026-07-28"]
TRANSPORTS = ["stdio", "http"]
# A probe's pongs are compared whole: the computers (Lua in a simulator process) get a long probe timeout.
LINK_ARGS = [
    "--computercraft-link-host",
    "127.0.0.1",
    "--computercraft-link-port",
    "0",
    "--computercraft-probe-timeout",
    "30s",
]

pytestmark = [pytest.mark.anyio]


def ccsim_bin() -> Path:
    """The ccsim example's executable."""
    return cargo_bin("bridge-computercraft", "ccsim", kind="example")


class Computers:
    """Simulated computers (one process): `linked <id>` on stdout once each client has linked."""

    def __init__(self, url: str, specs: list[str]) -> None:
        self.proc = subprocess.Popen(
            [str(ccsim_bin()), url, *specs], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.strip())
        self.lines.put("exit")

    async def wait_linked(self, n: int) -> None:
        for _ in range(n):
            line = await anyio.to_thread.run_sync(lambda: self.lines.get(timeout=60))
            assert line.startswith("linked "), line

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def bridge_bin() -> Path:
    return cargo_bin("mcp-bridges")


@pytest.fixture
def connect(bridge_bin: Path):
    """`async with connect(transport, era) as client:` a client of a fresh bridge."""

    @asynccontextmanager
    async def open_client(transport: str, era: str) -> AsyncIterator[Client]:
        server = None
        if transport == "stdio":
            target: object = StdioServerParameters(
                command=str(bridge_bin), args=["computercraft", "--stdio", *LINK_ARGS], env={"NO_COLOR": "1"}
            )
        else:
            server = HttpServer.start([str(bridge_bin), "computercraft", *LINK_ARGS])
            target = server.mcp_url
        try:
            async with Client(target, mode=era, cache=None, read_timeout_seconds=60) as client:
                yield client
        finally:
            if server is not None:
                server.stop()

    return open_client


def text(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


@asynccontextmanager
async def computers(client: Client, specs: list[str]) -> AsyncIterator[Computers]:
    listing = await ok(client, "list_computers", {})
    sims = Computers(f"ws://{listing['link_listen']}/link", specs)
    try:
        await sims.wait_linked(len(specs))
        with anyio.fail_after(20):
            while (await ok(client, "list_computers", {}))["count"] < len(specs):
                await anyio.sleep(0.02)
        yield sims
    finally:
        sims.stop()


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_against_lua_computers(connect, transport: str, era: str) -> None:
    async with connect(transport, era) as client:
        empty = await client.call_tool("probe-computers", {})
        assert text(empty) == "No computers connected."
        async with computers(client, ["12:base-turtle:turtle", "0"]):
            names = {t.name for t in (await client.list_tools()).tools}
            assert {
                "probe-computers", "list_computers", "run_lua", "fs_list", "fs_read", "fs_write", "fs_delete",
                "turtle_move", "turtle_turn", "turtle_dig", "turtle_place", "turtle_detect", "turtle_inspect",
                "turtle_inventory", "turtle_select", "turtle_refuel", "peripheral_list", "peripheral_call",
                "redstone_get", "redstone_set", "poll_events",
            } <= names

            probe = await client.call_tool("probe-computers", {})
            assert text(probe) == "pong from 0 (Label: nil)\npong from 12 (Label: base-turtle)"

            lua = await ok(client, "run_lua", {"computer": 12, "code": "print('hi') return 6 * 7, nil, 'é'"})
            assert lua["values"] == [42, None, "é"]
            assert lua["output"] == "hi\n"

            await ok(client, "fs_write", {"computer": 0, "path": "notes/a.txt", "content": "héllo"})
            read = await ok(client, "fs_read", {"computer": 0, "path": "notes/a.txt"})
            assert read["content"] == "héllo" and read["encoding"] == "utf8"

            blocked = await ok(client, "turtle_move", {"computer": 12, "direction": "forward"})
            assert blocked == {"success": False, "reason": "Movement obstructed"}
            inspect = await ok(client, "turtle_inspect", {"computer": 12})
            assert inspect["block"]["name"] == "minecraft:stone"
            assert (await ok(client, "turtle_move", {"computer": 12, "direction": "up"}))["success"] is True

            wrong = await error(client, "turtle_move", {"computer": 0, "direction": "up"})
            assert wrong["code"] == "E_UNSUPPORTED"
            missing = await error(client, "run_lua", {"computer": 77, "code": "return 1"})
            assert missing["code"] == "E_NOT_FOUND"

            links = await ok(client, "poll_events", {"stream": "computers"})
            assert sorted(e["data"]["computer"] for e in links["events"] if e["data"]["event"] == "connected") == [0, 12]
