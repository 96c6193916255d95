package io.github.mcpbridges.minecraft.neoforge;

/** The default minecraft-mcp-bridge.toml (adapters/README.md), written to config/ on first start. */
final class DefaultConfig {
    private DefaultConfig() {}

    static final String TEXT = """
            # minecraft-mcp-bridge: how this server links to the mcp-bridges Minecraft relay.
            [bridge]
            url = "ws://localhost:8080"
            auth_token = "secret"        # the relay's MINECRAFT_AUTH_TOKEN
            reconnect_attempts = 5       # failed dials before the outage is logged as long; it retries forever
            reconnect_delay = 5000       # ms before the first retry; doubles up to reconnect_max_delay
            reconnect_max_delay = 30000  # ms
            # server_name = "survival"   # the name commands address this server by (default: host name and port)

            [events]
            enabled = [
              "player_join",
              "player_quit",
              "player_chat",
              "player_death",
              "block_break"
            ]

            [commands]
            # A command runs only if one pattern matches all of it.
            allowed_patterns = [
              "^say .*",
              "^tp \\\\w+ -?\\\\d+ -?\\\\d+ -?\\\\d+$",
              "^give \\\\w+ \\\\w+ \\\\d+$"
            ]

            [security]
            require_auth = true
            max_command_length = 256

            [logging]
            level = "INFO"
            """;
}
