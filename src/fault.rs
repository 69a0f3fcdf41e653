//! Fault injection for tests: with `MEMFS_FAULT=NAME` in the daemon's
//! environment, the point of that name panics, so that tests can check
//! what a broken invariant does to the mount (`errors=`,
//! tests/daemon/test_errors.py). Unset, a point costs one load.
//!
//! Points: `rename` (in the core's rename, after the old name is removed
//! and before the new one is inserted: the worst moment to stop).

use crate::sync::OnceLock;

static FAULT: OnceLock<Option<String>> = OnceLock::new();

/// Panic here if `MEMFS_FAULT` names this point.
pub fn point(name: &str) {
    let armed = FAULT.get_or_init(|| std::env::var("MEMFS_FAULT").ok().filter(|v| !v.is_empty()));
    if armed.as_deref() == Some(name) {
        panic!("fault injected at {name} (MEMFS_FAULT)");
    }
}
