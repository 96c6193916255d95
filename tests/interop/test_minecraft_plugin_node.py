"""The flying-squid plugin's own tests (node:test, crates/minecraft/adapters/flying-squid/test): its TOML config
and whitelist (Properties 6 and 7, game side) and its relay link against a scripted relay (hello, outbox and
resend, malformed / wrong-version / oversize messages: Properties 12, 21, 22)."""

from __future__ import annotations

import subprocess

from conftest import ROOT
from minecraft_world import real_node

ADAPTER = ROOT / "crates" / "minecraft" / "adapters" / "flying-squid"


def test_plugin_unit_tests_pass() -> None:
    install = subprocess.run([str(ROOT / "scripts" / "minecraft-server"), "--install-only"], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr
    tests = sorted(str(p) for p in (ADAPTER / "test").glob("*.test.js"))
    assert tests, "no plugin tests found"
    run = subprocess.run([real_node(), "--test", *tests], capture_output=True, text=True, cwd=ADAPTER, timeout=300)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout or "ℹ fail 0" in run.stdout, run.stdout[-2000:]
