"""Drives tests/interop/ts_client.cjs: an MCP client on the official TypeScript SDK, one JSON line per request."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import ERROR_META_KEY, PEERS, peer_env, peer_tool

SCRIPT = Path(__file__).with_name("ts_client.cjs")
TIMEOUT_S = 60


class TsClient:
    """A connected TypeScript-SDK client (it has listed the tools, which arms its outputSchema validation)."""

    def __init__(self, target: dict[str, Any]) -> None:
        node_modules = PEERS / "node" / "node_modules"
        if not (node_modules / "@modelcontextprotocol" / "sdk" / "package.json").exists():
            pytest.fail(f"@modelcontextprotocol/sdk is not installed under {node_modules}: run scripts/install-peers", pytrace=False)
        self.proc = subprocess.Popen(
            [str(peer_tool("node")), str(SCRIPT), json.dumps(target)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=peer_env({"MCP_TS_SDK_NODE_MODULES": str(node_modules), "NO_COLOR": "1"}),
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        ready = self._next()
        assert ready.get("ready") is True, f"the TypeScript client did not connect: {ready}"
        # The negotiated protocol version (v2 client only; None for v1).
        self.protocol: str | None = ready.get("protocol")

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put("")

    def _next(self) -> dict[str, Any]:
        line = self.lines.get(timeout=TIMEOUT_S)
        assert line, f"the TypeScript client exited (status {self.proc.poll()})"
        return json.loads(line)

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        answer = self._next()
        # What a host would show instead of the tool's result (e.g. -32602 "Structured content does not match").
        assert "thrown" not in answer, f"the TypeScript SDK client threw on {request}: {answer['thrown']}"
        return answer

    def tools(self) -> dict[str, dict[str, Any]]:
        return {t["name"]: t for t in self._ask({"op": "list"})["tools"]}

    def call(self, tool: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
        """The CallToolResult as the SDK returned it to its host; fails the test if the SDK threw. `options`:
        `timeout_ms` (the SDK's request timeout), `progress=True` (a progress token; then `self.progress` is how
        many progress notifications came before the result)."""
        answer = self._ask({"op": "call", "tool": tool, "arguments": arguments, **options})
        self.progress: int | None = answer.get("progress")
        return answer["result"]

    def resources_page(self, cursor: str | None = None) -> dict[str, Any]:
        """One page of resources/list as the SDK returned it: `resources` and, when more follow, `nextCursor`."""
        return self._ask({"op": "resources", "cursor": cursor})["result"]

    def all_resources(self) -> list[list[dict[str, Any]]]:
        """Every page of resources/list, read by following `nextCursor` as a host does."""
        pages = [self.resources_page()]
        while (cursor := pages[-1].get("nextCursor")) is not None:
            assert len(pages) < 100, "resources/list never ends"
            pages.append(self.resources_page(cursor))
        return [page["resources"] for page in pages]

    def ok(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert result.get("isError") is not True, f"{tool}: {result}"
        return result["structuredContent"]

    def error(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """{code, message, hint, details} of a failed call, checked as a host sees it: isError, the text
        `[CODE] message — hint`, no structuredContent, the object in _meta."""
        result = self.call(tool, arguments)
        assert result.get("isError") is True, f"{tool} should fail: {result}"
        assert "structuredContent" not in result, result
        err = result["_meta"][ERROR_META_KEY]
        text = result["content"][0]["text"]
        assert text == f"[{err['code']}] {err['message']} — {err['hint']}", text
        return err

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> TsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
