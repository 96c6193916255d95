package io.github.mcpbridges.minecraft.neoforge;

import java.util.ArrayList;
import java.util.List;
import net.minecraft.commands.CommandSource;
import net.minecraft.network.chat.Component;

/**
 * Receives what a command says back (successes and failures), because performPrefixedCommand returns
 * nothing: the output lines execute_command returns. One per command; commands run one at a time.
 */
final class CapturingSource implements CommandSource {
    private static final int MAX_LINES = 1000;
    final List<String> lines = new ArrayList<>();

    @Override
    public void sendSystemMessage(Component message) {
        if (lines.size() < MAX_LINES) lines.add(message.getString());
    }

    @Override
    public boolean acceptsSuccess() {
        return true;
    }

    @Override
    public boolean acceptsFailure() {
        return true;
    }

    @Override
    public boolean shouldInformAdmins() {
        return false;
    }
}
