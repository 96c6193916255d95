"""A debug adapter whose launch hangs (test double), as an adapter stuck starting its program does: it answers
`initialize`, then ignores every other request (`launch`, `disconnect` too) and never sends `initialized`.

Run by the tests as `python3 hung_dap.py` on the adapter's stdio (Content-Length framing); the wrapper that
starts it writes its pid to a file.
"""

import sys

from dap_frames import read_frame, write_frame


def main():
    stdin = sys.stdin.buffer
    while True:
        req = read_frame(stdin)
        if req is None:
            return
        if req.get("type") == "request" and req.get("command") == "initialize":
            write_frame({"seq": 1, "type": "response", "request_seq": req["seq"], "command": "initialize",
                         "success": True, "body": {"supportsConfigurationDoneRequest": True}})


if __name__ == "__main__":
    main()
