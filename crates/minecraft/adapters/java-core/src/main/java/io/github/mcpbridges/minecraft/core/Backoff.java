package io.github.mcpbridges.minecraft.core;

import java.util.random.RandomGenerator;

/**
 * Reconnect policy: exponential backoff from reconnect_delay, capped at reconnect_max_delay (30 s by default),
 * with jitter so many game servers do not redial a restarted relay in step. It never gives up (issue 22: a core
 * that stopped after the original design's 5 attempts lost every later event until the server restarted);
 * reconnect_attempts only says after how many failures the outage is logged as a long one (0: after
 * {@link #LONG_OUTAGE_ATTEMPTS}).
 */
public final class Backoff {
    public static final long MAX_DELAY_MS = 30_000;
    public static final int LONG_OUTAGE_ATTEMPTS = 5;

    private final long initialMs;
    private final long maxDelayMs;
    private final int longAfter;
    private final RandomGenerator random;
    private int failures;

    public Backoff(long initialMs, long maxDelayMs, int reconnectAttempts, RandomGenerator random) {
        this.initialMs = Math.max(1, initialMs);
        this.maxDelayMs = Math.max(1, maxDelayMs);
        this.longAfter = reconnectAttempts > 0 ? reconnectAttempts : LONG_OUTAGE_ATTEMPTS;
        this.random = random;
    }

    /** The wait before the next attempt after one more failure; always a wait, never "give up". */
    public synchronized long nextDelayMs() {
        failures++;
        long base = Math.min(maxDelayMs, initialMs << Math.min(failures - 1, 20));
        long jittered = base / 2 + (long) (random.nextDouble() * (base - base / 2));
        return Math.max(1, jittered);
    }

    /** True exactly once per outage: right after the failure that made it a long one. */
    public synchronized boolean outageJustBecameLong() {
        return failures == longAfter + 1;
    }

    public synchronized int longAfter() {
        return longAfter;
    }

    public synchronized long maxDelayMs() {
        return maxDelayMs;
    }

    public synchronized void reset() {
        failures = 0;
    }

    public synchronized int failures() {
        return failures;
    }
}
