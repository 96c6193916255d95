"""A DAP adapter (test double) that answers `initialize`, then floods `output` events: 1000 of 512 KiB each
(500 MiB in all), then exits. The bridge must hold only its bounded journal of them."""

import sys

from dap_frames import read_frame, write_frame

req = read_frame(sys.stdin.buffer)
write_frame({"seq": 1, "type": "response", "request_seq": req["seq"], "command": req["command"], "success": True, "body": {}})
chunk = "y" * (512 << 10)
for i in range(1000):
    write_frame({"seq": 2 + i, "type": "event", "event": "output", "body": {"category": "stdout", "output": chunk}}, flush=False)
sys.stdout.buffer.flush()
