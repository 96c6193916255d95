"""Helpers of the Minecraft fault tests (`test_minecraft_faults.py`, `test_minecraft_outage.py`): flying-squid with the
project's plugin under a fault-test config, the relay's /metrics, reading the chat stream until every line said
arrived or was reported lost."""

from __future__ import annotations

import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import anyio
from conftest import PEERS, ROOT, ok
from mcp import Client
from minecraft_world import GAME_TOKEN, Bots, Proc, Relay

ADAPTER = ROOT / "crates" / "minecraft" / "adapters" / "flying-squid"

# Redial from 200 ms doubling to the default cap of 30 s: a 90 s outage goes through every step of it.
FAULT_CONFIG = """
[bridge]
reconnect_delay = 200
reconnect_max_delay = 30000

[events]
enabled = ["player_join", "player_quit", "player_chat", "player_death", "block_break"]

[commands]
allowed_patterns = [
  "^say bridge .*$",
  "^give \\\\w+ [\\\\w:]+ \\\\d+$",
  "^tp \\\\w+ -?\\\\d+ -?\\\\d+ -?\\\\d+$",
]

[logging]
level = "INFO"
"""


class Server:
    """flying-squid with the plugin (scripts/minecraft-server); `name=None` leaves the name to the plugin."""

    def __init__(self, relay_url: str, name: str | None, config: str = FAULT_CONFIG) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="mc-fault-")
        cfg = Path(self.dir.name) / "minecraft-mcp-bridge.toml"
        cfg.write_text(config)
        argv = [str(ROOT / "scripts" / "minecraft-server"), "--port", "0", "--relay", relay_url, "--token", GAME_TOKEN, "--config", str(cfg)]
        if name:
            argv += ["--name", name]
        # stdout: the launcher's status lines; stderr (the plugin's log) goes to the Proc's file.
        self.proc = Proc(argv, env={"PEERS_DIR": str(PEERS)}, watch="stdout", name="minecraft-server")
        m = self.proc.wait_for(r"^ready port=(\d+) game=(\S+)", timeout=180)
        self.port = int(m.group(1))
        self.name = m.group(2)

    def linked(self) -> int:
        return sum(line.startswith("linked ") for line in self.proc.seen)

    def wait_linked(self, count: int = 1, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.linked() < count:
            assert time.monotonic() < deadline, f"{self.name}: linked {self.linked()} times, not {count}:\n{self.proc.tail()}"
            assert self.proc.proc.poll() is None, self.proc.tail()
            time.sleep(0.05)

    def log(self) -> str:
        return self.proc.tail(100_000)

    def stop(self) -> None:
        self.proc.stop()
        self.dir.cleanup()


def metrics(relay: Relay) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{relay.port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


async def chat_lines(client: Client, cursor: int = 0) -> tuple[list[str], int]:
    """Every player_chat message on the stream after `cursor` (loss records skipped), and the next cursor."""
    lines: list[str] = []
    while True:
        page = await ok(client, "poll_events", {"stream": "player_chat", "since": cursor, "limit": 500})
        lines += [e["data"]["data"]["message"] for e in page["events"] if e["data"].get("eventType") == "player_chat"]
        cursor = page["next_since"]
        if not page["more"]:
            return lines, cursor


async def status(client: Client) -> dict[str, Any]:
    return await ok(client, "status", {})


async def wait_games(client: Client, games: list[str], timeout: float = 60) -> dict[str, Any]:
    with anyio.fail_after(timeout):
        while True:
            st = await status(client)
            if st.get("connected") and sorted(st.get("games", [])) == sorted(games):
                return st
            await anyio.sleep(0.1)


async def settle(client: Client, sent: list[str], received: list[str], cursor: int, timeout: float = 90) -> tuple[int, dict[str, Any]]:
    """Reads until every line sent arrived or is covered by lost_total (which only grows), then once more after
    a quiet second; returns the cursor and the final status."""
    deadline = time.monotonic() + timeout
    while True:
        lines, cursor = await chat_lines(client, cursor)
        received += lines
        st = await status(client)
        missing = sorted(set(sent) - set(received), key=sent.index)
        if len(missing) <= st["lost_total"]:
            await anyio.sleep(1)
            lines, cursor = await chat_lines(client, cursor)
            received += lines
            return cursor, await status(client)
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{len(missing)} lines neither arrived nor were reported lost within {timeout} s: sent {len(sent)}, "
                f"received {len(set(received))} distinct, status {st}; missing {missing[:5]}...{missing[-5:]}"
            )
        await anyio.sleep(0.2)


def client_of(url: str) -> Any:
    return Client(url, mode="legacy", cache=None, read_timeout_seconds=60)


def say(bots: Bots, bot: str, sent: list[str], n: int, prefix: str, gap: float = 0.0) -> None:
    for _ in range(n):
        text = f"{prefix}-{len(sent)}"
        bots.request("chat", name=bot, text=text)
        sent.append(text)
        if gap:
            time.sleep(gap)
