//! Dropping byte ranges from the kernel's page cache, off the request path.
//!
//! With the `no_data` tunable the core discards written bytes, but the kernel
//! keeps the pages it copied them through (memfs runs without OPEN, so page
//! cache is kept across opens) and would serve the written bytes back. After
//! such a write the adapter queues the range here; a background thread asks
//! the kernel to drop it (FUSE_NOTIFY_INVAL_INODE), so reads come to memfs
//! and return zeros. The kernel keeps the written pages locked until our
//! reply has been handled, so the invalidation cannot overtake the write.
//! Page-cache notifications are never sent from a request handler itself.
//!
//! Also: dropping an inode's cached attributes when memfs changed one the
//! kernel does not know about (ctime after chattr). That one is sent from
//! the handler, before its reply, so a stat right after sees the change.

use std::sync::mpsc::{channel, Sender};
use std::sync::OnceLock;

use fuser::{INodeNo, Notifier};

use crate::sync::{Arc, Mutex};

/// A range to drop: inode, offset, length.
type Range = (u64, i64, i64);

/// Queues page-cache invalidations for a background thread.
pub struct Invalidator {
    tx: Mutex<Sender<Range>>,
    notifier: Arc<OnceLock<Notifier>>,
}

impl Invalidator {
    /// Start the thread. `notifier` is filled in once the session exists;
    /// ranges queued before that are dropped (nothing can be cached yet).
    pub fn start(notifier: Arc<OnceLock<Notifier>>) -> std::io::Result<Invalidator> {
        let (tx, rx) = channel::<Range>();
        let for_thread = notifier.clone();
        std::thread::Builder::new().name("memfs-inval".into()).spawn(move || {
            let notifier = for_thread;
            for (ino, off, len) in rx {
                if let Some(n) = notifier.get() {
                    // ENOENT: the kernel no longer has the inode; nothing to drop.
                    let _ = n.inval_inode(INodeNo(ino), off, len);
                }
            }
        })?;
        Ok(Invalidator { tx: Mutex::new(tx), notifier })
    }

    /// Make the kernel ask for `ino`'s attributes again, now. Safe inside a
    /// handler: an attributes-only FUSE_NOTIFY_INVAL_INODE (negative offset)
    /// takes no inode lock and waits for no request (fs/fuse/inode.c,
    /// fuse_reverse_inval_inode), so it cannot deadlock with the request
    /// being served.
    pub fn drop_attrs(&self, ino: u64) {
        if let Some(n) = self.notifier.get() {
            let _ = n.inval_inode(INodeNo(ino), -1, 0);
        }
    }

    /// What [`Invalidator::drop_attrs`] needs, for a part of the adapter
    /// that does not hold the invalidator (the passthrough table).
    pub fn attr_dropper(&self) -> AttrDropper {
        AttrDropper(self.notifier.clone())
    }

    /// Ask the kernel to forget what it caches of `len` bytes at `off` of `ino`.
    pub fn drop_cached(&self, ino: u64, off: u64, len: u64) {
        let off = i64::try_from(off).unwrap_or(i64::MAX);
        let len = i64::try_from(len).unwrap_or(i64::MAX);
        let _ = self.tx.lock().send((ino, off, len));
    }
}

/// Drops an inode's cached attributes, as [`Invalidator::drop_attrs`] does.
pub struct AttrDropper(Arc<OnceLock<Notifier>>);

impl AttrDropper {
    pub fn drop_attrs(&self, ino: u64) {
        if let Some(n) = self.0.get() {
            let _ = n.inval_inode(INodeNo(ino), -1, 0);
        }
    }
}
