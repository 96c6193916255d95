package io.github.mcpbridges.minecraft.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

/** A test double for GameAdapter: records what ran and how many ran at once. */
final class FakeGame implements GameAdapter {
    final List<String> executed = Collections.synchronizedList(new ArrayList<>());
    final Map<String, Map<String, Object>> players = Collections.synchronizedMap(new LinkedHashMap<>());
    final AtomicInteger running = new AtomicInteger();
    final AtomicInteger maxRunning = new AtomicInteger();
    volatile long sleepMs;
    volatile RuntimeException crash;

    private void enter() {
        int n = running.incrementAndGet();
        maxRunning.accumulateAndGet(n, Math::max);
        if (sleepMs > 0) {
            try {
                Thread.sleep(sleepMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void leave() {
        running.decrementAndGet();
    }

    @Override
    public CommandOutput executeCommand(String command) {
        enter();
        try {
            if (crash != null) throw crash;
            executed.add(command);
            return new CommandOutput(!command.startsWith("fail"), List.of("ran " + command));
        } finally {
            leave();
        }
    }

    @Override
    public int sendMessage(String message, String target) throws GameException {
        if (target != null && !players.containsKey(target)) throw GameException.playerNotFound(target);
        executed.add("msg " + message);
        return target == null ? players.size() : 1;
    }

    @Override
    public Map<String, Object> teleport(String player, double x, double y, double z, String world) throws GameException {
        if (!players.containsKey(player)) throw GameException.playerNotFound(player);
        return Models.location(world == null ? "minecraft:overworld" : world, x, y, z);
    }

    @Override
    public void giveItem(String player, String item, int quantity) throws GameException {
        if (!players.containsKey(player)) throw GameException.playerNotFound(player);
        executed.add("give " + player + " " + item + " " + quantity);
    }

    @Override
    public List<String> onlinePlayers() {
        return new ArrayList<>(players.keySet());
    }

    @Override
    public Map<String, Object> playerInfo(String player) throws GameException {
        Map<String, Object> p = players.get(player);
        if (p == null) throw GameException.playerNotFound(player);
        return p;
    }

    @Override
    public Map<String, Object> serverInfo() {
        return Models.serverInfo("1.21.1", players.size(), 20, 6000, "clear", 20.0);
    }

    @Override
    public Map<String, Object> worldInfo(int x, int y, int z, int radius) {
        List<Map<String, Object>> blocks = new ArrayList<>();
        for (int dx = -radius; dx <= radius; dx++) blocks.add(Models.block("minecraft:stone", Models.location("minecraft:overworld", x + dx, y - 1, z)));
        return Models.worldInfo(blocks, List.of());
    }
}
