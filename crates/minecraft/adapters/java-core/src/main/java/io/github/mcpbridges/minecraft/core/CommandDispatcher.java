package io.github.mcpbridges.minecraft.core;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Turns a relay `command` (type + args, PROTOCOL.md §4.2) into a GameAdapter call and its `data`. Validates the
 * args again (the game side is the last line): numbers may arrive as numeric strings, limits are named in the
 * error. execute_command passes the whitelist first and is never run when refused (Property 7).
 */
public final class CommandDispatcher {
    public static final int MAX_WORLD_RADIUS = 16;
    public static final int MAX_QUANTITY = 6400;
    public static final List<String> COMMAND_TYPES = List.of("execute_command", "send_message", "teleport_player",
            "give_item", "get_online_players", "get_player_info", "get_server_info", "get_world_info");

    private final GameAdapter game;
    private final CommandGuard guard;
    private final int maxMessageLength;

    public CommandDispatcher(GameAdapter game, CommandGuard guard, int maxMessageLength) {
        this.game = game;
        this.guard = guard;
        this.maxMessageLength = maxMessageLength;
    }

    public Map<String, Object> run(String type, Map<String, Object> args) throws GameException {
        switch (type) {
            case "execute_command": {
                String command = string(args, "command", 32767);
                var refused = guard.check(command);
                if (refused.isPresent()) throw new GameException("INVALID_COMMAND", refused.get(), Map.of("command", command.length() > 256 ? command.substring(0, 256) : command));
                // Whitelisted is not enough: the numbers must fit the game's limits before the game sees them.
                CommandGuard.checkLimits(command);
                GameAdapter.CommandOutput out = game.executeCommand(command);
                Map<String, Object> data = new LinkedHashMap<>();
                data.put("success", out.success());
                if (out.success()) data.put("message", String.join("\n", out.lines()));
                else data.put("error", out.lines().isEmpty() ? "command failed" : out.lines().get(out.lines().size() - 1));
                data.put("output", out.lines());
                return data;
            }
            case "send_message": {
                String message = string(args, "message", maxMessageLength);
                if (message.indexOf('\n') >= 0 || message.indexOf('\r') >= 0 || message.indexOf('\0') >= 0) {
                    throw new GameException("SCHEMA_ERROR", "message: contains a line break or NUL", Map.of("field", "message"));
                }
                String target = optionalString(args, "target", 16);
                int n = game.sendMessage(message, target);
                return Models.map("success", true, "message", target == null ? "sent to " + n + " players" : "sent to " + target);
            }
            case "teleport_player": {
                String player = string(args, "player", 16);
                double x = number(args, "x"), y = number(args, "y"), z = number(args, "z");
                for (var c : List.of(Map.entry("x", x), Map.entry("z", z))) {
                    if (Math.abs(c.getValue()) > 30_000_000) throw CommandGuard.overLimit(c.getKey(), c.getValue(), 30_000_000, c.getValue() + " is outside the world border (±30000000)");
                }
                if (y < -2048 || y > 2048) throw CommandGuard.overLimit("y", y, 2048, y + " is outside -2048..2048");
                String world = optionalString(args, "world", 64);
                Map<String, Object> loc = game.teleport(player, x, y, z, world);
                return Models.map("success", true, "message", "teleported " + player, "location", loc);
            }
            case "give_item": {
                String player = string(args, "player", 16);
                String item = string(args, "item", 128);
                if (!item.contains(":")) item = "minecraft:" + item;
                long quantity = integer(args, "quantity");
                if (quantity < 1 || quantity > MAX_QUANTITY) throw CommandGuard.overLimit("quantity", quantity, MAX_QUANTITY, quantity + " is outside 1.." + MAX_QUANTITY);
                game.giveItem(player, item, (int) quantity);
                return Models.map("success", true, "message", "gave " + quantity + " " + item + " to " + player);
            }
            case "get_online_players":
                return Models.map("players", game.onlinePlayers());
            case "get_player_info":
                return game.playerInfo(string(args, "player", 16));
            case "get_server_info":
                return game.serverInfo();
            case "get_world_info": {
                long x = integer(args, "x"), y = integer(args, "y"), z = integer(args, "z"), r = integer(args, "radius");
                if (r < 0 || r > MAX_WORLD_RADIUS) throw CommandGuard.overLimit("radius", r, MAX_WORLD_RADIUS, r + " is outside 0.." + MAX_WORLD_RADIUS);
                return game.worldInfo((int) x, (int) y, (int) z, (int) r);
            }
            default:
                throw new GameException("INVALID_COMMAND", "unknown command type \"" + type + "\" (known: " + String.join(", ", COMMAND_TYPES) + ")");
        }
    }

    private static GameException schema(String field, String message) {
        return new GameException("SCHEMA_ERROR", message, Map.of("field", field));
    }

    static String string(Map<String, Object> args, String key, int max) throws GameException {
        Object v = args.get(key);
        if (v == null) throw schema(key, key + ": required");
        if (!(v instanceof String s)) throw schema(key, key + ": expected a string");
        if (s.length() > max) throw schema(key, key + ": " + s.length() + " characters, over the limit of " + max);
        return s;
    }

    static String optionalString(Map<String, Object> args, String key, int max) throws GameException {
        return args.get(key) == null ? null : string(args, key, max);
    }

    static double number(Map<String, Object> args, String key) throws GameException {
        Object v = args.get(key);
        double d;
        if (v instanceof Number n) d = n.doubleValue();
        else if (v instanceof String s) {
            try {
                d = Double.parseDouble(s.trim());
            } catch (NumberFormatException e) {
                throw schema(key, key + ": expected a number, got \"" + s + "\"");
            }
        } else throw schema(key, key + ": expected a number");
        if (!Double.isFinite(d)) throw schema(key, key + ": expected a finite number");
        return d;
    }

    static long integer(Map<String, Object> args, String key) throws GameException {
        double d = number(args, key);
        if (d != Math.rint(d) || Math.abs(d) > 1e15) throw schema(key, key + ": expected an integer");
        return (long) d;
    }
}
