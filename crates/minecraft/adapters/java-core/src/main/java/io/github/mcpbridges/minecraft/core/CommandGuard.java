package io.github.mcpbridges.minecraft.core;

import java.util.List;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * Property 7: a command runs only if it is no longer than max_command_length and some allowed pattern
 * matches the whole of it. Patterns are anchored at both ends whatever they say, so "^say .*" cannot be
 * stretched by a second command after a line break and "give" cannot match "giveall".
 */
public final class CommandGuard {
    private final List<Pattern> patterns;
    private final int maxLength;

    public CommandGuard(List<String> allowedPatterns, int maxLength) {
        this.patterns = allowedPatterns.stream().map(p -> Pattern.compile("(?:" + p + ")")).toList();
        this.maxLength = maxLength;
    }

    public static CommandGuard of(BridgeConfig cfg) {
        return new CommandGuard(cfg.allowedPatterns(), cfg.maxCommandLength());
    }

    /** Empty when the command may run; otherwise why not (for an INVALID_COMMAND error). */
    public Optional<String> check(String command) {
        if (command == null || command.isEmpty()) return Optional.of("command: must be a non-empty string");
        if (command.length() > maxLength) {
            return Optional.of("command: " + command.length() + " characters, over max_command_length " + maxLength);
        }
        for (int i = 0; i < command.length(); i++) {
            char c = command.charAt(i);
            if (c == '\n' || c == '\r' || c == '\0') return Optional.of("command: contains a line break or NUL");
        }
        for (Pattern p : patterns) {
            if (p.matcher(command).matches()) return Optional.empty();
        }
        String shown = command.length() > 64 ? command.substring(0, 64) + "…" : command;
        return Optional.of("command not allowed by commands.allowed_patterns: \"" + shown + "\"");
    }

    public boolean allows(String command) {
        return check(command).isEmpty();
    }

    /** Most items one give hands out: vanilla's 100 stacks of 64 (vanilla lowers it for smaller stacks itself). */
    public static final long MAX_GIVE = 6400;
    /** The world border, horizontally. */
    public static final double BORDER = 29_999_999;
    /** The height a teleport may aim at (vanilla's own bound). */
    public static final double MAX_HEIGHT = 20_000_000;

    /** A value over a game limit: INVALID_COMMAND (the caller can fix it), naming the field, the limit and the value. */
    public static GameException overLimit(String field, Object value, Number limit, String message) {
        return new GameException("INVALID_COMMAND", field + ": " + message,
                java.util.Map.of("reason", "over_game_limit", "field", field, "limit", limit, "value", value));
    }

    /**
     * Checks the numbers of the commands that take them against the game's limits before the game runs them:
     * give counts (1..6400, whole), tp/teleport coordinates (±29999999 across, ±20000000 up; ~ offsets alike).
     */
    public static void checkLimits(String command) throws GameException {
        String[] w = command.trim().split("\\s+");
        String base = w[0].startsWith("/") ? w[0].substring(1) : w[0];
        if (base.equals("give") && w.length >= 4) {
            String raw = w[3];
            if (!raw.matches("\\d{1,18}")) throw overLimit("count", raw, MAX_GIVE, "\"" + raw + "\" is not a whole number");
            long count = Long.parseLong(raw);
            if (count < 1 || count > MAX_GIVE) throw overLimit("count", count, MAX_GIVE, count + " is outside 1.." + MAX_GIVE);
        }
        if ((base.equals("tp") || base.equals("teleport")) && w.length >= 4) {
            String[] axes = {"x", "y", "z"};
            boolean coords = true;
            for (int i = w.length - 3; i < w.length; i++) coords &= w[i].matches("[~^]?-?[0-9.]*");
            if (!coords) return;
            for (int i = 0; i < 3; i++) {
                String t = w[w.length - 3 + i];
                String num = t.replaceFirst("^[~^]", "");
                double v;
                try {
                    v = num.isEmpty() || num.equals("-") ? 0 : Double.parseDouble(num);
                } catch (NumberFormatException e) {
                    throw overLimit(axes[i], t, BORDER, "\"" + t + "\" is not a coordinate");
                }
                double limit = i == 1 ? MAX_HEIGHT : BORDER;
                if (!Double.isFinite(v) || Math.abs(v) > limit) throw overLimit(axes[i], t, (long) limit, t + " is outside ±" + (long) limit);
            }
        }
    }
}
