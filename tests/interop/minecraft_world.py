"""Processes for the Minecraft end-to-end tests: the Rust relay (`mcp-bridges minecraft-relay`), the flying-squid
game with the bridge plugin (`scripts/minecraft-server`), mineflayer bots (`minecraft_bots.cjs`) and the MCP
server (`mcp-bridges minecraft --minecraft-relay-url ...`). Every port comes from the kernel (port 0) or, for the
relay, whose port must survive a restart, from `conftest.free_port`. A missing peer fails the test."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from conftest import PEERS, ROOT, HttpServer, cargo_bin, free_port

GAME_TOKEN = "game-token-e2e-0123456789"
MCP_TOKEN = "mcp-token-e2e-0123456789"
MCP_TOKEN_READONLY = "mcp-token-readonly-0123456789"
EVENT_TYPES = ["player_join", "player_quit", "player_chat", "player_death", "block_break"]

# The game's config for the tests: minecraft-mcp-bridge.toml (crates/minecraft/adapters/README.md); reconnect
# fast and forever; a whitelist that allows what the tests run and nothing else.
GAME_CONFIG = """
[bridge]
reconnect_attempts = 0
reconnect_delay = 200

[events]
enabled = ["player_join", "player_quit", "player_chat", "player_death", "block_break"]

[commands]
allowed_patterns = [
  "^say bridge .*$",
  "^time query daytime$",
  "^kill \\\\w+$",
  "^weather (clear|rain)$",
]

[security]
require_auth = true
max_command_length = 256

[logging]
level = "INFO"
"""


def real_node() -> str:
    """The Node binary itself (the venv's `node` is a Python launcher that would not pass signals on)."""
    launcher = PEERS / "venv" / "bin" / "node"
    if not launcher.exists():
        pytest.fail(f"node is not installed under {PEERS}: run scripts/install-peers", pytrace=False)
    return subprocess.run([str(launcher), "-e", "process.stdout.write(process.execPath)"], capture_output=True, text=True, check=True).stdout


class Proc:
    """A child process whose output lines (one stream) are queued for wait_for and kept for diagnostics."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, watch: str = "stderr", name: str = "") -> None:
        self.name = name or Path(argv[0]).name
        self.log = tempfile.NamedTemporaryFile(prefix=f"mc-{self.name}-", suffix=".log", delete=False)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        watched = subprocess.PIPE
        other = self.log
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=watched if watch == "stdout" else other,
            stderr=watched if watch == "stderr" else other,
            env={**os.environ, "NO_COLOR": "1", **(env or {})},
            cwd=ROOT,
        )
        stream = self.proc.stdout if watch == "stdout" else self.proc.stderr
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: Any) -> None:
        for raw in stream:
            line = raw.decode(errors="replace").rstrip("\n")
            self.seen.append(line)
            self.lines.put(line)
        self.lines.put("\0exit")

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match[str]:
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line == "\0exit":
                raise AssertionError(f"{self.name} exited (code {self.proc.wait()}) before /{pattern}/:\n{self.tail()}")
            m = rx.search(line)
            if m:
                return m
        raise AssertionError(f"{self.name}: no /{pattern}/ within {timeout} s:\n{self.tail()}")

    def tail(self, n: int = 40) -> str:
        self.log.flush()
        other = Path(self.log.name).read_text(errors="replace").splitlines()[-n:]
        return "\n".join(self.seen[-n:] + ["--- other stream ---"] + other)

    def send_signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                # Past a relay's drain grace (10 s here) and a game server's stop grace (15 s).
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Relay:
    """`mcp-bridges minecraft-relay` on a fixed loopback port (restartable on the same port)."""

    def __init__(self, port: int | None = None, extra_args: list[str] | None = None) -> None:
        self.port = port or free_port()
        self.extra_args = extra_args or []
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        argv = [str(cargo_bin("mcp-bridges")), "minecraft-relay", "--relay-host", "127.0.0.1", "--relay-port", str(self.port), *self.extra_args]
        env = {
            "MINECRAFT_AUTH_TOKEN": GAME_TOKEN,
            "MINECRAFT_MCP_AUTH_TOKENS": f"{MCP_TOKEN},{MCP_TOKEN_READONLY}=get_online_players|get_server_info",
            # A stopped relay waits this long for MCP servers to acknowledge what it sent them (queues live in
            # its memory): the restart tests lose nothing only if a loaded machine's server gets there in time.
            "MINECRAFT_DRAIN_GRACE": "10s",
            "RUST_LOG": "info",
        }
        # A port just freed by a stopped relay can take a moment to bind again.
        for attempt in range(20):
            self.proc = Proc(argv, env=env, name="relay")
            try:
                self.proc.wait_for(r"listening on ws://", timeout=30)
                return self
            except AssertionError:
                if attempt == 19 or "in use" not in self.proc.tail():
                    raise
                self.proc.stop()
                time.sleep(0.25)
        return self

    def health(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as resp:
            return json.loads(resp.read())

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc:
            self.proc.stop(sig)


class Game:
    """flying-squid 1.12.0 (MC 1.21.4, offline) with the bridge plugin, via scripts/minecraft-server."""

    def __init__(self, relay_url: str, *, token: str = GAME_TOKEN, name: str = "survival", config: str = GAME_CONFIG) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="mc-game-")
        cfg = Path(self.dir.name) / "minecraft-mcp-bridge.toml"
        cfg.write_text(config)
        # --stop-grace: a stopped server waits for the relay's acknowledgement of its last events; on a loaded
        # machine that is not always within the default 3 s.
        argv = [
            str(ROOT / "scripts" / "minecraft-server"),
            *("--port", "0", "--relay", relay_url, "--token", token, "--config", str(cfg), "--name", name),
            *("--stop-grace", "15000"),
        ]
        self.proc = Proc(argv, env={"PEERS_DIR": str(PEERS)}, watch="stdout", name="minecraft-server")
        self.port = int(self.proc.wait_for(r"^ready port=(\d+)", timeout=120).group(1))

    def wait_linked(self, timeout: float = 30) -> None:
        self.proc.wait_for(r"^linked ", timeout=timeout)

    def stop(self) -> None:
        self.proc.stop()
        self.dir.cleanup()


class Bots:
    """mineflayer 4.39.0 bots in one Node process, driven over stdin/stdout JSON lines."""

    def __init__(self, port: int) -> None:
        argv = [real_node(), str(ROOT / "tests" / "interop" / "minecraft_bots.cjs"), str(port)]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        self.messages: list[tuple[str, str]] = []
        self.deaths: list[str] = []
        self.next_id = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if msg.get("event") == "message":
                self.messages.append((msg["bot"], msg["text"]))
            elif msg.get("event") == "death":
                self.deaths.append(msg["bot"])
            elif "id" in msg:
                self.replies.put(msg)

    def request(self, op: str, timeout: float = 40, **kw: Any) -> dict[str, Any]:
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps({"id": rid, "op": op, "timeoutMs": int(timeout * 1000) - 1000, **kw}) + "\n")
            self.proc.stdin.flush()
            while True:
                reply = self.replies.get(timeout=timeout)
                if reply["id"] == rid:
                    break
        assert reply["ok"], f"bot {op} {kw}: {reply.get('error')}"
        return reply

    def saw(self, bot: str, text: str) -> bool:
        return any(b == bot and text in t for b, t in self.messages)

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def mcp_server(relay_url: str, *, token: str = MCP_TOKEN, client_id: str = "e2e", events: str = "*") -> HttpServer:
    """`mcp-bridges minecraft --minecraft-relay-url ...` serving MCP over HTTP on a kernel-chosen port."""
    env = {
        "MINECRAFT_RELAY_TOKEN": token,
        "MINECRAFT_CLIENT_ID": client_id,
        "MINECRAFT_EVENTS": events,
        "MINECRAFT_RECONNECT_BASE": "50ms",
        "MINECRAFT_RECONNECT_MAX": "200ms",
    }
    return HttpServer.start([str(cargo_bin("mcp-bridges")), "minecraft", "--minecraft-relay-url", relay_url], env=env)
