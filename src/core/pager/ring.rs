//! Many reads or writes of the backing store at once, through an io_uring
//! of the calling thread's own.
//!
//! Owns nothing but the per-thread rings. A page-in of a read that spans
//! pages scattered over the store (a 128 KiB readahead of a file whose
//! pages left RAM in another order) was one O_DIRECT read after another:
//! 32 waits on the disk where one would do. Here every I/O of a batch is
//! submitted together and the caller waits for them all: the batch costs
//! about the slowest I/O, not their sum.
//!
//! Each I/O owns its buffer ([`Io::bufs`], a [`StableBuf`]: its bytes do
//! not move with it) so that nothing the kernel may still write to can be
//! dropped: if a ring fails with I/O in flight (it should not), the
//! buffers of the unfinished I/O are leaked and replaced by fresh ones,
//! those I/O fail, and the thread's ring is not used again; the caller
//! then does them one by one, each page from or into a buffer of its own,
//! as it would without a ring. Where io_uring is unavailable
//! (`kernel.io_uring_disabled`, a seccomp filter), [`submit`] says so and
//! the caller does the same.

use std::cell::RefCell;
use std::io;
use std::os::unix::io::RawFd;

use io_uring::{opcode, types, IoUring};

/// Entries of a thread's ring: a batch larger than this goes in rounds.
const ENTRIES: u32 = 64;

/// A buffer the kernel may read or write while its owner is moved.
///
/// # Safety
/// The bytes `bytes()` gives must not move when `Self` is moved (they are
/// on the heap), and must stay valid until `Self` is dropped.
pub unsafe trait StableBuf {
    fn bytes(&mut self) -> &mut [u8];
    /// A new zeroed buffer of the same length, in place of one leaked
    /// (the kernel may still be writing into it).
    fn replacement(&self) -> Self;
}

// SAFETY: a Vec's bytes are on the heap and do not move with the Vec.
unsafe impl StableBuf for Vec<u8> {
    fn bytes(&mut self) -> &mut [u8] {
        self
    }
    fn replacement(&self) -> Vec<u8> {
        vec![0; self.len()]
    }
}

/// One read or write at byte offset `off` of the whole of `bufs`, and its
/// result once done.
pub struct Io<B> {
    pub off: u64,
    /// Read into, or written from; owned, so that it cannot be dropped
    /// while the kernel may still use it.
    pub bufs: B,
    pub result: io::Result<()>,
}

/// The thread's ring: not tried yet, working, or not to be used.
enum Ring {
    Untried,
    Up(Box<IoUring>),
    Down,
}

thread_local! {
    static RING: RefCell<Ring> = const { RefCell::new(Ring::Untried) };
}

/// Do every I/O of `ios` on `fd` (reads, or writes if `write`), all at once,
/// each result in its `result`. False when this thread has no ring: nothing
/// was done.
pub fn submit<B: StableBuf>(fd: RawFd, ios: &mut [Io<B>], write: bool) -> bool {
    RING.with(|cell| {
        let mut state = cell.borrow_mut();
        if let Ring::Untried = *state {
            *state = IoUring::new(ENTRIES).map_or(Ring::Down, |r| Ring::Up(Box::new(r)));
        }
        let Ring::Up(ring) = &mut *state else { return false };
        let mut start = 0;
        while start < ios.len() {
            let end = (start + ENTRIES as usize).min(ios.len());
            if !round(ring, fd, &mut ios[start..end], write) {
                *state = Ring::Down;
                // The rounds after it were not tried: they fail, and the
                // caller does them one by one, as failures.
                for io in &mut ios[end..] {
                    io.result = Err(io::Error::other("not done: the ring failed"));
                }
                return true;
            }
            start = end;
        }
        true
    })
}

/// One round of at most [`ENTRIES`] I/O. False if the ring failed; every
/// I/O of the round then has a result, and the buffers of those the kernel
/// may still touch are leaked.
fn round<B: StableBuf>(ring: &mut IoUring, fd: RawFd, ios: &mut [Io<B>], write: bool) -> bool {
    let mut done = vec![false; ios.len()];
    let mut pushed = 0;
    {
        let mut sq = ring.submission();
        for (i, io) in ios.iter_mut().enumerate() {
            let buf = io.bufs.bytes();
            let (ptr, len) = (buf.as_mut_ptr(), buf.len() as u32);
            let entry = if write {
                opcode::Write::new(types::Fd(fd), ptr, len).offset(io.off).build()
            } else {
                opcode::Read::new(types::Fd(fd), ptr, len).offset(io.off).build()
            };
            // SAFETY: the buffer lives in `io.bufs`, which is neither moved
            // nor dropped until this entry's completion is reaped below, or
            // is leaked if it never is.
            if unsafe { sq.push(&entry.user_data(i as u64)) }.is_err() {
                break; // cannot happen (the ring is empty and the round fits)
            }
            pushed += 1;
        }
    }
    for io in &mut ios[pushed..] {
        io.result = Err(io::Error::other("not submitted"));
    }
    let mut pending = pushed;
    while pending > 0 {
        if let Err(e) = wait(ring) {
            if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)) {
                log::warn!("backing store: io_uring failed ({e}); one I/O at a time from now on");
                for (io, _) in ios[..pushed].iter_mut().zip(&done).filter(|(_, d)| !**d) {
                    // The kernel may still write into it: leaked, and a
                    // fresh one in its place for the caller's retry.
                    let fresh = io.bufs.replacement();
                    std::mem::forget(std::mem::replace(&mut io.bufs, fresh));
                    io.result = Err(e.kind().into());
                }
                return false;
            }
            // EAGAIN: the kernel is short of memory for requests just now.
            std::thread::yield_now();
        }
        for cqe in ring.completion() {
            let Some(i) = usize::try_from(cqe.user_data()).ok().filter(|&i| i < pushed && !done[i]) else {
                continue;
            };
            done[i] = true;
            pending -= 1;
            let want = ios[i].bufs.bytes().len();
            ios[i].result = match cqe.result() {
                r if r < 0 => Err(io::Error::from_raw_os_error(-r)),
                r if r as usize == want => Ok(()),
                _ if write => Err(io::ErrorKind::WriteZero.into()),
                _ => Err(io::ErrorKind::UnexpectedEof.into()),
            };
        }
    }
    true
}

/// Submit what is queued and wait for a completion.
#[cfg(not(test))]
fn wait(ring: &mut IoUring) -> io::Result<usize> {
    ring.submit_and_wait(1)
}

#[cfg(test)]
thread_local! {
    /// Tests: the next wait submits, then fails as a broken ring would.
    pub static FAIL_NEXT_WAIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn wait(ring: &mut IoUring) -> io::Result<usize> {
    if FAIL_NEXT_WAIT.with(|f| f.replace(false)) {
        ring.submit()?;
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    ring.submit_and_wait(1)
}

/// Tests: forget this thread's ring, so that the next batch makes a new one.
#[cfg(test)]
pub fn reset() {
    RING.with(|cell| *cell.borrow_mut() = Ring::Untried);
}

/// Whether this thread can make a ring at all (tests skip where it cannot:
/// `kernel.io_uring_disabled`, a seccomp filter).
#[cfg(test)]
pub fn available() -> bool {
    IoUring::new(4).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use std::os::unix::io::AsRawFd;

    fn file() -> std::fs::File {
        let dir = std::env::temp_dir();
        let f = tempfile_in(&dir);
        f.write_all_at(&(0..64u8).flat_map(|b| [b; 512]).collect::<Vec<_>>(), 0).unwrap();
        f
    }

    fn tempfile_in(dir: &std::path::Path) -> std::fs::File {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).write(true).custom_flags(libc::O_TMPFILE).open(dir).unwrap()
    }

    #[test]
    fn reads_land_each_in_its_own_buffer_and_a_short_one_fails_alone() {
        let f = file(); // 64 blocks of 512 bytes, block b full of b
                        // The fourth starts in the last block and runs past the end.
        let mut ios: Vec<Io<Vec<u8>>> = [40u64, 3, 63, 63, 17]
            .iter()
            .enumerate()
            .map(|(k, &b)| Io { off: b * 512 + if k == 3 { 256 } else { 0 }, bufs: vec![0xee; 512], result: Ok(()) })
            .collect();
        if !submit(f.as_raw_fd(), &mut ios, false) {
            assert!(!available(), "no ring, though this thread can make one");
            return;
        }
        for io in &ios[..3] {
            assert!(io.result.is_ok(), "{:?}", io.result);
            assert!(io.bufs.iter().all(|&b| u64::from(b) == io.off / 512));
        }
        assert!(ios[3].bufs[..256].iter().all(|&b| b == 63), "what there was, it read");
        assert_eq!(ios[3].result.as_ref().unwrap_err().kind(), io::ErrorKind::UnexpectedEof, "a short read");
        assert!(ios[4].result.is_ok());
        assert!(ios[4].bufs.iter().all(|&b| b == 17));
    }

    #[test]
    fn writes_in_more_rounds_than_the_ring_holds_all_land() {
        let f = file();
        let n = ENTRIES as u64 * 2 + 5;
        let mut ios: Vec<Io<Vec<u8>>> =
            (0..n).map(|k| Io { off: k * 100, bufs: vec![(k % 251) as u8; 100], result: Ok(()) }).collect();
        if !submit(f.as_raw_fd(), &mut ios, true) {
            assert!(!available(), "no ring, though this thread can make one");
            return;
        }
        assert!(ios.iter().all(|io| io.result.is_ok()));
        let mut back = vec![0u8; (n * 100) as usize];
        f.read_exact_at(&mut back, 0).unwrap();
        for k in 0..n as usize {
            assert!(back[k * 100..(k + 1) * 100].iter().all(|&b| b == (k % 251) as u8), "write {k}");
        }
    }
}

#[cfg(test)]
mod failing {
    use super::*;

    #[test]
    fn a_ring_that_fails_leaves_fresh_buffers_and_is_not_used_again() {
        if !available() {
            return;
        }
        reset();
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        let mut ios: Vec<Io<Vec<u8>>> =
            (0..3).map(|k| Io { off: k * 4096, bufs: vec![0xee; 4096], result: Ok(()) }).collect();
        FAIL_NEXT_WAIT.with(|f| f.set(true));
        assert!(submit(std::os::unix::io::AsRawFd::as_raw_fd(&f), &mut ios, false));
        for io in &ios {
            assert!(io.result.is_err());
            assert_eq!(io.bufs.len(), 4096, "a buffer of the same length, for the retry");
        }
        assert!(!submit(std::os::unix::io::AsRawFd::as_raw_fd(&f), &mut ios, false), "the ring is down");
        reset();
    }
}
