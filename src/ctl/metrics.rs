//! Every statistic memfs shows, declared once with its one-line
//! description: the key in `stats/usage` or `stats/io`, the Prometheus
//! name and type, and how to read it. `stats/README`, the `# HELP` lines
//! of `stats/prometheus` and docs/CONTROL.md all come from here.
//!
//! Owns the declarations only; `render.rs` and `prometheus.rs` format them.

use crate::core::arena;
use crate::core::pager::PagerStats;
use crate::core::types::PAGE_SIZE;
use crate::core::usage::INODE_COST;
use crate::core::{Fs, UsageSnapshot};

use super::stats::Stats;
use crate::sync::Ordering;

/// What a statistic is computed from: one consistent read of the usage
/// counters plus the live request statistics.
pub struct View<'a> {
    pub fs: &'a Fs,
    pub usage: UsageSnapshot,
    pub stats: &'a Stats,
    /// Control-file snapshots held for the kernel right now.
    pub snapshots: usize,
    /// Where this memfs is mounted (the `mountpoint` label in Prometheus).
    pub mountpoint: &'a str,
    /// The mount options as given at mount (`stats/options`).
    pub options: &'a str,
    /// The pager's figures (all zero without `ram=`).
    pub pager: PagerStats,
}

/// Prometheus metric type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricType {
    Gauge,
    Counter,
}

impl MetricType {
    pub fn name(self) -> &'static str {
        match self {
            MetricType::Gauge => "gauge",
            MetricType::Counter => "counter",
        }
    }
}

/// One number, shown as `key: value` in its file and as a Prometheus sample.
pub struct Scalar {
    pub key: &'static str,
    /// Prometheus name (with the `memfs_` prefix).
    pub metric: &'static str,
    pub kind: MetricType,
    pub help: &'static str,
    pub get: fn(&View) -> u64,
}

/// `stats/usage`: space, inodes and metadata.
pub const USAGE: &[Scalar] = &[
    Scalar {
        key: "data_bytes_used",
        metric: "memfs_data_used_bytes",
        kind: MetricType::Gauge,
        help: "Bytes of file data in use, counted in 4 KiB pages as tmpfs counts them.",
        get: |v| v.usage.used_pages.saturating_mul(PAGE_SIZE),
    },
    Scalar {
        key: "data_bytes_limit",
        metric: "memfs_data_limit_bytes",
        kind: MetricType::Gauge,
        help: "The size limit in bytes (opts/size); 0 means unlimited.",
        get: |v| v.usage.max_pages.saturating_mul(PAGE_SIZE),
    },
    Scalar {
        key: "data_bytes_avail",
        metric: "memfs_data_avail_bytes",
        kind: MetricType::Gauge,
        help: "Bytes more that file data can take, as df shows them: under ram= the ceiling and the store bound it, not size= alone; 0 means none or unlimited.",
        get: |v| if v.usage.max_pages == 0 { 0 } else { v.fs.statfs().bavail.saturating_mul(PAGE_SIZE) },
    },
    Scalar {
        key: "inodes_used",
        metric: "memfs_inodes_used",
        kind: MetricType::Gauge,
        help:
            "Inodes in use as df -i and nr_inodes count them (inode space / 1024: hard links and xattrs use some too).",
        get: |v| v.usage.used_ispace.div_ceil(INODE_COST),
    },
    Scalar {
        key: "inodes_limit",
        metric: "memfs_inodes_limit",
        kind: MetricType::Gauge,
        help: "The inode limit (opts/nr_inodes); 0 means unlimited.",
        get: |v| v.usage.max_inodes,
    },
    Scalar {
        key: "inodes_live",
        metric: "memfs_inodes_live",
        kind: MetricType::Gauge,
        help: "Inodes that exist, including deleted files the kernel still holds open.",
        get: |v| v.usage.inodes,
    },
    Scalar {
        key: "metadata_bytes",
        metric: "memfs_metadata_bytes",
        kind: MetricType::Gauge,
        help: "Estimated heap bytes of metadata (inodes, names, xattrs, symlink targets); not counted against size.",
        get: |v| v.usage.meta_bytes,
    },
    Scalar {
        key: "metadata_bytes_limit",
        metric: "memfs_metadata_limit_bytes",
        kind: MetricType::Gauge,
        help: "Ceiling on metadata_bytes (meta= or metapct=); 0 = none. Past it, new names and xattrs get ENOSPC.",
        get: |v| v.fs.max_meta_bytes(),
    },
    Scalar {
        key: "no_data",
        metric: "memfs_no_data",
        kind: MetricType::Gauge,
        help: "1 while written bytes are discarded (opts/no_data), else 0.",
        get: |v| u64::from(v.fs.no_data()),
    },
    Scalar {
        key: "arena_bytes",
        metric: "memfs_arena_bytes",
        kind: MetricType::Gauge,
        help:
            "Bytes of the daemon's page arenas holding file pages, resident and compressed (slots of 64-byte classes).",
        get: |_| arena::stats().in_use,
    },
    Scalar {
        key: "arena_free_bytes",
        metric: "memfs_arena_free_bytes",
        kind: MetricType::Gauge,
        help: "Bytes of free arena slots that may still hold RAM until the next trim gives their pages back.",
        get: |_| arena::stats().slack,
    },
    Scalar {
        key: "arena_resident_bytes",
        metric: "memfs_arena_resident_bytes",
        kind: MetricType::Gauge,
        help: "Bytes of the arenas' spans touched and not given back since: their RAM, slots in use or not.",
        get: |_| arena::stats().resident,
    },
    Scalar {
        key: "arena_trimmed_bytes_total",
        metric: "memfs_arena_trimmed_bytes_total",
        kind: MetricType::Counter,
        help: "Bytes of arena memory given back to the kernel (MADV_DONTNEED) since mount.",
        get: |_| arena::stats().trimmed,
    },
    Scalar {
        key: "heap_bytes",
        metric: "memfs_heap_bytes",
        kind: MetricType::Gauge,
        help: "Bytes the daemon's malloc heap has handed out (mallinfo2 uordblks, chunks in malloc's thread caches included; allocations of 128 KiB and more are mapped apart and not counted): metadata, the pages' index, small buffers.",
        get: |_| heap().1,
    },
    Scalar {
        key: "heap_free_bytes",
        metric: "memfs_heap_free_bytes",
        kind: MetricType::Gauge,
        help: "Bytes free inside the malloc heap (mallinfo2 fordblks), some given back to the kernel already, some still in RAM until a trim.",
        get: |_| heap().0,
    },
];

/// The malloc heap's free bytes and bytes in use.
fn heap() -> (u64, u64) {
    // SAFETY: mallinfo2 only reads the allocator's own statistics.
    let m = unsafe { libc::mallinfo2() };
    (m.fordblks as u64, m.uordblks as u64)
}

/// `stats/io`: bytes moved and daemon housekeeping.
pub const IO: &[Scalar] = &[
    Scalar {
        key: "read_bytes",
        metric: "memfs_read_bytes_total",
        kind: MetricType::Counter,
        help: "Bytes returned by READ requests since mount (reads served from the kernel page cache are not seen).",
        get: |v| v.stats.read_bytes(),
    },
    Scalar {
        key: "write_bytes",
        metric: "memfs_write_bytes_total",
        kind: MetricType::Counter,
        help: "Bytes accepted by WRITE requests since mount.",
        get: |v| v.stats.write_bytes(),
    },
    Scalar {
        key: "control_requests",
        metric: "memfs_control_requests_total",
        kind: MetricType::Counter,
        help: "Requests for the control directory itself (reading these statistics), kept out of the per-operation counts.",
        get: |v| v.stats.control_requests(),
    },
    Scalar {
        key: "uptime_seconds",
        metric: "memfs_uptime_seconds",
        kind: MetricType::Gauge,
        help: "Seconds since the mount started serving.",
        get: |v| v.stats.uptime_secs(),
    },
    Scalar {
        key: "ctl_snapshots",
        metric: "memfs_ctl_snapshots",
        kind: MetricType::Gauge,
        help: "Control-file snapshots held until the kernel forgets them (see docs/CONTROL.md).",
        get: |v| v.snapshots as u64,
    },
    Scalar {
        key: "errors_total",
        metric: "memfs_errors_total",
        kind: MetricType::Counter,
        help: "Internal errors since mount: requests that panicked inside memfs and got EIO (logged with the operation).",
        get: |v| v.stats.errors_total.load(Ordering::Relaxed),
    },
    Scalar {
        key: "read_only_after_error",
        metric: "memfs_read_only_after_error",
        kind: MetricType::Gauge,
        help: "1 when an internal error made the mount refuse every change (errors=remount-ro).",
        get: |v| v.stats.read_only_after_error.load(Ordering::Relaxed),
    },
];

/// `stats/pager`: the tiers under `ram=` (core/pager). All zero without a pager.
/// `stats/transport`: how requests reach the daemon (`uring=`).
pub const TRANSPORT: &[Scalar] = &[
    Scalar {
        key: "io_uring",
        metric: "memfs_transport_io_uring",
        kind: MetricType::Gauge,
        help: "1 when requests arrive over FUSE-over-io_uring queues (uring=), 0 over /dev/fuse.",
        get: |v| u64::from(v.stats.transport.get().io_uring),
    },
    Scalar {
        key: "io_uring_queues",
        metric: "memfs_transport_io_uring_queues",
        kind: MetricType::Gauge,
        help: "io_uring queues, one per possible CPU (0 on /dev/fuse).",
        get: |v| v.stats.transport.get().queues,
    },
    Scalar {
        key: "io_uring_buffer_bytes",
        metric: "memfs_transport_io_uring_buffer_bytes",
        kind: MetricType::Gauge,
        help: "Bytes of the queues' payload buffers in RAM (touched by requests and replies since their last trim, \
               a second after the last large one); under ram= counted in stats/pager overhead_bytes.",
        get: |_| fuser::uring_buffer_bytes(),
    },
    Scalar {
        key: "awake_spins_total",
        metric: "memfs_transport_awake_spins_total",
        kind: MetricType::Counter,
        help: "Times the memfs-awake helper started spinning to keep an idle CPU awake while requests came over \
               io_uring (poll_us; fuse/awake.rs). 0 over /dev/fuse and on one CPU.",
        get: |v| v.stats.awake.get().spins,
    },
    Scalar {
        key: "awake_crowded_total",
        metric: "memfs_transport_awake_crowded_total",
        kind: MetricType::Counter,
        help: "Times the memfs-awake helper stopped and backed off because it waited for a CPU that other \
               processes wanted (no CPU was idle).",
        get: |v| v.stats.awake.get().crowded,
    },
];

/// `stats/migrate`: the last (or running) `memfs migrate`.
pub const MIGRATE: &[Scalar] = &[
    Scalar {
        key: "running",
        metric: "memfs_migrate_running",
        kind: MetricType::Gauge,
        help: "1 while a migration of file pages onto the allowed NUMA nodes runs (opts/migrate).",
        get: |v| u64::from(v.fs.migration().running),
    },
    Scalar {
        key: "migrations_total",
        metric: "memfs_migrations_total",
        kind: MetricType::Counter,
        help: "Migrations started since mount.",
        get: |v| v.fs.migration().runs,
    },
    Scalar {
        key: "pages",
        metric: "memfs_migrate_pages",
        kind: MetricType::Gauge,
        help: "Pages of file data in RAM the last (or running) migration looked at.",
        get: |v| v.fs.migration().done.pages,
    },
    Scalar {
        key: "moved",
        metric: "memfs_migrate_moved_pages",
        kind: MetricType::Gauge,
        help: "Pages the last (or running) migration moved to a node the policy allows.",
        get: |v| v.fs.migration().done.moved,
    },
    Scalar {
        key: "failed",
        metric: "memfs_migrate_failed_pages",
        kind: MetricType::Gauge,
        help: "Pages the last (or running) migration should have moved and could not (busy, or no room).",
        get: |v| v.fs.migration().done.failed,
    },
    Scalar {
        key: "data_pages",
        metric: "memfs_data_pages",
        kind: MetricType::Gauge,
        help: "Pages of file data the mount holds, in every tier (what a migration walks at most).",
        get: |v| v.usage.used_pages,
    },
];

/// Prometheus family of `stats/pagestat`, one sample per node.
pub const NUMA_PAGES_METRIC: &str = "memfs_numa_pages";
pub const NUMA_PAGES_HELP: &str =
    "Pages of file data in RAM on each NUMA node, as the kernel says (move_pages), arenas and memory files.";

/// `stats/passthrough`: what memfs can see of I/O it never serves.
pub const PASSTHROUGH: &[Scalar] = &[
    Scalar {
        key: "passthrough",
        metric: "memfs_passthrough_enabled",
        kind: MetricType::Gauge,
        help: "1 when large files are opened with FUSE passthrough (passthrough=; the kernel and the daemon's privileges allow it).",
        get: |v| v.stats.passthrough_on.load(Ordering::Relaxed),
    },
    Scalar {
        key: "memory_files",
        metric: "memfs_memory_files",
        kind: MetricType::Gauge,
        help: "Files whose bytes live in a kernel memory file (passthrough_min= or larger).",
        get: |v| v.fs.kernel_file_usage().0,
    },
    Scalar {
        key: "memory_file_bytes",
        metric: "memfs_memory_file_bytes",
        kind: MetricType::Gauge,
        help: "Bytes allocated to files in kernel memory files: their pages, those the pager moved out and those fallocated but not written included (stats/pager memory_file_pages is what is in RAM), as last taken in (at stat, statfs and the close of a passthrough open).",
        get: |v| v.fs.kernel_file_usage().1 * PAGE_SIZE,
    },
    Scalar {
        key: "passthrough_files",
        metric: "memfs_passthrough_files",
        kind: MetricType::Gauge,
        help: "Files open with passthrough now.",
        get: |v| v.stats.passthrough_files.load(Ordering::Relaxed),
    },
    Scalar {
        key: "passthrough_opens",
        metric: "memfs_passthrough_opens",
        kind: MetricType::Gauge,
        help: "Passthrough opens now (their reads, writes and mmaps go to the kernel: memfs cannot count them; read_bytes, write_bytes and the ops table do not include them).",
        get: |v| v.stats.passthrough_opens.load(Ordering::Relaxed),
    },
    Scalar {
        key: "passthrough_opens_total",
        metric: "memfs_passthrough_opens_total",
        kind: MetricType::Counter,
        help: "Opens answered with passthrough since mount.",
        get: |v| v.stats.passthrough_opens_total.load(Ordering::Relaxed),
    },
];

pub const PAGER: &[Scalar] = &[
    Scalar {
        key: "ram_limit_bytes",
        metric: "memfs_pager_ram_limit_bytes",
        kind: MetricType::Gauge,
        help: "The RAM ceiling for file data (ram= or swappct=); 0 = no pager, every page stays in RAM.",
        get: |v| v.pager.ram_limit_bytes,
    },
    Scalar {
        key: "ram_least_bytes",
        metric: "memfs_pager_ram_least_bytes",
        kind: MetricType::Gauge,
        help: "The least ceiling a live change of ram= takes now: what indexes the pages on the backing store \
               (their index is kept in RAM, under the ceiling), or without a store what file data took \
               compressed at the last refused change; at least 64k.",
        get: |v| v.pager.ram_least_bytes,
    },
    Scalar {
        key: "ram_usable_bytes",
        metric: "memfs_pager_ram_usable_bytes",
        kind: MetricType::Gauge,
        help: "The memory the daemon may use: the machine's RAM, or its memory cgroup's limit (with the groups \
               above it) where that is less; 0 without a ceiling. A ceiling above it cannot bind: the kernel \
               reclaims or kills first.",
        get: |v| if v.pager.ram_limit_bytes == 0 { 0 } else { crate::sysmem::usable_memory().0 },
    },
    Scalar {
        key: "ram_bytes",
        metric: "memfs_pager_ram_bytes",
        kind: MetricType::Gauge,
        help: "RAM held by file data under the ceiling: resident bytes plus compressed bytes.",
        get: |v| v.pager.ram_bytes(),
    },
    Scalar {
        key: "overhead_bytes",
        metric: "memfs_pager_overhead_bytes",
        kind: MetricType::Gauge,
        help: "RAM those pages cost beyond their bytes, also under the ceiling: their index in the heap (estimated per page, pages on the store included) the arenas' free space in RAM (at most a quarter of the ceiling), and the io_uring queues' buffers in RAM.",
        get: |v| v.pager.overhead_bytes,
    },
    Scalar {
        key: "resident_pages",
        metric: "memfs_pager_resident_pages",
        kind: MetricType::Gauge,
        help: "Pages held uncompressed in RAM.",
        get: |v| v.pager.resident_pages,
    },
    Scalar {
        key: "resident_bytes",
        metric: "memfs_pager_resident_bytes",
        kind: MetricType::Gauge,
        help: "Bytes of those pages (a small file's page holds only what it needs).",
        get: |v| v.pager.resident_bytes,
    },
    Scalar {
        key: "memory_file_pages",
        metric: "memfs_pager_memory_file_pages",
        kind: MetricType::Gauge,
        help: "Of the resident pages, those in kernel memory files (large files, docs/PASSTHROUGH.md); paged out by file, oldest used first.",
        get: |v| v.pager.memory_file_pages,
    },
    Scalar {
        key: "compressed_pages",
        metric: "memfs_pager_compressed_pages",
        kind: MetricType::Gauge,
        help: "Pages held compressed in RAM.",
        get: |v| v.pager.compressed_pages,
    },
    Scalar {
        key: "compressed_original_bytes",
        metric: "memfs_pager_compressed_original_bytes",
        kind: MetricType::Gauge,
        help: "Bytes those pages hold once decompressed.",
        get: |v| v.pager.compressed_original_bytes,
    },
    Scalar {
        key: "compressed_bytes",
        metric: "memfs_pager_compressed_bytes",
        kind: MetricType::Gauge,
        help: "RAM those compressed pages take (ratio = compressed_original_bytes / compressed_bytes).",
        get: |v| v.pager.compressed_bytes,
    },
    Scalar {
        key: "backing_pages",
        metric: "memfs_pager_backing_pages",
        kind: MetricType::Gauge,
        help: "Pages on the backing store (each in a 4 KiB slot, compressed or not), clean_pages (copies of pages also in RAM) included.",
        get: |v| v.pager.backing_pages,
    },
    Scalar {
        key: "backing_bytes",
        metric: "memfs_pager_backing_bytes",
        kind: MetricType::Gauge,
        help: "Backing-store space in use, in 4 KiB slots.",
        get: |v| v.pager.backing_pages.saturating_mul(PAGE_SIZE),
    },
    Scalar {
        key: "backing_capacity_bytes",
        metric: "memfs_pager_backing_capacity_bytes",
        kind: MetricType::Gauge,
        help:
            "Bytes the backing store may hold: a block device's size, or less where the RAM ceiling bounds it (the index of the pages on the store takes RAM under ram=, at most half of it); for a directory, that bound (the file grows until it or its file system is full).",
        get: |v| v.pager.backing_capacity_pages.saturating_mul(PAGE_SIZE),
    },
    Scalar {
        key: "hits_total",
        metric: "memfs_pager_hits_total",
        kind: MetricType::Counter,
        help: "Resident pages read through memfs (reads served from the kernel page cache are not seen).",
        get: |v| v.pager.hits,
    },
    Scalar {
        key: "misses_total",
        metric: "memfs_pager_misses_total",
        kind: MetricType::Counter,
        help: "Pages a request needed from the compressed tier or the backing store.",
        get: |v| v.pager.misses,
    },
    Scalar {
        key: "page_ins_total",
        metric: "memfs_pager_page_ins_total",
        kind: MetricType::Counter,
        help: "Pages loaded back into RAM intact.",
        get: |v| v.pager.page_ins,
    },
    Scalar {
        key: "read_through_total",
        metric: "memfs_pager_read_through_total",
        kind: MetricType::Counter,
        help: "Of the page-ins, pages served to a random reader without being made resident (the first read since they were paged out).",
        get: |v| v.pager.read_through,
    },
    Scalar {
        key: "page_outs_total",
        metric: "memfs_pager_page_outs_total",
        kind: MetricType::Counter,
        help: "Pages written to the backing store.",
        get: |v| v.pager.page_outs,
    },
    Scalar {
        key: "evictions_total",
        metric: "memfs_pager_evictions_total",
        kind: MetricType::Counter,
        help: "Resident pages moved out of RAM (compressed, or straight to the backing store).",
        get: |v| v.pager.evictions,
    },
    Scalar {
        key: "kept_total",
        metric: "memfs_pager_kept_total",
        kind: MetricType::Counter,
        help: "Pages a page-out tried that stayed in RAM: they do not compress usefully and no backing store took them.",
        get: |v| v.pager.kept,
    },
    Scalar {
        key: "clean_pages",
        metric: "memfs_pager_clean_pages",
        kind: MetricType::Gauge,
        help: "Of the backing pages, copies of pages loaded back into RAM and unchanged since: kept so that their next page-out writes nothing, given up when the page changes or the store runs short.",
        get: |v| v.pager.clean_pages,
    },
    Scalar {
        key: "clean_reused_total",
        metric: "memfs_pager_clean_reused_total",
        kind: MetricType::Counter,
        help: "Page-outs that wrote nothing: the page's clean copy on the backing store still held its bytes (checked by a keyed 128-bit hash). Not in page_outs_total.",
        get: |v| v.pager.clean_reused,
    },
    Scalar {
        key: "checksum_errors_total",
        metric: "memfs_pager_checksum_errors_total",
        kind: MetricType::Counter,
        help: "Loads of a page that came back damaged (checksum or decompression failed), each answered EIO: a damaged page read twice counts twice.",
        get: |v| v.pager.checksum_errors,
    },
    Scalar {
        key: "io_errors_total",
        metric: "memfs_pager_io_errors_total",
        kind: MetricType::Counter,
        help: "Backing-store reads or writes that failed with an I/O error.",
        get: |v| v.pager.io_errors,
    },
    Scalar {
        key: "backing_full_total",
        metric: "memfs_pager_backing_full_total",
        kind: MetricType::Counter,
        help: "Times the backing store was found full (once each time it filled up again after having room): page-outs wait, writers that need room get ENOSPC.",
        get: |v| v.pager.backing_full,
    },
];

/// Per-operation histogram (`stats/ops`, `stats/latency`).
pub const OP_DURATION_METRIC: &str = "memfs_op_duration_seconds";
pub const OP_DURATION_HELP: &str =
    "Time the daemon spent on each FUSE operation, from receiving the request to sending the reply.";

/// Per-owner usage (`stats/uid`).
pub const UID_BYTES_METRIC: &str = "memfs_uid_data_bytes";
pub const UID_BYTES_HELP: &str = "Bytes of file data (4 KiB pages) owned by each uid.";
pub const UID_INODES_METRIC: &str = "memfs_uid_inodes";
pub const UID_INODES_HELP: &str = "Inodes owned by each uid.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_help_is_one_line() {
        let all: Vec<&Scalar> = USAGE.iter().chain(IO).chain(PAGER).chain(PASSTHROUGH).collect();
        let mut keys: Vec<_> = all.iter().map(|s| s.key).collect();
        let mut metrics: Vec<_> = all.iter().map(|s| s.metric).collect();
        keys.sort();
        keys.dedup();
        metrics.sort();
        metrics.dedup();
        assert_eq!((keys.len(), metrics.len()), (all.len(), all.len()));
        for s in &all {
            assert!(s.metric.starts_with("memfs_"), "{}", s.metric);
            assert!(!s.help.contains(['\n', '\\']), "{}", s.key);
            assert_eq!(s.kind == MetricType::Counter, s.metric.ends_with("_total"), "{}", s.metric);
        }
    }
}
