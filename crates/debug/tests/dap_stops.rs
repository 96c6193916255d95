//! Stops on the `dap` backend (issue 21 items 3 and 7), through a real MCP client with debugpy and lldb-dap:
//! what a stop reports (source around the line, the stack, the reason and an exception's type and message),
//! pausing a running program, running to a line, and two threads hitting a breakpoint in a tight loop while
//! the agent steps, resumes and evaluates as fast as it can: every stop is reported exactly once, in order
//! per thread.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use bridge_debug::config::BackendChoice;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use support::*;

/// Two threads, each passing the breakpoint line (`total += i`, line 7) `ROUNDS` times; the sleep lets the
/// other thread run between rounds, so the two interleave.
const STRESS_PY: &str = "\
import threading
import time

def work(rounds):
    total = 0
    for i in range(rounds):
        total += i
        time.sleep(0.001)
    return total

threads = [threading.Thread(target=work, args=(ROUNDS,), name=f'w{k}') for k in range(2)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print('done')
";
const STRESS_PY_LINE: u64 = 7;

/// The same in C with pthreads: both threads really run at once, so both can hit the breakpoint (line 7) in
/// the same instant, and lldb-dap then sends a stopped event for each.
const STRESS_C: &str = "\
#include <pthread.h>
#include <stdio.h>
volatile long sink;
static void *work(void *arg) {
    long total = 0;
    for (int i = 0; i < ROUNDS; i++) {
        total += i;
        sink = total;
    }
    return arg;
}
int main(void) {
    pthread_t t[2];
    for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, work, NULL);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    printf(\"done\\n\");
    return 0;
}
";
const STRESS_C_LINE: u64 = 7;
const ROUNDS: u64 = 40;

/// Every stop a result reports: the stop itself and those reported as passed (their thread had resumed).
fn stops_in(result: &Value) -> Vec<Value> {
    let mut out: Vec<Value> = result["passedStops"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if result["event"] == "stopped" {
        out.push(result.clone());
    }
    out
}

/// Starts `config` with a breakpoint at `file:line`, then, as fast as one client goes: at each breakpoint stop
/// evaluates `i`, every third one steps over once, else continues, to the end. Asserts every stop the adapter
/// sent was reported exactly once, in arrival order, and each thread's breakpoint stops came in loop order,
/// one per round, unless the adapter itself never announced a round (see the last check). `log` is the
/// adapter's own record of its messages, where it keeps one (lldb-dap's `LLDBDAP_LOG`).
async fn stress(
    c: &mcp_testkit::Client,
    config: Value,
    file: &str,
    line: u64,
    log: Option<&std::path::Path>,
) {
    let trace = || log.map(adapter_trace).unwrap_or_default();
    data(c, "breakpoint_set", json!({"path": file, "line": line})).await;
    let start = data(
        c,
        "debug_start",
        json!({"config": config, "wait": true, "timeoutMs": 30000}),
    )
    .await;
    let mut result = start["stop"].clone();
    let mut seqs = Vec::new();
    // Per thread: the loop index at each breakpoint stop, as evaluated while paused there.
    let mut hits: BTreeMap<i64, Vec<u64>> = BTreeMap::new();
    let mut bp_stops: BTreeMap<i64, u64> = BTreeMap::new();
    let mut calls = 0u64;
    let mut steps = 0u64;
    let mut not_resumed = 0u64;
    let mut passed = 0usize;
    loop {
        let stops = stops_in(&result);
        passed += stops
            .len()
            .saturating_sub(usize::from(result["event"] == "stopped"));
        for s in stops {
            seqs.push(s["stopSeq"].as_u64().unwrap());
            if s["reason"] == "breakpoint" {
                *bp_stops.entry(s["threadId"].as_i64().unwrap()).or_default() += 1;
            }
        }
        if result["resumed"] == false {
            not_resumed += 1;
        }
        if result["event"] == "terminated" {
            break;
        }
        assert_eq!(result["event"], "stopped", "{result}");
        let thread = result["threadId"].as_i64().unwrap();
        if result["reason"] == "breakpoint" {
            assert_eq!(result["line"], line, "{result}{}", trace());
            let v = data(c, "debug_evaluate", json!({"expression": "i"})).await;
            hits.entry(thread)
                .or_default()
                .push(v["result"].as_str().unwrap().parse().unwrap());
        } else {
            assert_eq!(result["reason"], "step", "{result}");
        }
        calls += 1;
        result = if result["reason"] == "breakpoint" && calls.is_multiple_of(3) {
            steps += 1;
            data(c, "debug_step_over", json!({"timeoutMs": 30000})).await
        } else {
            data(c, "debug_continue", json!({"timeoutMs": 30000})).await
        };
    }
    let summary = data(c, "dap_summary", json!({})).await;
    let total = summary["stops"].as_u64().unwrap();
    let list = data(c, "debug_list_sessions", json!({})).await;
    let repeats = list["sessions"][0]["repeatedStopEventsDropped"]
        .as_u64()
        .unwrap_or(0);
    eprintln!(
        "stress {file}: {total} stops sent by the adapter, {} reported ({passed} as passed), {steps} steps, {not_resumed} resumes answered with a stop not yet reported, breakpoint stops per thread {bp_stops:?}, {repeats} repeated stopped events (a thread that had not run) dropped",
        seqs.len()
    );
    let unique: BTreeSet<u64> = seqs.iter().copied().collect();
    assert_eq!(
        unique.len(),
        seqs.len(),
        "no stop reported twice: {seqs:?}{}",
        trace()
    );
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "in the order they came: {seqs:?}{}",
        trace()
    );
    assert_eq!(
        unique,
        (1..=total).collect(),
        "every stop reported: {seqs:?}{}",
        trace()
    );
    assert_eq!(hits.len(), 2, "both threads stopped: {hits:?}{}", trace());
    for (thread, seen) in &hits {
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "thread {thread} in order: {seen:?}{}",
            trace()
        );
    }
    let announced = log.map(breakpoint_events_sent);
    for (thread, n) in &bp_stops {
        // A round without a stop is the bridge's fault only if it could have dropped one: every stopped event
        // it received and did not take for a repeat was reported (checked above). So the adapter never
        // announced that round when no event was dropped as a repeat (debugpy, which announces no repeats,
        // missed thread 3's round 0 once in CI: 118 events, 0 repeats), or when the adapter's log shows it
        // sent this thread exactly the breakpoint stops reported, none of them dropped (lldb-dap 19 did that
        // once in CI: thread B's round 15 never announced while thread A's 32 repeats were dropped; lldb
        // before LLVM 20 steps silently past a breakpoint a thread was halted at without having hit it,
        // llvm/llvm-project#126988). Then the missing rounds are only printed.
        let none_of_its_dropped = repeats == 0
            || announced
                .as_ref()
                .is_some_and(|sent| sent.get(thread) == Some(n));
        if none_of_its_dropped && *n < ROUNDS {
            eprintln!(
                "thread {thread}: the adapter announced {n} of {ROUNDS} breakpoint rounds: {hits:?}{}",
                trace()
            );
            continue;
        }
        assert_eq!(
            *n,
            ROUNDS,
            "thread {thread} stopped at the breakpoint on every round ({repeats} repeats dropped): {hits:?}{}",
            trace()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_threads_in_a_tight_loop_every_stop_is_reported_once_in_order() {
    let ws = workspace("stress-py");
    std::fs::write(
        ws.join("stress.py"),
        STRESS_PY.replace("ROUNDS", &ROUNDS.to_string()),
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let config =
        json!({"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/stress.py"});
    stress(&c, config, "stress.py", STRESS_PY_LINE, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_threads_in_a_tight_loop_every_stop_is_reported_once_in_order() {
    let ws = workspace("stress-c");
    std::fs::write(
        ws.join("stress.c"),
        STRESS_C.replace("ROUNDS", &ROUNDS.to_string()),
    )
    .unwrap();
    compile_c(&ws, "stress", &["-pthread"]);
    // lldb-dap writes every message it sends and receives to LLDBDAP_LOG: when a stop goes missing, that record
    // tells an adapter that never sent it from a stop the session's repeat rule took for a repeat.
    let log = ws.join("lldb-dap.log");
    let wrapper = ws.join("lldb-dap-logged");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nLLDBDAP_LOG='{}' exec '{}' \"$@\"\n",
            log.display(),
            lldb_dap().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut with_log = args(&ws, BackendChoice::Dap);
    with_log.lldb_dap = Some(wrapper);
    let c = client(with_log).await;
    let config =
        json!({"type": "lldb-dap", "request": "launch", "program": "${workspaceFolder}/stress"});
    stress(&c, config, "stress.c", STRESS_C_LINE, Some(&log)).await;
}

/// The messages in lldb-dap's own log, each with its direction: `-->` received, `<--` sent. The log is a
/// `<time> -->` or `<time> <--` line, a Content-Length header and the message's JSON, indented over several
/// lines.
fn adapter_messages(log: &std::path::Path) -> Result<Vec<(&'static str, Value)>, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("(no lldb-dap log: {e})"))?;
    let mut messages: Vec<(&'static str, String)> = Vec::new();
    for line in text.lines() {
        let t = line.trim_end();
        if let Some(dir) = ["-->", "<--"].into_iter().find(|d| t.ends_with(d)) {
            messages.push((dir, String::new()));
        } else if let Some((_, json)) = messages.last_mut()
            && !t.starts_with("Content-Length")
        {
            json.push_str(t);
        }
    }
    Ok(messages
        .into_iter()
        .filter_map(|(dir, json)| Some((dir, serde_json::from_str(&json).ok()?)))
        .collect())
}

/// Per thread, the stopped events with reason `breakpoint` the adapter sent, repeats included.
fn breakpoint_events_sent(log: &std::path::Path) -> BTreeMap<i64, u64> {
    let mut sent = BTreeMap::new();
    for (dir, m) in adapter_messages(log).unwrap_or_default() {
        if dir == "<--" && m["event"] == "stopped" && m["body"]["reason"] == "breakpoint" {
            *sent
                .entry(m["body"]["threadId"].as_i64().unwrap_or(0))
                .or_default() += 1;
        }
    }
    sent
}

/// The stops, resumes, steps and stack requests in lldb-dap's own log, one line each, in the order it sent and received them.
fn adapter_trace(log: &std::path::Path) -> String {
    let messages = match adapter_messages(log) {
        Ok(messages) => messages,
        Err(e) => return e,
    };
    let lines: Vec<String> = messages
        .iter()
        .filter_map(|(dir, m)| {
            let what = m["event"].as_str().or(m["command"].as_str())?;
            let wanted = [
                "stopped",
                "continued",
                "continue",
                "next",
                "stepIn",
                "stepOut",
                "stackTrace",
            ];
            if !wanted.contains(&what) || (m["type"] == "response" && what != "stackTrace") {
                return None;
            }
            let b = &m["body"];
            if what == "stackTrace" {
                // A stop reported with no stack: this tells whether the adapter answered with none.
                return Some(if m["type"] == "response" {
                    format!(
                        "{dir} stackTrace answer: {} frames{}",
                        b["stackFrames"].as_array().map_or(0, Vec::len),
                        m["message"]
                            .as_str()
                            .map(|e| format!(", {e}"))
                            .unwrap_or_default()
                    )
                } else {
                    format!("{dir} stackTrace thread {}", m["arguments"]["threadId"])
                });
            }
            let thread = b["threadId"].clone();
            Some(format!(
                "{dir} {what} thread {} {}",
                if thread.is_null() {
                    m["arguments"]["threadId"].clone()
                } else {
                    thread
                },
                [
                    ("reason", &b["reason"]),
                    ("all", &b["allThreadsContinued"]),
                    ("preserveFocus", &b["preserveFocusHint"]),
                    ("hit", &b["hitBreakpointIds"]),
                ]
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(" ")
            ))
        })
        .collect();
    format!(
        "\nlldb-dap's stops, resumes, steps and stacks ({} of {} messages):\n{}",
        lines.len(),
        messages.len(),
        lines.join("\n")
    )
}

/// An adapter that announces its resumes (lldb-dap) can send a stop of the pause being left after a resume
/// request went out, just before its `continued`: that thread was resumed too, so the stop is reported as
/// passed and the resume answers with the stop that came after (CI once reported thread 2's such stop as where
/// the program was, with an empty stack, since the thread was running). A resume the adapter does not announce
/// still ends in its stop, even for a wait shorter than the hold. The adapter is the test double `fake_dap.py --as-lldb-dap`; the step first is the
/// resume that shows the bridge this adapter announces them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_sent_across_a_resume_of_an_adapter_that_announces_resumes_is_passed() {
    let c = on_the_fake("crossed-resume", "--as-lldb-dap").await;
    let stepped = data(&c, "debug_step_over", json!({"timeoutMs": 10000})).await;
    assert_eq!(
        (stepped["threadId"].as_i64(), stepped["reason"].as_str()),
        (Some(1), Some("step")),
        "{stepped}"
    );
    let resumed = data(&c, "debug_continue", json!({"timeoutMs": 10000})).await;
    assert_eq!(
        (
            resumed["event"].as_str(),
            resumed["threadId"].as_i64(),
            resumed["reason"].as_str(),
            resumed["line"].as_u64()
        ),
        (Some("stopped"), Some(1), Some("breakpoint"), Some(3)),
        "where the program is after the resume: {resumed}"
    );
    let passed = resumed["passedStops"].as_array().unwrap();
    assert_eq!(passed.len(), 1, "{resumed}");
    assert_eq!(passed[0]["threadId"], 2, "{resumed}");
    assert_eq!(
        passed[0]["stopSeq"].as_u64().unwrap() + 1,
        resumed["stopSeq"].as_u64().unwrap(),
        "{resumed}"
    );
    // Unannounced, with a wait shorter than the bridge would hold for an announcement: its stop still comes.
    let unannounced = data(&c, "debug_step_over", json!({"timeoutMs": 1000})).await;
    assert_eq!(
        (
            unannounced["threadId"].as_i64(),
            unannounced["reason"].as_str(),
            unannounced["line"].as_u64()
        ),
        (Some(1), Some("step"), Some(3)),
        "{unannounced}"
    );
    let end = data(&c, "debug_continue", json!({"timeoutMs": 10000})).await;
    assert_eq!(end["event"], "terminated", "{end}");
}

/// A breakpoint stop carries the source around the line (the current one marked), the stack with file and
/// line, and the reason; step in and out; run to a line stops there once and leaves no breakpoint behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_shows_source_stack_and_reason_and_run_to_line_leaves_nothing_behind() {
    let ws = workspace("context");
    let c = client(args(&ws, BackendChoice::Dap)).await;
    data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 6}),
    )
    .await;
    let start = data(&c, "debug_start", json!({"launch": "py", "wait": true})).await;
    let stop = &start["stop"];
    assert_eq!(
        (stop["reason"].as_str(), stop["line"].as_u64()),
        (Some("breakpoint"), Some(6)),
        "{stop}"
    );
    let text = stop["source"]["text"].as_str().unwrap();
    assert!(text.contains(">6 | x = add(40, 2)\n"), "{stop}");
    assert!(text.contains(" 3 |     return total\n"), "{stop}");
    assert!(text.contains(" 9 | print('y =', y)\n"), "{stop}");
    assert_eq!(stop["source"]["startLine"], 3, "{stop}");

    let into = data(&c, "debug_step_into", json!({})).await;
    assert_eq!(
        (
            into["line"].as_u64(),
            into["reason"].as_str(),
            into["functionName"].as_str()
        ),
        (Some(2), Some("step"), Some("add")),
        "into add(40, 2): {into}"
    );
    let stack = into["stack"].as_array().unwrap();
    assert_eq!(
        (stack[0]["name"].as_str(), stack[0]["line"].as_u64()),
        (Some("add"), Some(2)),
        "{into}"
    );
    assert_eq!(stack[1]["line"], 6, "the caller: {into}");
    assert!(
        stack[1]["file"].as_str().unwrap().ends_with("target.py"),
        "{into}"
    );

    data(
        &c,
        "breakpoint_set",
        json!({"path": "target.py", "line": 2}),
    )
    .await;
    let ran = data(
        &c,
        "debug_run_to_line",
        json!({"path": "target.py", "line": 3}),
    )
    .await;
    assert_eq!(
        (
            ran["line"].as_u64(),
            ran["reachedTarget"].as_bool(),
            ran["reason"].as_str()
        ),
        (Some(3), Some(true), Some("runToLine")),
        "{ran}"
    );
    let next = data(&c, "debug_continue", json!({})).await;
    assert_eq!(
        (next["line"].as_u64(), next["reason"].as_str()),
        (Some(2), Some("breakpoint")),
        "the second call stops at the real breakpoint, not at the temporary one: {next}"
    );
    let out = data(&c, "debug_step_out", json!({})).await;
    assert_eq!(
        (
            out["line"].as_u64(),
            out["reason"].as_str(),
            out["functionName"].as_str()
        ),
        (Some(8), Some("step"), Some("<module>")),
        "back in the caller, y = add(x, 0): {out}"
    );
    data(&c, "breakpoint_clear_project", json!({})).await;
    let ran = data(
        &c,
        "debug_run_to_line",
        json!({"path": "target.py", "line": 3}),
    )
    .await;
    assert_eq!(ran["event"], "terminated", "add is not called again: {ran}");
    assert_eq!(ran["reachedTarget"], false, "{ran}");
}

/// An uncaught exception stops with its type and message (debugpy's exceptionInfo) and the raising line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exception_stop_says_its_type_and_message() {
    let ws = workspace("exc");
    std::fs::write(
        ws.join("boom.py"),
        "value = 41\nvalue += 1\nraise ValueError(f'bad value {value}')\n",
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let config =
        json!({"type": "python", "request": "launch", "program": "${workspaceFolder}/boom.py"});
    let start = data(&c, "debug_start", json!({"config": config, "wait": true})).await;
    let stop = &start["stop"];
    assert_eq!(stop["reason"], "exception", "{stop}");
    assert_eq!(stop["exception"]["type"], "ValueError", "{stop}");
    assert_eq!(stop["exception"]["message"], "bad value 42", "{stop}");
    assert_eq!(stop["line"], 3, "{stop}");
    assert!(
        stop["source"]["text"]
            .as_str()
            .unwrap()
            .contains(">3 | raise ValueError"),
        "{stop}"
    );
}

/// A program in a loop is paused where it runs (reason pause, with its source), resumed, and paused again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_a_running_program_where_it_is() {
    let ws = workspace("pause");
    std::fs::write(
        ws.join("spin.py"),
        "import time\nprint('ready', flush=True)\nfor i in range(600):\n    time.sleep(0.1)\n",
    )
    .unwrap();
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let config =
        json!({"type": "debugpy", "request": "launch", "program": "${workspaceFolder}/spin.py"});
    data(&c, "debug_start", json!({"config": config})).await;
    ready(&c).await;
    let (code, e) = support::code(&c, "debug_continue", json!({})).await;
    assert_eq!(code, "E_NOT_PAUSED", "{e}");
    for _ in 0..2 {
        let p = data(&c, "debug_pause", json!({})).await;
        assert_eq!(
            (p["event"].as_str(), p["reason"].as_str()),
            (Some("stopped"), Some("pause")),
            "{p}"
        );
        assert!(p["file"].as_str().unwrap().ends_with("spin.py"), "{p}");
        assert!(
            p["source"]["text"]
                .as_str()
                .is_some_and(|t| t.contains('>')),
            "{p}"
        );
        let again = data(&c, "debug_pause", json!({})).await;
        assert_eq!(again["alreadyPaused"], true, "{again}");
        assert_eq!(
            again["stopSeq"], p["stopSeq"],
            "the same stop, not a new one: {again}"
        );
        let i = data(&c, "debug_evaluate", json!({"expression": "i"})).await;
        assert!(i["result"].as_str().unwrap().parse::<u64>().is_ok(), "{i}");
        let (code, e) = support::code(&c, "debug_continue", json!({"timeoutMs": 300})).await;
        assert_eq!(code, "E_TIMEOUT", "resumed, no stop: {e}");
    }
}

/// Waits until the program printed `ready` (it runs its loop then).
async fn ready(c: &mcp_testkit::Client) {
    let begun = std::time::Instant::now();
    while !data(c, "dap_logs", json!({})).await["text"]
        .as_str()
        .unwrap()
        .contains("ready")
    {
        assert!(
            begun.elapsed() < HANG_GUARD,
            "the program never printed `ready`"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// lldb-dap pauses a C program too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_stops_a_running_c_program() {
    let ws = workspace("pause-c");
    std::fs::write(
        ws.join("spin.c"),
        "#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n    printf(\"ready\\n\");\n    fflush(stdout);\n    for (int i = 0; i < 600; i++) {\n        usleep(100000);\n    }\n    return 0;\n}\n",
    )
    .unwrap();
    compile_c(&ws, "spin", &[]);
    let c = client(args(&ws, BackendChoice::Dap)).await;
    let config =
        json!({"type": "lldb-dap", "request": "launch", "program": "${workspaceFolder}/spin"});
    data(&c, "debug_start", json!({"config": config})).await;
    // Paused in the dynamic loader, lldb reports a trace stop: wait until main runs.
    ready(&c).await;
    let p = data(&c, "debug_pause", json!({})).await;
    assert_eq!(
        (p["event"].as_str(), p["reason"].as_str()),
        (Some("stopped"), Some("pause")),
        "{p}"
    );
    assert!(!p["stack"].as_array().unwrap().is_empty(), "{p}");
}
