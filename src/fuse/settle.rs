//! Moving a small new file back into the heap after its last close, off
//! the request path.
//!
//! A new file made in a kernel memory file (`passthrough_create=`) moves
//! back into memfs's heap at the RELEASE of its last open when it ended
//! small (core `Fs::file_closed`), but only once no struct file of the
//! kernel holds the memory file any more: a mapping may outlive the open
//! (`MemFile::held_elsewhere`). The kernel lets go of a closed
//! passthrough open's file a moment after it sends the RELEASE (the
//! backing file is put when the closing task returns to user space), so
//! the first ask often finds it still held. The RELEASE handler used to
//! ask again up to three times, sleeping 25-50 µs in between: on the one
//! /dev/fuse worker, and over io_uring on the very CPU the closing task
//! needed in order to let go, every request behind that RELEASE waited
//! (a stat after a first write to an empty file took 74 µs over io_uring,
//! against 34 µs with `passthrough_create=off`).
//!
//! Now the handler asks once; a file still held is handed to this thread,
//! which asks again after [`FIRST_WAIT`], then after waits four times
//! longer each, [`TRIES`] times in all (about 17 ms), and leaves the file
//! in its memory file after that (as a mapping that lasts keeps it). The
//! core re-checks everything under the file's lock at each try (no open
//! pins it, it is still fresh, not deleted), so an open that comes in
//! between simply wins. The thread sleeps on its channel while nothing
//! waits, and ends with the mount.

use std::collections::BTreeMap;
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::Weak;
use std::time::{Duration, Instant};

use crate::core::Fs;

/// The wait before the thread's first try.
pub const FIRST_WAIT: Duration = Duration::from_micros(50);
/// Tries by the thread before a file is left in its memory file.
pub const TRIES: u32 = 5;

/// Hands files still held at their last close to the settling thread.
#[derive(Debug)]
pub struct Settler {
    tx: Option<Sender<u64>>,
}

impl Settler {
    /// Start the thread for `fs` (held weakly: the thread ends with it).
    pub fn start(fs: Weak<Fs>) -> std::io::Result<Settler> {
        let (tx, rx) = channel::<u64>();
        std::thread::Builder::new().name("memfs-settle".into()).spawn(move || {
            // (When to ask next, inode) -> tries left, soonest first. Due
            // files are asked about after every message too: a stream of
            // closes (two creating clients) kept the wait from ever timing
            // out, and every file waited in its memory file until a pause.
            let mut due: BTreeMap<(Instant, u64), u32> = BTreeMap::new();
            loop {
                let got = match due.first_key_value() {
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some((&(next, _), _)) => rx.recv_timeout(next.saturating_duration_since(Instant::now())),
                };
                match got {
                    Ok(ino) => {
                        due.insert((Instant::now() + FIRST_WAIT, ino), TRIES);
                    }
                    Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => {}
                }
                let now = Instant::now();
                if due.first_key_value().is_none_or(|(&(at, _), _)| at > now) {
                    continue;
                }
                let Some(fs) = fs.upgrade() else { return };
                while let Some(entry) = due.first_entry().filter(|e| e.key().0 <= now) {
                    let ((_, ino), left) = entry.remove_entry();
                    let left = left - 1;
                    if !fs.file_closed(ino) && left > 0 {
                        due.insert((now + FIRST_WAIT * 4u32.pow(TRIES - left), ino), left);
                    }
                }
            }
        })?;
        Ok(Settler { tx: Some(tx) })
    }

    /// A settler that drops what it is given (no thread: unit tests).
    pub fn none() -> Settler {
        Settler { tx: None }
    }

    /// Regular file `ino`'s last open was released while the kernel still
    /// held its memory file: ask again later.
    pub fn later(&self, ino: u64) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(ino);
        }
    }
}
