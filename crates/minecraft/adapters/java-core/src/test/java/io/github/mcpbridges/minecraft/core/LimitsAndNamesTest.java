package io.github.mcpbridges.minecraft.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Issue 22 items 6 and 7 on the Java side: default names unique per host, a graceful stop reporting every player
 * online as quitting (once), and commands whose numbers are checked against the game's limits before it runs them.
 */
class LimitsAndNamesTest {
    @Test
    void defaultNamesAreHostAndPortInTheProtocolAlphabet() throws Exception {
        assertEquals("mc-host-25565", BridgeConfig.defaultServerName("mc-host", 25565));
        assertEquals("my-host-.local-25566", BridgeConfig.defaultServerName("my host!.local", 25566));
        assertNotEquals(BridgeConfig.defaultServerName("h", 25565), BridgeConfig.defaultServerName("h", 25566));
        String longName = BridgeConfig.defaultServerName("x".repeat(200), 65535);
        assertEquals(64, longName.length());
        assertTrue(longName.endsWith("-65535"));
        assertEquals("minecraft-1", BridgeConfig.defaultServerName("", 1));
        for (String host : List.of("a", "ü-ñ", "---", "a b\tc")) {
            assertTrue(BridgeConfig.defaultServerName(host, 25565).matches("[A-Za-z0-9_.-]{1,64}"), host);
        }
        BridgeConfig named = BridgeConfig.fromMap(Map.of("bridge", Map.of("server_name", "survival")));
        assertEquals("survival", named.withGamePort(25565).serverName(), "a configured name is kept");
        assertEquals(BridgeConfig.defaultServerName(BridgeConfig.hostName(), 25565),
                BridgeConfig.defaults().withGamePort(25565).serverName());
    }

    @Test
    @SuppressWarnings("unchecked")
    void aGracefulStopReportsEveryPlayerOnlineAsQuittingOnce() throws Exception {
        try (Session s = new Session(BridgeConfig.defaults().withGamePort(25565), new FakeGame(), new Wire.Log(), "test", "1.21.1")) {
            Wire wire = new Wire();
            s.onOpen(wire);
            s.onText(Wire.welcome(0));
            Map<String, String> online = new LinkedHashMap<>();
            online.put("Steve", "u1");
            online.put("Alex", "u2");
            assertEquals(2, s.quitAll(online));
            // The server then logs them out: not reported twice.
            s.emitEvent("player_quit", Models.playerQuit("Steve", "u1"));
            assertEquals(0, s.quitAll(online));
            List<Map<String, Object>> quits = wire.ofType("event");
            assertEquals(2, quits.size());
            assertEquals(List.of(1L, 2L), quits.stream().map(q -> ((Map<String, Object>) q.get("payload")).get("typeSeq")).toList(),
                    "each type numbered on its own (typeSeq)");
            for (var q : quits) {
                Map<String, Object> data = (Map<String, Object>) ((Map<String, Object>) q.get("payload")).get("data");
                assertEquals("server_stopping", data.get("reason"));
                assertTrue(data.containsKey("uuid"));
            }
            s.onText(Wire.relay("ack", "a", Map.of("seq", 2L)));
            assertEquals(0, s.drain(1000), "the relay acknowledged both");
        }
    }

    @Test
    void commandsOverTheGamesLimitsAreRefusedBeforeTheGameRunsThem() throws Exception {
        FakeGame game = new FakeGame();
        CommandGuard guard = new CommandGuard(List.of("^give \\w+ \\w+ \\w+$", "^tp .*$"), 256);
        CommandDispatcher d = new CommandDispatcher(game, guard, 256);
        for (var c : List.of(
                List.of("give Steve diamond 6401", "count", 6400L),
                List.of("give Steve diamond 0", "count", 6400L),
                List.of("give Steve diamond lots", "count", 6400L),
                List.of("tp Steve 30000000 64 0", "x", 29999999L),
                List.of("tp Steve 0 99999999 0", "y", 20000000L),
                List.of("tp Steve ~ ~ ~-40000000", "z", 29999999L))) {
            GameException e = assertThrows(GameException.class, () -> d.run("execute_command", Map.of("command", c.get(0))), (String) c.get(0));
            assertEquals("INVALID_COMMAND", e.code(), (String) c.get(0));
            assertEquals("over_game_limit", e.details().get("reason"));
            assertEquals(c.get(1), e.details().get("field"), (String) c.get(0));
            assertEquals(((Long) c.get(2)).longValue(), ((Number) e.details().get("limit")).longValue(), (String) c.get(0));
        }
        assertEquals(List.of(), game.executed, "none reached the game");
        d.run("execute_command", Map.of("command", "give Steve diamond 23"));
        d.run("execute_command", Map.of("command", "tp Steve 10 64 ~-5"));
        assertEquals(List.of("give Steve diamond 23", "tp Steve 10 64 ~-5"), game.executed);
        GameException q = assertThrows(GameException.class,
                () -> d.run("give_item", Map.of("player", "Steve", "item", "diamond", "quantity", 7000L)));
        assertEquals("INVALID_COMMAND", q.code(), "a range error is the caller's to fix, not a schema bug");
        assertEquals("quantity", q.details().get("field"));
    }
}
