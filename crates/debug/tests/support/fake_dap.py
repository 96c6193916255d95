"""A fake DAP adapter (test double) for the debug bridge's tests: it plays the launch handshake the bridge
drives (initialize, launch answered after configurationDone, initialized, setBreakpoints,
setExceptionBreakpoints, configurationDone), then reports one stop on thread 1 and answers threads,
stackTrace, scopes and variables for it. What a real adapter rarely does, it does on purpose:

- `next`: refused (`success: false`, with a `message` and a `body.error` Message);
- `stepIn`: a `stopped` event (reason `step`), then refused the same way;
- `stepOut`: never answered (the bridge's request times out);
- `continue`: accepted, then `exited` and `terminated`.

Run by the tests as `python3 fake_dap.py` on the adapter's stdio (Content-Length framing).
"""

import sys

from dap_frames import read_frame, write_frame

REFUSAL = "the fake adapter refuses to step here"
PROGRAM = {"path": ""}


SEQ = [0]


def send(msg):
    SEQ[0] += 1
    msg["seq"] = SEQ[0]
    write_frame(msg)


def respond(req, body=None, success=True, message=None, error=None):
    msg = {"type": "response", "request_seq": req["seq"], "command": req["command"], "success": success}
    if body is not None:
        msg["body"] = body
    if message is not None:
        msg["message"] = message
    if error is not None:
        msg.setdefault("body", {})["error"] = error
    send(msg)


def event(name, body=None):
    msg = {"type": "event", "event": name}
    if body is not None:
        msg["body"] = body
    send(msg)


VARIABLES = {
    100: [
        {"name": "point", "value": "Point(x=1)", "type": "Point", "variablesReference": 101},
        {"name": "total", "value": "42", "type": "int", "variablesReference": 0},
    ],
    101: [{"name": "x", "value": "1", "type": "int", "variablesReference": 0}],
}


def main():
    launch = None
    stdin = sys.stdin.buffer
    while True:
        req = read_frame(stdin)
        if req is None:
            return
        if req.get("type") != "request":
            continue
        cmd = req.get("command")
        args = req.get("arguments") or {}
        if cmd == "initialize":
            respond(req, {"supportsConfigurationDoneRequest": True, "exceptionBreakpointFilters": []})
        elif cmd == "launch":
            # As debugpy: `initialized` now, the answer only after configurationDone.
            launch = req
            PROGRAM["path"] = args.get("program", "")
            event("initialized")
        elif cmd == "setBreakpoints":
            lines = [b.get("line", 0) for b in args.get("breakpoints", [])]
            respond(req, {"breakpoints": [{"verified": True, "line": n} for n in lines]})
        elif cmd == "setExceptionBreakpoints":
            respond(req, {})
        elif cmd == "configurationDone":
            respond(req)
            if launch is not None:
                respond(launch)
            event("stopped", {"reason": "breakpoint", "threadId": 1, "allThreadsStopped": True})
        elif cmd == "threads":
            respond(req, {"threads": [{"id": 1, "name": "MainThread"}]})
        elif cmd == "stackTrace":
            frame = {"id": 7, "name": "add", "line": 3, "column": 1, "source": {"path": PROGRAM["path"]}}
            respond(req, {"stackFrames": [frame], "totalFrames": 1})
        elif cmd == "scopes":
            respond(req, {"scopes": [{"name": "Locals", "variablesReference": 100, "expensive": False}]})
        elif cmd == "variables":
            respond(req, {"variables": VARIABLES.get(args.get("variablesReference"), [])})
        elif cmd in ("next", "stepIn"):
            if cmd == "stepIn":
                # A stop that comes before the refusal is news the bridge must keep.
                event("stopped", {"reason": "step", "threadId": 1, "allThreadsStopped": True})
            respond(req, success=False, message="cannot step",
                    error={"id": 4711, "format": REFUSAL, "showUser": True})
        elif cmd == "stepOut":
            pass
        elif cmd == "continue":
            respond(req, {"allThreadsContinued": True})
            event("exited", {"exitCode": 0})
            event("terminated")
        elif cmd == "disconnect":
            respond(req)
            return
        else:
            respond(req, success=False, message="unsupported by the fake adapter: %s" % cmd)


if __name__ == "__main__":
    main()
