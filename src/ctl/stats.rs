//! Per-operation counters and latency histograms for every FUSE operation,
//! plus byte counters for reads and writes.
//!
//! Owns the counters only; rendering is in `render.rs`. The FUSE adapter
//! records into them on every request, so the hot path is lock-free: one
//! `Instant::now()` at each end and three relaxed atomic adds (count, sum of
//! nanoseconds, one histogram bucket). Readers see each atomic exactly but
//! not a consistent cut across them, which is fine for statistics.
//!
//! The hot counters are kept per serving thread, not per mount (issue 9):
//! each thread that serves requests (an io_uring queue's, pinned to its
//! CPU, or a /dev/fuse worker) takes a shard of its own the first time it
//! counts (threads beyond the number of CPUs share, round robin), on cache
//! lines of its own, so that requests served on different CPUs never
//! write the same line; readers sum the shards.
//!
//! Histogram buckets are powers of two from 1.024 us: bucket `i` counts
//! requests that took at most `1024 << i` ns; the last bucket has no bound.

use std::cell::Cell;
use std::sync::atomic::AtomicUsize;
use std::time::Instant;

use crate::sync::{AtomicU64, OnceLock, Ordering};

/// Number of bounded buckets; the histogram has one more, unbounded.
pub const BOUNDED_BUCKETS: usize = 24;
/// All buckets, including the final unbounded one.
pub const BUCKETS: usize = BOUNDED_BUCKETS + 1;

/// Upper bound in nanoseconds of bounded bucket `i`.
pub fn bucket_bound_ns(i: usize) -> u64 {
    1024u64 << i
}

/// The bucket a duration of `ns` nanoseconds falls into.
fn bucket_of(ns: u64) -> usize {
    if ns <= 1024 {
        return 0;
    }
    // ceil(log2(ns)) - 10, capped at the unbounded bucket.
    let log2_ceil = 64 - (ns - 1).leading_zeros() as usize;
    (log2_ceil - 10).min(BOUNDED_BUCKETS)
}

macro_rules! ops {
    ($($variant:ident => $name:literal),* $(,)?) => {
        /// A FUSE operation, as counted in `stats/ops`.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum Op { $($variant),* }

        impl Op {
            /// Every operation, in the order the statistics files list them.
            pub const ALL: &'static [Op] = &[$(Op::$variant),*];

            /// The name used in the statistics files (the FUSE opcode, lower case).
            pub fn name(self) -> &'static str {
                match self { $(Op::$variant => $name),* }
            }
        }
    };
}

ops! {
    Lookup => "lookup",
    Forget => "forget",
    Getattr => "getattr",
    Setattr => "setattr",
    Readlink => "readlink",
    Mknod => "mknod",
    Mkdir => "mkdir",
    Unlink => "unlink",
    Rmdir => "rmdir",
    Symlink => "symlink",
    Rename => "rename",
    Link => "link",
    Open => "open",
    Read => "read",
    Write => "write",
    Flush => "flush",
    Release => "release",
    Fsync => "fsync",
    Opendir => "opendir",
    Readdir => "readdir",
    Readdirplus => "readdirplus",
    Releasedir => "releasedir",
    Fsyncdir => "fsyncdir",
    Statfs => "statfs",
    Setxattr => "setxattr",
    Getxattr => "getxattr",
    Listxattr => "listxattr",
    Removexattr => "removexattr",
    Access => "access",
    Create => "create",
    Getlk => "getlk",
    Setlk => "setlk",
    Bmap => "bmap",
    Ioctl => "ioctl",
    Poll => "poll",
    Fallocate => "fallocate",
    Lseek => "lseek",
    CopyFileRange => "copy_file_range",
    Tmpfile => "tmpfile",
    Statx => "statx",
}

/// Count, total time and latency histogram of one operation.
#[derive(Debug)]
pub struct OpStats {
    count: AtomicU64,
    total_ns: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

/// A copy of one operation's statistics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpSnapshot {
    pub op: Op,
    pub count: u64,
    pub total_ns: u64,
    /// Per-bucket (not cumulative) counts; see [`bucket_bound_ns`].
    pub buckets: [u64; BUCKETS],
}

impl OpSnapshot {
    pub fn mean_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }

    /// Upper bound of the bucket holding the `q` quantile (0 < q <= 1), in
    /// ns; `None` with no requests, `Some(u64::MAX)` in the unbounded bucket.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let total: u64 = self.buckets.iter().sum();
        if total == 0 {
            return None;
        }
        let rank = ((total as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(if i < BOUNDED_BUCKETS { bucket_bound_ns(i) } else { u64::MAX });
            }
        }
        Some(u64::MAX)
    }
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            count: AtomicU64::new(0),
            total_ns: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl OpStats {
    fn record(&self, ns: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        self.buckets[bucket_of(ns)].fetch_add(1, Ordering::Relaxed);
    }
}

thread_local! {
    /// Set while this thread serves a request for the control directory.
    static CONTROL_REQUEST: Cell<bool> = const { Cell::new(false) };
    /// This thread's shard number ([`NO_SHARD`] until it first counts).
    static SHARD: Cell<usize> = const { Cell::new(NO_SHARD) };
}

const NO_SHARD: usize = usize::MAX;
/// Shards at most: beyond this many serving threads, threads share.
const MAX_SHARDS: usize = 32;
/// The next shard number to hand to a thread (numbers grow; a mount's
/// shard is the number modulo its shard count).
static NEXT_SHARD: AtomicUsize = AtomicUsize::new(0);

/// This thread's shard number, taken the first time it counts.
fn shard_number() -> usize {
    SHARD.with(|c| match c.get() {
        NO_SHARD => {
            let n = NEXT_SHARD.fetch_add(1, Ordering::Relaxed);
            c.set(n);
            n
        }
        n => n,
    })
}

/// The counters one group of serving threads writes, on cache lines of
/// their own (the `Vec`'s buffer is an allocation of its own too).
#[repr(align(128))]
#[derive(Debug)]
struct Shard {
    ops: Vec<OpStats>,
    read_bytes: AtomicU64,
    write_bytes: AtomicU64,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            ops: Op::ALL.iter().map(|_| OpStats::default()).collect(),
            read_bytes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
        }
    }
}

/// The request this thread is serving is for the control directory: it is
/// counted in `control_requests`, not in the per-operation statistics, so
/// that reading the statistics does not show up in them.
pub fn mark_control_request() {
    CONTROL_REQUEST.with(|c| c.set(true));
}

/// Every operation's statistics and the byte counters of one mount.
#[derive(Debug)]
pub struct Stats {
    /// Per serving thread (see the module comment); summed when read.
    shards: Box<[Shard]>,
    /// Requests for the control directory itself.
    control_requests: AtomicU64,
    /// Passthrough (fuse/passthrough.rs): on at all, opens now, files with
    /// such opens now, opens granted since mount.
    pub passthrough_on: AtomicU64,
    pub passthrough_opens: AtomicU64,
    pub passthrough_files: AtomicU64,
    pub passthrough_opens_total: AtomicU64,
    /// The FUSE transport (set once by the daemon when the session exists).
    pub transport: TransportCell,
    /// The memfs-awake helper's counters over io_uring (fuse/awake.rs).
    pub awake: AwakeCell,
    /// Internal errors (panics inside a request) since mount, and whether
    /// they made the mount read-only (`errors=`, fuse/health.rs).
    pub errors_total: AtomicU64,
    pub read_only_after_error: AtomicU64,
    started: Instant,
}

/// The FUSE transport as the session reports it now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransportState {
    /// `dev_fuse`, `io_uring`, `io_uring_starting` or `dev_fuse_after_io_uring_failed`.
    pub name: &'static str,
    /// Requests come over io_uring queues.
    pub io_uring: bool,
    /// io_uring queues (one per possible CPU; 0 on /dev/fuse).
    pub queues: u64,
}

/// Asks the session which transport it uses (the daemon sets it).
pub type TransportProbe = Box<dyn Fn() -> TransportState + Send + Sync>;

/// Where the daemon leaves its [`TransportProbe`]; `/dev/fuse` until then.
#[derive(Default)]
pub struct TransportCell(OnceLock<TransportProbe>);

impl std::fmt::Debug for TransportCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.get())
    }
}

impl TransportCell {
    /// Set the probe (once; later calls are ignored).
    pub fn set(&self, probe: TransportProbe) {
        let _ = self.0.set(probe);
    }

    pub fn get(&self) -> TransportState {
        self.0.get().map_or(TransportState { name: "dev_fuse", io_uring: false, queues: 0 }, |p| p())
    }
}

/// What the memfs-awake helper did since mount (fuse/awake.rs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AwakeCounts {
    /// Times it started spinning for a stream of requests.
    pub spins: u64,
    /// Times it stopped because it waited for a CPU others wanted.
    pub crowded: u64,
}

/// Where the daemon leaves the helper's counters; zeros without a helper.
#[derive(Default)]
pub struct AwakeCell(OnceLock<Box<dyn Fn() -> AwakeCounts + Send + Sync>>);

impl std::fmt::Debug for AwakeCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.get())
    }
}

impl AwakeCell {
    /// Set the probe (once; later calls are ignored).
    pub fn set(&self, probe: Box<dyn Fn() -> AwakeCounts + Send + Sync>) {
        let _ = self.0.set(probe);
    }

    pub fn get(&self) -> AwakeCounts {
        self.0.get().map_or_else(AwakeCounts::default, |p| p())
    }
}

impl Default for Stats {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Stats {
            shards: (0..cpus.clamp(1, MAX_SHARDS)).map(|_| Shard::new()).collect(),
            control_requests: AtomicU64::new(0),
            passthrough_on: AtomicU64::new(0),
            passthrough_opens: AtomicU64::new(0),
            passthrough_files: AtomicU64::new(0),
            passthrough_opens_total: AtomicU64::new(0),
            transport: TransportCell::default(),
            awake: AwakeCell::default(),
            errors_total: AtomicU64::new(0),
            read_only_after_error: AtomicU64::new(0),
            started: Instant::now(),
        }
    }
}

/// Records the time from its creation to its drop against one operation.
pub struct Timer<'a> {
    op: &'a OpStats,
    control: &'a AtomicU64,
    start: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        if CONTROL_REQUEST.with(|c| c.replace(false)) {
            self.control.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.op.record(ns);
    }
}

impl Stats {
    /// Start timing one request of `op`; it is counted when the timer drops.
    pub fn time(&self, op: Op) -> Timer<'_> {
        CONTROL_REQUEST.with(|c| c.set(false));
        Timer { op: &self.shard().ops[op as usize], control: &self.control_requests, start: Instant::now() }
    }

    /// The calling thread's shard.
    fn shard(&self) -> &Shard {
        &self.shards[shard_number() % self.shards.len()]
    }

    /// Every request since mount but those for the control directory (a
    /// measure of activity: src/trim.rs trims only while it stands still,
    /// so that no file operation waits for a trim; a monitor reading the
    /// statistics every second or faster kept the freed memory for good).
    pub fn requests(&self) -> u64 {
        self.shards.iter().flat_map(|s| &s.ops).map(|o| o.count.load(Ordering::Relaxed)).sum()
    }

    /// Requests for the control directory since mount.
    pub fn control_requests(&self) -> u64 {
        self.control_requests.load(Ordering::Relaxed)
    }

    /// Count one request of `op` that took `ns` nanoseconds.
    pub fn record(&self, op: Op, ns: u64) {
        self.shard().ops[op as usize].record(ns);
    }

    pub fn add_read_bytes(&self, n: u64) {
        self.shard().read_bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub fn add_write_bytes(&self, n: u64) {
        self.shard().write_bytes.fetch_add(n, Ordering::Relaxed);
    }

    pub fn read_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.read_bytes.load(Ordering::Relaxed)).sum()
    }

    pub fn write_bytes(&self) -> u64 {
        self.shards.iter().map(|s| s.write_bytes.load(Ordering::Relaxed)).sum()
    }

    /// Seconds since the mount started serving.
    pub fn uptime_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// A copy of every operation's statistics, in [`Op::ALL`] order.
    pub fn ops(&self) -> Vec<OpSnapshot> {
        let sum = |op: usize, f: &dyn Fn(&OpStats) -> &AtomicU64| -> u64 {
            self.shards.iter().map(|s| f(&s.ops[op]).load(Ordering::Relaxed)).sum()
        };
        Op::ALL
            .iter()
            .enumerate()
            .map(|(i, &op)| OpSnapshot {
                op,
                count: sum(i, &|s| &s.count),
                total_ns: sum(i, &|s| &s.total_ns),
                buckets: std::array::from_fn(|b| sum(i, &|s| &s.buckets[b])),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_bounds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1024), 0);
        assert_eq!(bucket_of(1025), 1);
        assert_eq!(bucket_of(2048), 1);
        assert_eq!(bucket_of(2049), 2);
        assert_eq!(bucket_of(bucket_bound_ns(BOUNDED_BUCKETS - 1)), BOUNDED_BUCKETS - 1);
        assert_eq!(bucket_of(bucket_bound_ns(BOUNDED_BUCKETS - 1) + 1), BOUNDED_BUCKETS);
        assert_eq!(bucket_of(u64::MAX), BOUNDED_BUCKETS);
        for ns in [1u64, 999, 5000, 1 << 20, 123_456_789] {
            let b = bucket_of(ns);
            assert!(ns <= bucket_bound_ns(b));
            assert!(b == 0 || ns > bucket_bound_ns(b - 1));
        }
    }

    #[test]
    fn records_count_sum_and_quantiles() {
        let s = Stats::default();
        for _ in 0..99 {
            s.record(Op::Lookup, 1000);
        }
        s.record(Op::Lookup, 1_000_000);
        let snap = &s.ops()[Op::Lookup as usize];
        assert_eq!(snap.op, Op::Lookup);
        assert_eq!(snap.count, 100);
        assert_eq!(snap.total_ns, 99 * 1000 + 1_000_000);
        assert_eq!(snap.quantile_ns(0.5), Some(1024));
        assert_eq!(snap.quantile_ns(0.99), Some(1024));
        assert_eq!(snap.quantile_ns(1.0), Some(1 << 20));
        assert_eq!(s.ops()[Op::Read as usize].quantile_ns(0.5), None);
        {
            let _t = s.time(Op::Read);
        }
        assert_eq!(s.ops()[Op::Read as usize].count, 1);
    }

    /// Threads count into shards of their own (as many as the machine has
    /// CPUs, at most MAX_SHARDS; threads beyond share) and readers see the
    /// exact sums.
    #[test]
    fn threads_count_in_shards_of_their_own_and_the_sums_are_exact() {
        let s = std::sync::Arc::new(Stats::default());
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let s = s.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        s.record(Op::Write, 2000 + t);
                        s.add_write_bytes(t + 1);
                    }
                    shard_number() % s.shards.len()
                })
            })
            .collect();
        let used: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let w = &s.ops()[Op::Write as usize];
        assert_eq!(w.count, 4000);
        assert_eq!(w.total_ns, 1000 * (2000 + 2001 + 2002 + 2003));
        assert_eq!(w.buckets.iter().sum::<u64>(), 4000);
        assert_eq!(s.write_bytes(), 1000 * (1 + 2 + 3 + 4));
        assert_eq!(s.requests(), 4000);
        // Each thread's requests are in its own shard and nowhere else.
        for (i, shard) in s.shards.iter().enumerate() {
            let threads_here = used.iter().filter(|&&u| u == i).count() as u64;
            assert_eq!(shard.ops[Op::Write as usize].count.load(Ordering::Relaxed), 1000 * threads_here, "shard {i}");
        }
    }

    #[test]
    fn op_names_are_unique_and_index_matches() {
        let mut names: Vec<_> = Op::ALL.iter().map(|o| o.name()).collect();
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(*op as usize, i);
        }
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Op::ALL.len());
    }
}
