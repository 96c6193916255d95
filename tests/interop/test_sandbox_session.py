"""run_code's persistent session and rich results through the official Python MCP client (PyPI `mcp`), over the
real `mcp-bridges sandbox` binary on stdio and HTTP: state kept between calls, a matplotlib figure arriving as an
image block whose PNG decodes, a file under the output folder as a resource link the client reads back, and a
DataFrame as a text table. The client validates every result against the tool's outputSchema."""

from __future__ import annotations

import base64
import struct
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from conftest import HttpServer, cargo_bin, ok
from mcp import Client, StdioServerParameters

pytestmark = [pytest.mark.anyio]

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_IMAGE_BYTES = 256 << 10  # bridge_sandbox's MAX_IMAGE_BYTES


@pytest.fixture(scope="module")
def bins() -> tuple[Path, Path]:
    return cargo_bin("mcp-bridges"), cargo_bin("sandbox-agent")


def sandbox_env(agent: Path) -> dict[str, str]:
    return {"NO_COLOR": "1", "SANDBOX_AGENT_BIN": str(agent), "SANDBOX_POOL_MIN_SIZE": "1"}


@pytest.fixture(scope="module")
def bridge_http(bins: tuple[Path, Path]) -> Iterator[HttpServer]:
    bridge, agent = bins
    with HttpServer.start([str(bridge), "sandbox"], env=sandbox_env(agent)) as server:
        yield server


@pytest.fixture
def connect(bins: tuple[Path, Path], request: pytest.FixtureRequest):
    @asynccontextmanager
    async def open_client(transport: str) -> AsyncIterator[Client]:
        bridge, agent = bins
        if transport == "stdio":
            target: object = StdioServerParameters(
                command=str(bridge),
                args=["sandbox", "--stdio"],
                env={**sandbox_env(agent), "PATH": "/usr/bin:/bin"},
            )
        else:
            target = request.getfixturevalue("bridge_http").mcp_url
        async with Client(target, cache=None, read_timeout_seconds=120) as client:
            yield client

    return open_client


def png_size(png: bytes) -> tuple[int, int]:
    assert png.startswith(PNG_MAGIC), png[:16]
    assert png[12:16] == b"IHDR"
    return struct.unpack(">II", png[16:24])


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_session_with_a_chart_through_the_python_client(connect, transport: str) -> None:
    async with connect(transport) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ["run_code", "interrupt_session", "restart_session", "close_session"]:
            assert name in tools, sorted(tools)
            assert tools[name].title, name
        sid = (await ok(client, "create_sandbox", {}))["sandbox_id"]

        await ok(client, "run_code", {"sandbox_id": sid, "code": "x = 41\nimport math"})
        out = await ok(client, "run_code", {"sandbox_id": sid, "code": "x + 1"})
        assert (out["status"], out["value"], out["new_session"]) == ("ok", "42", False)

        code = (
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3, 4], [3, 1, 4, 1])\n"
            "plt.title('a chart')\n"
            "plt.savefig('/workspace/output/chart.png')\n"
            "print('saved')"
        )
        result = await client.call_tool("run_code", {"sandbox_id": sid, "code": code})
        assert result.is_error is False, result.content
        out = result.structured_content
        assert out["stdout"] == "saved\n"
        images = [c for c in result.content if c.type == "image"]
        assert len(images) == 1, [c.type for c in result.content]
        assert images[0].mime_type == "image/png"
        png = base64.b64decode(images[0].data)
        assert len(png) <= MAX_IMAGE_BYTES
        width, height = png_size(png)
        fig = out["figures"][0]
        assert (width, height) == (fig["width"], fig["height"]) == (640, 480)
        assert result.content[fig["content_index"]] is images[0]
        print(f"chart: {len(png)} bytes of PNG, {width}x{height}")

        links = [c for c in result.content if c.type == "resource_link"]
        assert [str(link.uri) for link in links] == [f"sandbox://{sid}/workspace/output/chart.png"]
        assert links[0].mime_type == "image/png"
        read = await client.read_resource(links[0].uri)
        saved = base64.b64decode(read.contents[0].blob)
        assert png_size(saved) == (640, 480)

        out = await ok(client, "run_code", {
            "sandbox_id": sid,
            "code": "import pandas as pd\npd.DataFrame({'n': [1, 2, 3], 'sq': [1, 4, 9]})",
        })
        lines = out["table"].splitlines()
        assert lines[0].split() == ["n", "sq"], out["table"]
        assert lines[3].split() == ["2", "3", "9"], out["table"]
        await ok(client, "destroy_sandbox", {"sandbox_id": sid})
