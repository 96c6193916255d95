package io.github.mcpbridges.minecraft.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.WebSocket;
import java.net.http.WebSocketHandshakeException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The Java core against the real Rust relay (`mcp-bridges minecraft-relay`, MC_RELAY_BIN) over loopback: the
 * relay routes a command from an MCP-role client to this game and back, forwards the game's events, refuses a
 * wrong token, and after a relay restart the core redials and resends what the new relay lacks. A missing
 * relay binary fails these tests; it never skips them.
 */
class RelayLoopbackTest {
    static final String GAME_TOKEN = "game-token-0123456789";
    static final String MCP_TOKEN = "mcp-token-0123456789";

    final List<Process> relays = new ArrayList<>();
    final List<AutoCloseable> closers = new ArrayList<>();

    @AfterEach
    void stop() throws Exception {
        for (AutoCloseable c : closers) c.close();
        for (Process p : relays) {
            p.destroy();
            if (!p.waitFor(5, TimeUnit.SECONDS)) p.destroyForcibly();
        }
    }

    static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    /** Starts the relay on port and waits for its listening line. */
    Process startRelay(int port) throws Exception {
        String bin = System.getenv("MC_RELAY_BIN");
        if (bin == null || bin.isEmpty()) fail("MC_RELAY_BIN is not set: run this through crates/minecraft/adapters/java-core/test.sh");
        ProcessBuilder pb = new ProcessBuilder(bin, "minecraft-relay", "--relay-host", "127.0.0.1", "--relay-port", String.valueOf(port),
                "--heartbeat-interval", "1s");
        pb.environment().put("MINECRAFT_AUTH_TOKEN", GAME_TOKEN);
        pb.environment().put("MCP_AUTH_TOKENS", MCP_TOKEN);
        pb.environment().put("RUST_LOG", "info");
        pb.environment().put("NO_COLOR", "1");
        pb.redirectErrorStream(true);
        Process p = pb.start();
        relays.add(p);
        LinkedBlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread pump = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    System.err.println("[relay] " + line);
                    lines.add(line);
                }
            } catch (IOException e) {
                // the relay exited
            }
            lines.add("<exit>");
        });
        pump.setDaemon(true);
        pump.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            String line = lines.poll(100, TimeUnit.MILLISECONDS);
            if (line == null) continue;
            if (line.contains("listening on ws://")) return p;
            if (line.equals("<exit>")) fail("the relay exited before listening (exit " + p.waitFor() + ")");
        }
        fail("the relay did not log that it listens within 30 s");
        return p;
    }

    /** An MCP-role client speaking the protocol directly, to observe what the relay forwards. */
    static final class McpPeer implements WebSocket.Listener, AutoCloseable {
        final LinkedBlockingQueue<Map<String, Object>> inbox = new LinkedBlockingQueue<>();
        volatile int batches;
        final StringBuilder partial = new StringBuilder();
        WebSocket ws;

        McpPeer(int port, String token, String clientId) {
            this(port, token, clientId, null);
        }

        /** previousEpoch: the epoch of a relay this client saw before (it resumes, PROTOCOL.md §5). */
        McpPeer(int port, String token, String clientId, String previousEpoch) {
            ws = HttpClient.newHttpClient().newWebSocketBuilder().header("Authorization", "Bearer " + token)
                    .buildAsync(URI.create("ws://127.0.0.1:" + port + "/"), this).join();
            Map<String, Object> p = Models.map("clientId", clientId, "subscriptions", List.of("*"));
            if (previousEpoch != null) p.put("epoch", previousEpoch);
            Map<String, Object> hello = Envelope.build("hello", "h1", p);
            hello.put("source", "mcp");
            send(Json.write(hello));
        }

        @Override
        @SuppressWarnings("unchecked")
        public CompletionStage<?> onText(WebSocket w, CharSequence data, boolean last) {
            partial.append(data);
            if (last) {
                try {
                    Map<String, Object> m = (Map<String, Object>) Json.parse(partial.toString());
                    // A 1.2 relay batches what it writes (PROTOCOL.md §2.2): its messages, each as if alone.
                    if ("batch".equals(m.get("type"))) {
                        batches++;
                        List<Map<String, Object>> inner = (List<Map<String, Object>>) payload(m).get("messages");
                        inbox.addAll(inner);
                        m = inner.get(inner.size() - 1);
                    } else {
                        inbox.add(m);
                    }
                    if (m.get("seq") instanceof Long seq) {
                        Map<String, Object> ack = Envelope.build("ack", "a" + seq, Models.map("seq", seq));
                        ack.put("source", "mcp");
                        send(Json.write(ack));
                    }
                } catch (Json.ParseException e) {
                    inbox.add(Map.of("type", "unparseable", "text", partial.toString()));
                }
                partial.setLength(0);
            }
            w.request(1);
            return null;
        }

        Map<String, Object> next(String type) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            while (System.nanoTime() < deadline) {
                Map<String, Object> m = inbox.poll(100, TimeUnit.MILLISECONDS);
                if (m != null && type.equals(m.get("type"))) return m;
            }
            throw new AssertionError("no " + type + " from the relay within 20 s");
        }

        void command(String id, String type, Map<String, Object> args) {
            Map<String, Object> c = Envelope.build("command", id, Models.map("command", type, "args", args));
            c.put("source", "mcp");
            send(Json.write(c));
        }

        /** java.net.http allows one send in flight per socket. */
        synchronized void send(String text) {
            ws.sendText(text, true).join();
        }

        @Override
        public void close() {
            ws.abort();
        }
    }

    static BridgeConfig config(int port) throws Exception {
        return BridgeConfig.parse("""
                [bridge]
                url = "ws://127.0.0.1:%d"
                auth_token = "%s"
                server_name = "java-core"
                reconnect_attempts = 0
                reconnect_delay = 100
                [commands]
                allowed_patterns = ["say .*"]
                """.formatted(port, GAME_TOKEN));
    }

    static void awaitLinked(BridgeClient client) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (!client.connected()) {
            if (System.nanoTime() > deadline) throw new AssertionError("the core did not link to the relay within 20 s");
            Thread.sleep(20);
        }
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> payload(Map<String, Object> m) {
        return (Map<String, Object>) m.get("payload");
    }

    @Test
    void routesCommandsAndEventsThroughTheRustRelay() throws Exception {
        int port = freePort();
        startRelay(port);
        FakeGame game = new FakeGame();
        game.players.put("alex", Models.map("name", "alex"));
        Wire.Log log = new Wire.Log();
        BridgeConfig cfg = config(port);
        Session session = new Session(cfg, game, log, "java-core-test", "1.21.1");
        closers.add(session);
        BridgeClient client = new BridgeClient(cfg, session, log);
        closers.add(client);
        client.start();
        awaitLinked(client);

        McpPeer mcp = new McpPeer(port, MCP_TOKEN, "java-test");
        closers.add(mcp);
        mcp.next("welcome");

        mcp.command("c1", "execute_command", Map.of("command", "say hello"));
        Map<String, Object> ok = payload(mcp.next("response"));
        assertEquals(true, ok.get("success"), ok.toString());
        assertEquals(List.of("say hello"), game.executed);

        mcp.command("c2", "execute_command", Map.of("command", "op alex"));
        Map<String, Object> refused = payload(mcp.next("response"));
        assertEquals(false, refused.get("success"));
        assertEquals("INVALID_COMMAND", ((Map<?, ?>) refused.get("error")).get("code"));
        assertEquals(List.of("say hello"), game.executed, "the refused command never ran");

        mcp.command("c3", "get_online_players", Map.of());
        assertEquals(Map.of("players", List.of("alex")), payload(mcp.next("response")).get("data"));

        session.emitEvent("player_chat", Models.playerChat("alex", "hi relay"));
        Map<String, Object> event = payload(mcp.next("event"));
        assertEquals("player_chat", event.get("eventType"));
        assertEquals(Models.playerChat("alex", "hi relay"), event.get("data"));

        HttpResponse<String> health = HttpClient.newHttpClient().send(
                HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/health")).header("Authorization", "Bearer " + MCP_TOKEN).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, health.statusCode());
        assertTrue(health.body().contains("java-core"), health.body());
    }

    /**
     * Protocol 1.2 (PROTOCOL.md §2.2): a burst of events from the game thread goes to the relay in batch frames
     * (what queued while the previous frame was written) and reaches an MCP client whole and in order.
     */
    @Test
    void aBurstOfEventsReachesTheRelayInOrderWithNoneLost() throws Exception {
        int port = freePort();
        startRelay(port);
        Wire.Log log = new Wire.Log();
        BridgeConfig cfg = config(port);
        Session session = new Session(cfg, new FakeGame(), log, "java-core-test", "1.21.1");
        closers.add(session);
        BridgeClient client = new BridgeClient(cfg, session, log);
        closers.add(client);
        client.start();
        awaitLinked(client);
        McpPeer mcp = new McpPeer(port, MCP_TOKEN, "burst");
        closers.add(mcp);
        mcp.next("welcome");
        assertTrue(session.batchLimit() > 0, "the relay speaks 1.2");
        int n = 3000;
        for (int i = 1; i <= n; i++) session.emitEvent("player_chat", Models.playerChat("alex", "m" + i));
        for (int i = 1; i <= n; i++) {
            Map<String, Object> e = mcp.next("event");
            assertEquals((long) i, e.get("gameSeq"));
            assertEquals("m" + i, ((Map<?, ?>) payload(e).get("data")).get("message"));
        }
        assertTrue(mcp.batches > 0, "the relay batched what it wrote to a 1.2 client");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (session.outbox().size() > 0 && System.nanoTime() < deadline) Thread.sleep(10);
        assertEquals(0, session.outbox().size(), "the relay acknowledged every event");
    }

    @Test
    void aWrongTokenIsRefusedWith401() throws Exception {
        int port = freePort();
        startRelay(port);
        try {
            HttpClient.newHttpClient().newWebSocketBuilder().header("Authorization", "Bearer not-the-token")
                    .connectTimeout(Duration.ofSeconds(5))
                    .buildAsync(URI.create("ws://127.0.0.1:" + port + "/"), new WebSocket.Listener() {}).join();
            fail("the relay accepted a wrong token");
        } catch (CompletionException e) {
            assertTrue(e.getCause() instanceof WebSocketHandshakeException, e.toString());
            assertEquals(401, ((WebSocketHandshakeException) e.getCause()).getResponse().statusCode());
        }
    }

    @Test
    void afterARelayRestartTheCoreRedialsAndResendsWhatTheRelayLacks() throws Exception {
        int port = freePort();
        Process first = startRelay(port);
        FakeGame game = new FakeGame();
        Wire.Log log = new Wire.Log();
        BridgeConfig cfg = config(port);
        Session session = new Session(cfg, game, log, "java-core-test", "1.21.1");
        closers.add(session);
        BridgeClient client = new BridgeClient(cfg, session, log);
        closers.add(client);
        client.start();
        awaitLinked(client);
        McpPeer before = new McpPeer(port, MCP_TOKEN, "java-test");
        String firstEpoch = (String) payload(before.next("welcome")).get("epoch");
        assertEquals(firstEpoch, session.epoch());
        before.close();

        first.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (client.connected() && System.nanoTime() < deadline) Thread.sleep(10);
        // Events while the relay is away stay in the bounded outbox.
        for (int i = 0; i < 20; i++) session.emitEvent("player_chat", Models.playerChat("alex", "offline " + i));
        assertEquals(20, session.outbox().size());

        // The same client redials on its own (Backoff) and resends; the new relay acknowledges and keeps them
        // in its backlog for MCP clients resuming from the old relay.
        startRelay(port);
        awaitLinked(client);
        assertTrue(!firstEpoch.equals(session.epoch()), "a new relay epoch");
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (session.outbox().size() > 0 && System.nanoTime() < deadline) Thread.sleep(10);
        assertEquals(0, session.outbox().size(), "the new relay acknowledged them");
        assertTrue(log.all().contains("reconnecting in"), "the redial is logged");

        McpPeer mcp = new McpPeer(port, MCP_TOKEN, "java-test", firstEpoch);
        closers.add(mcp);
        mcp.next("welcome");
        for (int i = 0; i < 20; i++) assertEquals("offline " + i, ((Map<?, ?>) payload(mcp.next("event")).get("data")).get("message"));
    }

    /**
     * Issue 22 item 1: the relay away far longer than the backoff cap and reconnect_attempts (the old core gave
     * up after them), then back on the same port: the core is linked again and everything emitted meanwhile
     * arrives. The outage is logged once as lost and once as long, not once per attempt.
     */
    @Test
    void aRelayAwayLongerThanEveryCapIsRedialledForeverAndGetsTheOutage() throws Exception {
        int port = freePort();
        Process first = startRelay(port);
        Wire.Log log = new Wire.Log();
        BridgeConfig cfg = BridgeConfig.parse("""
                [bridge]
                url = "ws://127.0.0.1:%d"
                auth_token = "%s"
                server_name = "java-core"
                reconnect_attempts = 2
                reconnect_delay = 10
                reconnect_max_delay = 50
                """.formatted(port, GAME_TOKEN));
        Session session = new Session(cfg, new FakeGame(), log, "java-core-test", "1.21.1");
        closers.add(session);
        BridgeClient client = new BridgeClient(cfg, session, log);
        closers.add(client);
        client.start();
        awaitLinked(client);
        String firstEpoch = session.epoch();
        first.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (client.connected() && System.nanoTime() < deadline) Thread.sleep(10);
        for (int i = 0; i < 30; i++) session.emitEvent("player_chat", Models.playerChat("alex", "away " + i));
        Thread.sleep(1500); // 30 caps of 50 ms, far past 2 attempts
        startRelay(port);
        awaitLinked(client);
        McpPeer mcp = new McpPeer(port, MCP_TOKEN, "java-test", firstEpoch);
        closers.add(mcp);
        mcp.next("welcome");
        for (int i = 0; i < 30; i++) assertEquals("away " + i, ((Map<?, ?>) payload(mcp.next("event")).get("data")).get("message"));
        String all = log.all();
        assertEquals(1, count(all, "relay link lost"), all);
        assertEquals(1, count(all, "still unreachable after 2 attempts"), all);
        assertTrue(!all.contains("giving up"), all);
    }

    static int count(String haystack, String needle) {
        int n = 0;
        for (int i = haystack.indexOf(needle); i >= 0; i = haystack.indexOf(needle, i + 1)) n++;
        return n;
    }

    @Test
    void aRelayThatGoesSilentIsDroppedAndRedialled() throws Exception {
        int port = freePort();
        Process relay = startRelay(port); // heartbeats every 1000 ms
        Wire.Log log = new Wire.Log();
        BridgeConfig cfg = config(port);
        Session session = new Session(cfg, new FakeGame(), log, "java-core-test", "1.21.1");
        closers.add(session);
        BridgeClient client = new BridgeClient(cfg, session, log);
        closers.add(client);
        client.start();
        awaitLinked(client);
        assertEquals(1000, session.heartbeatIntervalMs());
        // SIGSTOP: the TCP link stays open but nothing comes from the relay any more.
        new ProcessBuilder("kill", "-STOP", String.valueOf(relay.pid())).start().waitFor();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (client.connected() && System.nanoTime() < deadline) Thread.sleep(20);
            assertTrue(!client.connected(), "a silent relay is dropped");
            assertTrue(log.all().contains("relay silent"), log.all());
        } finally {
            new ProcessBuilder("kill", "-CONT", String.valueOf(relay.pid())).start().waitFor();
        }
        awaitLinked(client);
    }
}
