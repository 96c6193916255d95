package io.github.mcpbridges.minecraft.core;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** The data models of PROTOCOL.md §4 as JSON-ready maps with its field names (GameEvent data, Location, PlayerInfo ...). */
public final class Models {
    private Models() {}

    public static Map<String, Object> location(String world, double x, double y, double z) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("world", world);
        m.put("x", x);
        m.put("y", y);
        m.put("z", z);
        return m;
    }

    public static Map<String, Object> playerJoin(String player, String uuid) {
        return map("player", player, "uuid", uuid);
    }

    public static Map<String, Object> playerQuit(String player, String uuid) {
        return map("player", player, "uuid", uuid);
    }

    public static Map<String, Object> playerChat(String player, String message) {
        return map("player", player, "message", message);
    }

    /** killer may be null (omitted). */
    public static Map<String, Object> playerDeath(String player, String cause, Map<String, Object> location, String killer) {
        Map<String, Object> m = map("player", player, "cause", cause, "location", location);
        if (killer != null) m.put("killer", killer);
        return m;
    }

    public static Map<String, Object> blockBreak(String player, String blockType, Map<String, Object> location) {
        return map("player", player, "blockType", blockType, "location", location);
    }

    public static Map<String, Object> playerInfo(String name, String uuid, double health, int foodLevel,
                                                 Map<String, Object> location, String gameMode, List<Map<String, Object>> inventory) {
        return map("name", name, "uuid", uuid, "health", health, "foodLevel", foodLevel, "location", location,
                "gameMode", gameMode, "inventory", inventory);
    }

    public static Map<String, Object> itemStack(String type, int quantity, String displayName) {
        Map<String, Object> m = map("type", type, "quantity", quantity);
        if (displayName != null) m.put("displayName", displayName);
        return m;
    }

    public static Map<String, Object> serverInfo(String version, int onlinePlayers, int maxPlayers, long timeOfDay, String weather, double tps) {
        return map("version", version, "onlinePlayers", onlinePlayers, "maxPlayers", maxPlayers,
                "timeOfDay", timeOfDay, "weather", weather, "tps", tps);
    }

    public static Map<String, Object> block(String type, Map<String, Object> location) {
        return map("type", type, "location", location);
    }

    public static Map<String, Object> entity(String type, Map<String, Object> location, String name) {
        Map<String, Object> m = map("type", type, "location", location);
        if (name != null) m.put("name", name);
        return m;
    }

    public static Map<String, Object> worldInfo(List<Map<String, Object>> blocks, List<Map<String, Object>> entities) {
        return map("blocks", blocks, "entities", entities);
    }

    /** Property 1: the fields each event type's data must carry (PROTOCOL.md §4.1). */
    public static List<String> requiredFields(String eventType) {
        return switch (eventType) {
            case "player_join", "player_quit" -> List.of("player", "uuid");
            case "player_chat" -> List.of("player", "message");
            case "player_death" -> List.of("player", "cause", "location");
            case "block_break" -> List.of("player", "blockType", "location");
            default -> throw new IllegalArgumentException("unknown event type " + eventType);
        };
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }
}
