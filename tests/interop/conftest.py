"""Shared helpers for the interop tests: build a workspace binary, start it as an HTTP MCP server on a free
loopback port, wait until its /health answers, and stop it afterwards.

Bridge engineers: add your tests next to these files and reuse the helpers, e.g.

    from conftest import cargo_bin, HttpServer

    @pytest.fixture(scope="module")
    def bitburner_http():
        with HttpServer.start([str(cargo_bin("mcp-bridges")), "bitburner"]) as server:
            yield server          # server.mcp_url, server.health(), server.stderr_text()

The peers (Python `mcp`, pytest, Node 24, the Inspector CLI) come from `scripts/install-peers`; run the tests
with `scripts/test` or, after `source scripts/peers-env`, with `pytest tests/interop`.
"""

from __future__ import annotations

import json
import os
import queue
import random
import re
import socket
import subprocess
import tempfile
import threading
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEERS = Path(os.environ.get("PEERS_DIR", ROOT / ".peers"))

# How long a server may take from spawn to a healthy /health. Generous: CI machines are shared and slow; the
# wait ends as soon as /health answers, so a fast start costs nothing.
STARTUP_TIMEOUT_S = 60.0


# The files that take longest, longest first (seconds in one CI run). Under `pytest -n` each file goes whole to a
# worker in collection order, so these start at once instead of last; the stage takes about as long as the longest
# file. Any file not named keeps its place after them.
_SLOW_FILES = (
    "test_minecraft_outage.py",  # 105: the relay down for 90 s
    "test_sandbox_python.py",  # 67: a microVM boot
    "test_poll_events_ts.py",  # 67
    "test_inspector_bridges.py",  # 57
    "test_minecraft_faults.py",  # 55
    "test_minecraft_plugin_node.py",  # 50
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        return _SLOW_FILES.index(name) if name in _SLOW_FILES else len(_SLOW_FILES)

    items.sort(key=rank)  # stable: the tests of a file keep their order


@pytest.fixture
def anyio_backend() -> str:
    # The mcp client is anyio-based; one backend keeps runs deterministic.
    return "asyncio"


# Every executable target of the workspace, by (package, kind, name), from one `cargo build`; or the build's
# error text.
_BUILT: dict[tuple[str, str, str], Path] | str | None = None


def _package_name(package_id: str) -> str:
    # Cargo's package ids: "path+file:///…/crates/cli#mcp-bridges@0.1.0", "path+file:///…/sandbox-agent#0.1.0"
    # (the name left out when it is the directory's), or before cargo 1.77 "mcp-bridges 0.1.0 (path+file:///…)".
    if "#" not in package_id:
        return package_id.split(" ", 1)[0]
    url, fragment = package_id.rsplit("#", 1)
    if "@" in fragment:
        return fragment.split("@", 1)[0]
    return url.rstrip("/").rsplit("/", 1)[1]


def _build_all() -> dict[tuple[str, str, str], Path] | str:
    # One build of every binary and example with the whole workspace's features: the same feature set the Rust
    # tests were built with, so cargo links a few executables and compiles no dependency again. A build per
    # package (`-p bitburner-fake`) resolves that package's features alone and compiled another copy of the
    # dependencies for each.
    proc = subprocess.run(
        ["cargo", "build", "--quiet", "--workspace", "--bins", "--examples", "--message-format=json-render-diagnostics"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    if proc.returncode != 0:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        return f"cargo build --workspace --bins --examples failed:\n{tail}"
    built: dict[tuple[str, str, str], Path] = {}
    for line in proc.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg.get("executable"):
            for kind in msg["target"]["kind"]:
                built[(_package_name(msg["package_id"]), kind, msg["target"]["name"])] = Path(msg["executable"])
    return built


def cargo_bin(package: str, bin_name: str | None = None, kind: str = "bin") -> Path:
    """The executable of binary `bin_name` (default: the package name; `kind="example"` for an example) of a
    workspace package, in the dev profile. The first call builds every binary and example of the workspace at
    once; cargo does nothing for what is up to date. `<BIN_NAME>_BIN` in the environment (e.g. MCP_FIXTURE_BIN)
    names a prebuilt executable instead. A failed build fails every test that needs it, with cargo's errors,
    without building again for each test."""
    global _BUILT
    bin_name = bin_name or package
    override = os.environ.get(f"{bin_name.upper().replace('-', '_')}_BIN")
    if override:
        return Path(override)
    if _BUILT is None:
        _BUILT = _build_all()
    if isinstance(_BUILT, str):
        pytest.fail(_BUILT, pytrace=False)
    path = _BUILT.get((package, kind, bin_name))
    if path is None:
        pytest.fail(f"cargo built no {kind} named {bin_name} in package {package}", pytrace=False)
    return path


# Ports a test must know before its server binds (a peer that restarts on the same port, a game its bridge dials)
# come from below 32768, where Linux picks the local ports of outgoing connections (ip_local_port_range
# 32768-60999): a port taken from port 0 and released is in that range, and any test running beside it (pytest -n)
# can take it for a connection before the server binds it.
_PORTS_LOW, _PORTS_HIGH = 20000, 31999


def free_port() -> int:
    """A loopback port free at the moment of the call, from below the kernel's range for outgoing connections."""
    for _ in range(200):
        port = random.randint(_PORTS_LOW, _PORTS_HIGH)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.fail(f"no free loopback port in {_PORTS_LOW}-{_PORTS_HIGH} after 200 tries", pytrace=False)


def peer_tool(name: str) -> Path:
    """A peer executable installed by scripts/install-peers. A missing peer fails the test: never a skip."""
    for candidate in (PEERS / "venv" / "bin" / name, PEERS / "node" / "node_modules" / ".bin" / name):
        if candidate.exists():
            return candidate
    pytest.fail(f"peer {name} is not installed under {PEERS}: run scripts/install-peers", pytrace=False)


def peer_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for running peers: the venv's Node 24 first on PATH (the Node tools start with
    `#!/usr/bin/env node`)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(PEERS / "venv" / "bin"), str(PEERS / "node" / "node_modules" / ".bin"), env.get("PATH", "")])
    env.update(extra or {})
    return env


# The core logs "serving MCP at http://HOST:PORT/mcp" once it is listening: the readiness signal, and with
# `--mcp-port 0` the only way to learn the port the kernel picked (no race with other processes for a port).
_LISTENING = re.compile(r"serving MCP at http://(?P<host>[^\s/]+):(?P<port>\d+)/mcp")


def _with_listening_log(rust_log: str | None) -> str:
    # The listening line is logged at info by bridge_core::serve; keep it even when RUST_LOG is quieter.
    return f"{rust_log},bridge_core::serve=info" if rust_log else "info"


@dataclass
class HttpServer:
    """A server process serving MCP over Streamable HTTP on 127.0.0.1."""

    proc: subprocess.Popen[bytes]
    port: int
    stderr_path: Path
    _tmp: tempfile.TemporaryDirectory[str] = field(repr=False)
    _reader: threading.Thread = field(repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.base_url}/health", timeout=5) as resp:
            return json.loads(resp.read())

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    @classmethod
    def start(
        cls,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        http_args: list[str] | None = None,
    ) -> HttpServer:
        """Starts `argv` + `http_args` and returns once the server logged its address and GET /health answers
        200. The default `http_args` fit every binary that flattens the core's McpArgs: HTTP on 127.0.0.1, port
        chosen by the kernel."""
        args = http_args if http_args is not None else ["--http", "--mcp-host", "127.0.0.1", "--mcp-port", "0"]
        tmp = tempfile.TemporaryDirectory(prefix="mcp-interop-")
        stderr_path = Path(tmp.name) / "stderr.log"
        proc = subprocess.Popen(
            argv + args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "NO_COLOR": "1", "RUST_LOG": _with_listening_log(os.environ.get("RUST_LOG")), **(env or {})},
        )
        found: queue.Queue[int] = queue.Queue()

        def pump() -> None:
            # Copies the server's stderr to a file for diagnostics and reports the first listening line.
            assert proc.stderr is not None
            with open(stderr_path, "wb") as log:
                for line in proc.stderr:
                    log.write(line)
                    log.flush()
                    m = _LISTENING.search(line.decode(errors="replace"))
                    if m and found.empty():
                        found.put(int(m.group("port")))
            found.put(-1)  # stderr closed: the process is gone

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            port = found.get(timeout=STARTUP_TIMEOUT_S)
        except queue.Empty:
            port = -1
        server = cls(proc, port, stderr_path, tmp, reader)
        try:
            if port < 0:
                raise RuntimeError("it exited or never logged its address")
            server.health()  # raises unless 200 with JSON
        except Exception as e:
            text = server.stderr_text()
            server.stop()
            raise RuntimeError(f"server {argv + args} did not start ({e}); its stderr:\n{text}") from e
        return server

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(timeout=10)
        self._tmp.cleanup()

    def __enter__(self) -> HttpServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_inspector(target: list[str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Runs the Inspector CLI (`mcp-inspector --cli`) against a stdio command or an HTTP URL. Its catalog and
    client config go to a private temporary directory, never to ~/.mcp-inspector."""
    inspector = peer_tool("mcp-inspector")
    with tempfile.TemporaryDirectory(prefix="mcp-inspector-") as home:
        env = peer_env(
            {
                "MCP_CATALOG_PATH": str(Path(home) / "mcp.json"),
                "MCP_CLIENT_CONFIG_PATH": str(Path(home) / "client.json"),
                "HOME": home,
                "NO_COLOR": "1",
            }
        )
        return subprocess.run(
            [str(inspector), "--cli", *target, *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )


async def ok(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Calls `tool` through a Python `mcp` client and returns its structuredContent; fails on a tool error."""
    result = await client.call_tool(tool, args)
    assert result.is_error is False, f"{tool}: {result.content}"
    return result.structured_content


# Where a failed call's {code, message, hint, details} travel: the result's `_meta`, never `structuredContent`
# (clients validate that against the tool's outputSchema, error or not). bridge_core::error::ERROR_META_KEY.
ERROR_META_KEY = "io.github.mcp-bridges/error"


def error_of(result: Any) -> dict[str, Any]:
    """The {code, message, hint, details} of a failed `mcp` client result; checks the shape every client relies on:
    isError, no structuredContent, and the text `[CODE] message — hint` with the same code and hint."""
    assert result.is_error is True, f"expected a tool error: {result.content}"
    assert result.structured_content is None, result.structured_content
    assert result.meta is not None and ERROR_META_KEY in result.meta, result
    err = result.meta[ERROR_META_KEY]
    text = result.content[0].text
    assert text.startswith(f"[{err['code']}] ") and text.endswith(f" — {err['hint']}"), text
    return err


async def error(client: Any, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Calls `tool` expecting a tool error; returns its {code, message, hint, details}."""
    result = await client.call_tool(tool, args)
    assert result.is_error is True, f"{tool} should fail: {result.content}"
    return error_of(result)
