package io.github.mcpbridges.minecraft.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SessionTest {
    @Test
    void helloFirstThenNoEventBeforeWelcome() throws Exception {
        Wire wire = new Wire();
        try (Session s = new Session(BridgeConfig.defaults(), new FakeGame(), new Wire.Log(), "test", "1.21.1")) {
            s.onOpen(wire);
            s.emitEvent("player_chat", Models.playerChat("a", "1"));
            assertEquals(List.of("hello"), wire.messages().stream().map(m -> m.get("type")).toList());
            @SuppressWarnings("unchecked")
            Map<String, Object> hello = (Map<String, Object>) wire.messages().get(0).get("payload");
            assertEquals(BridgeConfig.defaultServerName(BridgeConfig.hostName(), 0), hello.get("name"), "no server_name: host name and port");
            assertEquals(s.instance(), hello.get("instance"));
            s.onText(Wire.welcome(0));
            assertEquals(1, wire.ofType("event").size(), "the queued event goes out after welcome");
        }
    }

    @Test
    void reconnectResendsExactlyTheEventsTheRelayLacks() throws Exception {
        try (Session s = new Session(BridgeConfig.defaults(), new FakeGame(), new Wire.Log(), "test", "1.21.1")) {
            Wire first = new Wire();
            s.onOpen(first);
            s.onText(Wire.welcome(0));
            for (int i = 0; i < 10; i++) s.emitEvent("player_chat", Models.playerChat("a", "m" + i));
            s.onText(Wire.relay("ack", "a", Map.of("seq", 4L)));
            assertEquals(6, s.outbox().size());
            s.onClose();
            for (int i = 10; i < 15; i++) s.emitEvent("player_chat", Models.playerChat("a", "m" + i));
            assertEquals(10, first.ofType("event").size(), "nothing is sent while disconnected");

            Wire second = new Wire();
            s.onOpen(second);
            s.onText(Wire.welcome(7)); // the relay had 5..7 already (acks lost with the link)
            List<Object> resent = second.ofType("event").stream().map(m -> m.get("seq")).toList();
            assertEquals(List.of(8L, 9L, 10L, 11L, 12L, 13L, 14L, 15L), resent);
        }
    }

    /**
     * Issue 22 item 9: at tens of thousands of events a second the relay's acks trail the outbox, which then
     * drops (already sent) events all the time; a log line per event was most of the game thread's send cost.
     */
    @Test
    void outboxDropsAreLoggedOncePerBurstWithTheirCount() throws Exception {
        BridgeConfig cfg = BridgeConfig.parse("""
                [bridge]
                outbox_size = 10
                """);
        Wire.Log log = new Wire.Log();
        try (Session s = new Session(cfg, new FakeGame(), log, "test", "1.21.1")) {
            Wire wire = new Wire();
            s.onOpen(wire);
            s.onText(Wire.welcome(0));
            for (int i = 0; i < 5000; i++) s.emitEvent("player_chat", Models.playerChat("a", "m" + i));
            assertEquals(5000, wire.ofType("event").size(), "every event is sent while linked");
            assertEquals(4990, s.outbox().dropped());
            List<String> drops = log.lines.stream().filter(l -> l.contains("outbox full")).toList();
            assertEquals(1, drops.size(), String.join("\n", drops.subList(0, Math.min(3, drops.size()))));
            assertTrue(drops.get(0).startsWith("WARN"), drops.get(0));
        }
    }

    /** Issue 22 item 9: over the relay's --game-rate each event gets its own rate_limited error; logged once per burst. */
    @Test
    void rateLimitedErrorsAreLoggedOncePerBurstWithTheirCount() throws Exception {
        Wire.Log log = new Wire.Log();
        try (Session s = new Session(BridgeConfig.defaults(), new FakeGame(), log, "test", "1.21.1")) {
            s.onOpen(new Wire());
            s.onText(Wire.welcome(0));
            for (int i = 0; i < 1000; i++) {
                s.onText(Wire.relay("error", "e" + i, Models.map("code", "SERVER_ERROR", "message", "rate limited",
                        "details", Models.map("reason", "rate_limited", "retryAfterMs", 1L))));
            }
            s.onText(Wire.relay("error", "other", Models.map("code", "SCHEMA_ERROR", "message", "bad", "details", Models.map())));
            List<String> warns = log.lines.stream().filter(l -> l.startsWith("WARN")).toList();
            assertEquals(2, warns.size(), String.join("\n", warns.subList(0, Math.min(3, warns.size()))));
            assertTrue(warns.get(0).contains("1 messages as rate limited"), warns.get(0));
            assertTrue(warns.get(1).contains("relay refused other"), warns.get(1));
        }
    }

    /**
     * Protocol 1.2 (PROTOCOL.md §2.2): events may share a batch frame only with a relay that speaks 1.2; a 1.1 relay
     * gets each as a frame of its own, resends included.
     */
    @Test
    void eventsMayShareABatchOnlyWithA12Relay() throws Exception {
        try (Session s = new Session(BridgeConfig.defaults(), new FakeGame(), new Wire.Log(), "test", "1.21.1")) {
            Wire old = new Wire();
            s.onOpen(old);
            Map<String, Object> w11 = Envelope.build("welcome", "w1", Models.map("role", "minecraft", "epoch", "E1", "lastSeq", 0L));
            w11.put("version", "1.1");
            w11.put("source", "relay");
            s.onText(Json.write(w11));
            s.emitEvent("player_chat", Models.playerChat("alex", "one"));
            assertEquals(1, old.ofType("event").size());
            assertTrue(old.batchable.isEmpty(), "a 1.1 relay: single frames");

            Wire wire = new Wire();
            s.onClose();
            s.onOpen(wire);
            s.onText(Wire.relay("welcome", "w2", Models.map("role", "minecraft", "epoch", "E1", "lastSeq", 0L, "maxMessageBytes", 4000L)));
            s.emitEvent("player_chat", Models.playerChat("alex", "two"));
            assertEquals(2, wire.batchable.size(), "the resent event and the new one may share a frame");
            assertEquals(4000, s.batchLimit());
        }
    }

    /** A batch is one message whose `messages` are the texts given, in order, spliced in whole. */
    @Test
    @SuppressWarnings("unchecked")
    void aBatchHoldsItsMessagesInOrder() throws Exception {
        List<String> texts = new java.util.ArrayList<>();
        for (long i = 1; i <= 3; i++) {
            Map<String, Object> e = Envelope.build("event", "g-i-" + i, Models.map("eventType", "player_chat", "timestamp", 1L,
                    "data", Models.playerChat("a", "m\"" + i)));
            e.put("seq", i);
            texts.add(Json.write(e));
        }
        Map<String, Object> b = (Map<String, Object>) Json.parse(Envelope.batch(texts));
        assertEquals("batch", b.get("type"));
        assertEquals(Envelope.VERSION, b.get("version"));
        List<Map<String, Object>> messages = (List<Map<String, Object>>) ((Map<String, Object>) b.get("payload")).get("messages");
        assertEquals(List.of(1L, 2L, 3L), messages.stream().map(m -> m.get("seq")).toList());
        assertEquals(Json.parse(texts.get(2)), messages.get(2));
        assertTrue(Envelope.speaksBatches("1.2") && Envelope.speaksBatches("2.0") && !Envelope.speaksBatches("1.1"));
    }

    /** Issue 22 item 2 (protocol 1.1, PROTOCOL.md §2.1): an answer over maxMessageBytes goes in chunks. */
    @Test
    @SuppressWarnings("unchecked")
    void aBigAnswerGoesInChunksToA11RelayAndWholeToA10One() throws Exception {
        try (Session s = new Session(BridgeConfig.defaults(), new FakeGame(), new Wire.Log(), "test", "1.21.1")) {
            Wire wire = new Wire();
            s.onOpen(wire);
            s.onText(Wire.relay("welcome", "w1", Models.map("role", "minecraft", "epoch", "E1", "lastSeq", 0L, "maxMessageBytes", 2000L)));
            s.onText(Wire.command("r1", "get_world_info", Models.map("x", 0L, "y", 64L, "z", 0L, "radius", 16L)));
            long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(10);
            List<Map<String, Object>> chunks = List.of();
            while (System.nanoTime() < deadline) {
                chunks = wire.ofType("chunk");
                if (!chunks.isEmpty() && ((Map<String, Object>) chunks.get(chunks.size() - 1).get("payload")).get("index")
                        .equals(((Map<String, Object>) chunks.get(0).get("payload")).get("count") instanceof Long c ? c - 1 : -1)) break;
                Thread.sleep(5);
            }
            assertTrue(chunks.size() > 1, "chunks: " + chunks.size());
            StringBuilder whole = new StringBuilder();
            for (int i = 0; i < chunks.size(); i++) {
                Map<String, Object> p = (Map<String, Object>) chunks.get(i).get("payload");
                assertEquals((long) i, p.get("index"));
                assertEquals("r1", chunks.get(i).get("id"));
                whole.append((String) p.get("data"));
            }
            synchronized (wire.sent) {
                for (String t : wire.sent) if (t.contains("\"type\":\"chunk\"")) assertTrue(t.getBytes(java.nio.charset.StandardCharsets.UTF_8).length <= 2000, t.length() + " bytes");
            }
            Map<String, Object> response = (Map<String, Object>) Json.parse(whole.toString());
            assertEquals("response", response.get("type"));
            Map<String, Object> data = (Map<String, Object>) ((Map<String, Object>) response.get("payload")).get("data");
            assertEquals(33, ((List<?>) data.get("blocks")).size());

            Wire old = new Wire();
            s.onClose();
            s.onOpen(old);
            Map<String, Object> w10 = Envelope.build("welcome", "w2", Models.map("role", "minecraft", "epoch", "E1", "lastSeq", 0L, "maxMessageBytes", 2000L));
            w10.put("version", "1.0");
            w10.put("source", "relay");
            s.onText(Json.write(w10));
            s.onText(Wire.command("r2", "get_world_info", Models.map("x", 0L, "y", 64L, "z", 0L, "radius", 16L)));
            old.await("response", 1);
            assertTrue(old.ofType("chunk").isEmpty(), "a 1.0 relay never gets chunks");
        }
    }

    @Test
    void outboxBoundByCountAndBytesDropsTheOldest() {
        Outbox byCount = new Outbox(3, 1 << 20);
        for (int i = 1; i <= 5; i++) byCount.push(i, "e" + i);
        assertEquals(List.of(3L, 4L, 5L), byCount.snapshot().stream().map(Outbox.Item::seq).toList());
        assertEquals(2, byCount.dropped());

        Outbox byBytes = new Outbox(1000, 100);
        for (int i = 1; i <= 10; i++) byBytes.push(i, "x".repeat(30));
        assertTrue(byBytes.bytes() <= 100, "bytes " + byBytes.bytes());
        assertEquals(3, byBytes.size());
        assertEquals(1, byBytes.push(11, "y".repeat(101)) - 0 >= 1 ? 1 : 0, "an event larger than the bound is not kept");
        assertTrue(byBytes.bytes() <= 100);
        byBytes.ackUpTo(100);
        assertEquals(0, byBytes.size());
        assertEquals(0, byBytes.bytes());
    }

    // Issue 22 item 9: a batch in flight holds up to MAX_BATCH events until the relay's ack; an outbox smaller
    // than that dropped events already sent at 50 000 events/s.
    @Test
    void defaultOutboxHoldsSeveralFullBatchesAwaitingTheirAck() throws Exception {
        BridgeConfig cfg = BridgeConfig.parse("");
        assertTrue(cfg.outboxSize() >= 4 * Envelope.MAX_BATCH, "outbox_size " + cfg.outboxSize());
    }

    @Test
    void sessionOutboxHonoursConfiguredBound() throws Exception {
        BridgeConfig cfg = BridgeConfig.parse("[bridge]\noutbox_size = 5\n");
        Wire.Log log = new Wire.Log();
        try (Session s = new Session(cfg, new FakeGame(), log, "test", "1.21.1")) {
            for (int i = 0; i < 20; i++) s.emitEvent("player_chat", Models.playerChat("a", "m" + i));
            assertEquals(5, s.outbox().size());
            assertEquals(15, s.outbox().dropped());
            assertTrue(log.all().contains("outbox full"));
        }
    }

    @Test
    void commandsRunOneAtATimeAndEachGetsOneResponse() throws Exception {
        FakeGame game = new FakeGame();
        game.sleepMs = 2;
        Wire wire = new Wire();
        BridgeConfig cfg = BridgeConfig.parse("[commands]\nallowed_patterns = [\"say .*\"]\n");
        try (Session s = new Session(cfg, game, new Wire.Log(), "test", "1.21.1")) {
            s.onOpen(wire);
            s.onText(Wire.welcome(0));
            Thread[] senders = new Thread[4];
            for (int t = 0; t < senders.length; t++) {
                int base = t * 10;
                senders[t] = new Thread(() -> {
                    for (int i = 0; i < 10; i++) s.onText(Wire.command("c" + (base + i), "execute_command", Map.of("command", "say " + (base + i))));
                });
                senders[t].start();
            }
            for (Thread t : senders) t.join();
            List<Map<String, Object>> responses = wire.await("response", 40);
            assertEquals(40, responses.stream().map(m -> m.get("id")).distinct().count());
            assertEquals(1, game.maxRunning.get(), "never two commands at once");
        }
    }

    @Test
    void dispatcherNormalisesItemsAndNumericStrings() throws Exception {
        FakeGame game = new FakeGame();
        game.players.put("alex", Models.map("name", "alex"));
        CommandDispatcher d = new CommandDispatcher(game, CommandGuard.of(BridgeConfig.defaults()), 256);
        d.run("give_item", Map.of("player", "alex", "item", "diamond", "quantity", "3"));
        d.run("give_item", Map.of("player", "alex", "item", "minecraft:diamond", "quantity", 3L));
        assertEquals(List.of("give alex minecraft:diamond 3", "give alex minecraft:diamond 3"), game.executed);
        Map<String, Object> tp = d.run("teleport_player", Map.of("player", "alex", "x", "1.5", "y", 64, "z", -2));
        assertEquals(Models.location("minecraft:overworld", 1.5, 64.0, -2.0), tp.get("location"));
        assertEquals(Map.of("players", List.of("alex")), d.run("get_online_players", Map.of()));
    }

    @Test
    void commandsWaitingBeyondTheBoundAreRefusedBusy() throws Exception {
        FakeGame game = new FakeGame();
        game.sleepMs = 5000; // the first command holds the command thread until close() interrupts it
        Wire wire = new Wire();
        BridgeConfig cfg = BridgeConfig.parse("[commands]\nallowed_patterns = [\"say .*\"]\n");
        try (Session s = new Session(cfg, game, new Wire.Log(), "test", "1.21.1")) {
            s.onOpen(wire);
            s.onText(Wire.welcome(0));
            int n = Session.MAX_PENDING_COMMANDS + 10;
            for (int i = 0; i < n; i++) s.onText(Wire.command("c" + i, "execute_command", Map.of("command", "say " + i)));
            // The over-the-bound ones are answered at once, before the slow game drains the rest.
            List<Map<String, Object>> busy = wire.await("response", 10);
            for (Map<String, Object> r : busy) {
                @SuppressWarnings("unchecked")
                Map<String, Object> err = (Map<String, Object>) ((Map<String, Object>) r.get("payload")).get("error");
                assertEquals("SERVER_ERROR", err.get("code"));
                assertEquals(Map.of("reason", "busy"), err.get("details"));
            }
        }
    }
}
