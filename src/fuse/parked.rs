//! Requests that ran out of space while deleted files' space was on its way back.
//!
//! When a file is deleted the kernel sends FORGET for its inode only after
//! the unlink has been answered, and may deliver it after requests that
//! follow (it interleaves its FORGET queue with normal requests). A create
//! or write that follows the delete on a full mount would then get ENOSPC
//! although tmpfs, which frees before unlink returns, would succeed. So when
//! an operation fails with ENOSPC while the core has unlinked inodes the
//! kernel still references (`Fs::orphans`), the adapter parks it instead of
//! replying: the event loop goes on, reads the FORGETs, and after each
//! FORGET every parked request is tried again. One that still fails after
//! [`GRACE`] (the deleted file is really still open, or nothing was freed)
//! gets ENOSPC as before. Parked requests are answered out of order, which
//! FUSE allows; nothing here holds a lock while replying.

use std::time::{Duration, Instant};

use crate::sync::{Arc, AtomicBool, Condvar, Mutex, Ordering};

/// How long a request may wait for space to come back.
pub const GRACE: Duration = Duration::from_millis(20);

/// Tries a parked request again; `last` means reply whatever happens.
/// Returns true once it has replied.
pub type Retry = Box<dyn FnMut(bool) -> bool + Send>;

/// The parked requests and the timer that expires them.
pub struct Parked {
    queue: Mutex<Vec<(Instant, Retry)>>,
    /// Cheap check for the FORGET path: anything parked at all?
    any: AtomicBool,
    /// Wakes the expiry thread when the first request is parked, so an
    /// idle mount costs no wakeups.
    parked_cv: Condvar,
}

impl Parked {
    /// Start the expiry thread.
    pub fn start() -> std::io::Result<Arc<Parked>> {
        let parked =
            Arc::new(Parked { queue: Mutex::new(Vec::new()), any: AtomicBool::new(false), parked_cv: Condvar::new() });
        let timer = parked.clone();
        std::thread::Builder::new().name("memfs-parked".into()).spawn(move || loop {
            {
                let mut q = timer.queue.lock();
                while q.is_empty() {
                    timer.parked_cv.wait(&mut q);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
            timer.run(|since| since.elapsed() >= GRACE);
        })?;
        Ok(parked)
    }

    pub fn park(&self, retry: Retry) {
        self.queue.lock().push((Instant::now(), retry));
        self.any.store(true, Ordering::Release);
        self.parked_cv.notify_one();
    }

    /// After a FORGET: try every parked request again.
    pub fn retry(&self) {
        if self.any.load(Ordering::Acquire) {
            self.run(|_| false);
        }
    }

    /// Run the parked requests (outside the lock); `last(since)` says which
    /// must reply now. Those that did not reply go back in the queue.
    fn run(&self, last: impl Fn(Instant) -> bool) {
        let batch = std::mem::take(&mut *self.queue.lock());
        let mut kept = Vec::new();
        for (since, mut retry) in batch {
            if !retry(last(since)) {
                kept.push((since, retry));
            }
        }
        let mut q = self.queue.lock();
        q.extend(kept);
        self.any.store(!q.is_empty(), Ordering::Release);
    }
}
