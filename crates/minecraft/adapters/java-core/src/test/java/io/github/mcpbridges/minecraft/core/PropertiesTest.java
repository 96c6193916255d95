package io.github.mcpbridges.minecraft.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * The design's correctness properties (each stated above its test) that belong to the game side, as seeded generator loops (jqwik is not in
 * Debian; each loop runs CASES generated cases and prints its seed on failure).
 */
class PropertiesTest {
    static final int CASES = 200;
    static final long SEED = Long.getLong("properties.seed", 0x5EEDL);
    static final List<String> VERBS = List.of("say", "tp", "give", "op", "stop", "kill", "ban", "gamemode");

    static String word(Random r, int min, int max) {
        String alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
        StringBuilder sb = new StringBuilder();
        int n = min + r.nextInt(max - min + 1);
        for (int i = 0; i < n; i++) sb.append(alphabet.charAt(r.nextInt(alphabet.length())));
        return sb.toString();
    }

    static String anyText(Random r, int max) {
        StringBuilder sb = new StringBuilder();
        int n = r.nextInt(max + 1);
        for (int i = 0; i < n; i++) {
            int kind = r.nextInt(10);
            if (kind == 0) sb.append((char) r.nextInt(0x20));
            else if (kind == 1) sb.append((char) (0xA0 + r.nextInt(0x2000)));
            else sb.append((char) (0x20 + r.nextInt(0x5F)));
        }
        return sb.toString();
    }

    static Session session(BridgeConfig cfg, FakeGame game, Wire wire, Wire.Log log) {
        Session s = new Session(cfg, game, log, "test", "1.21.1");
        s.onOpen(wire);
        s.onText(Wire.welcome(0));
        return s;
    }

    // Feature: minecraft-mcp-bridge, Property 7: Command whitelist enforcement — for any command that does not
    // match the allowed command patterns, the Mod should reject the command and return an error.
    @Test
    void property7WhitelistEnforcement() throws Exception {
        Random r = new Random(SEED);
        BridgeConfig cfg = BridgeConfig.defaults();
        CommandGuard guard = CommandGuard.of(cfg);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        int expectedRuns = 0;
        try (Session s = session(cfg, game, wire, new Wire.Log())) {
            for (int i = 0; i < CASES; i++) {
                String name = word(r, 1, 16);
                String allowed = switch (r.nextInt(3)) {
                    case 0 -> "say " + anyText(r, 40).replaceAll("[\\r\\n\\x00\\u0085\\u2028\\u2029]", "");
                    case 1 -> "tp " + name + " " + (r.nextInt(2000) - 1000) + " " + r.nextInt(300) + " " + (r.nextInt(2000) - 1000);
                    // Counts within the game's limit (1..6400): a whitelisted give over it is refused (issue 22).
                    default -> "give " + name + " " + word(r, 1, 20) + " " + (1 + r.nextInt(100));
                };
                String refused = switch (r.nextInt(7)) {
                    case 0 -> allowed + "\nop " + name;                       // a second line smuggled in
                    case 1 -> " " + allowed;                                    // not anchored at the start
                    case 2 -> allowed.startsWith("say") ? "xsay hi" : allowed + " extra"; // not anchored at the end
                    case 3 -> VERBS.get(3 + r.nextInt(VERBS.size() - 3)) + " " + name; // a verb nobody allowed
                    case 4 -> allowed + "x".repeat(cfg.maxCommandLength() + 1 - allowed.length()); // too long
                    case 5 -> "";
                    default -> "/" + allowed;                                   // a leading slash is not the command
                };
                String why = "seed " + SEED + " case " + i + ": ";
                assertTrue(guard.allows(allowed), why + allowed);
                assertFalse(guard.allows(refused), why + refused);

                s.onText(Wire.command("ok-" + i, "execute_command", Map.of("command", allowed)));
                s.onText(Wire.command("no-" + i, "execute_command", Map.of("command", refused)));
                expectedRuns++;
            }
            List<Map<String, Object>> responses = wire.await("response", 2 * CASES);
            for (Map<String, Object> resp : responses) {
                @SuppressWarnings("unchecked")
                Map<String, Object> p = (Map<String, Object>) resp.get("payload");
                String id = (String) resp.get("id");
                if (id.startsWith("no-")) {
                    assertEquals(false, p.get("success"), id);
                    @SuppressWarnings("unchecked")
                    Map<String, Object> err = (Map<String, Object>) p.get("error");
                    assertEquals("INVALID_COMMAND", err.get("code"), id);
                } else {
                    assertEquals(true, p.get("success"), id + " " + p);
                }
            }
            // Refused commands never reached the game.
            assertEquals(expectedRuns, game.executed.size());
            for (String ran : game.executed) assertTrue(guard.allows(ran), ran);
        }
    }

    // Feature: minecraft-mcp-bridge, Property 6: Event filtering by configuration — for any event that is not in
    // the enabled events list, the Mod should not transmit the event to the Bridge Server.
    @Test
    void property6EventFiltering() throws Exception {
        Random r = new Random(SEED + 6);
        for (int i = 0; i < CASES; i++) {
            List<String> enabled = new ArrayList<>();
            for (String t : BridgeConfig.EVENT_TYPES) if (r.nextBoolean()) enabled.add(t);
            StringBuilder toml = new StringBuilder("[events]\nenabled = [");
            for (String t : enabled) toml.append('"').append(t).append("\",");
            toml.append("]\n");
            BridgeConfig cfg = BridgeConfig.parse(toml.toString());
            Wire wire = new Wire();
            List<String> expected = new ArrayList<>();
            try (Session s = session(cfg, new FakeGame(), wire, new Wire.Log())) {
                int n = r.nextInt(30);
                for (int k = 0; k < n; k++) {
                    String type = BridgeConfig.EVENT_TYPES.get(r.nextInt(5));
                    boolean accepted = s.emitEvent(type, Models.playerChat("p" + k, "m"));
                    assertEquals(enabled.contains(type), accepted);
                    if (enabled.contains(type)) expected.add(type);
                }
                List<Map<String, Object>> events = wire.ofType("event");
                List<String> sentTypes = new ArrayList<>();
                long seq = 0;
                for (Map<String, Object> e : events) {
                    @SuppressWarnings("unchecked")
                    Map<String, Object> p = (Map<String, Object>) e.get("payload");
                    sentTypes.add((String) p.get("eventType"));
                    assertEquals(++seq, e.get("seq"), "seq numbers are contiguous over sent events only");
                }
                assertEquals(expected, sentTypes, "seed " + SEED + " case " + i + " enabled " + enabled);
                assertEquals(expected.size(), s.outbox().size(), "disabled events are not even queued");
            }
        }
    }

    // Feature: minecraft-mcp-bridge, Property 1: Event notification completeness — for any game event, the
    // emitted message contains all required fields for that event type (player, timestamp, event data).
    @Test
    void property1EventCompleteness() throws Exception {
        Random r = new Random(SEED + 1);
        Wire wire = new Wire();
        try (Session s = session(BridgeConfig.defaults(), new FakeGame(), wire, new Wire.Log())) {
            for (int i = 0; i < CASES; i++) {
                String player = word(r, 3, 16);
                Map<String, Object> loc = Models.location("minecraft:overworld", r.nextInt(1000), r.nextInt(300), r.nextInt(1000));
                String type = BridgeConfig.EVENT_TYPES.get(r.nextInt(5));
                Map<String, Object> data = switch (type) {
                    case "player_join" -> Models.playerJoin(player, "uuid-" + i);
                    case "player_quit" -> Models.playerQuit(player, "uuid-" + i);
                    case "player_chat" -> Models.playerChat(player, anyText(r, 100));
                    case "player_death" -> Models.playerDeath(player, "fell", loc, r.nextBoolean() ? "Zombie" : null);
                    default -> Models.blockBreak(player, "minecraft:stone", loc);
                };
                assertTrue(s.emitEvent(type, data));
            }
            for (Map<String, Object> e : wire.ofType("event")) {
                @SuppressWarnings("unchecked")
                Map<String, Object> p = (Map<String, Object>) e.get("payload");
                assertTrue(p.get("timestamp") instanceof Long, "payload.timestamp");
                @SuppressWarnings("unchecked")
                Map<String, Object> data = (Map<String, Object>) p.get("data");
                for (String f : Models.requiredFields((String) p.get("eventType"))) assertNotNull(data.get(f), p.get("eventType") + "." + f);
                if (data.get("location") instanceof Map<?, ?> loc) {
                    for (String f : List.of("world", "x", "y", "z")) assertNotNull(loc.get(f), "location." + f);
                }
            }
        }
    }

    // Feature: minecraft-mcp-bridge, Property 20: Message schema version inclusion — every message sent
    // between components includes a schema version number in the specified format.
    @Test
    void property20EveryMessageCarriesTheVersion() throws Exception {
        Random r = new Random(SEED + 20);
        FakeGame game = new FakeGame();
        game.players.put("alex", Models.map("name", "alex"));
        Wire wire = new Wire();
        try (Session s = session(BridgeConfig.defaults(), game, wire, new Wire.Log())) {
            for (int i = 0; i < CASES; i++) {
                switch (r.nextInt(4)) {
                    case 0 -> s.emitEvent("player_chat", Models.playerChat("alex", anyText(r, 20)));
                    case 1 -> s.onText(Wire.command("c" + i, CommandDispatcher.COMMAND_TYPES.get(r.nextInt(8)), Map.of("player", "alex")));
                    case 2 -> s.onText(anyText(r, 50));
                    default -> s.onText(Wire.relay("ack", "a" + i, Map.of("seq", "x")));
                }
            }
            Thread.sleep(200);
            for (Map<String, Object> m : wire.messages()) {
                assertEquals(Envelope.VERSION, m.get("version"), m.toString());
                assertEquals("minecraft", m.get("source"));
                assertTrue(m.get("timestamp") instanceof Long);
                assertTrue(m.get("payload") instanceof Map);
            }
        }
    }

    // Feature: minecraft-mcp-bridge, Property 21: Schema validation enforcement — for any message that fails
    // schema validation, the receiving component rejects it and returns a validation error.
    @Test
    void property21InvalidMessagesAreRefused() throws Exception {
        Random r = new Random(SEED + 21);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        try (Session s = session(BridgeConfig.parse("[commands]\nallowed_patterns = [\".*\"]\n"), game, wire, new Wire.Log())) {
            for (int i = 0; i < CASES; i++) {
                Map<String, Object> m = Envelope.build("command", "bad-" + i, Models.map("command", "execute_command", "args", Map.of("command", "say " + i)));
                switch (r.nextInt(8)) {
                    case 0 -> m.remove("version");
                    case 1 -> m.put("version", r.nextBoolean() ? 1 : "one");
                    case 2 -> m.put("type", "teleport");
                    case 3 -> m.put("timestamp", "now");
                    case 4 -> m.put("payload", List.of());
                    case 5 -> m.remove("source");
                    case 6 -> m.put("payload", Models.map("command", 7, "args", Map.of()));
                    default -> m.put("payload", Models.map("command", "execute_command", "args", "say hi"));
                }
                s.onText(Json.write(m));
            }
            List<Map<String, Object>> errors = wire.await("error", CASES);
            for (Map<String, Object> e : errors) {
                @SuppressWarnings("unchecked")
                Map<String, Object> p = (Map<String, Object>) e.get("payload");
                assertEquals("SCHEMA_ERROR", p.get("code"));
                assertTrue(((String) p.get("message")).contains("field"), p.toString());
            }
            Thread.sleep(100);
            assertEquals(List.of(), game.executed, "no invalid message was processed");
        }
    }

    // Feature: minecraft-mcp-bridge, Property 22: Version mismatch handling — a message with an unsupported
    // schema version is logged as a warning and handled gracefully (processed as 1.0 when it validates).
    @Test
    void property22VersionMismatchDegradesGracefully() throws Exception {
        Random r = new Random(SEED + 22);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        Wire.Log log = new Wire.Log();
        try (Session s = session(BridgeConfig.parse("[commands]\nallowed_patterns = [\"say .*\"]\n"), game, wire, log)) {
            for (int i = 0; i < CASES; i++) {
                Map<String, Object> m = Envelope.build("command", "v-" + i, Models.map("command", "execute_command", "args", Map.of("command", "say " + i)));
                m.put("version", (2 + r.nextInt(50)) + "." + r.nextInt(10));
                m.put("future", Map.of("field", r.nextInt()));
                s.onText(Json.write(m));
            }
            assertEquals(CASES, wire.await("response", CASES).size());
            assertEquals(CASES, game.executed.size());
            assertTrue(log.all().contains("WARN relay speaks protocol"), log.all());
        }
    }

    // Feature: minecraft-mcp-bridge, Property 12: Malformed message resilience — for any malformed message, the
    // component logs the error and keeps processing subsequent messages without crashing.
    @Test
    void property12MalformedMessagesDoNotStopTheSession() throws Exception {
        Random r = new Random(SEED + 12);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        Wire.Log log = new Wire.Log();
        try (Session s = session(BridgeConfig.parse("[commands]\nallowed_patterns = [\"say .*\"]\n"), game, wire, log)) {
            String valid = Json.write(Envelope.build("command", "x", Models.map("command", "execute_command", "args", Map.of("command", "say ok"))));
            for (int i = 0; i < CASES; i++) {
                String garbage = switch (r.nextInt(5)) {
                    case 0 -> anyText(r, 200);
                    case 1 -> valid.substring(0, r.nextInt(valid.length()));           // truncated
                    case 2 -> "[".repeat(1 + r.nextInt(500));                           // deep nesting
                    case 3 -> "{\"version\":\"1.0\",\"type\":\"ack\",\"id\":\"a\",\"timestamp\":1,\"source\":\"relay\",\"payload\":{\"seq\":" + anyText(r, 5) + "}}";
                    default -> valid.replace('"', (char) (r.nextInt(0x7F)));
                };
                s.onText(garbage);
                s.onText(Wire.command("after-" + i, "execute_command", Map.of("command", "say " + i)));
            }
            List<Map<String, Object>> responses = wire.await("response", CASES);
            Set<String> ids = new HashSet<>();
            for (Map<String, Object> m : responses) ids.add((String) m.get("id"));
            for (int i = 0; i < CASES; i++) assertTrue(ids.contains("after-" + i), "the message after garbage " + i + " went through");
            assertTrue(log.all().contains("refused a message"), "malformed messages are logged");
        }
    }

    // Feature: minecraft-mcp-bridge, Property 13: Connection error recovery — for any connection error, the
    // component retries according to the configured policy: exponential from reconnect_delay, capped at
    // reconnect_max_delay, forever (issue 22: reconnect_attempts only marks when the outage is logged as long).
    @Test
    void property13BackoffFollowsThePolicy() {
        Random r = new Random(SEED + 13);
        for (int i = 0; i < CASES; i++) {
            long initial = 1 + r.nextInt(10_000);
            long cap = initial + r.nextInt(60_000);
            int attempts = r.nextInt(12);
            Backoff b = new Backoff(initial, cap, attempts, new Random(r.nextLong()));
            for (int k = 1; k <= attempts + 40; k++) {
                long base = Math.min(cap, initial << Math.min(k - 1, 20));
                long d = b.nextDelayMs();
                assertTrue(d >= Math.max(1, base / 2) && d <= base, "attempt " + k + ": " + d + " not in [" + base / 2 + ", " + base + "]");
                assertEquals(k == Math.max(1, attempts == 0 ? Backoff.LONG_OUTAGE_ATTEMPTS : attempts) + 1, b.outageJustBecameLong(), "attempt " + k);
            }
            b.reset();
            assertTrue(b.nextDelayMs() <= initial, "a successful link starts over");
        }
    }

    // Feature: minecraft-mcp-bridge, Property 15: Command failure logging — for any failed command execution,
    // the Mod logs contain the command text, error reason, and stack trace.
    @Test
    void property15FailedCommandsAreLoggedWithStackTrace() throws Exception {
        Random r = new Random(SEED + 15);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        Wire.Log log = new Wire.Log();
        try (Session s = session(BridgeConfig.parse("[commands]\nallowed_patterns = [\".*\"]\n"), game, wire, log)) {
            for (int i = 0; i < CASES; i++) {
                String cmd = "cmd" + i + " " + word(r, 1, 10);
                String reason = "boom-" + r.nextInt(1_000_000);
                game.crash = new IllegalStateException(reason);
                log.lines.clear();
                s.onText(Wire.command("f" + i, "execute_command", Map.of("command", cmd)));
                wire.await("response", i + 1);
                String text = log.all();
                assertTrue(text.contains(cmd), "command text in the log");
                assertTrue(text.contains(reason), "reason in the log");
                assertTrue(text.contains("\tat "), "stack trace in the log");
            }
        }
    }

    // Feature: minecraft-mcp-bridge, Property 3: Command failure error responses — for any command that fails,
    // the response carries an error with a code and a descriptive message.
    @Test
    void property3FailuresCarryDescriptiveErrors() throws Exception {
        Random r = new Random(SEED + 3);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        try (Session s = session(BridgeConfig.defaults(), game, wire, new Wire.Log())) {
            for (int i = 0; i < CASES; i++) {
                String ghost = "ghost" + word(r, 1, 8);
                Map<String, Object> args = switch (r.nextInt(5)) {
                    case 0 -> Map.of("player", ghost);
                    case 1 -> Map.of("player", ghost, "item", "diamond", "quantity", 1);
                    case 2 -> Map.of("x", 0, "y", 0, "z", 0, "radius", 17 + r.nextInt(100));
                    case 3 -> Map.of("player", ghost, "x", "north", "y", 1, "z", 1);
                    default -> Map.of("message", "hi", "target", ghost);
                };
                String type = switch (args.size()) {
                    case 1 -> "get_player_info";
                    case 3 -> "give_item";
                    case 4 -> args.containsKey("radius") ? "get_world_info" : "teleport_player";
                    default -> "send_message";
                };
                s.onText(Wire.command("e" + i, type, args));
            }
            for (Map<String, Object> resp : wire.await("response", CASES)) {
                @SuppressWarnings("unchecked")
                Map<String, Object> p = (Map<String, Object>) resp.get("payload");
                assertEquals(false, p.get("success"));
                @SuppressWarnings("unchecked")
                Map<String, Object> err = (Map<String, Object>) p.get("error");
                // A value over a game limit is INVALID_COMMAND (the caller's to fix), a malformed one SCHEMA_ERROR.
                assertTrue(Set.of("PLAYER_NOT_FOUND", "SCHEMA_ERROR", "INVALID_COMMAND").contains(err.get("code")), err.toString());
                String msg = (String) err.get("message");
                assertTrue(msg.contains("ghost") || msg.contains("radius") || msg.contains("x:"), msg);
            }
        }
    }

    // Feature: minecraft-mcp-bridge, Property 2: Command forwarding and execution — for any valid invocation of
    // execute_command, send_message, teleport_player or give_item, the game executes it and answers success.
    @Test
    void property2ValidCommandsAreExecuted() throws Exception {
        Random r = new Random(SEED + 2);
        FakeGame game = new FakeGame();
        Wire wire = new Wire();
        List<String> expected = new ArrayList<>();
        try (Session s = session(BridgeConfig.defaults(), game, wire, new Wire.Log())) {
            for (int i = 0; i < CASES; i++) {
                String player = word(r, 3, 16);
                game.players.put(player, Models.map("name", player));
                switch (r.nextInt(4)) {
                    case 0 -> {
                        String cmd = "say " + word(r, 1, 30);
                        expected.add(cmd);
                        s.onText(Wire.command("p" + i, "execute_command", Map.of("command", cmd)));
                    }
                    case 1 -> {
                        String msg = word(r, 1, 50);
                        expected.add("msg " + msg);
                        s.onText(Wire.command("p" + i, "send_message", r.nextBoolean() ? Map.of("message", msg) : Map.of("message", msg, "target", player)));
                    }
                    case 2 -> s.onText(Wire.command("p" + i, "teleport_player",
                            Map.of("player", player, "x", r.nextInt(2000) - 1000, "y", r.nextInt(300), "z", String.valueOf(r.nextInt(50)))));
                    default -> {
                        int q = 1 + r.nextInt(CommandDispatcher.MAX_QUANTITY);
                        String item = r.nextBoolean() ? "diamond" : "minecraft:diamond";
                        expected.add("give " + player + " minecraft:diamond " + q);
                        s.onText(Wire.command("p" + i, "give_item", Map.of("player", player, "item", item, "quantity", q)));
                    }
                }
            }
            for (Map<String, Object> resp : wire.await("response", CASES)) {
                @SuppressWarnings("unchecked")
                Map<String, Object> p = (Map<String, Object>) resp.get("payload");
                assertEquals(true, p.get("success"), p.toString());
                @SuppressWarnings("unchecked")
                Map<String, Object> data = (Map<String, Object>) p.get("data");
                assertEquals(true, data.get("success"), data.toString());
            }
            assertEquals(expected, game.executed, "executed in the order received, each once");
        }
    }

    // Feature: minecraft-mcp-bridge, Property 8: Player list query completeness — get_online_players returns
    // exactly the names of the connected players.
    @Test
    void property8OnlinePlayersAreExactlyTheConnectedOnes() throws Exception {
        Random r = new Random(SEED + 8);
        FakeGame game = new FakeGame();
        CommandDispatcher d = new CommandDispatcher(game, CommandGuard.of(BridgeConfig.defaults()), 256);
        for (int i = 0; i < CASES; i++) {
            game.players.clear();
            int n = r.nextInt(20);
            Set<String> online = new HashSet<>();
            for (int k = 0; k < n; k++) {
                String name = word(r, 3, 16);
                online.add(name);
                game.players.put(name, Models.map("name", name));
            }
            @SuppressWarnings("unchecked")
            List<String> listed = (List<String>) d.run("get_online_players", Map.of()).get("players");
            assertEquals(online, new HashSet<>(listed));
            assertEquals(online.size(), listed.size(), "no duplicates");
        }
    }

    // Feature: minecraft-mcp-bridge, Property 11: World info query completeness — for any coordinates and radius
    // within 0..16 the query is answered from the game; a radius outside is refused naming the limit.
    @Test
    void property11WorldInfoRadiusIsHonoured() throws Exception {
        Random r = new Random(SEED + 11);
        FakeGame game = new FakeGame();
        CommandDispatcher d = new CommandDispatcher(game, CommandGuard.of(BridgeConfig.defaults()), 256);
        for (int i = 0; i < CASES; i++) {
            int radius = r.nextInt(40) - 10;
            Map<String, Object> args = Map.of("x", r.nextInt(1000), "y", String.valueOf(r.nextInt(300)), "z", -r.nextInt(1000), "radius", radius);
            if (radius >= 0 && radius <= CommandDispatcher.MAX_WORLD_RADIUS) {
                @SuppressWarnings("unchecked")
                List<Object> blocks = (List<Object>) d.run("get_world_info", args).get("blocks");
                assertEquals(2 * radius + 1, blocks.size(), "the fake reports one block per x in the cube");
            } else {
                GameException e = org.junit.jupiter.api.Assertions.assertThrows(GameException.class, () -> d.run("get_world_info", args));
                assertEquals("INVALID_COMMAND", e.code(), "a radius over the limit is the caller's to fix");
                assertEquals(CommandDispatcher.MAX_WORLD_RADIUS, ((Number) e.details().get("limit")).intValue());
                assertTrue(e.getMessage().contains("0.." + CommandDispatcher.MAX_WORLD_RADIUS), e.getMessage());
            }
        }
    }

    // Feature: minecraft-mcp-bridge, Property 14: Component startup logging — for any startup, the logs contain
    // the component version, a configuration summary and the connection status (and never the token).
    @Test
    void property14StartupIsLogged() throws Exception {
        Random r = new Random(SEED + 14);
        for (int i = 0; i < 100; i++) { // each case dials a closed port: 100, not CASES, to keep it quick
            String token = "tok-" + word(r, 10, 30);
            String name = word(r, 1, 20);
            int maxLen = 1 + r.nextInt(1000);
            List<String> enabled = new ArrayList<>();
            for (String t : BridgeConfig.EVENT_TYPES) if (r.nextBoolean()) enabled.add(t);
            BridgeConfig cfg = BridgeConfig.parse("[bridge]\nurl = \"ws://127.0.0.1:9\"\nauth_token = \"" + token + "\"\nserver_name = \"" + name
                    + "\"\nreconnect_attempts = 1\nreconnect_delay = 1\n[security]\nmax_command_length = " + maxLen
                    + "\n[events]\nenabled = [" + String.join(",", enabled.stream().map(t -> "\"" + t + "\"").toList()) + "]\n");
            Wire.Log log = new Wire.Log();
            try (Session s = new Session(cfg, new FakeGame(), log, "test-adapter 9.9." + i, "1.21.1");
                 BridgeClient c = new BridgeClient(cfg, s, log)) {
                c.start();
                long deadline = System.nanoTime() + 5_000_000_000L;
                while (!log.all().contains("unreachable") && System.nanoTime() < deadline) Thread.sleep(2);
            }
            String text = log.all();
            assertTrue(text.contains("version " + BridgeClient.VERSION), "the component version");
            assertTrue(text.contains("\"" + name + "\"") && text.contains("max_command_length " + maxLen) && text.contains("events " + enabled.stream().sorted(java.util.Comparator.comparing(BridgeConfig.EVENT_TYPES::indexOf)).toList()), text);
            assertTrue(text.contains("relay ws://127.0.0.1:9") && text.contains("unreachable"), "the connection status: " + text);
            assertFalse(text.contains(token), "never the token");
        }
    }
}
