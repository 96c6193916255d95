"""What MCP hosts show (issue 25 item 7), seen through the official MCP Inspector CLI
(`@modelcontextprotocol/inspector --cli`) as a new user would: every bridge, and `serve` with all of them, on
stdio and Streamable HTTP.

- `tools/list --strict` reports no schema portability error and no warning (no boolean schemas, no `type`
  arrays, no schema that constrains nothing);
- every tool has a title and every input field a description;
- in `serve`, a tool's name does not depend on which other bridges are mounted;
- with a bearer token set, OAuth discovery answers 404 (a 401 there sends clients into OAuth registration) and a
  401 elsewhere names the header;
- `resources/read` on a game that is merely disconnected is not "resource not found".
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import HttpServer, cargo_bin, run_inspector

# JSON-RPC's "resource not found" in MCP.
RESOURCE_NOT_FOUND = -32002

# How long one bridge may take to answer the Inspector: a bridge starts in well under a second, but CI machines
# are shared; the Inspector's run ends as soon as it has its answer.
INSPECTOR_TIMEOUT_S = 180

BRIDGES = ["bitburner", "computercraft", "debug", "minecraft", "sandbox", "serve"]


def bridge_args(name: str, workspace: Path) -> list[str]:
    """The arguments that start `name` with nothing else running: every port the kernel's choice, links on
    loopback, the debug bridge confined to a scratch workspace, Minecraft's embedded relay given its token."""
    own = {
        "bitburner": ["--bitburner-game-port", "0"],
        "computercraft": ["--computercraft-link-host", "127.0.0.1", "--computercraft-link-port", "0"],
        "debug": ["--debug-workspace", str(workspace)],
        "minecraft": ["--minecraft-relay-host", "127.0.0.1", "--minecraft-relay-port", "0", "--minecraft-auth-token", "inspector-game"],
        "sandbox": [],
    }
    if name == "serve":
        mounted = [arg for bridge in own for arg in ("--bridge", bridge)]
        return ["serve", *mounted, *(arg for flags in own.values() for arg in flags)]
    return [name, *own[name]]


@pytest.fixture(scope="module")
def binary() -> Path:
    return cargo_bin("mcp-bridges")


@pytest.fixture(scope="module")
def workspace() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="mcp-inspector-ws-") as ws:
        yield Path(ws)


@pytest.fixture(scope="module")
def http_servers(binary: Path, workspace: Path) -> Iterator[dict[str, HttpServer]]:
    """One HTTP server per bridge, started on first use and stopped at the end of the module."""
    servers: dict[str, HttpServer] = {}
    yield servers
    for server in servers.values():
        server.stop()


@pytest.fixture(params=BRIDGES)
def bridge(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["stdio", "http"])
def target(request: pytest.FixtureRequest, bridge: str, binary: Path, workspace: Path) -> list[str]:
    """The Inspector's target for this bridge and transport (after `--`)."""
    args = bridge_args(bridge, workspace)
    if request.param == "stdio":
        return ["--", str(binary), *args, "--stdio"]
    servers = request.getfixturevalue("http_servers")
    if bridge not in servers:
        servers[bridge] = HttpServer.start([str(binary), *args])
    return ["--", servers[bridge].mcp_url]


def list_tools(target: list[str], *extra: str) -> tuple[subprocess.CompletedProcess[str], dict]:
    proc = run_inspector(
        [], "--format", "json", "-q", "--method", "tools/list", *extra, *target, timeout=INSPECTOR_TIMEOUT_S
    )
    try:
        out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except json.JSONDecodeError as e:
        raise AssertionError(f"inspector printed no JSON: {proc.stdout!r}\nstderr: {proc.stderr}") from e
    return proc, out


def test_strict_lint_reports_no_error_and_no_warning(target: list[str]) -> None:
    proc, out = list_tools(target, "--strict")
    # The lint's report goes to stderr, one "Error:"/"Warning:" block per finding.
    findings = [line for line in proc.stderr.splitlines() if line.startswith(("Error:", "Warning:"))]
    assert proc.returncode == 0, proc.stderr
    assert findings == [], proc.stderr
    assert "schemaFindings" not in out, json.dumps(out.get("schemaFindings"), indent=1)
    assert out["result"]["tools"], "the Inspector listed no tools"


def undescribed_fields(schema: dict, path: str, root: dict, depth: int = 0) -> list[str]:
    """Input fields, nested ones included, whose schema (or the definition it refers to) has no description."""
    if depth > 8 or not isinstance(schema, dict):
        return []
    if "$ref" in schema:
        target = root.get("$defs", {}).get(schema["$ref"].rsplit("/", 1)[-1], {})
        return undescribed_fields(target, path, root, depth + 1)
    missing = []
    for name, field in (schema.get("properties") or {}).items():
        described = field.get("description") or (
            "$ref" in field and root.get("$defs", {}).get(field["$ref"].rsplit("/", 1)[-1], {}).get("description")
        )
        if not described:
            missing.append(f"{path}.{name}")
        missing += undescribed_fields(field, f"{path}.{name}", root, depth + 1)
    if isinstance(schema.get("items"), dict):
        missing += undescribed_fields(schema["items"], f"{path}[]", root, depth + 1)
    for key in ("anyOf", "oneOf", "allOf"):
        for branch in schema.get(key) or []:
            missing += undescribed_fields(branch, path, root, depth + 1)
    return missing


def test_every_tool_has_a_title_and_every_field_a_description(target: list[str]) -> None:
    proc, out = list_tools(target)
    assert proc.returncode == 0, proc.stderr
    tools = out["result"]["tools"]
    untitled = [t["name"] for t in tools if not (t.get("title") or "").strip()]
    assert untitled == [], f"tools without a title: {untitled}"
    missing = [f for t in tools for f in undescribed_fields(t["inputSchema"], t["name"], t["inputSchema"])]
    assert missing == [], f"input fields without a description: {missing}"


def test_serve_names_a_tool_the_same_whatever_else_is_mounted(binary: Path, workspace: Path) -> None:
    def bitburner_names(args: list[str]) -> list[str]:
        proc, out = list_tools(["--", str(binary), *args, "--stdio"])
        assert proc.returncode == 0, proc.stderr
        return sorted(t["name"] for t in out["result"]["tools"] if t["name"].startswith("bitburner_"))

    alone = bitburner_names(["serve", "--bridge", "bitburner", "--bitburner-game-port", "0"])
    with_all = bitburner_names(bridge_args("serve", workspace))
    assert "bitburner_status" in alone and "bitburner_read_file" in alone, alone
    assert alone == with_all


_LISTENING = re.compile(r"serving MCP at http://(?P<addr>[^\s/]+)/mcp")


@pytest.fixture(scope="module")
def token_server(binary: Path) -> Iterator[str]:
    """Bitburner over HTTP with a bearer token; yields its base URL. (HttpServer.start probes /health without
    the token, so this one is started by hand.)"""
    proc = subprocess.Popen(
        [str(binary), "bitburner", "--bitburner-game-port", "0", "--http", "--mcp-host", "127.0.0.1", "--mcp-port", "0"]
        + ["--mcp-token", "s3cret"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={"PATH": "/usr/bin:/bin", "RUST_LOG": "info", "NO_COLOR": "1"},
    )
    assert proc.stderr is not None
    seen = []
    address = None
    for line in proc.stderr:
        seen.append(line)
        match = _LISTENING.search(line)
        if match:
            address = match.group("addr")
            break
    try:
        assert address, "the server never said where it listens:\n" + "".join(seen)
        yield f"http://{address}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/.well-known/openid-configuration",
    ],
)
def test_oauth_discovery_is_not_found_when_a_bearer_token_is_set(token_server: str, path: str) -> None:
    status, headers, _ = get(token_server + path)
    assert status == 404, f"{path}: {status}"
    assert "WWW-Authenticate" not in headers, headers


def test_a_missing_token_is_a_401_naming_the_header_without_oauth_metadata(token_server: str) -> None:
    status, headers, body = get(token_server + "/mcp", {"Accept": "text/event-stream"})
    assert status == 401, status
    assert "Authorization: Bearer" in body, body
    assert "resource_metadata" not in headers.get("WWW-Authenticate", ""), headers


def test_the_inspector_uses_the_bearer_token_it_is_given(token_server: str) -> None:
    proc, out = list_tools(["--", token_server + "/mcp"], "--header", "Authorization: Bearer s3cret", "--strict")
    assert proc.returncode == 0, proc.stderr
    assert any(t["name"] == "status" for t in out["result"]["tools"])


def test_resources_read_on_a_disconnected_game_is_not_not_found(binary: Path) -> None:
    """Bitburner with no game: reading a game file is E_DISCONNECTED, not -32002 (a client drops a URI it is
    told does not exist)."""
    uri = "bitburner://files/home/hack.js"
    proc = run_inspector(
        [],
        "--format",
        "json",
        "-q",
        "--method",
        "resources/read",
        "--uri",
        uri,
        "--",
        str(binary),
        "bitburner",
        "--bitburner-game-port",
        "0",
        "--stdio",
        timeout=INSPECTOR_TIMEOUT_S,
    )
    assert proc.returncode != 0, proc.stdout
    assert "E_DISCONNECTED" in proc.stderr, proc.stderr
    # The Inspector's envelope does not show the JSON-RPC code: ask over the wire.
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "inspector-bridges-test", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": uri}},
    ]
    server = subprocess.Popen(
        [str(binary), "bitburner", "--bitburner-game-port", "0", "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert server.stdin is not None and server.stdout is not None
    try:
        server.stdin.write("".join(json.dumps(m) + "\n" for m in messages))
        server.stdin.flush()
        answer = None
        for line in server.stdout:
            message = json.loads(line)
            if message.get("id") == 2:
                answer = message
                break
    finally:
        server.stdin.close()
        server.terminate()
        server.wait(timeout=30)
    assert answer is not None and "error" in answer, answer
    error = answer["error"]
    assert error["code"] != RESOURCE_NOT_FOUND, error
    assert error["message"].startswith("[E_DISCONNECTED]"), error
    assert error["data"]["code"] == "E_DISCONNECTED", error
