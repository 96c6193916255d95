package io.github.mcpbridges.minecraft.neoforge;

import io.github.mcpbridges.minecraft.core.Models;
import io.github.mcpbridges.minecraft.core.Session;
import net.minecraft.core.BlockPos;
import net.minecraft.core.registries.BuiltInRegistries;
import net.minecraft.server.level.ServerPlayer;
import net.minecraft.world.entity.Entity;
import net.minecraft.world.entity.player.Player;
import net.minecraft.world.level.Level;
import net.neoforged.bus.api.EventPriority;
import net.neoforged.bus.api.SubscribeEvent;
import net.neoforged.neoforge.event.ServerChatEvent;
import net.neoforged.neoforge.event.entity.living.LivingDeathEvent;
import net.neoforged.neoforge.event.entity.player.PlayerEvent;
import net.neoforged.neoforge.event.level.BlockEvent;

/**
 * The five game events, turned into GameEvent data (PROTOCOL.md §4.1). Cancellable events are read at the lowest
 * priority and only when nothing cancelled them, so a chat line another mod blocked is not reported. These
 * run on the server thread: Session.emitEvent only queues, it never waits on the network.
 */
public final class GameEventListeners {
    private final Session session;

    GameEventListeners(Session session) {
        this.session = session;
    }

    static String name(Player p) {
        return p.getGameProfile().getName();
    }

    static String world(Level level) {
        return level.dimension().location().toString();
    }

    @SubscribeEvent
    public void onJoin(PlayerEvent.PlayerLoggedInEvent event) {
        Player p = event.getEntity();
        session.emitEvent("player_join", Models.playerJoin(name(p), p.getUUID().toString()));
    }

    @SubscribeEvent
    public void onQuit(PlayerEvent.PlayerLoggedOutEvent event) {
        Player p = event.getEntity();
        session.emitEvent("player_quit", Models.playerQuit(name(p), p.getUUID().toString()));
    }

    @SubscribeEvent(priority = EventPriority.LOWEST)
    public void onChat(ServerChatEvent event) {
        if (event.isCanceled()) return;
        session.emitEvent("player_chat", Models.playerChat(name(event.getPlayer()), event.getRawText()));
    }

    @SubscribeEvent(priority = EventPriority.LOWEST)
    public void onDeath(LivingDeathEvent event) {
        if (event.isCanceled() || !(event.getEntity() instanceof ServerPlayer p)) return;
        Entity killer = event.getSource().getEntity();
        session.emitEvent("player_death", Models.playerDeath(
                name(p),
                event.getSource().getMsgId(),
                Models.location(world(p.level()), p.getX(), p.getY(), p.getZ()),
                killer == null ? null : killer.getName().getString()));
    }

    @SubscribeEvent(priority = EventPriority.LOWEST)
    public void onBreak(BlockEvent.BreakEvent event) {
        if (event.isCanceled() || event.getPlayer() == null) return;
        BlockPos pos = event.getPos();
        String world = event.getLevel() instanceof Level level ? world(level) : "minecraft:overworld";
        session.emitEvent("block_break", Models.blockBreak(
                name(event.getPlayer()),
                BuiltInRegistries.BLOCK.getKey(event.getState().getBlock()).toString(),
                Models.location(world, pos.getX(), pos.getY(), pos.getZ())));
    }
}
