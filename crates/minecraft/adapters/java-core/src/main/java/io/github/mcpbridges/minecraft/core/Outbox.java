package io.github.mcpbridges.minecraft.core;

import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Events waiting for the relay's ack, bounded by count and bytes: while the relay is away the oldest are
 * dropped (and counted) rather than letting a long outage grow the game's memory without limit.
 */
public final class Outbox {
    public record Item(long seq, String text, int bytes) {}

    private final ArrayDeque<Item> items = new ArrayDeque<>();
    private final int maxItems;
    private final long maxBytes;
    private long bytes;
    private long dropped;

    public Outbox(int maxItems, long maxBytes) {
        this.maxItems = maxItems;
        this.maxBytes = maxBytes;
    }

    /** Adds an event; returns how many old events were dropped to make room. */
    public synchronized int push(long seq, String text) {
        int size = text.getBytes(StandardCharsets.UTF_8).length;
        items.addLast(new Item(seq, text, size));
        bytes += size;
        int n = 0;
        while (items.size() > maxItems || (bytes > maxBytes && items.size() > 1)) {
            bytes -= items.removeFirst().bytes();
            n++;
        }
        if (bytes > maxBytes) { // a single event bigger than the whole outbox
            bytes -= items.removeFirst().bytes();
            n++;
        }
        dropped += n;
        return n;
    }

    public synchronized void ackUpTo(long seq) {
        while (!items.isEmpty() && items.peekFirst().seq() <= seq) bytes -= items.removeFirst().bytes();
    }

    public synchronized List<Item> snapshot() {
        return new ArrayList<>(items);
    }

    public synchronized int size() {
        return items.size();
    }

    public synchronized long bytes() {
        return bytes;
    }

    public synchronized long dropped() {
        return dropped;
    }
}
