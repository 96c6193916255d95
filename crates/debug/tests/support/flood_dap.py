"""A DAP adapter (test double) that answers `initialize`, then floods `output` events: 1000 of 512 KiB each
(500 MiB in all), then exits. The bridge must hold only its bounded journal of them."""

import json
import sys

out = sys.stdout.buffer


def send(msg):
    body = json.dumps(msg).encode()
    out.write(b"Content-Length: %d\r\n\r\n" % len(body))
    out.write(body)


def read_frame():
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    return json.loads(sys.stdin.buffer.read(length))


req = read_frame()
send({"seq": 1, "type": "response", "request_seq": req["seq"], "command": req["command"], "success": True, "body": {}})
chunk = "y" * (512 << 10)
for i in range(1000):
    send({"seq": 2 + i, "type": "event", "event": "output", "body": {"category": "stdout", "output": chunk}})
out.flush()
