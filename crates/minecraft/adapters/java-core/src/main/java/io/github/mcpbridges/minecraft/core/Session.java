package io.github.mcpbridges.minecraft.core;

import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The game side of PROTOCOL.md, independent of the socket: hello on open, welcome resends the outbox past
 * lastSeq, acks trim it, commands run one at a time on a single thread and each gets one response on the link
 * it came from. Whatever arrives, nothing here throws back into the transport.
 */
public final class Session implements AutoCloseable {
    /** The socket of one connection; send returns false when it is gone. */
    public interface Transport {
        boolean send(String text);

        /**
         * An event, which the transport may send in one `batch` frame with the events queued after it
         * (PROTOCOL.md §2.2); called only while the relay speaks 1.2.
         */
        default boolean sendEvent(String text) {
            return send(text);
        }
    }

    /** Commands waiting for the command thread; more are refused (SERVER_ERROR, reason busy). */
    public static final int MAX_PENDING_COMMANDS = 1024;

    private final BridgeConfig cfg;
    private final CommandDispatcher dispatcher;
    private final BridgeLog log;
    private final String adapterName;
    private final String gameVersion;
    private final String instance;
    private final Outbox outbox;
    private final ExecutorService commands;
    private final AtomicLong pending = new AtomicLong();
    private final AtomicLong ids = new AtomicLong();
    /** Events sent per type (guarded by this). */
    private final Map<String, Long> typeSeqs = new java.util.HashMap<>();
    /** Players reported quitting as the server stopped. */
    private final java.util.Set<String> quitReported = java.util.concurrent.ConcurrentHashMap.newKeySet();
    private long seq;
    /** Outbox drops not yet logged, and when they were last (guarded by this). */
    private long unloggedDrops;
    private long dropsLoggedAt = Long.MIN_VALUE / 2;
    static final long DROP_LOG_MS = 10_000;
    private long unloggedLimited;
    private long limitedLoggedAt = Long.MIN_VALUE / 2;
    private Transport current;
    private boolean welcomed;
    private String epoch;
    private long heartbeatIntervalMs = 15_000;
    /** The relay's message limit when it takes chunks (1.1), else 0: answers go whole. */
    private int chunkAtBytes;
    /** The relay's message limit when it takes batches (1.2), else 0: events go one a frame. */
    private int batchAtBytes;

    public Session(BridgeConfig cfg, GameAdapter game, BridgeLog log, String adapterName, String gameVersion) {
        // A game that did not say its port (BridgeConfig.withGamePort) is named after the host alone.
        this.cfg = cfg.withGamePort(0);
        this.dispatcher = new CommandDispatcher(game, CommandGuard.of(cfg), cfg.maxCommandLength());
        this.log = log;
        this.adapterName = adapterName;
        this.gameVersion = gameVersion;
        byte[] b = new byte[6];
        new SecureRandom().nextBytes(b);
        this.instance = HexFormat.of().formatHex(b);
        this.outbox = new Outbox(cfg.outboxSize(), cfg.outboxBytes());
        this.commands = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "mcp-bridge-commands");
            t.setDaemon(true);
            return t;
        });
    }

    public String instance() {
        return instance;
    }

    public Outbox outbox() {
        return outbox;
    }

    public synchronized boolean welcomed() {
        return welcomed;
    }

    public synchronized String epoch() {
        return epoch;
    }

    /** The relay's heartbeat interval from its welcome (15 s until one says otherwise). */
    public synchronized long heartbeatIntervalMs() {
        return heartbeatIntervalMs;
    }

    public synchronized void onOpen(Transport t) {
        current = t;
        welcomed = false;
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("name", cfg.serverName());
        p.put("instance", instance);
        p.put("adapter", adapterName);
        p.put("gameVersion", gameVersion);
        t.send(Json.write(Envelope.build("hello", "h-" + instance + "-" + ids.incrementAndGet(), p)));
    }

    public synchronized void onClose() {
        current = null;
        welcomed = false;
    }

    /**
     * Records a game event (Property 6: a type not enabled in [events] is neither sent nor queued) and
     * sends it when linked. Returns whether it was accepted.
     */
    public boolean emitEvent(String eventType, Map<String, Object> data) {
        // A player quitAll already reported is not reported again as the server logs them out.
        if ("player_quit".equals(eventType) && quitReported.contains(String.valueOf(data.get("player")))) return false;
        return emitEventUnchecked(eventType, data);
    }

    private boolean emitEventUnchecked(String eventType, Map<String, Object> data) {
        if (!cfg.eventEnabled(eventType)) return false;
        synchronized (this) {
            seq++;
            Map<String, Object> p = new LinkedHashMap<>();
            long now = System.currentTimeMillis();
            p.put("eventType", eventType);
            p.put("timestamp", now);
            // Each type numbered too (PROTOCOL.md §4.1 typeSeq): a client taking some types finds its own gaps.
            p.put("typeSeq", typeSeqs.merge(eventType, 1L, Long::sum));
            p.put("data", data);
            Map<String, Object> msg = Envelope.build("event", cfg.serverName() + "-" + instance + "-" + seq, p);
            msg.put("seq", seq);
            String text = Json.write(msg);
            int dropped = outbox.push(seq, text);
            if (dropped > 0) noteDrops(dropped, now);
            if (welcomed && current != null) sendEvent(current, text);
            return true;
        }
    }

    /**
     * The server is stopping: every player still online is reported as quitting (reason server_stopping), once.
     * Returns how many.
     */
    public int quitAll(Map<String, String> online) {
        int n = 0;
        for (var e : online.entrySet()) {
            if (e.getKey() == null || e.getKey().isEmpty() || !quitReported.add(e.getKey())) continue;
            Map<String, Object> data = Models.playerQuit(e.getKey(), e.getValue());
            data.put("reason", "server_stopping");
            if (emitEventUnchecked("player_quit", data)) n++;
        }
        return n;
    }

    /**
     * Waits up to timeoutMs for the relay to acknowledge every event held (while linked); returns how many it
     * still lacks.
     */
    public int drain(long timeoutMs) throws InterruptedException {
        long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (outbox.size() > 0 && welcomed() && System.nanoTime() < deadline) Thread.sleep(20);
        return outbox.size();
    }

    /** The name this game says in hello: [bridge] server_name, or host name and port. */
    public String name() {
        return cfg.serverName();
    }

    /**
     * Logs outbox drops at most every {@link #DROP_LOG_MS} with their count: at tens of thousands of events a
     * second the relay's acks trail the outbox, and a line per dropped event was most of the send cost.
     */
    private void noteDrops(int dropped, long now) {
        unloggedDrops += dropped;
        if (now - dropsLoggedAt < DROP_LOG_MS) return;
        log.warn("outbox full (" + cfg.outboxSize() + " events / " + cfg.outboxBytes() + " bytes): dropped the " + unloggedDrops
                + " oldest events (" + outbox.dropped() + " in all); those the relay has not acknowledged cannot be resent if the link drops"
                + " (raise [bridge] outbox_size for more room); next report in " + DROP_LOG_MS / 1000 + " s at most");
        unloggedDrops = 0;
        dropsLoggedAt = now;
    }

    /**
     * Over the relay's --game-rate each event is refused with its own error: counted, and logged at most every
     * {@link #DROP_LOG_MS} (a line per event doubled the cost of a game already over its budget).
     */
    private synchronized void rateLimited(Map<String, Object> payload) {
        unloggedLimited++;
        long now = System.currentTimeMillis();
        if (now - limitedLoggedAt < DROP_LOG_MS) return;
        log.warn("the relay refused " + unloggedLimited + " messages as rate limited (" + payload.get("message")
                + "); refused events are lost and the MCP servers are told; next report in " + DROP_LOG_MS / 1000 + " s at most");
        unloggedLimited = 0;
        limitedLoggedAt = now;
    }

    /** Handles one text frame. Never throws. */
    public void onText(String text) {
        Envelope.Message m;
        try {
            m = Envelope.parse(text);
        } catch (Envelope.SchemaException e) {
            log.warn("refused a message from the relay: " + e.getMessage());
            if (!text.contains("\"type\":\"error\"")) reply(current(), Envelope.error(e.id, "SCHEMA_ERROR", e.getMessage(), Map.of("field", e.field)));
            return;
        }
        if (m.degraded()) log.warn("relay speaks protocol " + m.version() + ", this adapter " + Envelope.VERSION + ": handling it as " + Envelope.VERSION);
        try {
            switch (m.type()) {
                case "welcome" -> onWelcome(m);
                case "ack" -> {
                    if (!(m.payload().get("seq") instanceof Long s)) {
                        reply(current(), Envelope.error(m.id(), "SCHEMA_ERROR", "field `payload.seq`: must be an integer", Map.of("field", "payload.seq")));
                    } else {
                        outbox.ackUpTo(s);
                    }
                }
                case "command", "query" -> onCommand(m);
                case "heartbeat" -> { }
                case "notice" -> log.info("relay notice: " + Json.write(m.payload()));
                case "error" -> {
                    if (m.payload().get("details") instanceof Map<?, ?> d && "rate_limited".equals(d.get("reason"))) {
                        rateLimited(m.payload());
                    } else {
                        log.warn("relay refused " + m.id() + ": " + Json.write(m.payload()));
                    }
                }
                default -> reply(current(), Envelope.error(m.id(), "SCHEMA_ERROR", "type " + m.type() + " is not sent to game adapters", Map.of("field", "type")));
            }
        } catch (RuntimeException e) {
            log.error("failed to handle a " + m.type() + " message", e);
        }
    }

    private synchronized int chunkLimit() {
        return chunkAtBytes;
    }

    /** The largest batch frame the relay takes (its maxMessageBytes), or 0 when it does not speak 1.2. */
    public synchronized int batchLimit() {
        return batchAtBytes;
    }

    private void sendEvent(Transport t, String text) {
        if (batchAtBytes > 0) {
            t.sendEvent(text);
        } else {
            t.send(text);
        }
    }

    private synchronized Transport current() {
        return current;
    }

    private void reply(Transport t, Map<String, Object> msg) {
        if (t != null) t.send(Json.write(msg));
    }

    private synchronized void onWelcome(Envelope.Message m) {
        long lastSeq = m.payload().get("lastSeq") instanceof Long l ? l : 0;
        epoch = m.payload().get("epoch") instanceof String e ? e : "";
        if (m.payload().get("heartbeatInterval") instanceof Long h && h > 0) heartbeatIntervalMs = h;
        chunkAtBytes = !Envelope.speaksChunks(m.version()) ? 0
                : m.payload().get("maxMessageBytes") instanceof Long b && b > 0 && b <= Integer.MAX_VALUE ? b.intValue() : 65_536;
        batchAtBytes = Envelope.speaksBatches(m.version()) ? (chunkAtBytes > 0 ? chunkAtBytes : 65_536) : 0;
        outbox.ackUpTo(lastSeq);
        welcomed = true;
        var pendingEvents = outbox.snapshot();
        log.info("linked to relay (epoch " + epoch + ", it has our events up to " + lastSeq + "); resending " + pendingEvents.size());
        for (Outbox.Item item : pendingEvents) sendEvent(current, item.text());
    }

    @SuppressWarnings("unchecked")
    private void onCommand(Envelope.Message m) {
        Transport origin = current();
        Object type = m.payload().get("command");
        Object args = m.payload().getOrDefault("args", Map.of());
        if (!(type instanceof String t) || !(args instanceof Map<?, ?>)) {
            log.warn("refused command " + m.id() + ": payload needs command (string) and args (object)");
            reply(origin, Envelope.error(m.id(), "SCHEMA_ERROR", "field `payload.command`/`payload.args`: command must be a string and args an object", Map.of("field", "payload")));
            return;
        }
        if (pending.incrementAndGet() > MAX_PENDING_COMMANDS) {
            pending.decrementAndGet();
            reply(origin, response(m.id(), failure("SERVER_ERROR", "more than " + MAX_PENDING_COMMANDS + " commands waiting: try again", Map.of("reason", "busy"))));
            return;
        }
        try {
            commands.execute(() -> {
                try {
                    Map<String, Object> answer = response(m.id(), run(t, (Map<String, Object>) args));
                    if (origin != null) {
                        for (String frame : Envelope.frames(answer, chunkLimit())) origin.send(frame);
                    }
                } finally {
                    pending.decrementAndGet();
                }
            });
        } catch (RejectedExecutionException e) {
            pending.decrementAndGet();
            reply(origin, response(m.id(), failure("SERVER_ERROR", "the bridge is shutting down", Map.of())));
        }
    }

    /** Runs one command on the command thread; failures are logged with command text, reason and stack trace. */
    Map<String, Object> run(String type, Map<String, Object> args) {
        try {
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("success", true);
            p.put("data", dispatcher.run(type, args));
            return p;
        } catch (GameException e) {
            log.error("command " + type + " " + Json.write(args) + " refused: " + e.code() + " " + e.getMessage(), e);
            return failure(e.code(), e.getMessage(), e.details());
        } catch (RuntimeException e) {
            log.error("command " + type + " " + Json.write(args) + " failed: " + e, e);
            return failure("SERVER_ERROR", "the game failed to run " + type + ": " + e, Map.of());
        }
    }

    private static Map<String, Object> failure(String code, String message, Map<String, Object> details) {
        Map<String, Object> err = new LinkedHashMap<>();
        err.put("code", code);
        err.put("message", message);
        err.put("details", details);
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("success", false);
        p.put("error", err);
        return p;
    }

    private static Map<String, Object> response(String id, Map<String, Object> payload) {
        return Envelope.build("response", id, payload);
    }

    @Override
    public void close() {
        commands.shutdownNow();
    }
}
