//! `baseline-stdio`: the floor for an MCP server over stdio. Reads a line, writes the canned reply line
//! (bench/src/bin/baseline/reply.rs), flushes; blocking std I/O on one thread, no async runtime. mcp-bench
//! drives it like the core's noop-server and reports the core's CPU per call against it.

#[path = "baseline/reply.rs"]
mod reply;

use std::io::{BufRead, Write};

// The same allocator as the shipped `mcp-bridges` (crates/cli), so the core's figures are what users run and
// the comparison with the baselines is not one of allocators.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut output = std::io::stdout().lock();
    let mut line = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        out.clear();
        if reply::reply(&line, &mut out) {
            out.push(b'\n');
            output.write_all(&out)?;
            output.flush()?;
        }
    }
}
