package io.github.mcpbridges.minecraft.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/** Test helpers: a recording transport, seeded generators, and messages as the relay would send them. */
final class Wire implements Session.Transport {
    final List<String> sent = Collections.synchronizedList(new ArrayList<>());
    /** The texts the session handed over as events it would let share a batch (PROTOCOL.md §2.2). */
    final List<String> batchable = Collections.synchronizedList(new ArrayList<>());

    @Override
    public boolean send(String text) {
        sent.add(text);
        return true;
    }

    @Override
    public boolean sendEvent(String text) {
        batchable.add(text);
        return send(text);
    }

    @SuppressWarnings("unchecked")
    List<Map<String, Object>> messages() {
        List<Map<String, Object>> out = new ArrayList<>();
        synchronized (sent) {
            for (String s : sent) {
                try {
                    out.add((Map<String, Object>) Json.parse(s));
                } catch (Json.ParseException e) {
                    throw new AssertionError("the session sent invalid JSON: " + s, e);
                }
            }
        }
        return out;
    }

    List<Map<String, Object>> ofType(String type) {
        return messages().stream().filter(m -> type.equals(m.get("type"))).toList();
    }

    /** Waits until `n` messages of `type` were sent. */
    List<Map<String, Object>> await(String type, int n) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (System.nanoTime() < deadline) {
            List<Map<String, Object>> got = ofType(type);
            if (got.size() >= n) return got;
            Thread.sleep(2);
        }
        throw new AssertionError("expected " + n + " " + type + " messages, got " + ofType(type).size() + ": " + sent);
    }

    static String relay(String type, String id, Map<String, Object> payload) {
        Map<String, Object> m = Envelope.build(type, id, payload);
        m.put("source", "relay");
        return Json.write(m);
    }

    static String welcome(long lastSeq) {
        return relay("welcome", "w1", Models.map("role", "minecraft", "epoch", "E1", "lastSeq", lastSeq));
    }

    static String command(String id, String type, Map<String, Object> args) {
        return relay("command", id, Models.map("command", type, "args", args));
    }

    static final class Log implements BridgeLog {
        final List<String> lines = Collections.synchronizedList(new ArrayList<>());

        @Override
        public void log(Level level, String message) {
            lines.add(level + " " + message);
        }

        String all() {
            synchronized (lines) {
                return String.join("\n", lines);
            }
        }
    }
}
