#!/usr/bin/env python3
"""Memory under messages that decode far past their size: N clients at once each send one message holding an
array of tiny values (`0,0,0,...`), either a `tools/call` POSTed to the MCP HTTP port (`--to mcp`) or an answer
frame on the Bitburner game port's WebSocket, as any local process can (`--to game`), or a game adapter's
answer sent in `chunk`s to the Minecraft relay, as a holder of the game token can (`--to relay`; the values are
one-member objects, `{"a":0}`, the costliest to decode per byte). Prints the server's peak RSS (VmHWM) and what
it answered. Nothing is asserted: a measurement, not a test.

    bench/decode-flood.py --bin target/debug/mcp-bridges --clients 16 --bytes 4000000
    bench/decode-flood.py --bin target/debug/mcp-bridges --to game --clients 1 --bytes 30000000
    bench/decode-flood.py --bin target/debug/mcp-bridges --to relay --clients 4 --bytes 16000000

The bridge is `bitburner --http` (it needs no peer to serve MCP), or `minecraft-relay`; the server is started
and stopped here.
"""
import json
import argparse
import base64
import os
import socket
import struct
import subprocess
import threading
import time
import urllib.request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def peak_rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM"):
                return int(line.split()[1])
    return 0


def body_of(size: int) -> bytes:
    head = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"status","arguments":{"a":['
    tail = b"0]}}}"
    return head + b"0," * max(0, (size - len(head) - len(tail)) // 2) + tail


def post(port: int, body: bytes, statuses: list, i: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        )
        answer = b""
        try:
            s.sendall(body)
            while chunk := s.recv(65536):
                answer += chunk
        except OSError:
            pass  # refused before the whole body was read: the status line, if any, is below
        statuses[i] = answer.split(b"\r\n", 1)[0].decode(errors="replace") or "closed"


def frame_to_game_port(port: int, size: int, statuses: list, i: int) -> None:
    """One WebSocket text frame, then a moment for the bridge to read it."""
    text = b'{"jsonrpc":"2.0","id":1,"result":[' + b"0," * max(0, (size - 40) // 2) + b"0]}"
    s, status = ws_open(port)
    with s:
        ws_send(s, text)
        time.sleep(3)
    statuses[i] = status


GAME_TOKEN = "decode-flood-game-token"


def ws_open(port: int, token: str | None = None) -> tuple[socket.socket, str]:
    """A WebSocket upgrade (with `Authorization: Bearer token` when given); the socket and the status line."""
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16))
    auth = b"Authorization: Bearer " + token.encode() + b"\r\n" if token else b""
    s.sendall(
        b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + auth
        + b"Sec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    head = b""
    while b"\r\n\r\n" not in head and (byte := s.recv(1)):
        head += byte
    return s, head.split(b"\r\n", 1)[0].decode(errors="replace")


def ws_send(s: socket.socket, text: str | bytes) -> None:
    """One text frame, masked as a client's must be (RFC 6455 §5.3)."""
    data = text.encode() if isinstance(text, str) else text
    mask = os.urandom(4)
    n = len(data)
    if n < 126:
        head = bytes([0x81, 0x80 | n])
    elif n < 1 << 16:
        head = bytes([0x81, 0x80 | 126]) + struct.pack(">H", n)
    else:
        head = bytes([0x81, 0x80 | 127]) + struct.pack(">Q", n)
    pad = mask * (n // 4 + 1)
    # XOR through int arithmetic: a byte loop over 30 MB takes Python too long.
    masked = (int.from_bytes(data, "big") ^ int.from_bytes(pad[:n], "big")).to_bytes(n, "big") if n else b""
    s.sendall(head + mask + masked)


def ws_recv(s: socket.socket, timeout: float) -> str | None:
    """One text frame of the server's (unmasked), or None when none came within `timeout`."""
    s.settimeout(timeout)

    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise OSError("closed")
            out += chunk
        return out

    try:
        while True:
            b0, b1 = exactly(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", exactly(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", exactly(8))[0]
            payload = exactly(n)
            if b0 & 0x0F == 0x1:
                return payload.decode(errors="replace")
            if b0 & 0x0F == 0x8:
                return None
    except (OSError, socket.timeout):
        return None


def chunks_to_relay(port: int, size: int, statuses: list, i: int) -> None:
    """A game adapter's hello, then one answer of `size` bytes in chunks of 30 000 characters; the status is what
    the relay said after the last chunk (SCHEMA_ERROR and its reason, or nothing)."""
    s, status = ws_open(port, GAME_TOKEN)
    if " 101 " not in status:
        raise SystemExit(f"the relay refused the upgrade: {status}")
    env = lambda kind, id_, payload: json.dumps(  # noqa: E731
        {"version": "1.2", "type": kind, "id": id_, "timestamp": 0, "source": "minecraft", "payload": payload}
    )
    ws_send(s, env("hello", "h", {"name": f"flood{i}", "instance": f"i{i}", "adapter": "decode-flood"}))
    ws_recv(s, 10)
    head = '{"version":"1.2","type":"response","id":"nobody","timestamp":0,"source":"minecraft","payload":{"v":['
    one = '{"a":0},'
    whole = head + one * max(1, (size - len(head) - 3) // len(one)) + '{}]}}'
    step = 30_000
    count = (len(whole) + step - 1) // step
    for index in range(count):
        data = whole[index * step : (index + 1) * step]
        ws_send(s, env("chunk", "big", {"index": index, "count": count, "data": data}))
    said = None
    while (said := ws_recv(s, 10)) is not None and json.loads(said).get("type") in ("heartbeat", "ack", "notice"):
        pass
    statuses[i] = json.loads(said)["payload"].get("message", said)[:60] if said else "nothing"
    s.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default="target/release/mcp-bridges", help="the mcp-bridges binary")
    ap.add_argument("--clients", type=int, default=16, help="bodies sent at once")
    ap.add_argument("--bytes", type=int, default=4_000_000, help="size of each body")
    ap.add_argument(
        "--to", choices=["mcp", "game", "relay"], default="mcp", help="the MCP HTTP port, the game port or the relay"
    )
    a = ap.parse_args()
    port, game_port = free_port(), free_port()
    if a.to == "relay":
        command = [a.bin, "minecraft-relay", "--relay-port", str(port), "--minecraft-auth-token", GAME_TOKEN,
                   "--mcp-auth-tokens", "decode-flood-mcp-token"]
    else:
        command = [a.bin, "bitburner", "--http", "--mcp-port", str(port), "--bitburner-game-port", str(game_port)]
    server = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        before = peak_rss_kb(server.pid)
        body = body_of(a.bytes)
        statuses = [""] * a.clients
        if a.to == "mcp":
            threads = [threading.Thread(target=post, args=(port, body, statuses, i)) for i in range(a.clients)]
        elif a.to == "relay":
            threads = [
                threading.Thread(target=chunks_to_relay, args=(port, a.bytes, statuses, i)) for i in range(a.clients)
            ]
        else:
            threads = [
                threading.Thread(target=frame_to_game_port, args=(game_port, a.bytes, statuses, i))
                for i in range(a.clients)
            ]
        start = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - start
        counts = {s: statuses.count(s) for s in sorted(set(statuses))}
        print(
            f"{a.clients} x {a.bytes} bytes to {a.to}: peak RSS {before / 1024:.0f} MB before, "
            f"{peak_rss_kb(server.pid) / 1024:.0f} MB after, {took:.1f} s; answers {counts}"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
