package io.github.mcpbridges.minecraft.core;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class BridgeConfigTest {
    /** The default minecraft-mcp-bridge.toml of the bridge's design (adapters/README.md), verbatim. */
    static final String SEED = """
            [bridge]
            url = "ws://localhost:8080"
            auth_token = "secret"
            reconnect_attempts = 5
            reconnect_delay = 5000

            [events]
            enabled = [
              "player_join",
              "player_quit",
              "player_chat",
              "player_death",
              "block_break"
            ]

            [commands]
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

    @Test
    void theSeedFileParsesToTheSeedValues() throws Exception {
        BridgeConfig c = BridgeConfig.parse(SEED);
        assertEquals("ws://localhost:8080", c.url());
        assertEquals("secret", c.authToken());
        assertEquals(5, c.reconnectAttempts());
        assertEquals(5000, c.reconnectDelayMs());
        assertEquals(Set.copyOf(BridgeConfig.EVENT_TYPES), c.enabledEvents());
        assertEquals(List.of("^say .*", "^tp \\w+ -?\\d+ -?\\d+ -?\\d+$", "^give \\w+ \\w+ \\d+$"), c.allowedPatterns());
        assertTrue(c.requireAuth());
        assertEquals(256, c.maxCommandLength());
        assertEquals("INFO", c.logLevel());
    }

    @Test
    void anEmptyFileGivesTheSeedDefaults() throws Exception {
        assertEquals(BridgeConfig.parse(SEED), BridgeConfig.parse("# nothing\n"));
        assertEquals(BridgeConfig.defaults(), BridgeConfig.parse(""));
    }

    @Test
    void tomlSubsetHandlesCommentsQuotingAndEscapes() throws Exception {
        Map<String, Object> doc = Toml.parse("""
                top = 'lit\\eral' # comment
                [a.b]
                "quoted key" = "tab\\there \\u00e9 # not a comment"
                n = -1_000
                list = [ 1, 2, # inner comment
                  3, ]
                yes = true
                """);
        assertEquals("lit\\eral", doc.get("top"));
        @SuppressWarnings("unchecked")
        Map<String, Object> ab = (Map<String, Object>) ((Map<String, Object>) doc.get("a")).get("b");
        assertEquals("tab\there é # not a comment", ab.get("quoted key"));
        assertEquals(-1000L, ab.get("n"));
        assertEquals(List.of(1L, 2L, 3L), ab.get("list"));
        assertEquals(true, ab.get("yes"));
    }

    @Test
    void badFilesAreRefusedNamingTheKeyOrLine() {
        Map<String, String> cases = Map.of(
                "[security]\nmax_command_length = \"long\"\n", "security.max_command_length",
                "[security]\nmax_command_length = 0\n", "security.max_command_length",
                "[events]\nenabled = [\"player_teleport\"]\n", "events.enabled",
                "[commands]\nallowed_patterns = [\"(unclosed\"]\n", "commands.allowed_patterns[0]",
                "[bridge]\nurl = 8080\n", "bridge.url",
                "[bridge]\nurl = \"a\"\nurl = \"b\"\n", "duplicate key bridge.url",
                "[bridge]\nreconnect_delay = 1.5\n", "line 2",
                "[bridge\n", "line 1",
                "[logging]\nlevel = \"LOUD\"\n", "logging.level",
                "bridge = 1\n[bridge]\n", "redefines");
        cases.forEach((text, expected) -> {
            BridgeConfig.ConfigException e = assertThrows(BridgeConfig.ConfigException.class, () -> BridgeConfig.parse(text), text);
            assertTrue(e.getMessage().contains(expected), () -> "'" + e.getMessage() + "' should name " + expected);
        });
    }

    @Test
    void summaryNamesVersionlessSettingsButNeverTheToken() throws Exception {
        BridgeConfig c = BridgeConfig.parse("[bridge]\nauth_token = \"hunter2\"\n");
        assertFalse(c.summary().contains("hunter2"));
        assertTrue(c.summary().contains("max_command_length 256"));
    }
}
