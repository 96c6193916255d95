//! Children that must not outlive this process, even when it is killed outright and no clean-up of ours runs.

use tokio::process::Command;

/// Has the process `command` starts get SIGKILL when this process dies, however it dies (Linux's parent-death
/// signal; nothing elsewhere). Only that process gets it, not what it starts in turn.
///
/// The signal fires when the *thread* that spawned the child exits, not the process: spawn from a thread that
/// lives as long as the process (a tokio runtime worker, the current-thread runtime's own thread), never from
/// `spawn_blocking` (a blocking-pool thread idles out after 10 s) nor under `block_in_place` (which retires the
/// worker's thread).
pub fn dies_with_this_process(command: &mut Command) {
    #[cfg(target_os = "linux")]
    {
        let parent = std::process::id();
        // SAFETY: the closure runs in the child between fork and exec and only calls prctl(2) and getppid(2),
        // which are async-signal-safe; its errors are raw OS codes read from errno (no allocation); it touches
        // no memory shared with the parent.
        #[allow(unsafe_code)]
        unsafe {
            command.pre_exec(move || {
                let signal = libc::c_ulong::try_from(libc::SIGKILL).unwrap_or(9);
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // This process may have died between fork and prctl: then nothing would ever signal the child.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = command;
}
