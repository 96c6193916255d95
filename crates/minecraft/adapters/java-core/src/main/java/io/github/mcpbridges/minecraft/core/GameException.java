package io.github.mcpbridges.minecraft.core;

import java.util.Map;

/** A command the game refused or could not run, with one of PROTOCOL.md §7's codes. */
public class GameException extends Exception {
    private final String code;
    private final Map<String, Object> details;

    public GameException(String code, String message) {
        this(code, message, Map.of());
    }

    public GameException(String code, String message, Map<String, Object> details) {
        super(message);
        this.code = code;
        this.details = details;
    }

    public String code() {
        return code;
    }

    public Map<String, Object> details() {
        return details;
    }

    public static GameException playerNotFound(String player) {
        return new GameException("PLAYER_NOT_FOUND", "player \"" + player + "\" is not online", Map.of("player", player));
    }
}
