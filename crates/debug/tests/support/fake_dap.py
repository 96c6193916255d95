"""A fake DAP adapter (test double) for the debug bridge's tests: it plays the launch handshake the bridge
drives (initialize, launch answered after configurationDone, initialized, setBreakpoints,
setExceptionBreakpoints, configurationDone), then reports one stop on thread 1 and answers threads,
stackTrace, scopes and variables for it. What a real adapter rarely does, it does on purpose:

- `next`: refused (`success: false`, with a `message` and a `body.error` Message);
- `stepIn`: a `stopped` event (reason `step`), then refused the same way;
- `stepOut`: never answered (the bridge's request times out);
- `continue`: accepted, then `exited` and `terminated`.

With `--as-lldb-dap`, it resumes as lldb-dap does instead, announcing each resume with `continued` (all
threads), a second thread (2) beside thread 1:
- `next`: accepted, `continued`, then thread 1 stops (reason `step`); the second `next` is not announced (no
  `continued`: the bridge must not wait for one for good);
- the first `continue`: thread 2's breakpoint stop goes out after the request came but before the resume took
  effect (lldb-dap announces every thread with a stop reason at each stop, from a thread of its own, so such an
  event can cross a resume request), then the answer, `continued`, and thread 1 stops at the breakpoint again;
- the next `continue`: accepted, `continued`, `exited`, `terminated`;
- `stackTrace` of a thread that is running answers no frames, as lldb does.

Run by the tests as `python3 fake_dap.py [--as-lldb-dap]` on the adapter's stdio (Content-Length framing).
"""

import sys

from dap_frames import read_frame, write_frame

REFUSAL = "the fake adapter refuses to step here"
PROGRAM = {"path": ""}
AS_LLDB_DAP = "--as-lldb-dap" in sys.argv
# Threads stopped now (the launch stops thread 1), and `continue` and `next` requests answered so far.
STOPPED = set()
CONTINUES = [0]
NEXTS = [0]


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


def stop(thread, reason):
    STOPPED.add(thread)
    event("stopped", {"reason": reason, "threadId": thread, "allThreadsStopped": True})


def resumed():
    """lldb-dap's announcement of a resume of ours: every thread, named by the one in focus."""
    STOPPED.clear()
    event("continued", {"threadId": 1, "allThreadsContinued": True})


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
            stop(1, "breakpoint")
        elif cmd == "threads":
            respond(req, {"threads": [{"id": 1, "name": "MainThread"}, {"id": 2, "name": "Worker"}]})
        elif cmd == "stackTrace":
            if args.get("threadId") not in STOPPED:
                respond(req, {"stackFrames": [], "totalFrames": 0})
                continue
            frame = {"id": 7, "name": "add", "line": 3, "column": 1, "source": {"path": PROGRAM["path"]}}
            respond(req, {"stackFrames": [frame], "totalFrames": 1})
        elif cmd == "scopes":
            respond(req, {"scopes": [{"name": "Locals", "variablesReference": 100, "expensive": False}]})
        elif cmd == "variables":
            respond(req, {"variables": VARIABLES.get(args.get("variablesReference"), [])})
        elif cmd == "next" and AS_LLDB_DAP:
            NEXTS[0] += 1
            respond(req)
            if NEXTS[0] == 2:
                STOPPED.clear()
            else:
                resumed()
            stop(1, "step")
        elif cmd == "continue" and AS_LLDB_DAP:
            CONTINUES[0] += 1
            if CONTINUES[0] == 1:
                stop(2, "breakpoint")
            respond(req, {"allThreadsContinued": True})
            resumed()
            if CONTINUES[0] == 1:
                stop(1, "breakpoint")
            else:
                event("exited", {"exitCode": 0})
                event("terminated")
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
