package io.github.mcpbridges.minecraft.core;

import java.util.List;
import java.util.Map;

/**
 * What a game (a NeoForge server, a test double) provides to the bridge. Every method is called from the
 * bridge's single command thread, one call at a time; an implementation hops to the game's server thread
 * itself. Results are PROTOCOL.md's data models as JSON-ready maps (see {@link Models}).
 */
public interface GameAdapter {
    /** Runs a console command that already passed the whitelist; returns its output lines and success. */
    CommandOutput executeCommand(String command) throws GameException;

    /** Sends to one player, or to everyone when target is null; returns how many received it. */
    int sendMessage(String message, String target) throws GameException;

    /** Teleports and returns the new Location. */
    Map<String, Object> teleport(String player, double x, double y, double z, String world) throws GameException;

    /** item is namespaced ("minecraft:diamond"). */
    void giveItem(String player, String item, int quantity) throws GameException;

    List<String> onlinePlayers() throws GameException;

    Map<String, Object> playerInfo(String player) throws GameException;

    Map<String, Object> serverInfo() throws GameException;

    Map<String, Object> worldInfo(int x, int y, int z, int radius) throws GameException;

    record CommandOutput(boolean success, List<String> lines) {}
}
