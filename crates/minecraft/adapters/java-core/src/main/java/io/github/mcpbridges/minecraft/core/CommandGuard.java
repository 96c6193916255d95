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
}
