package io.github.mcpbridges.minecraft.core;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import java.util.regex.PatternSyntaxException;

/**
 * config/minecraft-mcp-bridge.toml (adapters/README.md): [bridge] [events] [commands] [security] [logging].
 * Missing keys take the defaults; a key of the wrong type, an unknown event or a bad pattern is refused
 * with the key's name.
 */
public record BridgeConfig(
        String url,
        String authToken,
        String serverName,
        int reconnectAttempts,
        long reconnectDelayMs,
        long reconnectMaxDelayMs,
        int outboxSize,
        long outboxBytes,
        Set<String> enabledEvents,
        List<String> allowedPatterns,
        boolean requireAuth,
        int maxCommandLength,
        String logLevel) {

    public static final List<String> EVENT_TYPES =
            List.of("player_join", "player_quit", "player_chat", "player_death", "block_break");
    public static final List<String> DEFAULT_PATTERNS =
            List.of("^say .*", "^tp \\w+ -?\\d+ -?\\d+ -?\\d+$", "^give \\w+ \\w+ \\d+$");

    public static final class ConfigException extends Exception {
        public ConfigException(String message) {
            super(message);
        }
    }

    public static BridgeConfig defaults() {
        try {
            return fromMap(Map.of());
        } catch (ConfigException e) {
            throw new IllegalStateException("the built-in defaults are invalid", e);
        }
    }

    public static BridgeConfig load(Path file) throws IOException, ConfigException {
        return parse(Files.readString(file, StandardCharsets.UTF_8));
    }

    public static BridgeConfig parse(String toml) throws ConfigException {
        try {
            return fromMap(Toml.parse(toml));
        } catch (Toml.TomlException e) {
            throw new ConfigException(e.getMessage());
        }
    }

    public static BridgeConfig fromMap(Map<String, Object> doc) throws ConfigException {
        Section bridge = new Section(doc, "bridge");
        Section events = new Section(doc, "events");
        Section commands = new Section(doc, "commands");
        Section security = new Section(doc, "security");
        Section logging = new Section(doc, "logging");

        List<String> enabled = events.strings("enabled", EVENT_TYPES);
        for (String e : enabled) {
            if (!EVENT_TYPES.contains(e)) {
                throw new ConfigException("events.enabled: unknown event type \"" + e + "\" (known: " + String.join(", ", EVENT_TYPES) + ")");
            }
        }
        List<String> patterns = commands.strings("allowed_patterns", DEFAULT_PATTERNS);
        for (int n = 0; n < patterns.size(); n++) {
            try {
                Pattern.compile(patterns.get(n));
            } catch (PatternSyntaxException e) {
                throw new ConfigException("commands.allowed_patterns[" + n + "]: " + e.getDescription());
            }
        }
        long maxLen = security.integer("max_command_length", 256, 1, 32767);
        String level = logging.string("level", "INFO").toUpperCase(java.util.Locale.ROOT);
        if (!List.of("TRACE", "DEBUG", "INFO", "WARN", "ERROR").contains(level)) {
            throw new ConfigException("logging.level: expected one of TRACE, DEBUG, INFO, WARN, ERROR");
        }
        return new BridgeConfig(
                bridge.string("url", "ws://localhost:8080"),
                bridge.string("auth_token", "secret"),
                bridge.string("server_name", ""),
                (int) bridge.integer("reconnect_attempts", 5, 0, 1_000_000),
                bridge.integer("reconnect_delay", 5000, 1, 3_600_000),
                bridge.integer("reconnect_max_delay", Backoff.MAX_DELAY_MS, 1, 3_600_000),
                (int) bridge.integer("outbox_size", 10_000, 1, 100_000),
                bridge.integer("outbox_bytes", 4L * 1024 * 1024, 1024, 256L * 1024 * 1024),
                Set.copyOf(new LinkedHashSet<>(enabled)),
                List.copyOf(patterns),
                security.bool("require_auth", true),
                (int) maxLen,
                level);
    }

    /** One [table] of the document, with typed getters that name the key on error. */
    private static final class Section {
        final String name;
        final Map<?, ?> values;

        Section(Map<String, Object> doc, String name) throws ConfigException {
            this.name = name;
            Object t = doc.get(name);
            if (t == null) values = Map.of();
            else if (t instanceof Map<?, ?> m) values = m;
            else throw new ConfigException(name + ": expected a [" + name + "] table");
        }

        String string(String key, String dflt) throws ConfigException {
            Object v = values.get(key);
            if (v == null) return dflt;
            if (v instanceof String s) return s;
            throw new ConfigException(name + "." + key + ": expected a string");
        }

        boolean bool(String key, boolean dflt) throws ConfigException {
            Object v = values.get(key);
            if (v == null) return dflt;
            if (v instanceof Boolean b) return b;
            throw new ConfigException(name + "." + key + ": expected true or false");
        }

        long integer(String key, long dflt, long min, long max) throws ConfigException {
            Object v = values.get(key);
            if (v == null) return dflt;
            if (v instanceof Long l) {
                if (l < min || l > max) throw new ConfigException(name + "." + key + ": " + l + " is outside " + min + ".." + max);
                return l;
            }
            throw new ConfigException(name + "." + key + ": expected an integer");
        }

        List<String> strings(String key, List<String> dflt) throws ConfigException {
            Object v = values.get(key);
            if (v == null) return dflt;
            if (!(v instanceof List<?> l)) throw new ConfigException(name + "." + key + ": expected an array of strings");
            List<String> out = new ArrayList<>();
            for (int n = 0; n < l.size(); n++) {
                if (!(l.get(n) instanceof String s)) throw new ConfigException(name + "." + key + "[" + n + "]: expected a string");
                out.add(s);
            }
            return out;
        }
    }

    /** Property 6: whether events of this type leave the game at all. */
    public boolean eventEnabled(String eventType) {
        return enabledEvents.contains(eventType);
    }

    /** A one-line summary for the startup log (Property 14), without the token. */
    /**
     * The game name when server_name is not set: host name and port, so two servers on one machine, or on two
     * machines, do not both claim one name (the relay refuses the second: name_in_use). Cut to the protocol's
     * name alphabet (A-Z a-z 0-9 _ . -) and 64 characters, the port always kept whole.
     */
    public static String defaultServerName(String host, int port) {
        String suffix = "-" + port;
        String h = (host == null ? "" : host).replaceAll("[^A-Za-z0-9_.-]+", "-").replaceAll("^[-.]+|[-.]+$", "");
        if (h.isEmpty()) h = "minecraft";
        return h.substring(0, Math.min(h.length(), 64 - suffix.length())) + suffix;
    }

    /** This machine's host name, or "" when it has none the JDK can read. */
    public static String hostName() {
        try {
            return java.net.InetAddress.getLocalHost().getHostName();
        } catch (java.io.IOException e) {
            return "";
        }
    }

    /** This config with server_name filled in from the host name and the game's port when it was not set. */
    public BridgeConfig withGamePort(int port) {
        if (!serverName.isEmpty()) return this;
        return new BridgeConfig(url, authToken, defaultServerName(hostName(), port), reconnectAttempts, reconnectDelayMs,
                reconnectMaxDelayMs, outboxSize, outboxBytes, enabledEvents, allowedPatterns, requireAuth, maxCommandLength,
                logLevel);
    }

    public String summary() {
        return "relay " + url + ", game \"" + serverName + "\", events " + EVENT_TYPES.stream().filter(enabledEvents::contains).toList()
                + ", " + allowedPatterns.size() + " allowed command patterns, max_command_length " + maxCommandLength
                + ", reconnect forever from " + reconnectDelayMs + " ms doubling to " + reconnectMaxDelayMs + " ms";
    }
}
