"""The official Python MCP client (PyPI `mcp`) against the fixture server built on bridge-core, in both protocol
eras (`legacy` = initialize handshake, `2026-07-28` = stateless) and over both transports (stdio, HTTP)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from conftest import HttpServer, cargo_bin, error_of
from mcp import Client, StdioServerParameters

ERAS = ["legacy", "2026-07-28"]
TRANSPORTS = ["stdio", "http"]

# What each `mode=` negotiates with the fixture: the newest version of its era.
EXPECTED_VERSION = {"legacy": "2025-11-25", "2026-07-28": "2026-07-28"}

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("era", ERAS),
    pytest.mark.parametrize("transport", TRANSPORTS),
]


@pytest.fixture(scope="module")
def fixture_bin() -> Path:
    return cargo_bin("mcp-fixture")


@pytest.fixture(scope="module")
def fixture_http(fixture_bin: Path) -> Iterator[HttpServer]:
    with HttpServer.start([str(fixture_bin)]) as server:
        yield server


@pytest.fixture
def connect(transport: str, era: str, fixture_bin: Path, request: pytest.FixtureRequest):
    """`async with connect() as client:` a Client for this test's transport and era."""

    @asynccontextmanager
    async def open_client() -> AsyncIterator[Client]:
        if transport == "stdio":
            target: object = StdioServerParameters(command=str(fixture_bin), args=["--stdio"], env={"NO_COLOR": "1"})
        else:
            target = request.getfixturevalue("fixture_http").mcp_url
        # cache=None: every call reaches the server, so each test sees the server's answer, not a cached one.
        async with Client(target, mode=era, cache=None, read_timeout_seconds=30) as client:
            yield client

    return open_client


async def test_negotiates_the_era(connect, era: str) -> None:
    async with connect() as client:
        assert client.protocol_version == EXPECTED_VERSION[era]


async def test_lists_tools_with_strict_schemas_and_annotations(connect) -> None:
    async with connect() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ["noop", "echo", "test_simple_text", "test_error_handling", "test_tool_with_progress"]:
        assert name in tools, sorted(tools)
    noop = tools["noop"]
    assert noop.input_schema["type"] == "object"
    assert noop.input_schema.get("additionalProperties") is False
    assert noop.annotations is not None and noop.annotations.read_only_hint is True
    echo = tools["echo"]
    assert echo.input_schema["required"] == ["text"]
    assert echo.input_schema.get("additionalProperties") is False
    assert echo.output_schema is not None
    assert set(echo.output_schema["properties"]) == {"text", "bytes"}


async def test_noop_returns_empty_structured_content(connect) -> None:
    async with connect() as client:
        result = await client.call_tool("noop", {})
    assert result.is_error is False
    assert result.structured_content == {}


async def test_echo_returns_structured_content_and_its_text_mirror(connect) -> None:
    async with connect() as client:
        result = await client.call_tool("echo", {"text": "héllo"})
    assert result.is_error is False
    assert result.structured_content == {"text": "héllo", "bytes": 6}
    assert json.loads(result.content[0].text) == result.structured_content


@pytest.mark.parametrize(
    "tool,arguments",
    [
        ("noop", {"bogus": 1}),
        ("echo", {"text": "x", "bogus": 1}),
        ("test_simple_text", {"bogus": 1}),
    ],
)
async def test_unknown_argument_is_a_tool_error(connect, tool: str, arguments: dict) -> None:
    async with connect() as client:
        result = await client.call_tool(tool, arguments)
    error = error_of(result)
    assert error["code"] == "E_INVALID_ARGUMENT"
    assert "bogus" in error["message"]
    assert "bogus" in result.content[0].text


async def test_missing_argument_is_a_tool_error(connect) -> None:
    async with connect() as client:
        result = await client.call_tool("echo", {})
    error = error_of(result)
    assert error["code"] == "E_INVALID_ARGUMENT"
    assert "text" in error["message"]


async def test_failing_tool_reports_code_message_and_hint(connect) -> None:
    async with connect() as client:
        result = await client.call_tool("test_error_handling", {})
    error = error_of(result)
    assert error["code"] == "E_REMOTE"
    assert error["message"] == "This tool intentionally returns an error for testing"
    assert error["hint"]
    assert "This tool intentionally returns an error for testing" in result.content[0].text


async def test_progress_arrives_in_order(connect) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect() as client:
        result = await client.call_tool("test_tool_with_progress", {}, progress_callback=on_progress)
    assert result.is_error is False
    assert [p for p, _, _ in seen] == [0, 50, 100]
    assert all(total == 100 for _, total, _ in seen)


async def test_reads_resources_and_gets_prompts(connect) -> None:
    async with connect() as client:
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert {"test://static-text", "test://static-binary"} <= uris
        text = await client.read_resource("test://static-text")
        assert text.contents[0].text == "This is the content of the static text resource."
        templated = await client.read_resource("test://template/42/data")
        assert json.loads(templated.contents[0].text)["id"] == "42"
        prompt = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert prompt.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"
