"""Issue 22, "prove it": the relay down for 90 s and back, with the real flying-squid server (MC 1.21.4) and the
project's plugin, the Rust relay and MCP server as separate processes, a mineflayer bot making the events. The
plugin redials through every backoff cap and resends its outbox: every chat line the bot said reaches the MCP
server, and nothing is reported lost.

Apart from the other fault tests (`test_minecraft_faults.py`) because it waits out the whole outage: as a file of
its own it runs beside them under `pytest -n`. Waits outlast every backoff and timeout involved; no assert has a
wall-clock upper bound."""

from __future__ import annotations

import re
import signal
import time

import pytest
from minecraft_faults import Server, client_of, say, settle, wait_games
from minecraft_world import Bots, Relay, mcp_server

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:resources/subscribe is removed")]


async def test_relay_down_90_s_and_back_loses_nothing_unreported() -> None:
    relay = Relay().start()
    game = Server(relay.url, "outage")
    server = mcp_server(relay.url, client_id="outage", events="player_chat")
    bots = Bots(game.port)
    sent: list[str] = []
    received: list[str] = []
    try:
        game.wait_linked()
        bots.request("join", name="olga")
        async with client_of(server.mcp_url) as client:
            await wait_games(client, ["outage"])
            say(bots, "olga", sent, 20, "before")
            cursor, st = await settle(client, sent, received, 0)
            assert set(sent) <= set(received) and st["lost_total"] == 0, st

            relay.stop(signal.SIGKILL)
            down = time.monotonic()
            # 100 lines over the 90 s the relay is away: held in the plugin's outbox (1000 events).
            say(bots, "olga", sent, 100, "away", gap=0.9)
            while time.monotonic() - down < 90:
                time.sleep(0.5)
            redials = len(re.findall(r"relay (dial failed|link error|refused)", game.log()))
            relay.start()
            # The plugin's next dial comes within its backoff cap (30 s) of the relay's return.
            game.wait_linked(2, timeout=90)
            await wait_games(client, ["outage"])
            say(bots, "olga", sent, 20, "after")
            cursor, st = await settle(client, sent, received, cursor)
        missing = sorted(set(sent) - set(received))
        print(f"relay down {time.monotonic() - down:.0f} s: sent {len(sent)} lines (100 while away), received "
              f"{len(set(received))} distinct, {len(received) - len(set(received))} duplicates, missing {len(missing)}, "
              f"lost_total {st['lost_total']}, plugin links {game.linked()}, dial problems logged {redials}")
        assert missing == [], f"lost while the relay was away: {missing[:10]}"
        assert st["lost_total"] == 0, st
        assert "retrying forever" in game.log(), "the long outage is logged once, and the plugin keeps dialling"
        assert game.log().count("retrying forever") == 1
        assert game.proc.proc.poll() is None
    finally:
        bots.stop()
        server.stop()
        game.stop()
        relay.stop()
