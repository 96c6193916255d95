"""DAP's Content-Length framing for the test doubles in this directory (fake_dap.py, flood_dap.py, hung_dap.py),
which import it: each is run as `python3 <this directory>/<name>.py`, so this directory is on their path."""

import json
import sys


def read_frame(stream):
    """The next message on `stream` (a binary stream), or None at its end."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if not line:
            break
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    if length is None:
        return None
    return json.loads(stream.read(length))


def write_frame(msg, flush=True):
    """Writes `msg` to stdout, framed."""
    data = json.dumps(msg).encode("utf-8")
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(data) + data)
    if flush:
        sys.stdout.buffer.flush()
