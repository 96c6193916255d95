package io.github.mcpbridges.minecraft.core;

import java.util.OptionalLong;
import java.util.random.RandomGenerator;

/**
 * Reconnect policy (seed: exponential backoff from reconnect_delay, capped at 30 s; the seed's "5 attempts").
 * maxAttempts 0 retries forever. Jitter keeps many game servers from redialling a restarted relay in step.
 */
public final class Backoff {
    public static final long MAX_DELAY_MS = 30_000;

    private final long initialMs;
    private final int maxAttempts;
    private final RandomGenerator random;
    private int failures;

    public Backoff(long initialMs, int maxAttempts, RandomGenerator random) {
        this.initialMs = initialMs;
        this.maxAttempts = maxAttempts;
        this.random = random;
    }

    /** The wait before the next attempt after one more failure, or empty when the attempts are used up. */
    public synchronized OptionalLong nextDelayMs() {
        failures++;
        if (maxAttempts > 0 && failures > maxAttempts) return OptionalLong.empty();
        long base = Math.min(MAX_DELAY_MS, initialMs << Math.min(failures - 1, 20));
        long jittered = base / 2 + (long) (random.nextDouble() * (base - base / 2));
        return OptionalLong.of(Math.max(1, jittered));
    }

    public synchronized void reset() {
        failures = 0;
    }

    public synchronized int failures() {
        return failures;
    }
}
