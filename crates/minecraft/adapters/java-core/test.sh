#!/usr/bin/env bash
# Builds the plain-JDK game-side core with javac (release 17, warnings are errors) and runs its JUnit 5 tests
# with Debian's console launcher, including RelayLoopbackTest against a real `mcp-bridges minecraft-relay`.
#
#   crates/minecraft/adapters/java-core/test.sh
#
# Environment: MC_RELAY_BIN   a built mcp-bridges binary (default: the workspace's dev build of it)
#              JUNIT_CONSOLE_JAR   (default /usr/share/java/junit-platform-console-standalone.jar, apt junit5)
#              TEST_COUNTS_FILE    if set, "<passed> <failed>" is appended (scripts/test's closing line)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../../.." && pwd)"
JAR="${JUNIT_CONSOLE_JAR:-/usr/share/java/junit-platform-console-standalone.jar}"

command -v javac >/dev/null || { echo "java-core: javac missing (Debian: apt-get install default-jdk-headless)" >&2; exit 1; }
[[ -f "$JAR" ]] || { echo "java-core: $JAR missing (Debian: apt-get install junit5)" >&2; exit 1; }

OUT="$(mktemp -d "${TMPDIR:-/tmp}/java-core.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT

mapfile -t main_src < <(find "$HERE/src/main/java" -name '*.java' | sort)
mapfile -t test_src < <(find "$HERE/src/test/java" -name '*.java' | sort)
javac --release 17 -Xlint:all,-serial -Werror -encoding UTF-8 -d "$OUT/main" "${main_src[@]}"
javac --release 17 -Xlint:all,-serial -encoding UTF-8 -d "$OUT/test" -cp "$OUT/main:$JAR" "${test_src[@]}"

if [[ -z "${MC_RELAY_BIN:-}" ]]; then
  # The whole workspace's binaries, as the other test stages build them: with its features, so no dependency is
  # compiled again for this one binary (a `-p mcp-bridges` build resolves that package's features alone).
  (cd "$ROOT" && cargo build --quiet --workspace --bins --examples)
  MC_RELAY_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/mcp-bridges"
fi
export MC_RELAY_BIN

rc=0
# shellcheck disable=SC2086 # JAVA_OPTS is a list of JVM flags, e.g. -Dproperties.seed=7
java ${JAVA_OPTS:-} -jar "$JAR" -cp "$OUT/main:$OUT/test" --select-package io.github.mcpbridges.minecraft.core \
  --disable-banner --disable-ansi-colors --details=tree --fail-if-no-tests --reports-dir "$OUT/reports" || rc=$?

if [[ -n "${TEST_COUNTS_FILE:-}" ]]; then
  python3 - "$OUT/reports" >>"$TEST_COUNTS_FILE" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
tests = bad = 0
for f in glob.glob(sys.argv[1] + "/*.xml"):
    for s in ET.parse(f).getroot().iter("testsuite"):
        tests += int(s.get("tests", 0))
        bad += int(s.get("failures", 0)) + int(s.get("errors", 0)) + int(s.get("skipped", 0))
print(tests - bad, bad if tests else 1)
PY
fi
exit "$rc"
