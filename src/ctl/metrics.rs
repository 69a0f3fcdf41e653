//! Every statistic memfs shows, declared once with its one-line
//! description: the key in `stats/usage` or `stats/io`, the Prometheus
//! name and type, and how to read it. `stats/README`, the `# HELP` lines
//! of `stats/prometheus` and docs/CONTROL.md all come from here.
//!
//! Owns the declarations only; `render.rs` and `prometheus.rs` format them.

use crate::core::types::PAGE_SIZE;
use crate::core::usage::INODE_COST;
use crate::core::{Fs, UsageSnapshot};

use super::stats::Stats;

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
        key: "no_data",
        metric: "memfs_no_data",
        kind: MetricType::Gauge,
        help: "1 while written bytes are discarded (opts/no_data), else 0.",
        get: |v| u64::from(v.fs.no_data()),
    },
];

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
        let all: Vec<&Scalar> = USAGE.iter().chain(IO).collect();
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
