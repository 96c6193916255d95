package io.github.mcpbridges.minecraft.neoforge;

import com.mojang.logging.LogUtils;
import io.github.mcpbridges.minecraft.core.BridgeClient;
import io.github.mcpbridges.minecraft.core.BridgeConfig;
import io.github.mcpbridges.minecraft.core.BridgeLog;
import io.github.mcpbridges.minecraft.core.Session;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import net.minecraft.server.MinecraftServer;
import net.neoforged.bus.api.IEventBus;
import net.neoforged.fml.ModContainer;
import net.neoforged.fml.common.Mod;
import net.neoforged.fml.loading.FMLPaths;
import net.neoforged.neoforge.common.NeoForge;
import net.neoforged.neoforge.event.server.ServerStartedEvent;
import net.neoforged.neoforge.event.server.ServerStoppingEvent;
import org.slf4j.Logger;

/**
 * The mod: on server start, reads config/minecraft-mcp-bridge.toml (written with the defaults when
 * absent), links to the relay and registers the five event listeners; on stop, unlinks. A bad config is
 * logged and leaves the server running without the bridge.
 */
@Mod(McpBridgeMod.MOD_ID)
public final class McpBridgeMod {
    public static final String MOD_ID = "mcp_bridge";
    static final String ADAPTER = "neoforge-mod 0.1.0";
    private static final Logger LOG = LogUtils.getLogger();

    private final String version;
    private Session session;
    private BridgeClient client;
    private GameEventListeners listeners;

    public McpBridgeMod(IEventBus modBus, ModContainer container) {
        this.version = container.getModInfo().getVersion().toString();
        NeoForge.EVENT_BUS.addListener(this::onServerStarted);
        NeoForge.EVENT_BUS.addListener(this::onServerStopping);
    }

    static BridgeLog log() {
        return (level, message) -> {
            switch (level) {
                case DEBUG -> LOG.debug(message);
                case INFO -> LOG.info(message);
                case WARN -> LOG.warn(message);
                case ERROR -> LOG.error(message);
            }
        };
    }

    private void onServerStarted(ServerStartedEvent event) {
        MinecraftServer server = event.getServer();
        Path file = FMLPaths.CONFIGDIR.get().resolve("minecraft-mcp-bridge.toml");
        BridgeConfig cfg;
        try {
            if (!Files.exists(file)) Files.writeString(file, DefaultConfig.TEXT);
            // Without server_name, the game is named after the host and its port (unique per host).
            cfg = BridgeConfig.load(file).withGamePort(server.getPort());
        } catch (IOException | BridgeConfig.ConfigException e) {
            LOG.error("minecraft-mcp-bridge: {} is unusable, the bridge stays off: {}", file, e.getMessage());
            return;
        }
        LOG.info("minecraft-mcp-bridge {} ({}), Minecraft {}: {}", version, ADAPTER, server.getServerVersion(), cfg.summary());
        session = new Session(cfg, new NeoForgeGame(server), log(), ADAPTER, server.getServerVersion());
        listeners = new GameEventListeners(session);
        NeoForge.EVENT_BUS.register(listeners);
        client = new BridgeClient(cfg, session, log());
        client.start();
    }

    private void onServerStopping(ServerStoppingEvent event) {
        if (listeners != null) NeoForge.EVENT_BUS.unregister(listeners);
        // Every player still online is reported as quitting before the link closes, and the relay is given
        // up to 3 s to acknowledge it.
        if (session != null) {
            java.util.Map<String, String> online = new java.util.LinkedHashMap<>();
            for (var p : event.getServer().getPlayerList().getPlayers()) {
                online.put(GameEventListeners.name(p), p.getUUID().toString());
            }
            int n = session.quitAll(online);
            try {
                int held = session.drain(3000);
                LOG.info("minecraft-mcp-bridge: stopping; {} players reported quitting, {} events not acknowledged", n, held);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        if (client != null) client.close();
        if (session != null) session.close();
        listeners = null;
        client = null;
        session = null;
    }
}
