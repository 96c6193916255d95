"""The sandbox bridge through the official Python MCP client (PyPI `mcp`), in both protocol eras and over both
transports: Bouvet's tools on real namespace sandboxes (the `mcp-bridges` binary with the `sandbox-agent` built
beside it). Stdio is selected with Bouvet's own variable, BOUVET_TRANSPORT=stdio."""

from __future__ import annotations

import base64
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import pytest
from conftest import PEERS, HttpServer, cargo_bin, error, ok
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

ERAS = ["legacy", "2026-07-28"]
TRANSPORTS = ["stdio", "http"]

pytestmark = [pytest.mark.anyio]


@pytest.fixture(scope="module")
def bins() -> tuple[Path, Path]:
    return cargo_bin("mcp-bridges"), cargo_bin("sandbox-agent")


def sandbox_env(agent: Path) -> dict[str, str]:
    return {"NO_COLOR": "1", "SANDBOX_AGENT_BIN": str(agent), "BOUVET_POOL_MIN_SIZE": "1"}


@pytest.fixture(scope="module")
def bridge_http(bins: tuple[Path, Path]) -> Iterator[HttpServer]:
    bridge, agent = bins
    with HttpServer.start([str(bridge), "sandbox"], env=sandbox_env(agent)) as server:
        yield server


@pytest.fixture
def connect(bins: tuple[Path, Path], request: pytest.FixtureRequest):
    @asynccontextmanager
    async def open_client(transport: str, era: str) -> AsyncIterator[Client]:
        bridge, agent = bins
        if transport == "stdio":
            target: object = StdioServerParameters(
                command=str(bridge),
                args=["sandbox"],
                env={**sandbox_env(agent), "BOUVET_TRANSPORT": "stdio", "PATH": "/usr/bin:/bin"},
            )
        else:
            target = request.getfixturevalue("bridge_http").mcp_url
        async with Client(target, mode=era, cache=None, read_timeout_seconds=60) as client:
            yield client

    return open_client


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("era", ERAS)
async def test_bouvet_tools_through_the_python_client(connect, transport: str, era: str) -> None:
    async with connect(transport, era) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"create_sandbox", "destroy_sandbox", "list_sandboxes", "execute_code", "run_command",
                "read_file", "write_file", "list_directory"} <= names
        created = await ok(client, "create_sandbox", {})
        sid = created["sandbox_id"]
        uuid.UUID(sid)
        assert "python" in created["languages"]
        out = await ok(client, "execute_code", {"sandbox_id": sid, "language": "python", "code": "print(2 ** 10)"})
        assert (out["exit_code"], out["stdout"], out["stderr"]) == (0, "1024\n", "")
        out = await ok(client, "run_command", {"sandbox_id": sid, "command": "echo $((6*7)) >&2; exit 4"})
        assert (out["exit_code"], out["stderr"]) == (4, "42\n")
        blob = bytes(range(256))
        await ok(client, "write_file", {"sandbox_id": sid, "path": "b.bin", "content": base64.b64encode(blob).decode(),
                                        "encoding": "base64"})
        back = await ok(client, "read_file", {"sandbox_id": sid, "path": "b.bin", "encoding": "base64"})
        assert base64.b64decode(back["content"]) == blob
        listing = await ok(client, "list_directory", {"sandbox_id": sid, "path": "/workspace"})
        assert {"name": "b.bin", "is_dir": False, "size": 256} in listing["entries"]
        sandboxes = (await ok(client, "list_sandboxes", {}))["sandboxes"]
        mine = next(s for s in sandboxes if s["sandbox_id"] == sid)
        # The report is in full once per page; a sandbox with the same one names it (isolation_as).
        report = mine.get("isolation") or next(s for s in sandboxes if s["sandbox_id"] == mine["isolation_as"])["isolation"]
        assert mine["state"] == "running" and report["namespaces"]
        assert (await ok(client, "destroy_sandbox", {"sandbox_id": sid}))["success"] is True
        err = await error(client, "execute_code", {"sandbox_id": sid, "language": "sh", "code": "true"})
        assert err["code"] == "E_NOT_FOUND" and err["message"] == "Sandbox not found or invalid ID"


async def test_health_reports_backend_pool_and_microvm_probe(bridge_http: HttpServer) -> None:
    health = bridge_http.health()
    body = health.get("bridges", {}).get("sandbox", health)
    assert body["backend"] == "namespace"
    assert "hits" in body["pool"] and body["microvm"]["available"] is False


def guest_files() -> tuple[Path, Path]:
    """The microvm guest scripts/install-peers builds (scripts/build-guest). Missing: a failure, never a skip."""
    kernel, initrd = PEERS / "guest" / "vmlinuz", PEERS / "guest" / "initrd.cpio"
    if not (kernel.is_file() and initrd.is_file()):
        pytest.fail(f"no microvm guest under {PEERS / 'guest'}: run scripts/install-peers", pytrace=False)
    return kernel, initrd


async def test_a_microvm_sandbox_through_the_python_client(bins: tuple[Path, Path]) -> None:
    """The microvm backend on QEMU's emulator (this host's KVM cannot boot a guest): the self-test passes, and
    code runs in a VM with its own kernel."""
    bridge, agent = bins
    kernel, initrd = guest_files()
    env = {**sandbox_env(agent), "SANDBOX_BACKEND": "microvm", "SANDBOX_MICROVM_ACCEL": "tcg",
           "SANDBOX_KERNEL": str(kernel), "SANDBOX_INITRD": str(initrd), "BOUVET_POOL_MIN_SIZE": "0"}
    # The self-test boots a VM before the server listens: seconds under TCG, within the start-up allowance.
    with HttpServer.start([str(bridge), "sandbox"], env=env) as server:
        body = server.health()
        assert body["backend"] == "microvm"
        assert body["microvm"]["available"] is True and body["microvm"]["self_tested"] is True
        async with Client(server.mcp_url, mode="2026-07-28", cache=None, read_timeout_seconds=120) as client:
            created = await ok(client, "create_sandbox", {})
            sid = created["sandbox_id"]
            out = await ok(client, "execute_code", {"sandbox_id": sid, "language": "python",
                                                     "code": "import os; print(os.uname().release, os.getuid())"})
            release, uid = out["stdout"].split()
            assert release != os.uname().release and release.endswith("-amd64"), out
            assert uid == "1000"
            listed = (await ok(client, "list_sandboxes", {}))["sandboxes"]
            assert next(s for s in listed if s["sandbox_id"] == sid)["isolation"]["isolation"] == "microvm (qemu, tcg)"
            assert (await ok(client, "destroy_sandbox", {"sandbox_id": sid}))["success"] is True
            # A bridge killed outright takes its VMs with it (parent-death signal), not at its next start. The
            # VMs are stopped first, so none can end on its own when its agent's socket closes.
            await ok(client, "create_sandbox", {})
            qemus = [p for p in children(server.proc.pid) if b"qemu" in Path(f"/proc/{p}/cmdline").read_bytes()]
            assert qemus, "a VM per sandbox"
            for pid in qemus:
                os.kill(pid, signal.SIGSTOP)
            server.proc.kill()
            server.proc.wait(timeout=10)
            deadline = time.monotonic() + 10
            while any(alive(p) for p in qemus) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not any(alive(p) for p in qemus), "a QEMU outlived the bridge killed with SIGKILL"


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie awaiting its new parent's reaping counts as gone)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def children(pid: int) -> list[int]:
    """The direct children of `pid`, over all its threads."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


async def test_a_busy_http_port_does_not_stop_stdio(bins: tuple[Path, Path], tmp_path: Path) -> None:
    """Transport `both` (the sandbox's default): with its HTTP port taken, the bridge launched over a pipe still
    serves stdio, and its log names the port and says HTTP is not listening."""
    import socket

    bridge, agent = bins
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        log = tmp_path / "stderr.log"
        env = {**sandbox_env(agent), "BOUVET_POOL_MIN_SIZE": "0", "MCP_HOST": "127.0.0.1", "MCP_PORT": str(port),
               "PATH": "/usr/bin:/bin", "RUST_LOG": "info"}
        params = StdioServerParameters(command=str(bridge), args=["sandbox"], env=env)
        with open(log, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), cache=None, read_timeout_seconds=60) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert "execute_code" in names
        text = log.read_text()
        warn = next((line for line in text.splitlines() if "HTTP is NOT listening" in line), None)
        assert warn is not None and "WARN" in warn and f"127.0.0.1:{port}" in warn, text
        # Nobody on stdio either (stdin closed from the start): nothing is served, so the start fails.
        import subprocess

        alone = subprocess.run([str(bridge), "sandbox"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               env={**os.environ, **env}, timeout=60)
        assert alone.returncode != 0 and f"cannot listen for MCP on 127.0.0.1:{port}" in alone.stderr, alone.stderr


BIG_LINES = 262_144  # "line 0000000\n" is 13 bytes: 3.25 MiB in all


def big_text() -> str:
    return "".join(f"line {i:07d}\n" for i in range(BIG_LINES))


@pytest.mark.parametrize("era", ERAS)
async def test_large_results_arrive_whole_over_http(bridge_http: HttpServer, era: str) -> None:
    """Results above 512 KiB once broke this client over HTTP (it refuses an SSE event over 1 MiB, and a result
    carries its content twice): output past the result budget is cut head-and-tail and says so, and a big file
    comes whole in pages."""
    async with Client(bridge_http.mcp_url, mode=era, cache=None, read_timeout_seconds=120) as client:
        sid = (await ok(client, "create_sandbox", {}))["sandbox_id"]
        try:
            out = await ok(client, "execute_code", {"sandbox_id": sid, "language": "python",
                                                     "code": "import sys; sys.stdout.write('a' * (600 << 10))"})
            assert out["exit_code"] == 0 and out["stdout_bytes"] == 600 << 10
            kept = out["stdout"]
            assert set(kept) == {"a"} and 0 < len(kept) <= 600 << 10
            assert out["truncated"] is (len(kept) < 600 << 10)
            expected = big_text()
            code = f"open('big.txt', 'w').write(''.join(f'line {{i:07d}}\\n' for i in range({BIG_LINES})))"
            await ok(client, "execute_code", {"sandbox_id": sid, "language": "python", "code": code})
            got, offset = [], 0
            while True:
                page = await ok(client, "read_file", {"sandbox_id": sid, "path": "big.txt", "offset": offset})
                assert page["size"] == len(expected) and page["bytes"] > 0
                got.append(page["content"])
                offset += page["bytes"]
                if not page["truncated"]:
                    break
            assert offset == len(expected) and "".join(got) == expected
            b64 = await ok(client, "read_file", {"sandbox_id": sid, "path": "big.txt", "encoding": "base64"})
            assert base64.b64decode(b64["content"]) == expected[: b64["bytes"]].encode()
        finally:
            await ok(client, "destroy_sandbox", {"sandbox_id": sid})


@pytest.mark.parametrize("pool", ["1", "true", "TRUE", "yes", "0", "false"])
@pytest.mark.parametrize("transport", ["STDIO", "Both"])
async def test_bouvet_env_values_start_the_bridge(bins: tuple[Path, Path], pool: str, transport: str) -> None:
    """BOUVET_* values Bouvet accepts start ours too: a boolean in any spelling, the transport in any case."""
    bridge, agent = bins
    env = {**sandbox_env(agent), "BOUVET_POOL_ENABLED": pool, "BOUVET_TRANSPORT": transport,
           "BOUVET_HTTP_HOST": "127.0.0.1", "BOUVET_HTTP_PORT": "0", "PATH": "/usr/bin:/bin"}
    params = StdioServerParameters(command=str(bridge), args=["sandbox"], env=env)
    async with Client(params, cache=None, read_timeout_seconds=60) as client:
        assert "execute_code" in {t.name for t in (await client.list_tools()).tools}


@pytest.mark.parametrize("transport", ["sse", "remote", "HTTP"])
def test_bouvet_http_transport_names(bins: tuple[Path, Path], transport: str) -> None:
    """Bouvet's names for its HTTP transport serve HTTP."""
    bridge, agent = bins
    env = {**sandbox_env(agent), "BOUVET_TRANSPORT": transport, "BOUVET_POOL_MIN_SIZE": "0"}
    with HttpServer.start([str(bridge), "sandbox"], env=env, http_args=["--mcp-host", "127.0.0.1", "--mcp-port", "0"]) as server:
        assert server.health()["status"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancelling_a_call_kills_its_program_every_time(connect, transport: str) -> None:
    """The Python client cancels a running execute_code (it sends notifications/cancelled): the program is gone,
    in every round (it once survived in 2 to 8 of 8)."""
    import anyio

    count = "pgrep -x python3 | wc -l"
    async with connect(transport, "legacy") as client:
        sid = (await ok(client, "create_sandbox", {}))["sandbox_id"]
        try:
            survived = []
            for round_ in range(8):
                running = anyio.Event()

                async def progressed(_done: float, _total: float | None, _message: str | None) -> None:
                    running.set()

                async with anyio.create_task_group() as group:
                    group.start_soon(partial(client.call_tool, "execute_code", {
                        "sandbox_id": sid, "language": "python",
                        "code": "import time\nprint('up', flush=True)\ntime.sleep(1000)"}, progress_callback=progressed))
                    if round_ % 2 == 0:
                        with anyio.fail_after(60):
                            await running.wait()
                    else:
                        await anyio.sleep(0.05 * round_)  # while it may still be starting
                    group.cancel_scope.cancel()
                # The core gives the handler 5 s to send its kill; the kill waits at most 2 s; each look is a
                # run of its own, slower on a loaded machine.
                deadline = time.monotonic() + 30
                left = "?"
                while time.monotonic() < deadline:
                    left = (await ok(client, "run_command", {"sandbox_id": sid, "command": count}))["stdout"]
                    if left == "0\n":
                        break
                    await anyio.sleep(0.05)
                if left != "0\n":
                    survived.append(round_)
                    await ok(client, "run_command", {"sandbox_id": sid, "command": "pkill -9 -x python3; true"})
            assert survived == [], f"the program survived its cancelled call in rounds {survived}"
        finally:
            await ok(client, "destroy_sandbox", {"sandbox_id": sid})
