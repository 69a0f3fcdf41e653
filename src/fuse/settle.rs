//! Moving a small new file back into the heap after its last close, off
//! the request path.
//!
//! A new file made in a kernel memory file (`passthrough_create=`) moves
//! back into memfs's heap after the RELEASE of its last open when it ended
//! small (core `Fs::file_closed`), but only once no struct file of the
//! kernel holds the memory file any more: a mapping may outlive the open
//! (`MemFile::held_elsewhere`). The kernel lets go of a closed
//! passthrough open's file a moment after it sends the RELEASE (the
//! backing file is put when the closing task returns to user space), so
//! an ask at the RELEASE itself mostly finds it still held.
//!
//! So the RELEASE handler does none of it: it only checks, cheaply, that
//! the file is one that moves back (`Fs::moves_back`) and queues it here.
//! This thread asks after [`FIRST_WAIT`], then after waits four times
//! longer each, [`TRIES`] times in all (about 17 ms), and leaves the file
//! in its memory file after that (as a mapping that lasts keeps it). The
//! core re-checks everything under the file's lock at each try (no open
//! pins it, it is still fresh, not deleted), so an open that comes in
//! between simply wins.
//!
//! Until 2026-12-06 the handler asked once itself (two `fcntl`s for the
//! lease, mostly refused) and woke this thread through a channel for
//! every file; with a client creating files, that was a third of the
//! RELEASE's time and a wake-up of this thread per file. Now the queue is
//! a vector under a mutex; the thread is woken only when it sleeps with
//! nothing to do or waits longer than [`ROUND`] (for a file still held),
//! and while files wait it takes the new ones in rounds at most every
//! [`ROUND`]. If the thread ever ends before the mount (a panic), files
//! get one try at once on the RELEASE's thread instead. A file still
//! pinned when asked is asked again (two opens' RELEASEs can run at
//! once: the one that counted the last open gone may have queued it
//! before the other unpinned). Over io_uring the RELEASE is served on the closing
//! client's own CPU, so whatever it does the client waits for; this
//! thread runs wherever the scheduler finds room, typically the other CPU
//! (which the memfs-awake helper keeps awake, at SCHED_IDLE: this thread
//! preempts it). The thread ends with the mount.

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use crate::core::Fs;

/// The wait before a file's first try.
pub const FIRST_WAIT: Duration = Duration::from_micros(50);
/// Tries before a file is left in its memory file.
pub const TRIES: u32 = 5;
/// The shortest time between two rounds of tries while files wait: new
/// files queued meanwhile are taken in at the next round, without a
/// wake-up each.
pub const ROUND: Duration = Duration::from_micros(200);

/// What the RELEASE handlers and the thread share.
#[derive(Debug, Default)]
struct Queue {
    /// Files queued since the thread last looked.
    new: Vec<u64>,
    /// The thread sleeps with nothing to do: a new file must wake it.
    idle: bool,
    /// The mount is going: the thread ends.
    closed: bool,
    /// The thread ended (with the mount, or by a panic): files get one
    /// try at once instead, on the caller's thread, rather than a queue
    /// that nothing drains.
    dead: bool,
}

#[derive(Debug, Default)]
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Hands files whose last open was released to the settling thread.
#[derive(Debug)]
pub struct Settler {
    shared: Option<Arc<Shared>>,
}

impl Settler {
    /// Start the thread for `fs` (held weakly: the thread ends with it).
    pub fn start(fs: Weak<Fs>) -> std::io::Result<Settler> {
        let shared = Arc::new(Shared::default());
        let theirs = shared.clone();
        std::thread::Builder::new().name("memfs-settle".into()).spawn(move || {
            let _dead = Dead(&theirs);
            settle(&theirs, &fs);
        })?;
        Ok(Settler { shared: Some(shared) })
    }

    /// A settler without a thread: each file gets one try at once, on the
    /// caller's thread (unit tests, or no thread could be started).
    pub fn none() -> Settler {
        Settler { shared: None }
    }

    /// Regular file `ino`'s last open was released and it is one that
    /// moves back into the heap ([`Fs::moves_back`]): move it soon.
    pub fn later(&self, fs: &Fs, ino: u64) {
        let Some(shared) = &self.shared else {
            fs.file_closed(ino);
            return;
        };
        let mut q = shared.lock();
        if q.dead {
            drop(q);
            fs.file_closed(ino);
            return;
        }
        q.new.push(ino);
        let wake = std::mem::replace(&mut q.idle, false);
        drop(q);
        if wake {
            shared.wake.notify_one();
        }
    }
}

impl Drop for Settler {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.lock().closed = true;
            shared.wake.notify_one();
        }
    }
}

/// Marks the queue when the thread ends, however it ends.
struct Dead<'a>(&'a Shared);

impl Drop for Dead<'_> {
    fn drop(&mut self) {
        let mut q = self.0.lock();
        q.dead = true;
        q.new.clear();
    }
}

/// The thread: rounds of tries, no more often than [`ROUND`], while files
/// wait; asleep without a timer when none does.
fn settle(shared: &Shared, fs: &Weak<Fs>) {
    // (When to ask next, inode) -> tries left, soonest first.
    let mut due: BTreeMap<(Instant, u64), u32> = BTreeMap::new();
    let mut last_round: Option<Instant> = None;
    loop {
        let new = {
            let mut q = shared.lock();
            loop {
                if q.closed {
                    return;
                }
                if !q.new.is_empty() || !due.is_empty() {
                    break;
                }
                q.idle = true;
                q = shared.wake.wait(q).unwrap_or_else(|e| e.into_inner());
            }
            q.idle = false;
            std::mem::take(&mut q.new)
        };
        let now = Instant::now();
        for ino in new {
            due.insert((now + FIRST_WAIT, ino), TRIES);
        }
        // Wait until the first file is due, and at least ROUND after the
        // last round. A file released meanwhile joins the next round; it
        // wakes the thread only from a wait longer than ROUND (a file
        // still held, asked again after milliseconds), so that its own
        // first try is not put off that long.
        let first = due.first_key_value().map_or(now, |(&(at, _), _)| at);
        let at = last_round.map_or(first, |l| first.max(l + ROUND));
        if at > now {
            let q = shared.lock();
            if q.closed {
                return;
            }
            if q.new.is_empty() {
                let mut q = q;
                q.idle = at - now > ROUND;
                let (mut q, _) = shared.wake.wait_timeout(q, at - now).unwrap_or_else(|e| e.into_inner());
                q.idle = false;
            }
            continue; // new files in, and the time to wait worked out again
        }
        let Some(fs) = fs.upgrade() else { return };
        let now = Instant::now();
        last_round = Some(now);
        while let Some(entry) = due.first_entry().filter(|e| e.key().0 <= now) {
            let ((_, ino), left) = entry.remove_entry();
            let left = left - 1;
            if !fs.file_closed(ino) && left > 0 {
                due.insert((now + FIRST_WAIT * 4u32.pow(TRIES - left), ino), left);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until the settling thread sleeps with nothing to do.
    fn idle(s: &Settler) {
        let shared = s.shared.as_ref().unwrap();
        let t0 = Instant::now();
        while !shared.lock().idle {
            assert!(t0.elapsed() < Duration::from_secs(5), "the thread never went to sleep");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn files_queued_while_the_thread_sleeps_move_back_into_the_heap() {
        use crate::core::memfile::KernelStore;
        use crate::core::{Caller, FsConfig, ROOT_INO};
        let mut cfg = FsConfig::with_limits(0, 0);
        cfg.kernel_files = Some((KernelStore::memfd(), 4 * crate::core::types::PAGE_SIZE));
        let fs = Arc::new(Fs::new(cfg));
        fs.set_kernel_new_files(true);
        let s = Settler::start(Arc::downgrade(&fs)).unwrap();
        for (round, name) in [&b"a"[..], b"b", b"c"].iter().enumerate() {
            idle(&s); // each file wakes a sleeping thread
            let ino = fs.mknod(ROOT_INO, name, libc::S_IFREG | 0o644, 0, 0, &Caller::ROOT).unwrap().ino;
            assert!(fs.pin_new_kernel_file(ino, true));
            fs.unpin_kernel_file(ino, true);
            assert!(fs.in_kernel_file(ino) && fs.moves_back(ino));
            s.later(&fs, ino);
            let t0 = Instant::now();
            while fs.in_kernel_file(ino) {
                assert!(t0.elapsed() < Duration::from_secs(5), "file {round} stayed in its memory file");
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    #[test]
    fn the_thread_sleeps_without_work_and_ends_with_its_settler() {
        // A dead mount: the thread has nothing to try and must still end
        // when the settler goes, whether asleep or mid-round.
        let fs: Weak<Fs> = Weak::new();
        let s = Settler::start(fs).unwrap();
        let shared = s.shared.clone().unwrap();
        let t0 = Instant::now();
        while !shared.lock().idle {
            assert!(t0.elapsed() < Duration::from_secs(5), "the thread never went to sleep");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(s);
        while Arc::strong_count(&shared) > 1 {
            assert!(t0.elapsed() < Duration::from_secs(5), "the thread did not end with its settler");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
