//! What an internal error does to the mount (`errors=`, ext4's names).
//!
//! An internal error is a panic inside a request: a bug, never a client's
//! input. The [`Counted`](super::Counted) layer catches it, so the request
//! gets EIO instead of the mount ending; what state it left behind is
//! unknown (a rename may have removed a name and not yet inserted the new
//! one). This file decides what follows, per `errors=`:
//! - `continue`: it is logged and counted, and the mount serves on;
//! - `remount-ro` (the default): also, from then on every request that
//!   would change anything gets EROFS (so nothing already stored is lost
//!   or damaged further), and the daemon remounts the mount read-only for
//!   the kernel (a callback the daemon installs; the kernel refuses while
//!   a file is open for writing, so the daemon tries again until it is
//!   closed); `memfs stat` and `stats/io` say so;
//! - `panic`: it is logged and the daemon ends at once (the mount then
//!   answers ENOTCONN until unmounted).
//!
//! Writes that FUSE passthrough sends straight to a memory file never pass
//! through memfs, so an open passthrough writer can still write after the
//! switch; new write opens are refused.

use crate::ctl::stats::Stats;
use crate::options::ErrorsMode;
use crate::sync::{Arc, AtomicBool, OnceLock, Ordering};

/// Called once when the mount turns read-only (the daemon remounts it).
pub type OnReadOnly = Box<dyn Fn() + Send + Sync>;

pub struct Health {
    mode: ErrorsMode,
    stats: Arc<Stats>,
    read_only: AtomicBool,
    on_read_only: OnceLock<OnReadOnly>,
}

impl Health {
    pub fn new(mode: ErrorsMode, stats: Arc<Stats>) -> Health {
        Health { mode, stats, read_only: AtomicBool::new(false), on_read_only: OnceLock::new() }
    }

    /// What to run when the mount turns read-only (set once by the daemon).
    pub fn set_on_read_only(&self, f: OnReadOnly) {
        let _ = self.on_read_only.set(f);
    }

    /// Whether changes are refused (after an internal error, `remount-ro`).
    pub fn read_only(&self) -> bool {
        self.read_only.load(Ordering::Relaxed)
    }

    /// A request of operation `op` panicked with `what`.
    pub fn failed(&self, op: &str, what: &str) {
        self.stats.errors_total.fetch_add(1, Ordering::Relaxed);
        log::error!("memfs: INTERNAL ERROR in {op}: {what}; the request got EIO");
        match self.mode {
            ErrorsMode::Continue => {
                log::error!("memfs: errors=continue: serving on; the file system may be inconsistent")
            }
            ErrorsMode::RemountRo => {
                if !self.read_only.swap(true, Ordering::Relaxed) {
                    self.stats.read_only_after_error.store(1, Ordering::Relaxed);
                    log::error!("memfs: errors=remount-ro: every change is refused from now on (EROFS); read what you need and unmount");
                    if let Some(f) = self.on_read_only.get() {
                        f();
                    }
                }
            }
            ErrorsMode::Panic => {
                log::error!("memfs: errors=panic: ending the daemon");
                // At once, running nothing more (no core dump, no clean unmount):
                // the kernel sees the device closed and the mount answers ENOTCONN.
                // SAFETY: _exit ends the process; nothing after it runs.
                unsafe { libc::_exit(70) };
            }
        }
    }
}

/// The message of a caught panic.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::AtomicU64;

    #[test]
    fn remount_ro_refuses_changes_once_and_calls_back_once() {
        let stats = Arc::new(Stats::default());
        let h = Health::new(ErrorsMode::RemountRo, stats.clone());
        let calls = Arc::new(AtomicU64::new(0));
        let c = calls.clone();
        h.set_on_read_only(Box::new(move || {
            c.fetch_add(1, Ordering::Relaxed);
        }));
        assert!(!h.read_only());
        h.failed("rename", "boom");
        h.failed("write", "again");
        assert!(h.read_only());
        assert_eq!(calls.load(Ordering::Relaxed), 1);
        assert_eq!(stats.errors_total.load(Ordering::Relaxed), 2);
        assert_eq!(stats.read_only_after_error.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn continue_only_counts() {
        let stats = Arc::new(Stats::default());
        let h = Health::new(ErrorsMode::Continue, stats.clone());
        h.failed("rename", "boom");
        assert!(!h.read_only());
        assert_eq!(stats.errors_total.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn panic_messages_are_read_from_both_payload_kinds() {
        let a = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        let b = std::panic::catch_unwind(|| panic!("{}", 42)).unwrap_err();
        assert_eq!((panic_message(&*a), panic_message(&*b)), ("plain".to_string(), "42".to_string()));
    }
}
