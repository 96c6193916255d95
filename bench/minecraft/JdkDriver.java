import io.github.mcpbridges.minecraft.core.BridgeClient;
import io.github.mcpbridges.minecraft.core.BridgeConfig;
import io.github.mcpbridges.minecraft.core.BridgeLog;
import io.github.mcpbridges.minecraft.core.GameAdapter;
import io.github.mcpbridges.minecraft.core.GameException;
import io.github.mcpbridges.minecraft.core.Session;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The real-stack bench's JDK game (bench/src/bin/minecraft-stack.rs): the plain-JDK core (Session, BridgeClient)
 * as a NeoForge server runs it, with a game that answers nothing; events enter through Session.emitEvent from
 * one "server thread", as the mod's listeners call it.
 *
 *   java -cp CORE_CLASSES:. JdkDriver RELAY_URL TOKEN NAME
 *
 * stdout: `linked`, then per `emit RATE SECONDS` line on stdin, `sent N` when done.
 */
public final class JdkDriver {
    static final class NoGame implements GameAdapter {
        public CommandOutput executeCommand(String command) throws GameException { return new CommandOutput(true, List.of()); }
        public int sendMessage(String message, String target) { return 0; }
        public Map<String, Object> teleport(String p, double x, double y, double z, String w) { return Map.of(); }
        public void giveItem(String player, String item, int quantity) { }
        public List<String> onlinePlayers() { return List.of(); }
        public Map<String, Object> playerInfo(String player) { return Map.of(); }
        public Map<String, Object> serverInfo() { return Map.of("version", "bench"); }
        public Map<String, Object> worldInfo(int x, int y, int z, int radius) { return Map.of(); }
    }

    static long nowUs() {
        Instant i = Instant.now();
        return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
    }

    public static void main(String[] a) throws Exception {
        BridgeConfig cfg = BridgeConfig.parse("""
                [bridge]
                url = "%s"
                auth_token = "%s"
                server_name = "%s"
                reconnect_delay = 100
                [logging]
                level = "WARN"
                """.formatted(a[0], a[1], a[2]));
        BridgeLog log = (level, message) -> {
            if (level.compareTo(BridgeLog.Level.WARN) >= 0) System.err.println("[jdk-core " + level + "] " + message);
        };
        Session session = new Session(cfg, new NoGame(), log, "bench-jdk-driver", "bench");
        BridgeClient client = new BridgeClient(cfg, session, log);
        client.start();
        while (!client.connected()) Thread.sleep(5);
        System.out.println("linked");
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 3 && w[0].equals("emit")) {
                long rate = Long.parseLong(w[1]);
                double secs = Double.parseDouble(w[2]);
                long total = Math.round(rate * secs);
                long start = System.nanoTime();
                long sent = 0;
                long accepted = 0;
                while (sent < total) {
                    long due = Math.min(total, (System.nanoTime() - start) * rate / 1_000_000_000L);
                    while (sent < due) {
                        sent++;
                        Map<String, Object> data = new LinkedHashMap<>();
                        data.put("player", "bench");
                        data.put("message", "x");
                        data.put("sentUs", nowUs());
                        if (session.emitEvent("player_chat", data)) accepted++;
                    }
                    // A game tick's worth of work between bursts: 1 ms.
                    Thread.sleep(1);
                }
                System.out.println("sent " + accepted);
                System.out.flush();
            }
        }
        client.close();
        session.close();
    }
}
