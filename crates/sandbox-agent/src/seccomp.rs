//! The seccomp filters of sandboxed programs, declared as rules and compiled by `seccompiler`. Installed in
//! the child between fork and exec, after `no_new_privs`; compiled once, before any fork.
//!
//! Two filters, both checking the architecture first (any other audit arch kills the process):
//! - the allow-list: every native x86_64 call libc knows ([`NATIVE`]), except `clone3`; anything else
//!   fails with ENOSYS. That refuses every x32-ABI call (`nr | 0x40000000`), `clone3` (so libc falls back
//!   to `clone`, whose flags the deny-list can inspect) and calls newer than this table, which programs
//!   treat as "not in this kernel". The kernel's per-filter action cache makes a constant allow free.
//! - the deny-list: calls that open kernel surface a sandbox never needs fail with EPERM: new namespaces
//!   (any `CLONE_NEW*` flag on `clone`, `unshare`, `setns`), io_uring, BPF, perf, userfaultfd, keyrings,
//!   ptrace and cross-process memory, the mount family, modules and kexec, raw packet, vsock and netlink
//!   sockets other than `NETLINK_ROUTE` (which `ip` needs for `lo`), and terminal injection (TIOCSTI,
//!   TIOCLINUX).
//!
//! When two filters answer with errors, the kernel takes the most recently installed one's errno; no call
//! is refused by both, so each answers with its own.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io;
use std::sync::OnceLock;

/// Bumped whenever what the filters refuse changes; `enforced.seccomp.version` reports it.
/// 1: the hand-written deny-list of 44 calls. 2: allow-list + declared deny-list (this file).
pub const VERSION: u32 = 2;

/// The native x86_64 calls libc names (`libc::SYS_*` of its glibc x86_64 module, in number order),
/// without `clone3`. Generated from libc 0.2.191's table; a call libc does not name is ENOSYS.
#[rustfmt::skip]
const NATIVE: &[libc::c_long] = &[
    libc::SYS_read, libc::SYS_write, libc::SYS_open, libc::SYS_close, libc::SYS_stat, libc::SYS_fstat,
    libc::SYS_lstat, libc::SYS_poll, libc::SYS_lseek, libc::SYS_mmap, libc::SYS_mprotect,
    libc::SYS_munmap, libc::SYS_brk, libc::SYS_rt_sigaction, libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigreturn, libc::SYS_ioctl, libc::SYS_pread64, libc::SYS_pwrite64, libc::SYS_readv,
    libc::SYS_writev, libc::SYS_access, libc::SYS_pipe, libc::SYS_select, libc::SYS_sched_yield,
    libc::SYS_mremap, libc::SYS_msync, libc::SYS_mincore, libc::SYS_madvise, libc::SYS_shmget,
    libc::SYS_shmat, libc::SYS_shmctl, libc::SYS_dup, libc::SYS_dup2, libc::SYS_pause,
    libc::SYS_nanosleep, libc::SYS_getitimer, libc::SYS_alarm, libc::SYS_setitimer, libc::SYS_getpid,
    libc::SYS_sendfile, libc::SYS_socket, libc::SYS_connect, libc::SYS_accept, libc::SYS_sendto,
    libc::SYS_recvfrom, libc::SYS_sendmsg, libc::SYS_recvmsg, libc::SYS_shutdown, libc::SYS_bind,
    libc::SYS_listen, libc::SYS_getsockname, libc::SYS_getpeername, libc::SYS_socketpair,
    libc::SYS_setsockopt, libc::SYS_getsockopt, libc::SYS_clone, libc::SYS_fork, libc::SYS_vfork,
    libc::SYS_execve, libc::SYS_exit, libc::SYS_wait4, libc::SYS_kill, libc::SYS_uname,
    libc::SYS_semget, libc::SYS_semop, libc::SYS_semctl, libc::SYS_shmdt, libc::SYS_msgget,
    libc::SYS_msgsnd, libc::SYS_msgrcv, libc::SYS_msgctl, libc::SYS_fcntl, libc::SYS_flock,
    libc::SYS_fsync, libc::SYS_fdatasync, libc::SYS_truncate, libc::SYS_ftruncate, libc::SYS_getdents,
    libc::SYS_getcwd, libc::SYS_chdir, libc::SYS_fchdir, libc::SYS_rename, libc::SYS_mkdir,
    libc::SYS_rmdir, libc::SYS_creat, libc::SYS_link, libc::SYS_unlink, libc::SYS_symlink,
    libc::SYS_readlink, libc::SYS_chmod, libc::SYS_fchmod, libc::SYS_chown, libc::SYS_fchown,
    libc::SYS_lchown, libc::SYS_umask, libc::SYS_gettimeofday, libc::SYS_getrlimit,
    libc::SYS_getrusage, libc::SYS_sysinfo, libc::SYS_times, libc::SYS_ptrace, libc::SYS_getuid,
    libc::SYS_syslog, libc::SYS_getgid, libc::SYS_setuid, libc::SYS_setgid, libc::SYS_geteuid,
    libc::SYS_getegid, libc::SYS_setpgid, libc::SYS_getppid, libc::SYS_getpgrp, libc::SYS_setsid,
    libc::SYS_setreuid, libc::SYS_setregid, libc::SYS_getgroups, libc::SYS_setgroups,
    libc::SYS_setresuid, libc::SYS_getresuid, libc::SYS_setresgid, libc::SYS_getresgid,
    libc::SYS_getpgid, libc::SYS_setfsuid, libc::SYS_setfsgid, libc::SYS_getsid, libc::SYS_capget,
    libc::SYS_capset, libc::SYS_rt_sigpending, libc::SYS_rt_sigtimedwait, libc::SYS_rt_sigqueueinfo,
    libc::SYS_rt_sigsuspend, libc::SYS_sigaltstack, libc::SYS_utime, libc::SYS_mknod, libc::SYS_uselib,
    libc::SYS_personality, libc::SYS_ustat, libc::SYS_statfs, libc::SYS_fstatfs, libc::SYS_sysfs,
    libc::SYS_getpriority, libc::SYS_setpriority, libc::SYS_sched_setparam,
    libc::SYS_sched_getparam, libc::SYS_sched_setscheduler, libc::SYS_sched_getscheduler,
    libc::SYS_sched_get_priority_max, libc::SYS_sched_get_priority_min,
    libc::SYS_sched_rr_get_interval, libc::SYS_mlock, libc::SYS_munlock, libc::SYS_mlockall,
    libc::SYS_munlockall, libc::SYS_vhangup, libc::SYS_modify_ldt, libc::SYS_pivot_root,
    libc::SYS__sysctl, libc::SYS_prctl, libc::SYS_arch_prctl, libc::SYS_adjtimex, libc::SYS_setrlimit,
    libc::SYS_chroot, libc::SYS_sync, libc::SYS_acct, libc::SYS_settimeofday, libc::SYS_mount,
    libc::SYS_umount2, libc::SYS_swapon, libc::SYS_swapoff, libc::SYS_reboot, libc::SYS_sethostname,
    libc::SYS_setdomainname, libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_init_module,
    libc::SYS_delete_module, libc::SYS_quotactl, libc::SYS_nfsservctl, libc::SYS_getpmsg,
    libc::SYS_putpmsg, libc::SYS_afs_syscall, libc::SYS_tuxcall, libc::SYS_security, libc::SYS_gettid,
    libc::SYS_readahead, libc::SYS_setxattr, libc::SYS_lsetxattr, libc::SYS_fsetxattr,
    libc::SYS_getxattr, libc::SYS_lgetxattr, libc::SYS_fgetxattr, libc::SYS_listxattr,
    libc::SYS_llistxattr, libc::SYS_flistxattr, libc::SYS_removexattr, libc::SYS_lremovexattr,
    libc::SYS_fremovexattr, libc::SYS_tkill, libc::SYS_time, libc::SYS_futex,
    libc::SYS_sched_setaffinity, libc::SYS_sched_getaffinity, libc::SYS_set_thread_area,
    libc::SYS_io_setup, libc::SYS_io_destroy, libc::SYS_io_getevents, libc::SYS_io_submit,
    libc::SYS_io_cancel, libc::SYS_get_thread_area, libc::SYS_lookup_dcookie, libc::SYS_epoll_create,
    libc::SYS_epoll_ctl_old, libc::SYS_epoll_wait_old, libc::SYS_remap_file_pages,
    libc::SYS_getdents64, libc::SYS_set_tid_address, libc::SYS_restart_syscall, libc::SYS_semtimedop,
    libc::SYS_fadvise64, libc::SYS_timer_create, libc::SYS_timer_settime, libc::SYS_timer_gettime,
    libc::SYS_timer_getoverrun, libc::SYS_timer_delete, libc::SYS_clock_settime,
    libc::SYS_clock_gettime, libc::SYS_clock_getres, libc::SYS_clock_nanosleep, libc::SYS_exit_group,
    libc::SYS_epoll_wait, libc::SYS_epoll_ctl, libc::SYS_tgkill, libc::SYS_utimes, libc::SYS_vserver,
    libc::SYS_mbind, libc::SYS_set_mempolicy, libc::SYS_get_mempolicy, libc::SYS_mq_open,
    libc::SYS_mq_unlink, libc::SYS_mq_timedsend, libc::SYS_mq_timedreceive, libc::SYS_mq_notify,
    libc::SYS_mq_getsetattr, libc::SYS_kexec_load, libc::SYS_waitid, libc::SYS_add_key,
    libc::SYS_request_key, libc::SYS_keyctl, libc::SYS_ioprio_set, libc::SYS_ioprio_get,
    libc::SYS_inotify_init, libc::SYS_inotify_add_watch, libc::SYS_inotify_rm_watch,
    libc::SYS_migrate_pages, libc::SYS_openat, libc::SYS_mkdirat, libc::SYS_mknodat,
    libc::SYS_fchownat, libc::SYS_futimesat, libc::SYS_newfstatat, libc::SYS_unlinkat,
    libc::SYS_renameat, libc::SYS_linkat, libc::SYS_symlinkat, libc::SYS_readlinkat,
    libc::SYS_fchmodat, libc::SYS_faccessat, libc::SYS_pselect6, libc::SYS_ppoll, libc::SYS_unshare,
    libc::SYS_set_robust_list, libc::SYS_get_robust_list, libc::SYS_splice, libc::SYS_tee,
    libc::SYS_sync_file_range, libc::SYS_vmsplice, libc::SYS_move_pages, libc::SYS_utimensat,
    libc::SYS_epoll_pwait, libc::SYS_signalfd, libc::SYS_timerfd_create, libc::SYS_eventfd,
    libc::SYS_fallocate, libc::SYS_timerfd_settime, libc::SYS_timerfd_gettime, libc::SYS_accept4,
    libc::SYS_signalfd4, libc::SYS_eventfd2, libc::SYS_epoll_create1, libc::SYS_dup3,
    libc::SYS_pipe2, libc::SYS_inotify_init1, libc::SYS_preadv, libc::SYS_pwritev,
    libc::SYS_rt_tgsigqueueinfo, libc::SYS_perf_event_open, libc::SYS_recvmmsg,
    libc::SYS_fanotify_init, libc::SYS_fanotify_mark, libc::SYS_prlimit64,
    libc::SYS_name_to_handle_at, libc::SYS_open_by_handle_at, libc::SYS_clock_adjtime,
    libc::SYS_syncfs, libc::SYS_sendmmsg, libc::SYS_setns, libc::SYS_getcpu,
    libc::SYS_process_vm_readv, libc::SYS_process_vm_writev, libc::SYS_kcmp, libc::SYS_finit_module,
    libc::SYS_sched_setattr, libc::SYS_sched_getattr, libc::SYS_renameat2, libc::SYS_seccomp,
    libc::SYS_getrandom, libc::SYS_memfd_create, libc::SYS_kexec_file_load, libc::SYS_bpf,
    libc::SYS_execveat, libc::SYS_userfaultfd, libc::SYS_membarrier, libc::SYS_mlock2,
    libc::SYS_copy_file_range, libc::SYS_preadv2, libc::SYS_pwritev2, libc::SYS_pkey_mprotect,
    libc::SYS_pkey_alloc, libc::SYS_pkey_free, libc::SYS_statx, libc::SYS_rseq,
    libc::SYS_pidfd_send_signal, libc::SYS_io_uring_setup, libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register, libc::SYS_open_tree, libc::SYS_move_mount, libc::SYS_fsopen,
    libc::SYS_fsconfig, libc::SYS_fsmount, libc::SYS_fspick, libc::SYS_pidfd_open,
    libc::SYS_close_range, libc::SYS_openat2, libc::SYS_pidfd_getfd, libc::SYS_faccessat2,
    libc::SYS_process_madvise, libc::SYS_epoll_pwait2, libc::SYS_mount_setattr,
    libc::SYS_quotactl_fd, libc::SYS_landlock_create_ruleset, libc::SYS_landlock_add_rule,
    libc::SYS_landlock_restrict_self, libc::SYS_memfd_secret, libc::SYS_process_mrelease,
    libc::SYS_futex_waitv, libc::SYS_set_mempolicy_home_node, libc::SYS_fchmodat2, libc::SYS_mseal,
];

/// `(name, number)` of a `libc::SYS_*` constant.
macro_rules! calls {
    ($($name:ident),* $(,)?) => {
        &[$((stringify!($name), libc::$name)),*]
    };
}

/// Refused with EPERM whatever their arguments.
#[rustfmt::skip]
const DENIED: &[(&str, libc::c_long)] = calls![
    // New namespaces and entering others.
    SYS_unshare, SYS_setns,
    // Kernel surface a sandbox never needs.
    SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register, SYS_bpf, SYS_perf_event_open,
    SYS_userfaultfd, SYS_keyctl, SYS_add_key, SYS_request_key,
    // Other processes' memory.
    SYS_ptrace, SYS_process_vm_readv, SYS_process_vm_writev,
    // The mount family.
    SYS_mount, SYS_umount2, SYS_pivot_root, SYS_chroot, SYS_open_tree, SYS_move_mount, SYS_fsopen,
    SYS_fsconfig, SYS_fsmount, SYS_fspick, SYS_mount_setattr,
    // Modules, kexec.
    SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_kexec_load, SYS_kexec_file_load,
    // File handles bypass path checks; the rest is host administration.
    SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_swapon, SYS_swapoff, SYS_reboot, SYS_acct,
    SYS_quotactl, SYS_quotactl_fd, SYS_settimeofday, SYS_clock_settime, SYS_clock_adjtime,
    SYS_adjtimex, SYS_syslog, SYS_iopl, SYS_ioperm, SYS_lookup_dcookie, SYS_vhangup,
];

/// Namespace flags refused on `clone` (each alone is enough).
const CLONE_NEW: &[(&str, u64)] = &[
    ("CLONE_NEWUSER", libc::CLONE_NEWUSER as u64),
    ("CLONE_NEWNS", libc::CLONE_NEWNS as u64),
    ("CLONE_NEWPID", libc::CLONE_NEWPID as u64),
    ("CLONE_NEWNET", libc::CLONE_NEWNET as u64),
    ("CLONE_NEWIPC", libc::CLONE_NEWIPC as u64),
    ("CLONE_NEWUTS", libc::CLONE_NEWUTS as u64),
    ("CLONE_NEWCGROUP", libc::CLONE_NEWCGROUP as u64),
    // libc 0.2 does not name CLONE_NEWTIME; <linux/sched.h> does.
    ("CLONE_NEWTIME", 0x80),
];

/// Socket families refused on `socket` and `socketpair`.
const FAMILIES: &[(&str, u64)] = &[
    ("AF_VSOCK", libc::AF_VSOCK as u64),
    ("AF_PACKET", libc::AF_PACKET as u64),
];

/// Terminal ioctls that push input into a terminal.
// The request type is c_ulong with glibc and c_int with musl: the cast is needed on one of them.
#[allow(clippy::unnecessary_cast)]
const IOCTLS: &[(&str, u64)] = &[
    ("TIOCSTI", libc::TIOCSTI as u64),
    ("TIOCLINUX", libc::TIOCLINUX as u64),
];

/// The two compiled filters.
#[derive(Debug)]
pub struct Filters {
    allow: BpfProgram,
    deny: BpfProgram,
}

/// Why the filters could not be built (a bug in the rules above: the unit tests build them).
#[derive(Debug, thiserror::Error)]
#[error("the seccomp filter does not compile: {0}")]
pub struct BuildError(String);

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, BuildError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| BuildError(e.to_string()))
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, BuildError> {
    SeccompRule::new(conds).map_err(|e| BuildError(e.to_string()))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    mismatch: SeccompAction,
    on_match: SeccompAction,
) -> Result<BpfProgram, BuildError> {
    SeccompFilter::new(rules, mismatch, on_match, TargetArch::x86_64)
        .and_then(BpfProgram::try_from)
        .map_err(|e| BuildError(e.to_string()))
}

/// Compiles both filters.
pub fn build() -> Result<Filters, BuildError> {
    let eperm = SeccompAction::Errno(libc::EPERM as u32);
    let enosys = SeccompAction::Errno(libc::ENOSYS as u32);
    let allowed = NATIVE.iter().map(|nr| (*nr, Vec::new())).collect();
    let allow = compile(allowed, enosys, SeccompAction::Allow)?;

    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|(_, nr)| (*nr, Vec::new())).collect();
    let clone = CLONE_NEW
        .iter()
        .map(|(_, flag)| rule(vec![cond(0, SeccompCmpOp::MaskedEq(*flag), *flag)?]))
        .collect::<Result<Vec<_>, _>>()?;
    denied.insert(libc::SYS_clone, clone);
    let mut sockets = FAMILIES
        .iter()
        .map(|(_, family)| rule(vec![cond(0, SeccompCmpOp::Eq, *family)?]))
        .collect::<Result<Vec<_>, _>>()?;
    sockets.push(rule(vec![
        cond(0, SeccompCmpOp::Eq, libc::AF_NETLINK as u64)?,
        cond(2, SeccompCmpOp::Ne, libc::NETLINK_ROUTE as u64)?,
    ])?);
    denied.insert(libc::SYS_socket, sockets.clone());
    denied.insert(libc::SYS_socketpair, sockets);
    let ioctls = IOCTLS
        .iter()
        .map(|(_, req)| rule(vec![cond(1, SeccompCmpOp::Eq, *req)?]))
        .collect::<Result<Vec<_>, _>>()?;
    denied.insert(libc::SYS_ioctl, ioctls);
    let deny = compile(denied, SeccompAction::Allow, eperm)?;
    Ok(Filters { allow, deny })
}

/// The filters, compiled once by the first caller (before any fork: never in a child).
pub fn program() -> Option<&'static Filters> {
    static FILTERS: OnceLock<Option<Filters>> = OnceLock::new();
    FILTERS.get_or_init(|| build().ok()).as_ref()
}

/// Between fork and exec: installs both filters on the calling thread (with `no_new_privs`). No
/// allocation: the programs were compiled before the fork. `None` (they did not compile) fails the spawn.
pub fn install(filters: &Option<&'static Filters>) -> io::Result<()> {
    let Some(f) = filters else {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    };
    for program in [&f.deny, &f.allow] {
        match seccompiler::apply_filter(program) {
            Ok(()) => {}
            Err(seccompiler::Error::Prctl(e) | seccompiler::Error::Seccomp(e)) => return Err(e),
            Err(_) => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }
    Ok(())
}

/// What the filters refuse, for `enforced.seccomp`.
pub fn describe() -> Value {
    if program().is_none() {
        return json!({"status": "not enforced", "reason": build().err().map(|e| e.to_string())});
    }
    let names = |list: &[(&str, u64)]| list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let eperm: Vec<&str> = DENIED
        .iter()
        .map(|(n, _)| n.trim_start_matches("SYS_"))
        .collect();
    json!({
        "version": VERSION,
        "arch": "x86_64 (any other architecture's calls kill the process)",
        "enosys": format!(
            "clone3, every x32 call and any call outside libc's {} x86_64 calls",
            NATIVE.len()
        ),
        "eperm": eperm,
        "eperm_when": {
            "clone": names(CLONE_NEW),
            "socket, socketpair": format!("{}, AF_NETLINK except NETLINK_ROUTE", names(FAMILIES)),
            "ioctl": names(IOCTLS),
        },
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn the_filters_compile_within_the_kernels_limit() {
        let f = build().unwrap();
        assert!(f.allow.len() < 4096 && f.deny.len() < 4096);
        assert!(program().is_some());
    }

    #[test]
    fn the_table_is_libcs_native_calls_without_clone3() {
        let mut sorted = NATIVE.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), NATIVE.len(), "no call twice");
        assert_eq!(sorted, NATIVE, "in number order");
        assert!(!NATIVE.contains(&libc::SYS_clone3));
        assert_eq!(NATIVE[0], 0);
        assert!(NATIVE.iter().all(|nr| *nr < 0x4000_0000), "no x32 numbers");
        for nr in [
            libc::SYS_clone,
            libc::SYS_execve,
            libc::SYS_openat2,
            libc::SYS_mseal,
        ] {
            assert!(NATIVE.contains(&nr), "{nr}");
        }
    }

    /// Runs `f` in a forked child that installs the filters first; returns what `f` returned (an errno or
    /// 0), passed back through the exit status.
    #[allow(unsafe_code)]
    fn in_filtered_child(f: impl FnOnce() -> i32) -> i32 {
        let filters = program();
        // SAFETY: the child only installs the prebuilt filters, makes raw system calls and exits with
        // _exit; it takes no lock and allocates nothing.
        match unsafe { nix::unistd::fork() }.unwrap() {
            nix::unistd::ForkResult::Child => {
                let code = match install(&filters) {
                    Ok(()) => f(),
                    Err(_) => 255,
                };
                // SAFETY: ends the forked child without running the parent's atexit handlers.
                unsafe { libc::_exit(code) }
            }
            nix::unistd::ForkResult::Parent { child } => {
                match nix::sys::wait::waitpid(child, None).unwrap() {
                    nix::sys::wait::WaitStatus::Exited(_, code) => code,
                    other => panic!("the child ended with {other:?}"),
                }
            }
        }
    }

    /// A raw call's errno (0 when it succeeded).
    #[allow(unsafe_code)]
    fn errno_of(nr: libc::c_long, args: [libc::c_long; 4]) -> i32 {
        // SAFETY: the calls below pass null or invalid pointers only where the kernel checks them and
        // fails (EFAULT/EBADF) rather than writing.
        let r = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3]) };
        if r < 0 {
            io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        } else {
            0
        }
    }

    #[test]
    fn refused_calls_answer_their_errno_and_ordinary_ones_pass() {
        let cases: &[(&str, libc::c_long, [libc::c_long; 4], i32)] = &[
            ("getpid", libc::SYS_getpid, [0; 4], 0),
            ("clone3", libc::SYS_clone3, [0; 4], libc::ENOSYS),
            (
                "x32 getpid",
                0x4000_0000 | libc::SYS_getpid,
                [0; 4],
                libc::ENOSYS,
            ),
            ("unknown 1000", 1000, [0; 4], libc::ENOSYS),
            ("unshare", libc::SYS_unshare, [0; 4], libc::EPERM),
            (
                "clone NEWUSER",
                libc::SYS_clone,
                [
                    (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_long,
                    0,
                    0,
                    0,
                ],
                libc::EPERM,
            ),
            (
                "clone NEWTIME",
                libc::SYS_clone,
                [0x80 | libc::SIGCHLD as libc::c_long, 0, 0, 0],
                libc::EPERM,
            ),
            (
                "io_uring_setup",
                libc::SYS_io_uring_setup,
                [1, 0, 0, 0],
                libc::EPERM,
            ),
            ("bpf", libc::SYS_bpf, [0; 4], libc::EPERM),
            (
                "socket AF_VSOCK",
                libc::SYS_socket,
                [libc::AF_VSOCK as _, libc::SOCK_STREAM as _, 0, 0],
                libc::EPERM,
            ),
            (
                "socket AF_PACKET",
                libc::SYS_socket,
                [libc::AF_PACKET as _, libc::SOCK_RAW as _, 0, 0],
                libc::EPERM,
            ),
            (
                "socket NETLINK_NETFILTER",
                libc::SYS_socket,
                [
                    libc::AF_NETLINK as _,
                    libc::SOCK_RAW as _,
                    libc::NETLINK_NETFILTER as _,
                    0,
                ],
                libc::EPERM,
            ),
            (
                "ioctl TIOCSTI",
                libc::SYS_ioctl,
                [-1, libc::TIOCSTI as _, 0, 0],
                libc::EPERM,
            ),
            (
                "ioctl TIOCLINUX",
                libc::SYS_ioctl,
                [-1, libc::TIOCLINUX as _, 0, 0],
                libc::EPERM,
            ),
            (
                "ioctl FIONREAD on a bad fd",
                libc::SYS_ioctl,
                [-1, libc::FIONREAD as _, 0, 0],
                libc::EBADF,
            ),
            ("mount", libc::SYS_mount, [0; 4], libc::EPERM),
        ];
        for (what, nr, args, want) in cases {
            let got = in_filtered_child(|| errno_of(*nr, *args));
            assert_eq!(got, *want, "{what}");
        }
        // NETLINK_ROUTE passes the filter (the socket opens, or fails for a reason of the kernel's own).
        let route = in_filtered_child(|| {
            errno_of(
                libc::SYS_socket,
                [
                    libc::AF_NETLINK as _,
                    libc::SOCK_RAW as _,
                    libc::NETLINK_ROUTE as _,
                    0,
                ],
            )
        });
        assert_ne!(route, libc::EPERM);
    }

    #[test]
    fn the_report_names_version_and_refusals() {
        let d = describe();
        assert_eq!(d["version"], VERSION);
        assert!(d["eperm"].as_array().unwrap().iter().any(|v| v == "setns"));
        assert!(d["enosys"].as_str().unwrap().contains("x32"));
        assert!(
            d["eperm_when"]["ioctl"]
                .as_str()
                .unwrap()
                .contains("TIOCSTI")
        );
    }
}
