package io.github.mcpbridges.minecraft.core;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small JSON reader and writer over plain Java values (Map, List, String, Long, Double, Boolean, null), so the
 * core ships without a JSON library. Bounded: nesting depth and input length are capped, because the input
 * comes from the network.
 */
public final class Json {
    public static final int MAX_DEPTH = 64;

    private Json() {}

    /** Thrown for text that is not JSON; the message names the position. */
    public static final class ParseException extends Exception {
        public ParseException(String message) {
            super(message);
        }
    }

    public static Object parse(String text) throws ParseException {
        Reader r = new Reader(text);
        r.ws();
        Object v = r.value(0);
        r.ws();
        if (r.i != text.length()) throw r.fail("unexpected text after the value");
        return v;
    }

    public static String write(Object value) {
        StringBuilder sb = new StringBuilder();
        write(sb, value);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof String s) {
            quote(sb, s);
        } else if (v instanceof Boolean b) {
            sb.append(b);
        } else if (v instanceof Double d) {
            if (d.isNaN() || d.isInfinite()) sb.append("null");
            else if (d == Math.rint(d) && Math.abs(d) < 1e15) sb.append(d.longValue()).append(".0");
            else sb.append(d);
        } else if (v instanceof Float f) {
            write(sb, f.doubleValue());
        } else if (v instanceof Number n) {
            sb.append(n.longValue());
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) sb.append(',');
                first = false;
                quote(sb, String.valueOf(e.getKey()));
                sb.append(':');
                write(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable<?> it) {
            sb.append('[');
            boolean first = true;
            for (Object o : it) {
                if (!first) sb.append(',');
                first = false;
                write(sb, o);
            }
            sb.append(']');
        } else {
            quote(sb, v.toString());
        }
    }

    private static void quote(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                default -> {
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
                }
            }
        }
        sb.append('"');
    }

    private static final class Reader {
        final String s;
        int i;

        Reader(String s) {
            this.s = s;
        }

        ParseException fail(String what) {
            return new ParseException(what + " at offset " + i);
        }

        void ws() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') i++;
                else break;
            }
        }

        Object value(int depth) throws ParseException {
            if (depth > MAX_DEPTH) throw fail("nesting deeper than " + MAX_DEPTH);
            if (i >= s.length()) throw fail("unexpected end of input");
            char c = s.charAt(i);
            switch (c) {
                case '{': return object(depth);
                case '[': return array(depth);
                case '"': return string();
                case 't': return literal("true", Boolean.TRUE);
                case 'f': return literal("false", Boolean.FALSE);
                case 'n': return literal("null", null);
                default:
                    if (c == '-' || (c >= '0' && c <= '9')) return number();
                    throw fail("unexpected character '" + c + "'");
            }
        }

        Object literal(String word, Object v) throws ParseException {
            if (!s.startsWith(word, i)) throw fail("expected " + word);
            i += word.length();
            return v;
        }

        Map<String, Object> object(int depth) throws ParseException {
            Map<String, Object> m = new LinkedHashMap<>();
            i++;
            ws();
            if (i < s.length() && s.charAt(i) == '}') {
                i++;
                return m;
            }
            while (true) {
                ws();
                if (i >= s.length() || s.charAt(i) != '"') throw fail("expected a string key");
                String k = string();
                ws();
                if (i >= s.length() || s.charAt(i) != ':') throw fail("expected ':'");
                i++;
                ws();
                m.put(k, value(depth + 1));
                ws();
                if (i >= s.length()) throw fail("unterminated object");
                char c = s.charAt(i++);
                if (c == '}') return m;
                if (c != ',') throw fail("expected ',' or '}'");
            }
        }

        List<Object> array(int depth) throws ParseException {
            List<Object> a = new ArrayList<>();
            i++;
            ws();
            if (i < s.length() && s.charAt(i) == ']') {
                i++;
                return a;
            }
            while (true) {
                ws();
                a.add(value(depth + 1));
                ws();
                if (i >= s.length()) throw fail("unterminated array");
                char c = s.charAt(i++);
                if (c == ']') return a;
                if (c != ',') throw fail("expected ',' or ']'");
            }
        }

        String string() throws ParseException {
            StringBuilder sb = new StringBuilder();
            i++;
            while (i < s.length()) {
                char c = s.charAt(i++);
                if (c == '"') return sb.toString();
                if (c == '\\') {
                    if (i >= s.length()) break;
                    char e = s.charAt(i++);
                    switch (e) {
                        case '"' -> sb.append('"');
                        case '\\' -> sb.append('\\');
                        case '/' -> sb.append('/');
                        case 'b' -> sb.append('\b');
                        case 'f' -> sb.append('\f');
                        case 'n' -> sb.append('\n');
                        case 'r' -> sb.append('\r');
                        case 't' -> sb.append('\t');
                        case 'u' -> {
                            if (i + 4 > s.length()) throw fail("short \\u escape");
                            try {
                                sb.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                            } catch (NumberFormatException ex) {
                                throw fail("bad \\u escape");
                            }
                            i += 4;
                        }
                        default -> throw fail("bad escape \\" + e);
                    }
                } else if (c < 0x20) {
                    throw fail("control character in string");
                } else {
                    sb.append(c);
                }
            }
            throw fail("unterminated string");
        }

        Object number() throws ParseException {
            int start = i;
            if (s.charAt(i) == '-') i++;
            boolean real = false;
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c >= '0' && c <= '9') i++;
                else if (c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
                    real = true;
                    i++;
                } else break;
            }
            String t = s.substring(start, i);
            try {
                if (!real) return Long.parseLong(t);
                return Double.parseDouble(t);
            } catch (NumberFormatException e) {
                if (!real) {
                    try {
                        return Double.parseDouble(t);
                    } catch (NumberFormatException e2) {
                        // fall through
                    }
                }
                throw fail("bad number " + t);
            }
        }
    }
}
