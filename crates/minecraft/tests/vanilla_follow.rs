//! The server log follower: appended lines, rotation by rename and a new file, truncation, a partial last
//! line completed later, an over-long line bounded in bytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use bridge_minecraft::vanilla::follow::{Follower, scan_version};
use std::io::Write;
use std::path::{Path, PathBuf};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("vanilla-follow-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn appended_lines_arrive_and_history_does_not() {
    let d = dir("append");
    let log = d.join("latest.log");
    append(&log, "[10:00:00] [Server thread/INFO]: old line\n");
    let mut f = Follower::new(&log, 1024).start_at_end();
    assert!(
        f.poll().is_empty(),
        "lines written before following are history"
    );
    append(&log, "one\ntwo\r\n");
    assert_eq!(f.poll(), vec!["one", "two"]);
    assert!(f.poll().is_empty());
    append(&log, "three\n");
    assert_eq!(f.poll(), vec!["three"]);
    assert_eq!(f.status.lines, 3);
}

#[test]
fn a_file_that_appears_later_is_read_whole() {
    let d = dir("later");
    let log = d.join("latest.log");
    let mut f = Follower::new(&log, 1024).start_at_end();
    assert!(f.poll().is_empty());
    assert!(!f.status.following);
    assert!(
        f.status
            .last_error
            .as_deref()
            .unwrap()
            .contains("latest.log")
    );
    append(&log, "first\n");
    assert_eq!(f.poll(), vec!["first"]);
    assert!(f.status.following);
}

#[test]
fn rotation_by_rename_reads_the_old_file_to_its_end_then_the_new_one() {
    let d = dir("rotate");
    let log = d.join("latest.log");
    append(&log, "");
    let mut f = Follower::new(&log, 1024).start_at_end();
    assert!(f.poll().is_empty());
    append(&log, "before\n");
    // Vanilla at start: latest.log renamed away (then gzipped), a new latest.log written.
    let old = d.join("2026-11-26-1.log");
    std::fs::rename(&log, &old).unwrap();
    append(&old, "last words of the old file\n");
    assert_eq!(
        f.poll(),
        vec!["before", "last words of the old file"],
        "the path is gone: keep reading what is open"
    );
    append(&log, "new file\n");
    assert_eq!(f.poll(), vec!["new file"]);
    assert_eq!(f.status.rotations, 1);
    append(&log, "more\n");
    assert_eq!(f.poll(), vec!["more"]);
}

#[test]
fn a_rename_and_a_new_file_between_two_polls_lose_nothing() {
    let d = dir("rotate2");
    let log = d.join("latest.log");
    append(&log, "");
    let mut f = Follower::new(&log, 1024).start_at_end();
    f.poll();
    append(&log, "a\nb");
    std::fs::rename(&log, d.join("old.log")).unwrap();
    append(&log, "c\n");
    // The old file's unterminated `b` is a line of its own: the writer is gone.
    assert_eq!(f.poll(), vec!["a", "b", "c"]);
}

#[test]
fn truncation_reads_from_the_start_again() {
    let d = dir("truncate");
    let log = d.join("latest.log");
    append(&log, "");
    let mut f = Follower::new(&log, 1024).start_at_end();
    append(&log, "a long first line before the cut\n");
    assert_eq!(f.poll().len(), 1);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&log, "after\n");
    assert_eq!(f.poll(), vec!["after"]);
    assert_eq!(f.status.truncations, 1);
    assert_eq!(f.status.rotations, 0);
}

#[test]
fn a_partial_last_line_waits_for_its_end() {
    let d = dir("partial");
    let log = d.join("latest.log");
    append(&log, "");
    let mut f = Follower::new(&log, 1024).start_at_end();
    append(&log, "[12:00:00] [Server thread/INFO]: <Ste");
    assert!(f.poll().is_empty());
    append(&log, "ve> hel");
    assert!(f.poll().is_empty());
    append(&log, "lo\nnext");
    assert_eq!(
        f.poll(),
        vec!["[12:00:00] [Server thread/INFO]: <Steve> hello"]
    );
    append(&log, "\n");
    assert_eq!(f.poll(), vec!["next"]);
}

#[test]
fn an_over_long_line_is_cut_to_the_limit_at_a_character_boundary() {
    let d = dir("long");
    let log = d.join("latest.log");
    append(&log, "");
    let mut f = Follower::new(&log, 100).start_at_end();
    // 'é' is two bytes: 99 bytes of 'a' then 'é' would pass 100 in the middle of the character.
    let long = format!("{}é{}", "a".repeat(99), "b".repeat(1 << 20));
    append(&log, &format!("{long}\nshort\n"));
    let lines = f.poll();
    assert_eq!(lines.len(), 2);
    assert_eq!(
        lines[0],
        "a".repeat(99),
        "cut at 100 bytes, without half a character"
    );
    assert_eq!(lines[1], "short");
    assert_eq!(f.status.lines_cut, 1);
}

#[test]
fn an_over_long_line_across_polls_stays_bounded() {
    let d = dir("long2");
    let log = d.join("latest.log");
    append(&log, "");
    let mut f = Follower::new(&log, 64).start_at_end();
    for _ in 0..10 {
        append(&log, &"x".repeat(1000));
        assert!(f.poll().is_empty());
    }
    append(&log, "\n");
    assert_eq!(f.poll(), vec!["x".repeat(64)]);
    assert_eq!(f.status.lines_cut, 1);
}

#[test]
fn the_version_is_found_in_the_head_of_the_log() {
    let d = dir("version");
    let log = d.join("latest.log");
    append(
        &log,
        "[19:21:40] [ServerMain/INFO]: Loaded 1276 advancements\n[19:21:40] [Server thread/INFO]: Starting minecraft server version 1.20.6\n",
    );
    assert_eq!(scan_version(&log).as_deref(), Some("1.20.6"));
    assert_eq!(scan_version(&d.join("none.log")), None);
}

/// Whoever can write the server's logs/ (the server's own user) can put a FIFO at latest.log: opening it
/// blocked the follower until a writer came (events stopped), and what that writer sent became events.
#[test]
fn a_fifo_at_the_log_path_is_refused_not_opened() {
    use std::os::unix::fs::OpenOptionsExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    let d = dir("fifo");
    let log = d.join("latest.log");
    let made = std::process::Command::new("mkfifo")
        .arg(&log)
        .status()
        .unwrap();
    assert!(made.success());
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    // A writer that sends a forged line as soon as anyone opens the FIFO for reading.
    let writer = {
        let (log, stop) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // O_NONBLOCK: a write open fails (ENXIO) until a reader has the FIFO open.
                if let Ok(mut w) = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(0o4000)
                    .open(&log)
                {
                    let _ =
                        w.write_all(b"[10:00:00] [Server thread/INFO]: Forged joined the game\n");
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    assert_eq!(scan_version(&log), None);
    let mut f = Follower::new(&log, 1024).start_at_end();
    let lines = f.poll();
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(lines.is_empty(), "read from the FIFO: {lines:?}");
    assert!(!f.status.following);
    let e = f.status.last_error.clone().unwrap_or_default();
    assert!(e.contains("not a regular file"), "{e}");
}
