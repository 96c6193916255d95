"""The debug bridge (`mcp-bridges debug --debug-backend dap`) through the official Python MCP client (PyPI `mcp`) over
stdio, in both protocol eras, on a real debugger: debugpy from scripts/install-peers debugging a Python target
the test writes. Breakpoint → start → wait → variables → evaluate → set → continue → output."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from conftest import PEERS, cargo_bin, error, ok
from mcp import Client, StdioServerParameters

ERAS = ["legacy", "2026-07-28"]
pytestmark = [pytest.mark.anyio]

TARGET = "def add(a, b):\n    total = a + b\n    return total\n\n\nx = add(40, 2)\nprint('y =', x)\n"


@pytest.mark.parametrize("era", ERAS)
async def test_python_session_on_debugpy(era: str) -> None:
    python = PEERS / "venv" / "bin" / "python"
    assert python.exists(), "run scripts/install-peers (debugpy)"
    with tempfile.TemporaryDirectory(prefix="debug-interop-") as ws:
        Path(ws, "app.py").write_text(TARGET)
        params = StdioServerParameters(
            command=str(cargo_bin("mcp-bridges")),
            args=["debug", "--debug-workspace", ws, "--debug-backend", "dap", "--debug-python", str(python)],
            env={"NO_COLOR": "1"},
        )
        async with Client(params, mode=era, cache=None, read_timeout_seconds=60) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            assert {"breakpoint_set", "debug_wait_for_hit", "dap_logs", "bridge_status"} <= tools
            assert (await error(client, "debug_evaluate", {"expression": "1"}))["code"] == "E_NO_SESSION"
            bp = await ok(client, "breakpoint_set", {"path": "app.py", "line": 3})
            assert bp["data"]["details"]["breakpoint"]["pending"] is True
            program = str(Path(ws, "app.py"))
            await ok(client, "debug_start", {"config": {"type": "debugpy", "request": "launch", "program": program}})
            hit = await ok(client, "debug_wait_for_hit", {"timeoutMs": 30000})
            assert hit["data"]["line"] == 3
            assert (await ok(client, "debug_evaluate", {"expression": "total * 2"}))["data"]["result"] == "84"
            assert (await ok(client, "debug_set_variable", {"name": "total", "value": "100"}))["data"]["value"] == "100"
            end = await ok(client, "debug_continue", {"timeoutMs": 30000})
            assert end["data"]["event"] == "terminated"
            logs = await ok(client, "dap_logs", {"count": 50})
            assert "y = 100" in logs["data"]["text"]
