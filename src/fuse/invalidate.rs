//! Dropping byte ranges from the kernel's page cache, off the request path.
//!
//! With the `no_data` tunable the core discards written bytes, but the kernel
//! keeps the pages it copied them through (memfs runs without OPEN, so page
//! cache is kept across opens) and would serve the written bytes back. After
//! such a write the adapter queues the range here; a background thread asks
//! the kernel to drop it (FUSE_NOTIFY_INVAL_INODE), so reads come to memfs
//! and return zeros. The kernel keeps the written pages locked until our
//! reply has been handled, so the invalidation cannot overtake the write.
//! Notifications are never sent from a request handler itself.

use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use fuser::{INodeNo, Notifier};

use crate::sync::{Arc, Mutex};

/// A range to drop: inode, offset, length.
type Range = (u64, i64, i64);

/// Queues page-cache invalidations for a background thread.
pub struct Invalidator {
    tx: Mutex<Sender<Range>>,
}

impl Invalidator {
    /// Start the thread. `notifier` is filled in once the session exists;
    /// ranges queued before that are dropped (nothing can be cached yet).
    pub fn start(notifier: Arc<OnceLock<Notifier>>) -> std::io::Result<Invalidator> {
        let (tx, rx) = channel::<Range>();
        std::thread::Builder::new().name("memfs-inval".into()).spawn(move || {
            for (ino, off, len) in rx {
                if let Some(n) = notifier.get() {
                    // ENOENT: the kernel no longer has the inode; nothing to drop.
                    let _ = n.inval_inode(INodeNo(ino), off, len);
                }
            }
        })?;
        Ok(Invalidator { tx: Mutex::new(tx) })
    }

    /// Ask the kernel to forget what it caches of `len` bytes at `off` of `ino`.
    pub fn drop_cached(&self, ino: u64, off: u64, len: u64) {
        let off = i64::try_from(off).unwrap_or(i64::MAX);
        let len = i64::try_from(len).unwrap_or(i64::MAX);
        let _ = self.tx.lock().send((ino, off, len));
    }
}
