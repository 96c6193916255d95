package io.github.mcpbridges.minecraft.core;

import java.io.PrintWriter;
import java.io.StringWriter;

/** Where the bridge logs: the mod plugs in its logger; the default writes to System.Logger. */
public interface BridgeLog {
    enum Level { DEBUG, INFO, WARN, ERROR }

    void log(Level level, String message);

    default void info(String message) {
        log(Level.INFO, message);
    }

    default void warn(String message) {
        log(Level.WARN, message);
    }

    default void error(String message, Throwable t) {
        log(Level.ERROR, t == null ? message : message + "\n" + stackTrace(t));
    }

    static String stackTrace(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    static BridgeLog system(String name) {
        System.Logger logger = System.getLogger(name);
        return (level, message) -> logger.log(switch (level) {
            case DEBUG -> System.Logger.Level.DEBUG;
            case INFO -> System.Logger.Level.INFO;
            case WARN -> System.Logger.Level.WARNING;
            case ERROR -> System.Logger.Level.ERROR;
        }, message);
    }
}
