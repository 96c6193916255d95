"""The persistent Python session behind the sandbox bridge's run_code (crates/sandbox/src/tools/session.rs).

One file, two roles (MCP_KERNEL_ROLE):

- "serve", the kernel: a background process of the sandbox that keeps one globals dict. It listens on a Unix
  socket in its session directory (MCP_KERNEL_DIR) and runs one cell per connection, in order.
- "cell", the relay: what each run_code call runs, as an ordinary streaming exec. It reads the request on stdin,
  hands the kernel its own stdout and stderr (SCM_RIGHTS), so everything the cell prints, its subprocesses
  included, goes straight into the pipes the agent streams as progress, and exits when the kernel says the cell
  is done (0); 3 when no kernel answered, 4 when the kernel ended mid-cell.

The cell's result (the trailing expression's value or table, the error, figures, files written under the
output folder) is written as JSON to r-<cell>.json in the session directory, figures beside it as PNG; the host
reads them with the agent's `read`. Interrupt: SIGINT to the kernel raises KeyboardInterrupt in a running cell
(state kept) and is ignored between cells.
"""

import json
import os
import socket
import sys
import time

DIR = os.environ.get("MCP_KERNEL_DIR", "")
SOCK = "k.sock"


def env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def relay():
    request = sys.stdin.buffer.read()
    deadline = time.monotonic() + env_int("MCP_KERNEL_CONNECT_MS", 20000) / 1000
    while True:
        try:
            os.chdir(DIR)
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect(SOCK)
            break
        except OSError:
            if time.monotonic() > deadline:
                sys.stderr.write("the session's kernel did not answer\n")
                sys.exit(3)
            time.sleep(0.02)
    socket.send_fds(conn, [b"F"], [1, 2])
    conn.sendall(request.rstrip(b"\n") + b"\n")
    answer = conn.makefile("rb").readline()
    sys.exit(0 if answer.startswith(b"done") else 4)


def serve():
    import ast
    import builtins
    import linecache
    import mimetypes
    import signal
    import traceback

    max_image = env_int("MCP_KERNEL_MAX_IMAGE", 256 << 10)
    max_side = env_int("MCP_KERNEL_MAX_SIDE", 1600)
    max_figures = env_int("MCP_KERNEL_MAX_FIGURES", 4)
    max_text = env_int("MCP_KERNEL_MAX_TEXT", 32 << 10)
    max_rows = env_int("MCP_KERNEL_MAX_ROWS", 60)
    max_files = env_int("MCP_KERNEL_MAX_FILES", 20)
    home = os.environ.get("HOME", "/workspace")
    output = os.environ.get("MCP_KERNEL_OUTPUT") or os.path.join(home, "output")

    os.makedirs(DIR, mode=0o700, exist_ok=True)
    for name in os.listdir(DIR):
        try:
            os.remove(os.path.join(DIR, name))
        except OSError:
            pass
    os.makedirs(output, exist_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # Relative: the session directory's absolute path may pass the 108 bytes a socket address holds.
    os.chdir(DIR)
    server.bind(SOCK)
    server.listen(8)
    os.chdir(home)

    armed = [False]

    def on_sigint(signum, frame):
        # Between cells (waiting, writing a result) an interrupt has nothing to stop.
        if armed[0]:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    user = {"__name__": "__main__", "__builtins__": builtins}
    sys.argv = [""]

    def cut(text):
        raw = text.encode("utf-8", "replace")
        if len(raw) <= max_text:
            return text, False
        half = max_text // 2
        head = raw[:half].decode("utf-8", "ignore")
        tail = raw[-half:].decode("utf-8", "ignore")
        return head + "\n[... %d bytes cut: %d kept of %d ...]\n" % (len(raw) - max_text, max_text, len(raw)) + tail, True

    def table_of(value):
        mod = type(value).__module__ or ""
        if mod.startswith("pandas") and type(value).__name__ in ("DataFrame", "Series"):
            return value.to_string(max_rows=max_rows, max_cols=20)
        if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
            cols = []
            for row in value[:max_rows]:
                for k in row:
                    if k not in cols:
                        cols.append(k)
            if not cols or len(cols) > 50:
                return None
            cells = [[str(c) for c in cols]]
            for row in value[:max_rows]:
                cells.append([repr(row[c]) if c in row and not isinstance(row[c], str) else str(row.get(c, "")) for c in cols])
            widths = [max(len(r[i]) for r in cells) for i in range(len(cols))]
            lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
            lines.insert(1, "  ".join("-" * w for w in widths))
            if len(value) > max_rows:
                lines.append("[%d rows, first %d shown]" % (len(value), max_rows))
            return "\n".join(lines)
        return None

    def files_under(root):
        found = {}
        for base, dirs, names in os.walk(root):
            for n in names:
                p = os.path.join(base, n)
                try:
                    st = os.stat(p)
                except OSError:
                    continue
                found[p] = (st.st_mtime_ns, st.st_size)
        return found

    def figures(cell, notes):
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return []
        out = []
        try:
            nums = plt.get_fignums()
        except Exception:
            return []
        import io

        for k, num in enumerate(nums):
            if k >= max_figures:
                notes.append("%d more figures not returned (at most %d a cell)" % (len(nums) - k, max_figures))
                break
            try:
                fig = plt.figure(num)
                w, h = fig.get_size_inches()
                dpi = min(float(fig.dpi), max_side / max(w, h, 0.01))
                for _ in range(6):
                    buf = io.BytesIO()
                    fig.savefig(buf, format="png", dpi=dpi)
                    data = buf.getvalue()
                    if len(data) <= max_image:
                        break
                    # Re-rendered smaller, not resampled: PNG size falls roughly with the pixel count.
                    dpi *= max(0.3, min(0.9, (max_image / len(data)) ** 0.5 * 0.9))
                if len(data) > max_image:
                    notes.append("figure %d is %d bytes as PNG even at %d dpi; the limit is %d bytes" % (num, len(data), dpi, max_image))
                    continue
                path = os.path.join(DIR, "f-%d-%d.png" % (cell, k))
                with open(path, "wb") as f:
                    f.write(data)
                px_w, px_h = int(round(w * dpi)), int(round(h * dpi))
                out.append({"path": path, "bytes": len(data), "width": px_w, "height": px_h, "dpi": round(dpi, 1)})
            except Exception as e:
                notes.append("figure %d could not be saved: %s" % (num, e))
        try:
            plt.close("all")
        except Exception:
            pass
        return out

    def run_cell(code, cell):
        name = "<cell %d>" % cell
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        armed[0] = True
        try:
            exec(compile(tree, name, "exec"), user)
            if last is not None:
                return eval(compile(last, name, "eval"), user)
            return None
        finally:
            armed[0] = False

    def handle(conn):
        _, fds, _, _ = socket.recv_fds(conn, 1, 2)
        line = conn.makefile("rb").readline()
        req = json.loads(line)
        cell = int(req["cell"])
        for name in os.listdir(DIR):
            if name.endswith((".json", ".png")):
                try:
                    os.remove(os.path.join(DIR, name))
                except OSError:
                    pass
        saved = [os.dup(1), os.dup(2)]
        sys.stdout.flush()
        sys.stderr.flush()
        if len(fds) == 2:
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        result = {"cell": cell, "status": "ok"}
        notes = []
        before = files_under(output)
        started = time.monotonic()
        try:
            value = run_cell(req["code"], cell)
            if value is not None:
                user["_"] = value
                table = None
                try:
                    table = table_of(value)
                except Exception:
                    table = None
                if table is not None:
                    result["table"], cutt = cut(table)
                else:
                    result["value"], cutt = cut(repr(value))
                if cutt:
                    notes.append("the value was cut to %d bytes" % max_text)
        except BaseException as e:
            interrupted = isinstance(e, KeyboardInterrupt)
            result["status"] = "interrupted" if interrupted else "error"
            tb = e.__traceback__
            # Drop the kernel's own frame (run_cell) so the traceback starts in the cell.
            while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
                tb = tb.tb_next
            text = "".join(traceback.format_exception(type(e), e, tb))
            result["error"] = {"type": type(e).__name__, "message": str(e), "traceback": cut(text)[0]}
            if isinstance(e, SystemExit):
                result["error"]["message"] = "SystemExit(%r): the session keeps running" % (e.code,)
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            except Exception:
                pass
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        result["duration_ms"] = int((time.monotonic() - started) * 1000)
        result["figures"] = figures(cell, notes)
        files = []
        for path, stamp in sorted(files_under(output).items()):
            if before.get(path) != stamp:
                if len(files) >= max_files:
                    notes.append("more files changed under %s than the %d listed" % (output, max_files))
                    break
                mime = mimetypes.guess_type(path)[0] or "application/octet-stream"
                files.append({"path": path, "bytes": stamp[1], "mime_type": mime})
        result["files"] = files
        result["notes"] = notes
        tmp = os.path.join(DIR, "r-%d.json.tmp" % cell)
        with open(tmp, "w") as f:
            json.dump(result, f)
        os.rename(tmp, os.path.join(DIR, "r-%d.json" % cell))
        try:
            conn.sendall(b"done\n")
        except OSError:
            pass

    while True:
        conn, _ = server.accept()
        try:
            handle(conn)
        except Exception as e:
            sys.stderr.write("kernel: a request failed: %r\n" % (e,))
        finally:
            conn.close()


if __name__ == "__main__":
    if os.environ.get("MCP_KERNEL_ROLE") == "serve":
        serve()
    else:
        relay()
