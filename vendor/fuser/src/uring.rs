//! FUSE over io_uring (memfs patch; Linux 6.14 and later, `enable_uring`).
//!
//! The protocol (the kernel's fs/fuse/dev_uring.c, libfuse's
//! lib/fuse_uring.c and doc/README.fuse-io-uring):
//!
//! - FUSE_INIT goes over /dev/fuse as always; the kernel offers
//!   `FUSE_OVER_IO_URING` in flags2 only while the module parameter
//!   `enable_uring` is Y, and the daemon accepts it in its INIT reply.
//! - The kernel has one queue per *possible* CPU and sends a request to the
//!   queue of the CPU the requesting task runs on. It keeps sending every
//!   request over /dev/fuse (requests wait, in fact, in `fuse_get_req`) until
//!   every queue has at least one registered entry (`is_ring_ready`), so all
//!   queues are registered together, by one thread per queue.
//! - An entry is a pair of buffers: a `fuse_uring_req_header` (in/out
//!   header, op header, `fuse_uring_ent_in_out`) and a payload buffer of at
//!   least the ring's `max_payload_sz` (max of max_write and max_pages
//!   pages). `FUSE_IO_URING_CMD_REGISTER` (an `IORING_OP_URING_CMD` on a
//!   128-byte SQE, `sqe->addr` = the iovec pair, `sqe->len` = 2) hands it to
//!   the kernel; its completion means a request was copied in: the
//!   `fuse_in_header` into `in_out`, the first argument (the op header, if
//!   the op has one) into `op_in`, the rest into the payload, with its size
//!   in `ring_ent_in_out.payload_sz` and the id to answer with in
//!   `commit_id`.
//! - The answer goes back in the same buffers: the `fuse_out_header` in
//!   `in_out`, *every* reply argument (op reply struct included) in the
//!   payload with their total size in `payload_sz` (the kernel's
//!   `fuse_copy_out_args` reads only the payload when `cs->is_uring`), and
//!   `FUSE_IO_URING_CMD_COMMIT_AND_FETCH` with `commit_id` both delivers it
//!   and gives the entry back for the next request.
//! - FORGET and INTERRUPT still come over /dev/fuse (the kernel's
//!   `fuse_io_uring_ops` keeps the device's forget and interrupt queues), as
//!   do requests sent before the ring is ready; notifications
//!   (invalidations, poll wake-ups) are written to /dev/fuse. So the
//!   /dev/fuse worker threads keep running beside the queue threads.
//!
//! Threads and ownership. Each queue has one thread, pinned to its CPU,
//! that alone owns that queue's io_uring: it submits every SQE and reaps
//! every CQE. A request is reassembled (header + op header + payload, one
//! copy into a per-thread buffer: fuser's parser wants one contiguous
//! buffer), but for a WRITE, whose headers are copied into the
//! [`HEADROOM`] mapped just before the payload so that its data is parsed
//! where the kernel put it (its reply's few argument bytes wait in the
//! entry's stash until the commit, as the data is borrowed until then);
//! either way it is dispatched exactly as a /dev/fuse request, with a reply
//! sender ([`UringReply`]) that points at the entry. A reply, from whatever
//! thread sends it (memfs answers some requests later, from another thread:
//! parked ENOSPC requests, poll), writes the out header and payload into the
//! entry's buffers, then puts the entry's index on the queue's `done` list;
//! if it is not the queue's own thread it also writes the queue's eventfd,
//! on which the queue thread keeps a multishot poll, to wake it. The queue
//! thread turns each `done` index into a COMMIT_AND_FETCH. Submitting only
//! from the owning thread keeps the kernel's task work (the copy of the next
//! request into the entry, `fuse_uring_send_in_task`) on that thread and
//! its CPU, and needs no lock on the submission queue.
//!
//! Task work. The kernel copies a request into an entry's buffers in the
//! queue thread's own context (`fuse_uring_send_in_task`, run as io_uring
//! task work), and posts the entry's completion in the same step. A ring
//! made the default way runs task work whenever its thread returns to user
//! space, at any interrupt included: in the middle of the thread's own
//! code. The rings are made with `IORING_SETUP_DEFER_TASKRUN` (and the
//! `SINGLE_ISSUER` it needs) instead, so task work runs only inside this
//! thread's `io_uring_enter` waits; [`trim_idle`] relies on that. Measured
//! (2026-11-28, 2 vCPUs, `fgetxattr` round trips and the transport
//! loop): no slower than a default ring on a quiet machine (22-23 µs a
//! round trip, 8.3-9.0 with the client pinned), and with both CPUs busy
//! a create took 51 µs against 70-83. libfuse leaves `SINGLE_ISSUER` and
//! `COOP_TASKRUN` off as slower; it did not try `DEFER_TASKRUN`.
//!
//! Exclusive access to an entry's buffers: the kernel writes them between
//! the submission of REGISTER/COMMIT_AND_FETCH and its completion; the
//! queue thread reads them after the completion, before it dispatches; the
//! reply (there is exactly one per request: `ReplyRaw` sends once) writes
//! them after that and before it puts the index on `done`; the queue thread
//! submits the commit after taking it from `done`. The `done` mutex orders
//! the reply's writes before the submission. No two of these overlap, which
//! is what makes the raw-pointer accesses below sound.
//!
//! Teardown: on unmount or abort the kernel completes every entry it holds
//! with -ENOTCONN (or -ECONNABORTED); a commit after that fails the same
//! way. A queue thread ends once no entry of its queue is in the kernel.
//! The buffers belong to the queue's `Arc`, which replies still pending
//! elsewhere keep alive, so a late reply writes into memory that is still
//! ours and is then dropped.
//!
//! Fallback: the rings are created before the INIT reply; if that fails,
//! the reply does not ask for io_uring and everything stays on /dev/fuse.
//! If a REGISTER fails in the kernel (for example `enable_uring` was turned
//! off in between), the kernel itself clears `fc->io_uring` and goes on
//! over /dev/fuse.

use std::cell::{Cell, UnsafeCell};
use std::io;
use std::io::IoSlice;
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::os::fd::FromRawFd;
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::AtomicU8;
use std::sync::atomic::Ordering;

use io_uring::IoUring;
use io_uring::cqueue;
use io_uring::opcode;
use io_uring::squeue::Entry128;
use io_uring::types;
use log::debug;
use log::error;
use log::info;
use log::warn;
use parking_lot::Mutex;

use crate::Filesystem;
use crate::channel::ChannelSender;
use crate::ll::fuse_abi as abi;
use crate::passthrough::BackingId;
use crate::read_buf::FuseReadBuf;
use crate::request::RequestWithSender;
use crate::session::SessionEventLoop;

/// `FUSE_URING_IN_OUT_HEADER_SZ` and `FUSE_URING_OP_IN_OUT_SZ` (uapi fuse.h).
const IN_OUT_HEADER_SZ: usize = 128;
const OP_IN_OUT_SZ: usize = 128;
/// `enum fuse_uring_cmd`.
const CMD_REGISTER: u32 = 1;
const CMD_COMMIT_AND_FETCH: u32 = 2;
/// Entries per queue. A request answered later from another thread holds
/// its entry until then, so one entry per queue would stall the CPU's
/// other requests behind it (libfuse's default depth is 8 as well).
pub(crate) const QUEUE_DEPTH: usize = 8;
/// Bytes all queues' entry buffers may hold together ([`set_buffer_budget`]);
/// 0: no bound, every queue registers [`QUEUE_DEPTH`] entries.
static BUFFER_BUDGET: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
/// The fewest entries a queue registers, whatever the budget: one request
/// answered later from another thread must not stall its CPU's others.
const MIN_ENTRIES: usize = 2;

/// Bound what the queues' entry buffers may hold in RAM together, before
/// the session starts: each queue then registers as many entries as its
/// share of `bytes` holds whole (at least 2, at most [`QUEUE_DEPTH`]). A
/// file system that bounds its memory (memfs's `ram=`) keeps the buffers
/// within what it counts: eight entries of 1 MiB per CPU, all resident
/// under large I/O, were 14 of the 16 MiB that `ram=64M` allows for
/// everything beyond the data, and the daemon held 7.8% over its promise.
pub fn set_buffer_budget(bytes: u64) {
    BUFFER_BUDGET.store(bytes, Ordering::Relaxed);
}

/// Entries each of `queues` queues registers, with payload buffers of
/// `payload_len` bytes, under [`BUFFER_BUDGET`].
fn entries_per_queue(queues: usize, payload_len: usize) -> usize {
    match BUFFER_BUDGET.load(Ordering::Relaxed) {
        0 => QUEUE_DEPTH,
        budget => {
            let per_queue = budget / queues.max(1) as u64;
            let each = (payload_len + HEADROOM) as u64;
            ((per_queue / each) as usize).clamp(MIN_ENTRIES, QUEUE_DEPTH)
        }
    }
}

/// `user_data` of the eventfd poll; entry completions carry their index.
const WAKE_TAG: u64 = u64::MAX;
/// Bytes mapped before each entry's payload, outside what the kernel may
/// write: a WRITE's headers are copied there, so that headers and data lie
/// contiguous for the parser without copying the data (one page, to keep
/// the payload page-aligned).
const HEADROOM: usize = 4096;
/// Room for the reply arguments of a request parsed in place (a WRITE's
/// `fuse_write_out`, 8 bytes).
const STASH_SZ: usize = 64;
const OPCODE_WRITE: u32 = abi::fuse_opcode::FUSE_WRITE as u32;
/// A queue that has served no request for this long gives the pages of its
/// idle buffers back to the kernel ([`trim_idle`]); memfs's own trim
/// (src/trim.rs) waits for the same quiet second before it gives back.
const IDLE_TRIM: std::time::Duration = std::time::Duration::from_secs(1);
/// Bytes of the queues' payload buffers in RAM: each entry's high-water
/// mark (whole pages) of the requests and replies it carried since it was
/// last trimmed, summed over every queue of the process ([`buffer_bytes`]).
static BUFFER_BYTES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// RAM the io_uring queues' payload buffers hold now, as far as their
/// threads know (pages touched by requests and replies and not yet given
/// back); 0 over /dev/fuse. A file system that bounds its memory (memfs's
/// `ram=`) counts it.
pub fn buffer_bytes() -> u64 {
    BUFFER_BYTES.load(Ordering::Relaxed)
}

/// A queue's share of [`BUFFER_BYTES`]: each entry's high-water mark of
/// payload bytes, in whole pages; given back when the queue ends.
struct Touched([usize; QUEUE_DEPTH]);

impl Touched {
    /// Raise entry `ent`'s mark to `sz` bytes.
    fn note(&mut self, ent: usize, sz: usize) {
        let want = sz.next_multiple_of(4096);
        if want > self.0[ent] {
            BUFFER_BYTES.fetch_add((want - self.0[ent]) as u64, Ordering::Relaxed);
            self.0[ent] = want;
        }
    }

    /// Entry `ent`'s buffer was given back.
    fn trimmed(&mut self, ent: usize) {
        BUFFER_BYTES.fetch_sub(self.0[ent] as u64, Ordering::Relaxed);
        self.0[ent] = 0;
    }
}

impl Drop for Touched {
    fn drop(&mut self) {
        BUFFER_BYTES.fetch_sub(self.0.iter().sum::<usize>() as u64, Ordering::Relaxed);
    }
}

/// A request or reply this large (in its payload buffer) makes the queue
/// give its buffers back [`IDLE_TRIM`] after it, whatever small requests
/// come meanwhile.
const BIG_PAYLOAD: usize = 64 << 10;

/// `struct fuse_uring_ent_in_out`.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct EntInOut {
    flags: u64,
    commit_id: u64,
    payload_sz: u32,
    padding: u32,
    reserved: u64,
}

/// `struct fuse_uring_req_header`.
#[repr(C, align(8))]
struct ReqHeader {
    in_out: [u8; IN_OUT_HEADER_SZ],
    op_in: [u8; OP_IN_OUT_SZ],
    ent_in_out: EntInOut,
}

/// `struct fuse_uring_cmd_req`, in the SQE's 80-byte command area.
#[repr(C)]
struct CmdReq {
    flags: u64,
    commit_id: u64,
    qid: u16,
    padding: [u8; 6],
}

impl CmdReq {
    fn bytes(&self) -> [u8; 80] {
        let mut cmd = [0u8; 80];
        cmd[0..8].copy_from_slice(&self.flags.to_ne_bytes());
        cmd[8..16].copy_from_slice(&self.commit_id.to_ne_bytes());
        cmd[16..18].copy_from_slice(&self.qid.to_ne_bytes());
        cmd
    }
}

/// Which transport a session uses, readable from any thread at any time.
#[derive(Debug, Clone, Default)]
pub struct TransportStatus(Arc<AtomicU8>, Arc<Mutex<usize>>);

/// What [`TransportStatus::get`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Every request over /dev/fuse.
    DevFuse,
    /// io_uring negotiated at INIT; the queues are being registered.
    IoUringStarting,
    /// Requests arrive on io_uring queues (one per possible CPU).
    IoUring,
    /// io_uring was negotiated but registering failed; the kernel went back
    /// to /dev/fuse.
    IoUringFailed,
}

impl Transport {
    /// A short name: `dev_fuse`, `io_uring`, ...
    pub fn name(self) -> &'static str {
        match self {
            Transport::DevFuse => "dev_fuse",
            Transport::IoUringStarting => "io_uring_starting",
            Transport::IoUring => "io_uring",
            Transport::IoUringFailed => "dev_fuse_after_io_uring_failed",
        }
    }
}

impl TransportStatus {
    pub(crate) fn set(&self, t: Transport) {
        self.0.store(t as u8, Ordering::Release);
    }
    pub(crate) fn set_queues(&self, n: usize) {
        *self.1.lock() = n;
    }
    /// The transport in use now.
    pub fn get(&self) -> Transport {
        match self.0.load(Ordering::Acquire) {
            1 => Transport::IoUringStarting,
            2 => Transport::IoUring,
            3 => Transport::IoUringFailed,
            _ => Transport::DevFuse,
        }
    }
    /// Number of io_uring queues (0 on /dev/fuse).
    pub fn queues(&self) -> usize {
        *self.1.lock()
    }
}

/// One ring entry: its two buffers and the iovec pair that registers them.
struct RingEnt {
    header: *mut ReqHeader,
    /// [`HEADROOM`] bytes into its mapping.
    payload: *mut u8,
    payload_len: usize,
    /// Read by the kernel when REGISTER is issued; kept beside the buffers.
    iov: Box<[libc::iovec; 2]>,
    /// A request parsed in place: its reply's arguments wait here until
    /// the queue thread commits (module doc).
    stash: UnsafeCell<Stash>,
}

/// See [`RingEnt::stash`].
struct Stash {
    /// The request being served borrows the payload (a WRITE's data).
    in_place: bool,
    len: usize,
    bytes: [u8; STASH_SZ],
}

/// The part of a queue that replies reach from any thread.
pub(crate) struct QueueShared {
    qid: u16,
    ents: Box<[RingEnt]>,
    /// How many of `ents` are registered with the kernel (the first ones;
    /// [`entries_per_queue`]): the others are never used.
    registered: usize,
    /// Entries whose reply is written, waiting for their COMMIT_AND_FETCH.
    done: Mutex<Vec<u16>>,
    /// Wakes the queue thread when a reply comes from another thread.
    wake: OwnedFd,
}

// SAFETY: the raw pointers are to buffers this struct owns (freed in Drop);
// who may touch them when is the protocol in the module doc, enforced by
// the entry being handed from kernel to queue thread to the request's one
// reply and back through `done`.
unsafe impl Send for QueueShared {}
unsafe impl Sync for QueueShared {}

impl Drop for QueueShared {
    fn drop(&mut self) {
        for e in self.ents.iter() {
            // SAFETY: allocated in `QueueShared::new` with these sizes; no
            // entry is in the kernel any more (the queue thread ended or
            // never registered them) and no reply holds the Arc.
            unsafe {
                drop(Box::from_raw(e.header));
                libc::munmap(e.payload.sub(HEADROOM).cast(), HEADROOM + e.payload_len);
            }
        }
    }
}

thread_local! {
    /// The queue this thread serves (its `QueueShared` address), or 0.
    static CURRENT_QUEUE: Cell<usize> = const { Cell::new(0) };
}

impl QueueShared {
    fn new(qid: u16, payload_len: usize, registered: usize) -> io::Result<QueueShared> {
        // SAFETY: plain eventfd creation.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: eventfd returned a new descriptor that we own.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut ents = Vec::with_capacity(QUEUE_DEPTH);
        let shared_ents = |ents: Vec<RingEnt>| ents.into_boxed_slice();
        for _ in 0..QUEUE_DEPTH {
            // Payload: anonymous memory, reserved lazily; only the pages a
            // request uses become resident.
            // SAFETY: anonymous private mapping, checked below.
            let mapping = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    HEADROOM + payload_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if mapping == libc::MAP_FAILED {
                let err = io::Error::last_os_error();
                // Free what was made so far.
                drop(QueueShared {
                    qid,
                    ents: shared_ents(ents),
                    registered,
                    done: Mutex::new(Vec::new()),
                    wake,
                });
                return Err(err);
            }
            // SAFETY: inside the mapping just made.
            let payload: *mut libc::c_void = unsafe { mapping.cast::<u8>().add(HEADROOM).cast() };
            let header = Box::into_raw(Box::new(ReqHeader {
                in_out: [0; IN_OUT_HEADER_SZ],
                op_in: [0; OP_IN_OUT_SZ],
                ent_in_out: EntInOut::default(),
            }));
            let iov = Box::new([
                libc::iovec {
                    iov_base: header.cast(),
                    iov_len: size_of::<ReqHeader>(),
                },
                libc::iovec {
                    iov_base: payload,
                    iov_len: payload_len,
                },
            ]);
            ents.push(RingEnt {
                header,
                payload: payload.cast(),
                payload_len,
                iov,
                stash: UnsafeCell::new(Stash {
                    in_place: false,
                    len: 0,
                    bytes: [0; STASH_SZ],
                }),
            });
        }
        Ok(QueueShared {
            qid,
            ents: shared_ents(ents),
            registered,
            done: Mutex::new(Vec::with_capacity(QUEUE_DEPTH)),
            wake,
        })
    }

    fn id(&self) -> usize {
        self as *const QueueShared as usize
    }

    /// An entry's reply is in its buffers: have the queue thread commit it.
    fn finish(&self, ent: u16) {
        self.done.lock().push(ent);
        if CURRENT_QUEUE.with(Cell::get) != self.id() {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a local to our eventfd. EAGAIN
            // (counter full) still leaves it readable, which is all we need.
            unsafe { libc::write(self.wake.as_raw_fd(), (&raw const one).cast(), 8) };
        }
    }
}

/// The reply sender of a request that came from a ring entry.
#[derive(Clone)]
pub(crate) struct UringReply {
    queue: Arc<QueueShared>,
    ent: u16,
    /// /dev/fuse, for what still goes there (backing-file ioctls).
    dev: ChannelSender,
}

impl std::fmt::Debug for UringReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UringReply(q{} e{})", self.queue.qid, self.ent)
    }
}

impl UringReply {
    /// Write the reply (`fuse_out_header` then the reply arguments, as
    /// fuser lays them out for writev) into the entry and queue its commit.
    pub(crate) fn send(&self, bufs: &[IoSlice<'_>]) -> io::Result<()> {
        let ent = &self.queue.ents[usize::from(self.ent)];
        let out_len = size_of::<abi::fuse_out_header>();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if total < out_len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "short FUSE reply",
            ));
        }
        let payload_sz = total - out_len;
        // SAFETY: this request's entry is ours until `finish` (module doc);
        // every write stays inside the header struct or the payload mapping,
        // whose length is checked first.
        unsafe {
            let header = &mut *ent.header;
            let stash = &mut *ent.stash.get();
            if stash.in_place && payload_sz <= STASH_SZ {
                // The request's data is still borrowed from the payload:
                // the queue thread moves these bytes there at the commit.
                let mut pos = 0usize;
                for b in bufs {
                    let mut src: &[u8] = b;
                    if pos < out_len {
                        let take = (out_len - pos).min(src.len());
                        header.in_out[pos..pos + take].copy_from_slice(&src[..take]);
                        pos += take;
                        src = &src[take..];
                    }
                    let at = pos - out_len;
                    stash.bytes[at..at + src.len()].copy_from_slice(src);
                    pos += src.len();
                }
                stash.len = payload_sz;
                header.ent_in_out.payload_sz = payload_sz as u32;
            } else if payload_sz > ent.payload_len || stash.in_place {
                // Cannot happen with the sizes the kernel asks for; answer
                // EIO rather than overflow.
                let mut hdr = [0u8; 16];
                let mut n = 0;
                for b in bufs {
                    let take = (16 - n).min(b.len());
                    hdr[n..n + take].copy_from_slice(&b[..take]);
                    n += take;
                    if n == 16 {
                        break;
                    }
                }
                hdr[0..4].copy_from_slice(&16u32.to_ne_bytes());
                hdr[4..8].copy_from_slice(&(-libc::EIO).to_ne_bytes());
                header.in_out[..16].copy_from_slice(&hdr);
                header.ent_in_out.payload_sz = 0;
                error!("FUSE reply of {payload_sz} bytes exceeds the ring buffer");
            } else {
                let mut pos = 0usize; // position in the concatenated reply
                for b in bufs {
                    let mut src: &[u8] = b;
                    if pos < out_len {
                        let take = (out_len - pos).min(src.len());
                        header.in_out[pos..pos + take].copy_from_slice(&src[..take]);
                        pos += take;
                        src = &src[take..];
                    }
                    if !src.is_empty() {
                        let at = pos - out_len;
                        std::ptr::copy_nonoverlapping(src.as_ptr(), ent.payload.add(at), src.len());
                        pos += src.len();
                    }
                }
                header.ent_in_out.payload_sz = payload_sz as u32;
            }
        }
        self.queue.finish(self.ent);
        Ok(())
    }

    pub(crate) fn open_backing(&self, fd: std::os::fd::BorrowedFd<'_>) -> io::Result<BackingId> {
        self.dev.open_backing(fd)
    }

    pub(crate) unsafe fn wrap_backing(&self, id: u32) -> BackingId {
        unsafe { self.dev.wrap_backing(id) }
    }
}

/// A queue between INIT and the start of its thread.
pub(crate) struct PendingQueue {
    shared: Arc<QueueShared>,
    ring: IoUring<Entry128, cqueue::Entry>,
    /// Made with `IORING_SETUP_R_DISABLED`: the queue thread enables it,
    /// and so becomes its single issuer.
    disabled: bool,
}

/// The rings of a session, made before the INIT reply.
pub(crate) struct UringSetup {
    pub(crate) queues: Vec<PendingQueue>,
}

impl std::fmt::Debug for UringSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UringSetup({} queues)", self.queues.len())
    }
}

/// The number of possible CPUs (the kernel's `num_possible_cpus()`, which
/// sets its number of queues).
pub(crate) fn possible_cpus() -> io::Result<usize> {
    cpu_count(&std::fs::read_to_string(
        "/sys/devices/system/cpu/possible",
    )?)
}

/// The number of CPUs in a kernel CPU list such as `0-3,8,10-11`.
fn cpu_count(s: &str) -> io::Result<usize> {
    let mut n = 0;
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: usize = a.parse().map_err(|_| io::Error::other("bad cpu list"))?;
        let b: usize = b.parse().map_err(|_| io::Error::other("bad cpu list"))?;
        n += b
            .checked_sub(a)
            .ok_or_else(|| io::Error::other("bad cpu list"))?
            + 1;
    }
    if n == 0 {
        return Err(io::Error::other("no possible CPUs"));
    }
    Ok(n)
}

/// Whether the running kernel lets FUSE use io_uring now (`enable_uring`).
pub fn kernel_enabled() -> Option<bool> {
    let s = std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring").ok()?;
    Some(s.trim() == "Y" || s.trim() == "1")
}

impl UringSetup {
    /// One ring and `QUEUE_DEPTH` entries per possible CPU, with payload
    /// buffers of `payload_len` bytes.
    pub(crate) fn new(payload_len: usize) -> io::Result<UringSetup> {
        let n = possible_cpus()?;
        let qid_max = usize::from(u16::MAX);
        if n > qid_max {
            return Err(io::Error::other("too many CPUs"));
        }
        let mut queues = Vec::with_capacity(n);
        let registered = entries_per_queue(n, payload_len);
        for qid in 0..n {
            // Room for every entry's commit plus the eventfd poll; the CQ
            // twice that (the crate's default), so it never overflows.
            let entries = (QUEUE_DEPTH + 1).next_power_of_two() as u32;
            // Task work only inside the queue thread's own waits
            // (DEFER_TASKRUN, which needs SINGLE_ISSUER; the ring starts
            // disabled so that the queue thread, not this one, becomes its
            // issuer): see "Task work" above. Kernels without it (older
            // than 6.1, so without FUSE over io_uring either) get a plain
            // ring.
            let (ring, disabled) = match IoUring::<Entry128, cqueue::Entry>::builder()
                .setup_single_issuer()
                .setup_defer_taskrun()
                .setup_r_disabled()
                .build(entries)
            {
                Ok(ring) => (ring, true),
                Err(_) => (
                    IoUring::<Entry128, cqueue::Entry>::builder().build(entries)?,
                    false,
                ),
            };
            let shared = Arc::new(QueueShared::new(qid as u16, payload_len, registered)?);
            queues.push(PendingQueue {
                shared,
                ring,
                disabled,
            });
        }
        Ok(UringSetup { queues })
    }
}

/// An `IORING_OP_URING_CMD` for FUSE on entry `ent` of `q`.
fn fuse_cmd(dev: RawFd, q: &QueueShared, ent: u16, cmd_op: u32, commit_id: u64) -> Entry128 {
    let cmd = CmdReq {
        flags: 0,
        commit_id,
        qid: q.qid,
        padding: [0; 6],
    };
    let e = &q.ents[usize::from(ent)];
    let mut op = opcode::UringCmd80::new(types::Fd(dev), cmd_op).cmd(cmd.bytes());
    if cmd_op == CMD_REGISTER {
        op = op.addr(Some(e.iov.as_ptr() as u64));
    }
    let sqe = op.build().user_data(u64::from(ent));
    if cmd_op == CMD_REGISTER {
        set_sqe_len(sqe, 2)
    } else {
        sqe
    }
}

/// Sets `sqe->len`, which FUSE's REGISTER reads as the iovec count.
/// io-uring 0.7's `UringCmd80` has setters for `addr` and the command but
/// none for `len`, and `Entry128` exposes no field; it is `#[repr(C)]` over
/// the kernel's 128-byte `io_uring_sqe`, whose `len` is the `u32` at byte
/// 24, so we write it there.
fn set_sqe_len(sqe: Entry128, len: u32) -> Entry128 {
    const _: () = assert!(size_of::<Entry128>() == 128);
    // SAFETY: Entry128 is repr(C), 128 bytes of plain integers (the SQE and
    // its extra 64 bytes); any byte pattern is a valid value of both types.
    let mut raw: [u8; 128] = unsafe { std::mem::transmute::<Entry128, [u8; 128]>(sqe) };
    raw[24..28].copy_from_slice(&len.to_ne_bytes());
    // SAFETY: as above.
    unsafe { std::mem::transmute::<[u8; 128], Entry128>(raw) }
}

fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET on an in-range index.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu < 8 * size_of::<libc::cpu_set_t>() {
            libc::CPU_SET(cpu, &mut set);
            if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
                debug!(
                    "uring queue {cpu}: cannot pin to its CPU: {}",
                    io::Error::last_os_error()
                );
            }
        }
    }
}

/// Why a queue thread stopped taking requests.
enum QueueEnd {
    /// The connection ended (unmount, abort).
    Disconnected,
    /// The kernel refused registration and went back to /dev/fuse.
    Refused(i32),
}

/// Serve one queue until the connection ends. Runs on the queue's thread.
pub(crate) fn run_queue<FS: Filesystem>(
    pending: PendingQueue,
    se: &SessionEventLoop<FS>,
    status: &TransportStatus,
    registered: &std::sync::Barrier,
) -> io::Result<()> {
    let PendingQueue {
        shared: q,
        mut ring,
        disabled,
    } = pending;
    let qid = q.qid;
    pin_to_cpu(usize::from(qid));
    CURRENT_QUEUE.with(|c| c.set(q.id()));
    let dev = se.ch.as_fd().as_raw_fd();
    let mut buf = FuseReadBuf::new();
    let buf = buf.as_mut();

    // Register the queue's entries, and the wake-up poll.
    let mut sqes: Vec<Entry128> = (0..q.registered as u16)
        .map(|i| fuse_cmd(dev, &q, i, CMD_REGISTER, 0))
        .collect();
    sqes.push(wake_poll(&q));
    let mut in_kernel = q.registered;
    // Issue the registrations (the kernel handles them inline), then tell
    // the session this queue is in place, whatever happened.
    let enabled = if disabled {
        ring.submitter().register_enable_rings()
    } else {
        Ok(())
    };
    let first = enabled
        .and_then(|()| push_all(&mut ring, &mut sqes))
        .and_then(|()| ring.submit().map(drop));
    registered.wait();
    let result =
        first.and_then(|()| serve_queue(&q, &mut ring, &mut sqes, &mut in_kernel, buf, se, status));
    if result.is_err() && in_kernel > 0 {
        // The kernel may still hold entries pointing at our buffers: never
        // free them (the process is going away with its session anyway).
        std::mem::forget(q.clone());
    }
    result
}

/// The queue's loop, after registration: commit replies, wait, serve.
fn serve_queue<FS: Filesystem>(
    q: &Arc<QueueShared>,
    ring: &mut IoUring<Entry128, cqueue::Entry>,
    sqes: &mut Vec<Entry128>,
    in_kernel: &mut usize,
    buf: &mut [u8],
    se: &SessionEventLoop<FS>,
    status: &TransportStatus,
) -> io::Result<()> {
    let qid = q.qid;
    let dev = se.ch.as_fd().as_raw_fd();
    let mut end: Option<QueueEnd> = None;
    let mut retries_left = 1000;
    // Reused every turn: no allocation per request.
    let mut done: Vec<u16> = Vec::with_capacity(QUEUE_DEPTH);
    let mut cqes: Vec<cqueue::Entry> = Vec::with_capacity(2 * QUEUE_DEPTH);
    // Entries out of the kernel: from their request's completion until
    // their commit is pushed (their buffers are in use).
    let mut busy = [false; QUEUE_DEPTH];
    // A request was served since the buffers were last given back.
    let mut touched = false;
    // The last request or reply of [`BIG_PAYLOAD`] or more since then:
    // the buffers are given back IDLE_TRIM after it even while small
    // requests keep coming (`memfs stat --watch` reads once a second).
    let mut last_big: Option<std::time::Instant> = None;
    // Each entry's payload bytes in RAM, as counted in BUFFER_BYTES.
    let mut hw = Touched([0; QUEUE_DEPTH]);
    let idle = types::Timespec::from(IDLE_TRIM);
    loop {
        // Replies ready since the last turn become commits.
        std::mem::swap(&mut done, &mut *q.done.lock());
        for ent in done.drain(..) {
            // SAFETY: the entry's reply is complete (it was on `done`) and
            // the request that borrowed its payload has been served: only
            // this thread touches the entry now.
            let commit_id = unsafe { prepare_commit(&q.ents[usize::from(ent)]) };
            // SAFETY: as above.
            let sz = unsafe { payload_sz(&q.ents[usize::from(ent)]) }.min(q.ents[usize::from(ent)].payload_len);
            hw.note(usize::from(ent), sz);
            // (A reply from another thread can come after a trim cleared
            // `touched`: the wait must still time out to trim it.)
            touched = true;
            if sz >= BIG_PAYLOAD {
                last_big = Some(std::time::Instant::now());
            }
            sqes.push(fuse_cmd(dev, q, ent, CMD_COMMIT_AND_FETCH, commit_id));
            busy[usize::from(ent)] = false;
            *in_kernel += 1;
        }
        if end.is_some() && *in_kernel == 0 {
            break;
        }
        push_all(ring, sqes)?;
        // After a request, wait at most IDLE_TRIM; idle since, give back.
        // After a large one, at most until IDLE_TRIM has passed since it.
        let after_big = last_big.map(|t| types::Timespec::from(IDLE_TRIM.saturating_sub(t.elapsed())));
        let waited = match (&after_big, touched && end.is_none()) {
            (Some(left), true) => ring
                .submitter()
                .submit_with_args(1, &types::SubmitArgs::new().timespec(left)),
            (None, true) => ring
                .submitter()
                .submit_with_args(1, &types::SubmitArgs::new().timespec(&idle)),
            (_, false) => ring.submit_and_wait(1),
        };
        match waited {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                // (Made with DEFER_TASKRUN, which needs SINGLE_ISSUER.)
                if ring.params().is_setup_single_issuer() {
                    trim_idle(q, ring, &busy, buf, &mut hw);
                }
                touched = false;
                last_big = None;
                continue;
            }
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                continue;
            }
            Err(e) => return Err(e),
        }
        cqes.extend(ring.completion());
        for cqe in cqes.drain(..) {
            if cqe.user_data() == WAKE_TAG {
                drain_eventfd(q);
                if !cqueue::more(cqe.flags()) {
                    sqes.push(wake_poll(q));
                }
                continue;
            }
            let Ok(ent) = u16::try_from(cqe.user_data()) else {
                continue;
            };
            if usize::from(ent) >= QUEUE_DEPTH {
                continue;
            }
            *in_kernel -= 1;
            let res = cqe.result();
            if res < 0 {
                match -res {
                    // fc->initialized not yet seen: register again.
                    libc::EAGAIN if retries_left > 0 && end.is_none() => {
                        retries_left -= 1;
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        sqes.push(fuse_cmd(dev, q, ent, CMD_REGISTER, 0));
                        *in_kernel += 1;
                    }
                    libc::ENOTCONN | libc::ECONNABORTED | libc::ECANCELED | libc::ENODEV => {
                        end.get_or_insert(QueueEnd::Disconnected);
                    }
                    e => {
                        // EOPNOTSUPP: enable_uring went off before we
                        // registered; the kernel falls back to /dev/fuse.
                        // Anything else loses this entry only.
                        warn!(
                            "uring queue {qid}: entry {ent}: {}",
                            io::Error::from_raw_os_error(e)
                        );
                        if *in_kernel == 0 {
                            end.get_or_insert(QueueEnd::Refused(e));
                        }
                    }
                }
                continue;
            }
            busy[usize::from(ent)] = true;
            touched = true;
            // SAFETY: the kernel completed this entry (module doc).
            let sz = unsafe { payload_sz(&q.ents[usize::from(ent)]) }.min(q.ents[usize::from(ent)].payload_len);
            hw.note(usize::from(ent), sz);
            if sz >= BIG_PAYLOAD {
                last_big = Some(std::time::Instant::now());
            }
            serve_entry(q, ent, buf, se);
        }
    }
    match end {
        Some(QueueEnd::Refused(e)) => {
            status.set(crate::uring::Transport::IoUringFailed);
            warn!(
                "uring queue {qid}: registration refused ({}); requests go over /dev/fuse",
                io::Error::from_raw_os_error(e)
            );
        }
        _ => debug!("uring queue {qid}: connection ended"),
    }
    Ok(())
}

/// Give the pages of a queue's idle buffers back to the kernel
/// (MADV_DONTNEED): the payload (and headroom) of every entry waiting in
/// the kernel for a request, and the thread's reassembly buffer `buf`.
/// After large requests these stay resident otherwise, up to
/// `QUEUE_DEPTH` x 1 MiB + 1 MiB per CPU for as long as the mount lives;
/// a page given back costs a page fault when a later request uses it.
///
/// Why this is sound while the kernel holds the entries: it copies a
/// request into an entry's buffers only in this thread's task work, which
/// the ring defers to this thread's `io_uring_enter` waits (see "Task
/// work" in the module comment: a default ring would also run it at any
/// return to user space, between the check below and the madvise), and it
/// posts the entry's completion in the same step. So an entry with no
/// completion waiting holds no request, and stays so until this thread
/// next waits on its ring; the trim makes no such call, and stops at the
/// first completion (its request must be served, not zeroed). On a ring
/// without `DEFER_TASKRUN` (a kernel that lacks it) the trim is skipped.
/// Entries out of the kernel (`busy`: served, or waiting for a reply from
/// another thread) are not touched.
fn trim_idle(
    q: &QueueShared,
    ring: &mut IoUring<Entry128, cqueue::Entry>,
    busy: &[bool; QUEUE_DEPTH],
    buf: &mut [u8],
    hw: &mut Touched,
) {
    for (k, (e, _)) in q.ents.iter().zip(busy).enumerate().filter(|(_, (_, b))| !**b) {
        if !ring.completion().is_empty() {
            return;
        }
        // SAFETY: the entry's own mapping, whole (see QueueShared::new); it
        // holds no request (above) and nothing else reads it meanwhile.
        unsafe {
            libc::madvise(e.payload.sub(HEADROOM).cast(), HEADROOM + e.payload_len, libc::MADV_DONTNEED);
        }
        hw.trimmed(k);
    }
    // The reassembly buffer's whole pages (it is scratch: nothing in it is
    // read before a request is copied in again).
    let page = 4096;
    let start = (buf.as_ptr() as usize).next_multiple_of(page);
    let end = (buf.as_ptr() as usize + buf.len()) / page * page;
    if end > start {
        // SAFETY: whole pages inside `buf`, which this thread owns
        // exclusively (&mut); zero-filled pages are a valid [u8].
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_DONTNEED) };
    }
}

/// Put a stashed reply's arguments into the payload (a request parsed in
/// place: its data was borrowed from there until now); the commit id.
///
/// # Safety
/// The entry's reply is complete and its request served; nothing else
/// touches the entry until it is committed.
unsafe fn prepare_commit(e: &RingEnt) -> u64 {
    unsafe {
        let stash = &mut *e.stash.get();
        if stash.in_place {
            std::ptr::copy_nonoverlapping(stash.bytes.as_ptr(), e.payload, stash.len);
            stash.in_place = false;
            stash.len = 0;
        }
        (*e.header).ent_in_out.commit_id
    }
}

/// The payload size in entry `e`'s header: the request's after its
/// completion, the reply's once it is written.
///
/// # Safety
/// Only the queue's thread, while the kernel does not hold the entry.
unsafe fn payload_sz(e: &RingEnt) -> usize {
    unsafe { (*e.header).ent_in_out.payload_sz as usize }
}

fn wake_poll(q: &QueueShared) -> Entry128 {
    Entry128::from(
        opcode::PollAdd::new(types::Fd(q.wake.as_raw_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(WAKE_TAG),
    )
}

fn drain_eventfd(q: &QueueShared) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a local from our non-blocking eventfd.
    unsafe { libc::read(q.wake.as_raw_fd(), (&raw mut v).cast(), 8) };
}

fn push_all(
    ring: &mut IoUring<Entry128, cqueue::Entry>,
    sqes: &mut Vec<Entry128>,
) -> io::Result<()> {
    while !sqes.is_empty() {
        {
            let mut sq = ring.submission();
            let mut pushed = 0;
            for e in sqes.iter() {
                // SAFETY: every SQE points only at memory that outlives its
                // completion: the entry buffers and iovecs of an
                // `Arc<QueueShared>` this thread holds until it ends.
                if unsafe { sq.push(e) }.is_err() {
                    break;
                }
                pushed += 1;
            }
            sqes.drain(..pushed);
        }
        if !sqes.is_empty() {
            ring.submit()?;
        }
    }
    Ok(())
}

/// Reassemble the request in entry `ent` into `buf` and dispatch it.
fn serve_entry<FS: Filesystem>(
    q: &Arc<QueueShared>,
    ent: u16,
    buf: &mut [u8],
    se: &SessionEventLoop<FS>,
) {
    let e = &q.ents[usize::from(ent)];
    let in_len = size_of::<abi::fuse_in_header>();
    // SAFETY: the kernel completed this entry; until we reply, only this
    // thread touches it (module doc). Reads stay inside the header struct
    // and the first `payload_sz` (checked) bytes of the payload.
    let request: Option<&[u8]> = unsafe {
        let h = &*e.header;
        let total =
            u32::from_ne_bytes([h.in_out[0], h.in_out[1], h.in_out[2], h.in_out[3]]) as usize;
        let opcode = u32::from_ne_bytes([h.in_out[4], h.in_out[5], h.in_out[6], h.in_out[7]]);
        let payload_sz = h.ent_in_out.payload_sz as usize;
        // The op header's size is what the total leaves beside the payload.
        let op_sz = total.checked_sub(in_len + payload_sz);
        match op_sz {
            // A WRITE's data stays where the kernel put it: its headers go
            // just before it, into the headroom (at most one copy of the
            // data inside the daemon: into the file's pages).
            Some(op_sz)
                if opcode == OPCODE_WRITE
                    && op_sz <= OP_IN_OUT_SZ
                    && payload_sz <= e.payload_len
                    && in_len + op_sz <= HEADROOM =>
            {
                let start = e.payload.sub(in_len + op_sz);
                std::ptr::copy_nonoverlapping(h.in_out.as_ptr(), start, in_len);
                std::ptr::copy_nonoverlapping(h.op_in.as_ptr(), start.add(in_len), op_sz);
                (*e.stash.get()).in_place = true;
                Some(std::slice::from_raw_parts(start, total))
            }
            Some(op_sz)
                if op_sz <= OP_IN_OUT_SZ && payload_sz <= e.payload_len && total <= buf.len() =>
            {
                buf[..in_len].copy_from_slice(&h.in_out[..in_len]);
                buf[in_len..in_len + op_sz].copy_from_slice(&h.op_in[..op_sz]);
                std::ptr::copy_nonoverlapping(
                    e.payload,
                    buf.as_mut_ptr().add(in_len + op_sz),
                    payload_sz,
                );
                Some(&buf[..total])
            }
            _ => None,
        }
    };
    let reply = UringReply {
        queue: q.clone(),
        ent,
        dev: se.ch.sender(),
    };
    let Some(request) = request else {
        error!("uring queue {}: malformed request in entry {ent}", q.qid);
        answer_error(&reply, libc::EIO);
        return;
    };
    match RequestWithSender::new_uring(se.ch.sender(), reply.clone(), request) {
        Some(req) => req.dispatch(se),
        None => answer_error(&reply, libc::EIO),
    }
}

/// Answer an entry whose request could not be parsed.
fn answer_error(reply: &UringReply, errno: i32) {
    // SAFETY: as in `serve_entry`: the entry is ours until `finish`.
    let unique = unsafe {
        let h = &*reply.queue.ents[usize::from(reply.ent)].header;
        u64::from_ne_bytes(h.in_out[8..16].try_into().unwrap_or([0; 8]))
    };
    let mut hdr = [0u8; 16];
    hdr[0..4].copy_from_slice(&16u32.to_ne_bytes());
    hdr[4..8].copy_from_slice(&(-errno).to_ne_bytes());
    hdr[8..16].copy_from_slice(&unique.to_ne_bytes());
    let _ = reply.send(&[IoSlice::new(&hdr)]);
}

/// Log line for the mount.
pub(crate) fn log_started(n: usize, payload_len: usize) {
    info!(
        "FUSE over io_uring: {n} queues of {} entries, {} KiB payload buffers",
        entries_per_queue(n, payload_len),
        payload_len / 1024
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply_to(q: &Arc<QueueShared>, ent: u16) -> UringReply {
        let null = std::fs::File::options()
            .write(true)
            .open("/dev/null")
            .unwrap();
        let dev = crate::channel::Channel::new(Arc::new(crate::dev_fuse::DevFuse(null)));
        UringReply {
            queue: q.clone(),
            ent,
            dev: dev.sender(),
        }
    }

    /// The budget sets each queue's entries: as many as its share holds
    /// whole, at least two, at most QUEUE_DEPTH; none set, QUEUE_DEPTH.
    #[test]
    fn a_buffer_budget_sets_the_entries_per_queue() {
        const MIB: usize = 1 << 20;
        assert_eq!(entries_per_queue(2, MIB), QUEUE_DEPTH, "no budget");
        set_buffer_budget(8 << 20); // ram=64M: 4 MiB a queue, 3 entries of 1 MiB + a page
        assert_eq!(entries_per_queue(2, MIB), 3);
        set_buffer_budget(1 << 20);
        assert_eq!(entries_per_queue(2, MIB), MIN_ENTRIES, "never fewer than two");
        set_buffer_budget(1 << 40);
        assert_eq!(entries_per_queue(64, MIB), QUEUE_DEPTH, "never more than QUEUE_DEPTH");
        set_buffer_budget(0);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_count("0-1\n").unwrap(), 2);
        assert_eq!(cpu_count("0").unwrap(), 1);
        assert_eq!(cpu_count("0-3,8,10-11").unwrap(), 7);
        assert!(cpu_count("").is_err());
        assert!(cpu_count("3-1").is_err());
        assert!(cpu_count("x").is_err());
    }

    #[test]
    fn abi_sizes_match_the_kernel() {
        assert_eq!(size_of::<ReqHeader>(), 288);
        assert_eq!(size_of::<EntInOut>(), 32);
        assert_eq!(size_of::<CmdReq>(), 24);
        let cmd = CmdReq {
            flags: 0,
            commit_id: 0x1122,
            qid: 3,
            padding: [0; 6],
        }
        .bytes();
        assert_eq!(&cmd[8..10], &0x1122u16.to_ne_bytes());
        assert_eq!(&cmd[16..18], &3u16.to_ne_bytes());
    }

    #[test]
    fn register_sqe_carries_the_iovec_pair() {
        let q = QueueShared::new(1, 8192, QUEUE_DEPTH).unwrap();
        let sqe = fuse_cmd(7, &q, 2, CMD_REGISTER, 0);
        // SAFETY: as in set_sqe_len.
        let raw: [u8; 128] = unsafe { std::mem::transmute::<Entry128, [u8; 128]>(sqe) };
        assert_eq!(raw[0], io_uring::opcode::UringCmd80::CODE);
        assert_eq!(i32::from_ne_bytes(raw[4..8].try_into().unwrap()), 7);
        let addr = u64::from_ne_bytes(raw[16..24].try_into().unwrap());
        assert_eq!(addr, q.ents[2].iov.as_ptr() as u64);
        assert_eq!(u32::from_ne_bytes(raw[24..28].try_into().unwrap()), 2);
        assert_eq!(u64::from_ne_bytes(raw[32..40].try_into().unwrap()), 2);
        // The command area starts at byte 48: qid at 48 + 16.
        assert_eq!(u16::from_ne_bytes(raw[64..66].try_into().unwrap()), 1);
    }

    #[test]
    fn a_reply_lands_in_the_entry_and_is_queued_for_commit() {
        let q = Arc::new(QueueShared::new(0, 8192, QUEUE_DEPTH).unwrap());
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&(16u32 + 10).to_ne_bytes());
        hdr[8..16].copy_from_slice(&42u64.to_ne_bytes());
        // Header and payload split across slices in odd places.
        let data = b"0123456789";
        reply_to(&q, 3)
            .send(&[
                IoSlice::new(&hdr[..5]),
                IoSlice::new(&hdr[5..]),
                IoSlice::new(&data[..4]),
                IoSlice::new(&data[4..]),
            ])
            .unwrap();
        let e = &q.ents[3];
        // SAFETY: the test owns the queue; nothing else touches it.
        unsafe {
            let h = &*e.header;
            assert_eq!(&h.in_out[..16], &hdr);
            assert_eq!(h.ent_in_out.payload_sz, 10);
            assert_eq!(std::slice::from_raw_parts(e.payload, 10), data);
        }
        assert_eq!(*q.done.lock(), vec![3]);
    }

    #[test]
    fn an_in_place_requests_reply_waits_in_the_stash_until_the_commit() {
        let q = Arc::new(QueueShared::new(0, 8192, QUEUE_DEPTH).unwrap());
        let e = &q.ents[2];
        unsafe {
            // The request's data, borrowed from the payload while served.
            std::ptr::write_bytes(e.payload, 0xdd, 16);
            (*e.stash.get()).in_place = true;
        }
        let mut hdr = [0u8; 16];
        hdr[0..4].copy_from_slice(&24u32.to_ne_bytes());
        let out = 4096u32.to_ne_bytes(); // fuse_write_out.size
        reply_to(&q, 2)
            .send(&[IoSlice::new(&hdr), IoSlice::new(&out), IoSlice::new(&[0; 4])])
            .unwrap();
        unsafe {
            assert_eq!(*e.payload, 0xdd, "the borrowed data is untouched");
            assert_eq!((*e.header).ent_in_out.payload_sz, 8);
            prepare_commit(e);
            assert_eq!(std::slice::from_raw_parts(e.payload, 8), [0, 16, 0, 0, 0, 0, 0, 0]);
            assert!(!(*e.stash.get()).in_place);
        }
        assert_eq!(*q.done.lock(), vec![2]);
    }

    #[test]
    fn an_oversized_reply_becomes_eio() {
        let q = Arc::new(QueueShared::new(0, 4096, QUEUE_DEPTH).unwrap());
        let mut hdr = [0u8; 16];
        hdr[8..16].copy_from_slice(&7u64.to_ne_bytes());
        let big = vec![1u8; 5000];
        reply_to(&q, 0)
            .send(&[IoSlice::new(&hdr), IoSlice::new(&big)])
            .unwrap();
        // SAFETY: as above.
        unsafe {
            let h = &*q.ents[0].header;
            assert_eq!(
                i32::from_ne_bytes(h.in_out[4..8].try_into().unwrap()),
                -libc::EIO
            );
            assert_eq!(u64::from_ne_bytes(h.in_out[8..16].try_into().unwrap()), 7);
            assert_eq!(h.ent_in_out.payload_sz, 0);
        }
        assert!(reply_to(&q, 1).send(&[IoSlice::new(&hdr[..8])]).is_err());
    }
}
