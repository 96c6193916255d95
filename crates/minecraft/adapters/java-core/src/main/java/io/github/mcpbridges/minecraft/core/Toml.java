package io.github.mcpbridges.minecraft.core;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The TOML subset minecraft-mcp-bridge.toml uses: [table] and [a.b] headers, bare or quoted keys, basic and
 * literal strings, integers, booleans and (multi-line) arrays of those, # comments. Anything else is refused
 * with the line number, rather than guessed.
 */
public final class Toml {
    private Toml() {}

    public static final class TomlException extends Exception {
        public TomlException(int line, String message) {
            super("line " + line + ": " + message);
        }
    }

    public static Map<String, Object> parse(String text) throws TomlException {
        return new Parser(text.replace("\r\n", "\n")).document();
    }

    private static final class Parser {
        final String s;
        int i;
        int line = 1;

        Parser(String s) {
            this.s = s;
        }

        TomlException fail(String msg) {
            return new TomlException(line, msg);
        }

        char peek() {
            return i < s.length() ? s.charAt(i) : '\0';
        }

        void spaces() {
            while (peek() == ' ' || peek() == '\t') i++;
        }

        /** Skips blanks, comments and newlines (inside arrays). */
        void blanks() {
            while (i < s.length()) {
                char c = peek();
                if (c == ' ' || c == '\t' || c == '\r') i++;
                else if (c == '\n') {
                    i++;
                    line++;
                } else if (c == '#') {
                    while (i < s.length() && peek() != '\n') i++;
                } else break;
            }
        }

        /** After a value or header: only blanks and a comment until the end of the line. */
        void endOfLine() throws TomlException {
            spaces();
            if (peek() == '#') while (i < s.length() && peek() != '\n') i++;
            if (i < s.length() && peek() != '\n') throw fail("unexpected text after the value");
        }

        Map<String, Object> document() throws TomlException {
            Map<String, Object> root = new LinkedHashMap<>();
            Map<String, Object> table = root;
            String tableName = "";
            while (true) {
                blanks();
                if (i >= s.length()) return root;
                if (peek() == '[') {
                    i++;
                    spaces();
                    List<String> path = new ArrayList<>();
                    path.add(key());
                    spaces();
                    while (peek() == '.') {
                        i++;
                        spaces();
                        path.add(key());
                        spaces();
                    }
                    if (peek() != ']') throw fail("expected ] after the table name");
                    i++;
                    endOfLine();
                    table = root;
                    tableName = String.join(".", path);
                    for (String part : path) {
                        Object existing = table.get(part);
                        if (existing == null) {
                            Map<String, Object> t = new LinkedHashMap<>();
                            table.put(part, t);
                            table = t;
                        } else if (existing instanceof Map<?, ?> m) {
                            @SuppressWarnings("unchecked")
                            Map<String, Object> t = (Map<String, Object>) m;
                            table = t;
                        } else {
                            throw fail("[" + tableName + "] redefines the value " + part);
                        }
                    }
                    continue;
                }
                String k = key();
                spaces();
                if (peek() != '=') throw fail("expected = after key " + k);
                i++;
                spaces();
                if (table.containsKey(k)) throw fail("duplicate key " + (tableName.isEmpty() ? "" : tableName + ".") + k);
                table.put(k, value());
                endOfLine();
            }
        }

        String key() throws TomlException {
            char c = peek();
            if (c == '"') return basicString();
            if (c == '\'') return literalString();
            int start = i;
            while (i < s.length()) {
                char d = peek();
                if (Character.isLetterOrDigit(d) && d < 128 || d == '_' || d == '-') i++;
                else break;
            }
            if (start == i) throw fail("expected a key");
            return s.substring(start, i);
        }

        Object value() throws TomlException {
            char c = peek();
            if (c == '"') {
                if (s.startsWith("\"\"\"", i)) throw fail("multi-line strings are not supported");
                return basicString();
            }
            if (c == '\'') {
                if (s.startsWith("'''", i)) throw fail("multi-line strings are not supported");
                return literalString();
            }
            if (c == '[') return array();
            if (s.startsWith("true", i)) {
                i += 4;
                return Boolean.TRUE;
            }
            if (s.startsWith("false", i)) {
                i += 5;
                return Boolean.FALSE;
            }
            int start = i;
            if (c == '+' || c == '-') i++;
            while (i < s.length() && (Character.isDigit(peek()) || peek() == '_')) i++;
            String t = s.substring(start, i).replace("_", "");
            if (t.isEmpty() || t.equals("+") || t.equals("-")) throw fail("unsupported value (strings, integers, booleans and arrays only)");
            if (peek() == '.' || peek() == 'e' || peek() == 'E') throw fail("floats are not supported");
            try {
                return Long.parseLong(t);
            } catch (NumberFormatException e) {
                throw fail("integer out of range: " + t);
            }
        }

        List<Object> array() throws TomlException {
            List<Object> out = new ArrayList<>();
            i++;
            while (true) {
                blanks();
                if (i >= s.length()) throw fail("unterminated array");
                if (peek() == ']') {
                    i++;
                    return out;
                }
                out.add(value());
                blanks();
                if (peek() == ',') i++;
                else if (peek() != ']') throw fail("expected , or ] in the array");
            }
        }

        String basicString() throws TomlException {
            StringBuilder sb = new StringBuilder();
            i++;
            while (i < s.length()) {
                char c = s.charAt(i++);
                if (c == '"') return sb.toString();
                if (c == '\n') break;
                if (c != '\\') {
                    sb.append(c);
                    continue;
                }
                if (i >= s.length()) break;
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> sb.append('\n');
                    case 't' -> sb.append('\t');
                    case 'r' -> sb.append('\r');
                    case 'b' -> sb.append('\b');
                    case 'f' -> sb.append('\f');
                    case '"' -> sb.append('"');
                    case '\\' -> sb.append('\\');
                    case 'u', 'U' -> {
                        int len = e == 'u' ? 4 : 8;
                        if (i + len > s.length()) throw fail("short \\" + e + " escape");
                        try {
                            sb.appendCodePoint(Integer.parseInt(s.substring(i, i + len), 16));
                        } catch (IllegalArgumentException ex) {
                            throw fail("bad \\" + e + " escape");
                        }
                        i += len;
                    }
                    default -> throw fail("unknown escape \\" + e);
                }
            }
            throw fail("unterminated string");
        }

        String literalString() throws TomlException {
            int end = s.indexOf('\'', i + 1);
            int nl = s.indexOf('\n', i + 1);
            if (end < 0 || (nl >= 0 && nl < end)) throw fail("unterminated string");
            String v = s.substring(i + 1, end);
            i = end + 1;
            return v;
        }
    }
}
