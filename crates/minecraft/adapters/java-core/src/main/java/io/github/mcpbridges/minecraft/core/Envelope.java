package io.github.mcpbridges.minecraft.core;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

/** The envelope of crates/minecraft/PROTOCOL.md §2: building messages and validating what arrives. */
public final class Envelope {
    /**
     * 1.1 added `chunk` (PROTOCOL.md §2.1): an answer over the relay's maxMessageBytes goes in slices. 1.2 added
     * `batch` (§2.2): events queued together travel in one frame, to a relay that speaks 1.2.
     */
    public static final String VERSION = "1.2";
    public static final List<String> TYPES = List.of(
            "hello", "welcome", "command", "query", "response", "event", "ack", "subscribe", "heartbeat", "notice", "error", "chunk",
            "batch");
    /** Most messages one batch carries (PROTOCOL.md §2.2). */
    public static final int MAX_BATCH = 1024;
    /** Room a batch's envelope takes around its messages. */
    public static final int BATCH_OVERHEAD = 192;
    private static final java.util.concurrent.atomic.AtomicLong BATCH_IDS = new java.util.concurrent.atomic.AtomicLong();
    /** Room a chunk's envelope takes besides its data. */
    private static final int CHUNK_OVERHEAD = 512;
    private static final Pattern VERSION_FORMAT = Pattern.compile("\\d+\\.\\d+");

    private Envelope() {}

    /** A validated inbound message. {@code degraded} is true for another major version handled as 1.0. */
    public record Message(String version, String type, String id, long timestamp, String source, Long seq,
                          Map<String, Object> payload, boolean degraded) {}

    /** Why a message was refused; {@code id} is the offending message's id or "" (for the error reply). */
    public static final class SchemaException extends Exception {
        public final String id;
        public final String field;

        public SchemaException(String id, String field, String message) {
            super(message);
            this.id = id;
            this.field = field;
        }
    }

    public static Map<String, Object> build(String type, String id, Map<String, Object> payload) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("version", VERSION);
        m.put("type", type);
        m.put("id", id);
        m.put("timestamp", System.currentTimeMillis());
        m.put("source", "minecraft");
        m.put("payload", payload);
        return m;
    }

    @SuppressWarnings("unchecked")
    public static Message parse(String text) throws SchemaException {
        Object root;
        try {
            root = Json.parse(text);
        } catch (Json.ParseException e) {
            throw new SchemaException("", "", "not JSON: " + e.getMessage());
        }
        if (!(root instanceof Map<?, ?> raw)) throw new SchemaException("", "", "not a JSON object");
        Map<String, Object> m = (Map<String, Object>) raw;
        String id = m.get("id") instanceof String s ? s : "";
        if (!(m.get("version") instanceof String version) || !VERSION_FORMAT.matcher(version).matches()) {
            throw new SchemaException(id, "version", "field `version`: must be a string \"MAJOR.MINOR\"");
        }
        if (!(m.get("type") instanceof String type) || !TYPES.contains(type)) {
            throw new SchemaException(id, "type", "field `type`: must be one of " + String.join(", ", TYPES));
        }
        if (!(m.get("id") instanceof String) || id.isEmpty() && !type.equals("error") || id.length() > 128) {
            throw new SchemaException(id, "id", "field `id`: must be a string of 1-128 characters");
        }
        if (!(m.get("timestamp") instanceof Number ts)) throw new SchemaException(id, "timestamp", "field `timestamp`: must be a number");
        if (!(m.get("source") instanceof String source)) throw new SchemaException(id, "source", "field `source`: must be a string");
        if (!(m.get("payload") instanceof Map<?, ?> payload)) throw new SchemaException(id, "payload", "field `payload`: must be an object");
        Long seq = null;
        if (m.containsKey("seq")) {
            if (!(m.get("seq") instanceof Long s) || s < 1) throw new SchemaException(id, "seq", "field `seq`: must be an integer >= 1");
            seq = s;
        }
        boolean degraded = !version.startsWith("1.");
        return new Message(version, type, id, ts.longValue(), source, seq, (Map<String, Object>) payload, degraded);
    }

    /** Whether a peer whose message said {@code version} reads `chunk` (1.1 or later). */
    public static boolean speaksChunks(String version) {
        String[] p = version.split("\\.");
        try {
            int major = Integer.parseInt(p[0]);
            int minor = Integer.parseInt(p[1]);
            return major > 1 || (major == 1 && minor >= 1);
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** Whether a peer whose message said {@code version} reads `batch` (1.2 or later). */
    public static boolean speaksBatches(String version) {
        String[] p = version.split("\\.");
        try {
            int major = Integer.parseInt(p[0]);
            int minor = Integer.parseInt(p[1]);
            return major > 1 || (major == 1 && minor >= 2);
        } catch (RuntimeException e) {
            return false;
        }
    }

    /** UTF-8 length of {@code text}. */
    public static int utf8Length(String text) {
        int n = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            n += c < 0x80 ? 1 : c < 0x800 || Character.isSurrogate(c) ? 2 : 3;
        }
        return n;
    }

    /**
     * A `batch` message (PROTOCOL.md §2.2) carrying {@code texts}, each a whole message's JSON text, spliced in
     * as they are rather than encoded again.
     */
    public static String batch(List<String> texts) {
        int size = BATCH_OVERHEAD;
        for (String t : texts) size += t.length() + 1;
        StringBuilder b = new StringBuilder(size);
        b.append("{\"version\":\"").append(VERSION).append("\",\"type\":\"batch\",\"id\":\"b-")
                .append(BATCH_IDS.incrementAndGet()).append("\",\"timestamp\":").append(System.currentTimeMillis())
                .append(",\"source\":\"minecraft\",\"payload\":{\"messages\":[");
        for (int i = 0; i < texts.size(); i++) {
            if (i > 0) b.append(',');
            b.append(texts.get(i));
        }
        return b.append("]}}").toString();
    }

    /** Bytes one UTF-16 unit takes inside a JSON string (a surrogate pair: 2 + 2). */
    private static int escapedBytes(char c) {
        if (c == '"' || c == '\\') return 2;
        if (c < 0x20) return 6;
        if (c < 0x80) return 1;
        if (c < 0x800 || Character.isSurrogate(c)) return 2;
        return 3;
    }

    /**
     * The frames `msg` goes out as: its text, or when that is over {@code maxBytes} (and maxBytes &gt; 0), `chunk`
     * messages of at most maxBytes whose `data` slices together to that text (PROTOCOL.md §2.1).
     */
    public static List<String> frames(Map<String, Object> msg, int maxBytes) {
        String text = Json.write(msg);
        if (maxBytes <= 0 || text.getBytes(java.nio.charset.StandardCharsets.UTF_8).length <= maxBytes) return List.of(text);
        String id = String.valueOf(msg.get("id"));
        int budget = Math.max(64, maxBytes - CHUNK_OVERHEAD - 2 * id.length() * 3);
        List<String> parts = new java.util.ArrayList<>();
        int start = 0;
        int size = 0;
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            int n = escapedBytes(c);
            if (size + n > budget && i > start && !Character.isLowSurrogate(c)) {
                parts.add(text.substring(start, i));
                start = i;
                size = 0;
            }
            size += n;
        }
        parts.add(text.substring(start));
        List<String> out = new java.util.ArrayList<>(parts.size());
        for (int i = 0; i < parts.size(); i++) {
            Map<String, Object> p = new LinkedHashMap<>();
            p.put("index", (long) i);
            p.put("count", (long) parts.size());
            p.put("data", parts.get(i));
            out.add(Json.write(build("chunk", id, p)));
        }
        return out;
    }

    /** An `error` message refusing another (PROTOCOL.md §4.7). */
    public static Map<String, Object> error(String refusedId, String code, String message, Map<String, Object> details) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("code", code);
        p.put("message", message);
        p.put("details", details);
        return build("error", refusedId, p);
    }
}
