"""Every bridge through the official TypeScript SDK client (@modelcontextprotocol/sdk, the client of the Inspector
and of most hosts), over stdio and Streamable HTTP: a success and tool errors arrive as results the host can show,
with the error's code and hint. The SDK validates `structuredContent` against the tool's `outputSchema` even when
`isError` is true, so each error below comes from a tool that declares an outputSchema: the case that used to
turn into -32602 "Structured content does not match the tool's output schema"."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from conftest import HttpServer, cargo_bin
from test_bitburner_python import FakeGame
from ts_client import TsClient

TRANSPORTS = ["stdio", "http"]


@contextmanager
def ts_client(argv: list[str], transport: str, env: dict[str, str] | None = None) -> Iterator[TsClient]:
    """A TypeScript-SDK client of the server `argv` (a stdio child of the client, or an HTTP server)."""
    if transport == "stdio":
        with TsClient({"stdio": {"command": argv[0], "args": [*argv[1:], "--stdio"], "env": env or {}}}) as client:
            yield client
    else:
        with HttpServer.start(argv, env=env) as server, TsClient({"http": server.mcp_url}) as client:
            yield client


def has_output_schema(client: TsClient, tool: str) -> None:
    assert "outputSchema" in client.tools()[tool], f"{tool} must declare an outputSchema for this test to mean much"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_fixture(transport: str) -> None:
    with ts_client([str(cargo_bin("mcp-fixture"))], transport) as client:
        has_output_schema(client, "echo")
        assert client.ok("echo", {"text": "hi"}) == {"text": "hi", "bytes": 2}

        missing = client.error("echo", {})
        assert missing["code"] == "E_INVALID_ARGUMENT"
        assert missing["details"]["field"] == "text"
        assert "`text`" in missing["hint"]

        failed = client.error("test_error_handling", {})
        assert failed["code"] == "E_REMOTE"
        assert failed["hint"] == "this tool always fails; there is nothing to retry"


def attach_game(client: TsClient) -> FakeGame:
    """Starts the fake game against the bridge behind `client`; returns once the bridge reports it linked."""
    status = client.ok("status", {})
    before = status["connections_total"]
    game = FakeGame(status["listen"])
    while (event := game.next_event())["event"] != "connected":
        assert event["event"] != "exit", f"fake game exited: {game.seen}"
    deadline = time.monotonic() + 20
    while not ((s := client.ok("status", {}))["connected"] and s["connections_total"] > before):
        assert time.monotonic() < deadline, f"the bridge never took the game: {s}"
        time.sleep(0.01)
    return game


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_bitburner(transport: str) -> None:
    with tempfile.TemporaryDirectory(prefix="bitburner-saves-") as saves:
        argv = [str(cargo_bin("mcp-bridges")), "bitburner", "--bitburner-game-port", "0", "--bitburner-save-dir", saves]
        with ts_client(argv, transport) as client:
            has_output_schema(client, "list_files")
            has_output_schema(client, "read_file")

            offline = client.error("list_files", {})
            assert offline["code"] == "E_DISCONNECTED"
            assert "Remote API" in offline["hint"]

            game = attach_game(client)
            try:
                client.ok("write_file", {"filename": "a.js", "content": "export async function main(ns) {}"})
                read = client.call("read_file", {"filename": "a.js"})
                assert read["content"][0]["text"] == "export async function main(ns) {}"
                assert read["structuredContent"]["total_bytes"] == len("export async function main(ns) {}")

                gone = client.error("read_file", {"filename": "nope.js"})
                assert gone["code"] == "E_REMOTE"
                assert gone["message"] == "File does not exist. Filename: nope.js"
                assert gone["hint"]

                # A home with more files than one resources/list page holds (500): the SDK follows nextCursor.
                for i in range(510):
                    client.ok("write_file", {"filename": f"many/{i}.txt", "content": "x"})
                pages = client.all_resources()
                assert len(pages) == 2 and all(len(page) <= 500 for page in pages), [len(p) for p in pages]
                uris = [r["uri"] for page in pages for r in page]
                assert len(uris) == len(set(uris)), "no resource twice"
                assert {f"bitburner://files/home/many/{i}.txt" for i in range(510)} <= set(uris)
            finally:
                game.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_computercraft(transport: str) -> None:
    argv = [str(cargo_bin("mcp-bridges")), "computercraft", "--computercraft-link-host", "127.0.0.1", "--computercraft-link-port", "0"]
    with ts_client(argv, transport) as client:
        has_output_schema(client, "run_lua")
        listing: dict[str, Any] = client.ok("list_computers", {})
        assert listing["computers"] == []

        missing = client.error("run_lua", {"computer": 77, "code": "return 1"})
        assert missing["code"] == "E_NOT_FOUND"
        assert missing["hint"]
        bad = client.error("run_lua", {"computer": 0})
        assert bad["code"] == "E_INVALID_ARGUMENT"
        assert bad["details"]["field"] == "code"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_debug(transport: str) -> None:
    with tempfile.TemporaryDirectory(prefix="debug-ts-") as ws:
        argv = [str(cargo_bin("mcp-bridges")), "debug", "--debug-workspace", ws, "--debug-backend", "dap"]
        with ts_client(argv, transport) as client:
            assert {"breakpoint_set", "debug_start", "debug_wait_for_hit", "bridge_status"} <= set(client.tools())
            assert client.ok("bridge_status", {})["data"]["backend"] == "dap"

            no_session = client.error("debug_evaluate", {"expression": "1"})
            assert no_session["code"] == "E_NO_SESSION"
            assert "debug_start" in no_session["hint"]
            missing = client.error("breakpoint_set", {"path": "app.py"})
            assert missing["code"] == "E_INVALID_ARGUMENT"
            assert missing["details"]["field"] == "line"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_minecraft(transport: str) -> None:
    argv = [str(cargo_bin("mcp-bridges")), "minecraft", "--minecraft-relay-host", "127.0.0.1", "--minecraft-relay-port", "0"]
    with ts_client(argv, transport, env={"MINECRAFT_AUTH_TOKEN": "ts-game-token"}) as client:
        has_output_schema(client, "status")
        has_output_schema(client, "get_online_players")
        status = client.ok("status", {})
        assert status["games"] == [] or not status.get("game_connected"), status

        offline = client.error("get_online_players", {})
        assert offline["code"] == "CONNECTION_ERROR", offline
        assert offline["hint"]
        bad = client.error("give_item", {"player": "steve", "item": "diamond", "quantity": "lots"})
        assert bad["code"] == "E_INVALID_ARGUMENT"
        assert bad["details"]["field"] == "quantity"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_sandbox(transport: str) -> None:
    argv = [str(cargo_bin("mcp-bridges")), "sandbox"]
    with ts_client(argv, transport) as client:
        has_output_schema(client, "run_command")
        sandbox = client.ok("create_sandbox", {})["sandbox_id"]
        try:
            ran = client.ok("run_command", {"sandbox_id": sandbox, "command": "echo from-ts"})
            assert ran["exit_code"] == 0 and ran["stdout"] == "from-ts\n", ran
            gone = client.error("read_file", {"sandbox_id": sandbox, "path": "missing.txt"})
            assert gone["code"] == "E_NOT_FOUND", gone
            # Large results: output past the result budget is cut head-and-tail and says so; a 3 MiB file
            # comes whole in pages.
            big = client.ok("execute_code", {"sandbox_id": sandbox, "language": "python",
                                             "code": "import sys; sys.stdout.write('a' * (600 << 10))"})
            assert big["stdout_bytes"] == 600 << 10 and big["truncated"] is True and set(big["stdout"]) == {"a"}
            expected = "".join(f"line {i:07d}\n" for i in range(242_000))
            code = "open('big.txt', 'w').write(''.join(f'line {i:07d}\\n' for i in range(242_000)))"
            client.ok("execute_code", {"sandbox_id": sandbox, "language": "python", "code": code})
            got, offset = [], 0
            while True:
                page = client.ok("read_file", {"sandbox_id": sandbox, "path": "big.txt", "offset": offset})
                got.append(page["content"])
                offset += page["bytes"]
                if not page["truncated"]:
                    break
            assert "".join(got) == expected
        finally:
            assert client.ok("destroy_sandbox", {"sandbox_id": sandbox})["success"] is True
        unknown = client.error("run_command", {"sandbox_id": sandbox, "command": "true"})
        assert unknown["code"] == "E_NOT_FOUND"
