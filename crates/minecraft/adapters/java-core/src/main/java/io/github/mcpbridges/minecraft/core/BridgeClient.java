package io.github.mcpbridges.minecraft.core;

import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.WebSocket;
import java.net.http.WebSocketHandshakeException;
import java.time.Duration;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Dials the relay with java.net.http.WebSocket (Authorization: Bearer), feeds a {@link Session}, and redials
 * forever with {@link Backoff} after a failure or a closed link (Property 13). Each state change (link lost,
 * outage long, linked, a new dial problem) is logged once; each attempt only at DEBUG. The session outlives the client
 * (its owner closes it), so a new client can carry on with the same outbox.
 */
public final class BridgeClient implements AutoCloseable {
    /** Text frames larger than this (after reassembly) are dropped: the relay never sends more than 1 MiB. */
    public static final int MAX_INBOUND_CHARS = 1024 * 1024;
    /**
     * A relay silent (no frame, no ping) for this many heartbeat intervals is taken for dead: a half-open TCP
     * link would otherwise look alive until the OS gives up on it.
     */
    public static final int SILENT_INTERVALS = 3;
    /** This core's version, in the startup log line. */
    public static final String VERSION = "0.1.0";
    /**
     * Frames waiting for the socket. Sends are queued, never awaited by the caller, because events are emitted
     * on the game's server thread; past this bound the link is dropped and the outbox resends after redial.
     */
    public static final int MAX_QUEUED_SENDS = 100_000;
    /**
     * Characters of those messages waiting, the bound that holds for big ones. Events share batch frames (PROTOCOL.md
     * §2.2), so at 50 000 events/s a bound of 10 000 messages (200 ms) dropped the link on any pause of the relay.
     */
    public static final long MAX_QUEUED_CHARS = 16L << 20;

    private final BridgeConfig cfg;
    private final Session session;
    private final BridgeLog log;
    private final HttpClient http;
    private final Backoff backoff;
    private final ScheduledExecutorService timer;
    private final ExecutorService sender;
    private final AtomicInteger queuedSends = new AtomicInteger();
    private final java.util.concurrent.atomic.AtomicLong queuedChars = new java.util.concurrent.atomic.AtomicLong();
    private final ConcurrentLinkedQueue<Frame> frames = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean pumping = new AtomicBoolean();
    private volatile WebSocket socket;
    private volatile Listener listener;
    private volatile long lastHeardNanos;
    private volatile boolean closed;
    /** The last dial problem logged, so an outage of an hour is one line and not one per attempt. */
    private String lastProblem;

    public BridgeClient(BridgeConfig cfg, Session session, BridgeLog log) {
        this.cfg = cfg;
        this.session = session;
        this.log = log;
        this.http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        this.backoff = new Backoff(cfg.reconnectDelayMs(), cfg.reconnectMaxDelayMs(), cfg.reconnectAttempts(), new Random());
        this.timer = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "mcp-bridge-reconnect");
            t.setDaemon(true);
            return t;
        });
        this.sender = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "mcp-bridge-send");
            t.setDaemon(true);
            return t;
        });
    }

    /** A frame waiting for the send thread, with the link it was meant for; events may share a batch frame. */
    private record Frame(WebSocket ws, String text, boolean event) {}

    /**
     * Queues one frame for `ws`, in order; false when the link is gone or too far behind. One drain task runs
     * per burst, not one task per frame: at 10k events/s the hand-off per frame was the send path's main cost.
     */
    private boolean send(WebSocket ws, String text, boolean event) {
        if (socket != ws) return false;
        long chars = queuedChars.addAndGet(text.length());
        if (queuedSends.incrementAndGet() > MAX_QUEUED_SENDS || chars > MAX_QUEUED_CHARS) {
            queuedSends.decrementAndGet();
            queuedChars.addAndGet(-text.length());
            log.warn("over " + MAX_QUEUED_SENDS + " messages or " + MAX_QUEUED_CHARS + " characters waiting for the relay link: "
                    + "dropping it to resend from the outbox");
            ws.abort();
            Listener l = listener;
            if (l != null) l.lost("too far behind");
            return false;
        }
        frames.add(new Frame(ws, text, event));
        if (pumping.compareAndSet(false, true)) {
            try {
                sender.execute(this::pump);
            } catch (RejectedExecutionException e) {
                pumping.set(false);
                return false;
            }
        }
        return true;
    }

    /**
     * Sends what is queued, in order, then stops; a frame queued while it stops starts it again. Events queued
     * together (while the previous send was in flight) go in one `batch` frame up to the relay's message limit
     * (PROTOCOL.md §2.2): the first event of a quiet spell goes at once, alone, so batching adds no wait.
     */
    private void pump() {
        while (true) {
            for (Frame f; (f = frames.poll()) != null; ) {
                int taken = 1;
                long chars = f.text().length();
                String text = f.text();
                try {
                    int limit = f.event() ? session.batchLimit() : 0;
                    if (limit > 0) {
                        java.util.List<String> group = new java.util.ArrayList<>();
                        group.add(text);
                        int bytes = Envelope.BATCH_OVERHEAD + Envelope.utf8Length(text) + 1;
                        // Only this thread takes frames, so what it peeks is what it polls.
                        for (Frame next; group.size() < Envelope.MAX_BATCH && (next = frames.peek()) != null
                                && next.event() && next.ws() == f.ws(); ) {
                            int b = Envelope.utf8Length(next.text()) + 1;
                            if (bytes + b > limit) break;
                            frames.poll();
                            group.add(next.text());
                            chars += next.text().length();
                            bytes += b;
                        }
                        taken = group.size();
                        if (taken > 1) text = Envelope.batch(group);
                    }
                    // java.net.http allows one send in flight: this single thread waits for each.
                    if (socket == f.ws()) f.ws().sendText(text, true).join();
                } catch (RuntimeException e) {
                    log.warn("send to the relay failed: " + e);
                } finally {
                    queuedSends.addAndGet(-taken);
                    queuedChars.addAndGet(-chars);
                }
            }
            pumping.set(false);
            if (frames.isEmpty() || !pumping.compareAndSet(false, true)) return;
        }
    }

    public void start() {
        log.info("minecraft-mcp-bridge java-core version " + VERSION + " starting: " + cfg.summary());
        timer.execute(this::connect);
        timer.scheduleWithFixedDelay(this::checkSilence, 250, 250, TimeUnit.MILLISECONDS);
    }

    private void checkSilence() {
        WebSocket ws = socket;
        Listener l = listener;
        if (ws == null || l == null || !session.welcomed()) return;
        long limitMs = SILENT_INTERVALS * session.heartbeatIntervalMs();
        if (System.nanoTime() - lastHeardNanos > TimeUnit.MILLISECONDS.toNanos(limitMs)) {
            log.warn("relay silent for over " + SILENT_INTERVALS + " heartbeats (" + limitMs + " ms): dropping the link");
            ws.abort();
            l.lost("silent");
        }
    }

    public boolean connected() {
        return socket != null && session.welcomed();
    }

    private void connect() {
        if (closed) return;
        URI uri;
        try {
            uri = URI.create(cfg.url());
        } catch (IllegalArgumentException e) {
            log.error("bridge.url " + cfg.url() + " is not a URL; not connecting", e);
            return;
        }
        WebSocket.Builder b = http.newWebSocketBuilder().connectTimeout(Duration.ofSeconds(10));
        if (cfg.requireAuth()) b.header("Authorization", "Bearer " + cfg.authToken());
        b.buildAsync(uri, new Listener()).whenComplete((ws, err) -> {
            if (err != null) {
                Throwable cause = err.getCause() != null ? err.getCause() : err;
                if (cause instanceof WebSocketHandshakeException h && h.getResponse().statusCode() == 401) {
                    problem("relay " + uri + " refused the token (AUTH_FAILED, HTTP 401)");
                } else {
                    problem("relay " + uri + " unreachable: " + cause);
                }
                scheduleReconnect();
            }
        });
    }

    private synchronized void problem(String message) {
        String key = message.replaceAll("\\d+", "#");
        if (key.equals(lastProblem)) {
            log.log(BridgeLog.Level.DEBUG, message);
        } else {
            lastProblem = key;
            log.warn(message);
        }
    }

    private synchronized void linked() {
        lastProblem = null;
        backoff.reset();
    }

    private void scheduleReconnect() {
        if (closed) return;
        long delay = backoff.nextDelayMs();
        if (backoff.outageJustBecameLong()) {
            log.log(BridgeLog.Level.ERROR, "relay still unreachable after " + backoff.longAfter() + " attempts; retrying forever every "
                    + backoff.maxDelayMs() + " ms at most (" + session.outbox().size() + " events held in the outbox)");
        }
        log.log(BridgeLog.Level.DEBUG, "reconnecting in " + delay + " ms (attempt " + backoff.failures() + ")");
        try {
            timer.schedule(this::connect, delay, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException e) {
            // closed meanwhile
        }
    }

    private final class Listener implements WebSocket.Listener {
        private final StringBuilder partial = new StringBuilder();
        private boolean oversized;
        private WebSocket mine;

        @Override
        public void onOpen(WebSocket ws) {
            mine = ws;
            lastHeardNanos = System.nanoTime();
            listener = this;
            socket = ws;
            session.onOpen(new Session.Transport() {
                @Override
                public boolean send(String text) {
                    return BridgeClient.this.send(ws, text, false);
                }

                @Override
                public boolean sendEvent(String text) {
                    return BridgeClient.this.send(ws, text, true);
                }
            });
            ws.request(1);
        }

        @Override
        public CompletionStage<?> onText(WebSocket ws, CharSequence data, boolean last) {
            lastHeardNanos = System.nanoTime();
            if (!oversized) {
                partial.append(data);
                if (partial.length() > MAX_INBOUND_CHARS) {
                    oversized = true;
                    partial.setLength(0);
                    log.warn("dropped a message from the relay over " + MAX_INBOUND_CHARS + " characters");
                }
            }
            if (last) {
                String text = partial.toString();
                partial.setLength(0);
                boolean drop = oversized;
                oversized = false;
                if (!drop) {
                    if (text.contains("\"type\":\"welcome\"")) linked();
                    session.onText(text);
                }
            }
            ws.request(1);
            return null;
        }

        @Override
        public CompletionStage<?> onPing(WebSocket ws, java.nio.ByteBuffer message) {
            lastHeardNanos = System.nanoTime();
            ws.request(1); // the JDK answers the ping with a pong by itself
            return null;
        }

        @Override
        public CompletionStage<?> onBinary(WebSocket ws, java.nio.ByteBuffer data, boolean last) {
            log.warn("ignored a binary frame from the relay");
            ws.request(1);
            return null;
        }

        @Override
        public CompletionStage<?> onClose(WebSocket ws, int status, String reason) {
            lost("closed " + status + " " + reason);
            return CompletableFuture.completedFuture(null);
        }

        @Override
        public void onError(WebSocket ws, Throwable error) {
            lost("error " + error);
        }

        synchronized void lost(String why) {
            if (mine != null && socket == mine) {
                socket = null;
                boolean wasLinked = session.welcomed();
                session.onClose();
                if (wasLinked) {
                    log.warn("relay link lost (" + why + "); reconnecting with backoff (" + cfg.reconnectDelayMs() + " ms doubling to "
                            + backoff.maxDelayMs() + " ms, forever); " + session.outbox().size() + " events held");
                } else {
                    problem("relay link " + why);
                }
                scheduleReconnect();
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        WebSocket ws = socket;
        socket = null;
        if (ws != null) ws.abort();
        timer.shutdownNow();
        sender.shutdownNow();
    }
}
