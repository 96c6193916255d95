"""The MCP Inspector CLI (`@modelcontextprotocol/inspector --cli`, TypeScript SDK v2 client) against the fixture
server built on bridge-core, in both protocol eras, over stdio and HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ERROR_META_KEY, HttpServer, cargo_bin, run_inspector

# The Inspector exits with this status when the tool answered isError:true (its error envelope on stderr).
EXIT_TOOL_IS_ERROR = 5

pytestmark = [
    pytest.mark.parametrize("era", ["legacy", "modern"]),
    pytest.mark.parametrize("transport", ["stdio", "http"]),
]


@pytest.fixture(scope="module")
def fixture_bin() -> Path:
    return cargo_bin("mcp-fixture")


@pytest.fixture(scope="module")
def fixture_http(fixture_bin: Path) -> Iterator[HttpServer]:
    with HttpServer.start([str(fixture_bin)]) as server:
        yield server


@pytest.fixture
def inspect(transport: str, era: str, fixture_bin: Path, request: pytest.FixtureRequest):
    """Runs the Inspector CLI for this test's transport and era; returns (exit status, stdout JSON, stderr)."""
    if transport == "stdio":
        target = ["--", str(fixture_bin), "--stdio"]
    else:
        target = ["--", request.getfixturevalue("fixture_http").mcp_url]

    def run(*args: str) -> tuple[int, dict, str]:
        # Inspector options first, the target after `--`, so the fixture's own flags reach the fixture.
        proc = run_inspector([], "--protocol-era", era, "--format", "json", "-q", *args, *target)
        try:
            out = json.loads(proc.stdout) if proc.stdout.strip() else {}
        except json.JSONDecodeError as e:
            raise AssertionError(f"inspector printed no JSON: {proc.stdout!r}\nstderr: {proc.stderr}") from e
        return proc.returncode, out, proc.stderr

    return run


def test_lists_the_fixture_tools(inspect) -> None:
    status, out, err = inspect("--method", "tools/list")
    assert status == 0, err
    names = [t["name"] for t in out["result"]["tools"]]
    assert {"noop", "echo", "test_simple_text"} <= set(names)
    noop = next(t for t in out["result"]["tools"] if t["name"] == "noop")
    assert noop["inputSchema"]["additionalProperties"] is False
    assert noop["annotations"]["readOnlyHint"] is True


def test_tool_schemas_pass_the_strict_portability_lint(inspect) -> None:
    # --strict exits 6 on any error-severity schema portability problem.
    status, _, err = inspect("--method", "tools/list", "--strict")
    assert status == 0, err


def test_calls_noop(inspect) -> None:
    status, out, err = inspect("--method", "tools/call", "--tool-name", "noop")
    assert status == 0, err
    assert out["result"]["isError"] is False
    assert out["result"]["structuredContent"] == {}


def test_calls_echo_with_structured_content(inspect) -> None:
    status, out, err = inspect("--method", "tools/call", "--tool-name", "echo", "--tool-arg", "text=hi")
    assert status == 0, err
    assert out["result"]["structuredContent"] == {"text": "hi", "bytes": 2}


def test_unknown_argument_is_a_tool_error(inspect) -> None:
    status, out, err = inspect("--method", "tools/call", "--tool-name", "noop", "--tool-args-json", '{"bogus": 1}')
    assert status == EXIT_TOOL_IS_ERROR, err
    result = out["result"]
    assert result["isError"] is True
    assert "structuredContent" not in result
    error = result["_meta"][ERROR_META_KEY]
    assert error["code"] == "E_INVALID_ARGUMENT"
    assert error["details"]["field"] == "bogus"
    assert result["content"][0]["text"].startswith("[E_INVALID_ARGUMENT] ")
    assert json.loads(err.strip().splitlines()[-1])["error"]["code"] == "tool_is_error"
