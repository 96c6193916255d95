package io.github.mcpbridges.minecraft.neoforge;

import io.github.mcpbridges.minecraft.core.GameAdapter;
import io.github.mcpbridges.minecraft.core.GameException;
import io.github.mcpbridges.minecraft.core.Models;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import net.minecraft.commands.CommandSourceStack;
import net.minecraft.core.BlockPos;
import net.minecraft.core.registries.BuiltInRegistries;
import net.minecraft.core.registries.Registries;
import net.minecraft.network.chat.Component;
import net.minecraft.resources.ResourceKey;
import net.minecraft.resources.ResourceLocation;
import net.minecraft.server.MinecraftServer;
import net.minecraft.server.level.ServerLevel;
import net.minecraft.server.level.ServerPlayer;
import net.minecraft.world.entity.Entity;
import net.minecraft.world.entity.player.Player;
import net.minecraft.world.item.Item;
import net.minecraft.world.item.ItemStack;
import net.minecraft.world.level.block.state.BlockState;
import net.minecraft.world.phys.AABB;

/**
 * GameAdapter on a NeoForge server. The bridge calls it from its command thread, one call at a time; every
 * call hops to the server thread (server.submit) and waits for it, so game state is only touched where
 * Minecraft allows it and command output is never interleaved.
 */
final class NeoForgeGame implements GameAdapter {
    private static final long SERVER_THREAD_TIMEOUT_S = 10;

    private final MinecraftServer server;

    NeoForgeGame(MinecraftServer server) {
        this.server = server;
    }

    /** A task that may refuse with a GameException, run on the server thread. */
    private interface OnServer<T> {
        T run() throws GameException;
    }

    private <T> T onServerThread(OnServer<T> task) throws GameException {
        Supplier<Object> wrapped = () -> {
            try {
                return task.run();
            } catch (GameException e) {
                return e;
            }
        };
        try {
            Object out = server.submit(wrapped).get(SERVER_THREAD_TIMEOUT_S, TimeUnit.SECONDS);
            if (out instanceof GameException e) throw e;
            @SuppressWarnings("unchecked")
            T t = (T) out;
            return t;
        } catch (TimeoutException e) {
            throw new GameException("TIMEOUT", "the server thread did not run the command within " + SERVER_THREAD_TIMEOUT_S + " s");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new GameException("SERVER_ERROR", "interrupted while waiting for the server thread");
        } catch (ExecutionException e) {
            throw new GameException("SERVER_ERROR", "the server thread failed: " + e.getCause());
        }
    }

    private ServerPlayer player(String name) throws GameException {
        ServerPlayer p = server.getPlayerList().getPlayerByName(name);
        if (p == null) throw GameException.playerNotFound(name);
        return p;
    }

    private static Map<String, Object> location(Entity e) {
        return Models.location(e.level().dimension().location().toString(), e.getX(), e.getY(), e.getZ());
    }

    @Override
    public CommandOutput executeCommand(String command) throws GameException {
        return onServerThread(() -> {
            CapturingSource out = new CapturingSource();
            boolean[] success = {false};
            CommandSourceStack stack = server.createCommandSourceStack()
                    .withSource(out)
                    .withPermission(4)
                    .withCallback((ok, result) -> success[0] = ok);
            server.getCommands().performPrefixedCommand(stack, command);
            return new CommandOutput(success[0], List.copyOf(out.lines));
        });
    }

    @Override
    public int sendMessage(String message, String target) throws GameException {
        return onServerThread(() -> {
            Component text = Component.literal(message);
            if (target != null) {
                player(target).sendSystemMessage(text);
                return 1;
            }
            server.getPlayerList().broadcastSystemMessage(text, false);
            return server.getPlayerCount();
        });
    }

    @Override
    public Map<String, Object> teleport(String name, double x, double y, double z, String world) throws GameException {
        return onServerThread(() -> {
            ServerPlayer p = player(name);
            ServerLevel level = p.serverLevel();
            if (world != null) {
                ResourceLocation id = ResourceLocation.tryParse(world);
                level = id == null ? null : server.getLevel(ResourceKey.create(Registries.DIMENSION, id));
                if (level == null) throw new GameException("INVALID_COMMAND", "world: unknown dimension \"" + world + "\"", Map.of("field", "world"));
            }
            p.teleportTo(level, x, y, z, p.getYRot(), p.getXRot());
            return location(p);
        });
    }

    @Override
    public void giveItem(String name, String itemId, int quantity) throws GameException {
        onServerThread(() -> {
            ServerPlayer p = player(name);
            ResourceLocation id = ResourceLocation.tryParse(itemId);
            Item item = id == null ? null : BuiltInRegistries.ITEM.getOptional(id).orElse(null);
            if (item == null) throw new GameException("INVALID_COMMAND", "item: unknown item \"" + itemId + "\"", Map.of("field", "item"));
            int left = quantity;
            while (left > 0) {
                int n = Math.min(left, item.getDefaultMaxStackSize());
                ItemStack stack = new ItemStack(item, n);
                if (!p.getInventory().add(stack) && !stack.isEmpty()) p.drop(stack, false); // a full inventory drops the rest at the player's feet
                left -= n;
            }
            return null;
        });
    }

    @Override
    public List<String> onlinePlayers() throws GameException {
        return onServerThread(() -> server.getPlayerList().getPlayers().stream().map(p -> p.getGameProfile().getName()).toList());
    }

    @Override
    public Map<String, Object> playerInfo(String name) throws GameException {
        return onServerThread(() -> {
            ServerPlayer p = player(name);
            List<Map<String, Object>> inventory = new ArrayList<>();
            for (int i = 0; i < p.getInventory().getContainerSize(); i++) {
                ItemStack s = p.getInventory().getItem(i);
                if (s.isEmpty()) continue;
                inventory.add(Models.itemStack(BuiltInRegistries.ITEM.getKey(s.getItem()).toString(), s.getCount(), s.getHoverName().getString()));
            }
            return Models.playerInfo(p.getGameProfile().getName(), p.getUUID().toString(), p.getHealth(),
                    p.getFoodData().getFoodLevel(), location(p), p.gameMode.getGameModeForPlayer().getName(), inventory);
        });
    }

    @Override
    public Map<String, Object> serverInfo() throws GameException {
        return onServerThread(() -> {
            ServerLevel overworld = server.overworld();
            String weather = overworld.isThundering() ? "thunder" : overworld.isRaining() ? "rain" : "clear";
            double msPerTick = server.getAverageTickTimeNanos() / 1_000_000.0;
            double tps = msPerTick <= 0 ? 20.0 : Math.min(20.0, 1000.0 / msPerTick);
            return Models.serverInfo(server.getServerVersion(), server.getPlayerCount(), server.getMaxPlayers(),
                    overworld.getDayTime() % 24000L, weather, tps);
        });
    }

    @Override
    public Map<String, Object> worldInfo(int x, int y, int z, int radius) throws GameException {
        return onServerThread(() -> {
            ServerLevel level = server.overworld();
            String world = level.dimension().location().toString();
            List<Map<String, Object>> blocks = new ArrayList<>();
            for (BlockPos pos : BlockPos.betweenClosed(x - radius, y - radius, z - radius, x + radius, y + radius, z + radius)) {
                if (!level.isLoaded(pos)) continue; // never load or generate chunks for a query
                BlockState state = level.getBlockState(pos);
                if (state.isAir()) continue;
                blocks.add(Models.block(BuiltInRegistries.BLOCK.getKey(state.getBlock()).toString(),
                        Models.location(world, pos.getX(), pos.getY(), pos.getZ())));
            }
            AABB box = new AABB(x - radius, y - radius, z - radius, x + radius + 1, y + radius + 1, z + radius + 1);
            List<Map<String, Object>> entities = new ArrayList<>();
            for (Entity e : level.getEntities((Entity) null, box, e -> true)) {
                String name = e instanceof Player pl ? pl.getGameProfile().getName() : e.hasCustomName() ? e.getName().getString() : null;
                entities.add(Models.entity(BuiltInRegistries.ENTITY_TYPE.getKey(e.getType()).toString(), location(e), name));
            }
            return Models.worldInfo(blocks, entities);
        });
    }
}
