//! The text of every read-only control file: the statistics files and the
//! READMEs. Each file is plain text ending in a newline; formats are
//! described in docs/CONTROL.md and parsed back by `report.rs`.
//!
//! Owns the formats and the table of statistics files ([`STAT_FILES`]).

use std::fmt::Write;

use super::metrics::{Scalar, View, IO, MIGRATE, PAGER, PASSTHROUGH, TRANSPORT, USAGE};
use super::prometheus;
use super::stats::{bucket_bound_ns, OpSnapshot, BOUNDED_BUCKETS};
use super::tunables::TUNABLES;
use crate::core::types::PAGE_SIZE;

/// One file in `stats/`.
pub struct StatFile {
    pub name: &'static str,
    /// One line, shown in `stats/README`.
    pub help: &'static str,
    pub render: fn(&View) -> String,
}

/// The files of `stats/`, in listing order.
pub const STAT_FILES: &[StatFile] = &[
    StatFile { name: "README", help: "this description", render: stats_readme },
    StatFile { name: "usage", help: "space and inodes in use and their limits, as `key: value` lines", render: usage },
    StatFile { name: "io", help: "bytes read and written through FUSE, uptime, as `key: value` lines", render: io },
    StatFile {
        name: "ops",
        help: "per FUSE operation: count, total and mean time, p50 and p99 (histogram bucket bounds, ns)",
        render: ops,
    },
    StatFile {
        name: "latency",
        help: "per FUSE operation: latency histogram, requests per bucket; the header gives each bucket's bound in ns",
        render: latency,
    },
    StatFile {
        name: "pager",
        help: "the tiers under ram=: RAM, compressed, backing store; hits, page-ins, page-outs, errors",
        render: pager,
    },
    StatFile {
        name: "passthrough",
        help: "large files in kernel memory files and their passthrough opens (I/O memfs never sees)",
        render: passthrough,
    },
    StatFile {
        name: "transport",
        help: "how requests reach memfs: `transport: dev_fuse` or `io_uring` (uring=), then `key: value` lines",
        render: transport,
    },
    StatFile {
        name: "pagestat",
        help: "pages of file data in RAM per NUMA node, `node<N> <pages>`, where the kernel says they are",
        render: pagestat,
    },
    StatFile {
        name: "migrate",
        help: "the last (or running) migration onto the allowed nodes (opts/migrate), as `key: value` lines",
        render: migrate,
    },
    StatFile {
        name: "options",
        help: "the mount options as given at mount, one line (a remount refuses to change those fixed at mount)",
        render: options,
    },
    StatFile { name: "uid", help: "data bytes and inodes owned by each uid", render: uid },
    StatFile {
        name: "prometheus",
        help: "all of the above in the Prometheus text format (for node_exporter's textfile collector)",
        render: prometheus::render,
    },
];

fn scalars(out: &mut String, v: &View, table: &[Scalar]) {
    for s in table {
        let _ = writeln!(out, "{}: {}", s.key, (s.get)(v));
    }
}

fn usage(v: &View) -> String {
    let mut out = String::new();
    scalars(&mut out, v, USAGE);
    out
}

fn io(v: &View) -> String {
    let mut out = String::new();
    scalars(&mut out, v, IO);
    out
}

fn passthrough(v: &View) -> String {
    let mut out = String::new();
    scalars(&mut out, v, PASSTHROUGH);
    out
}

fn transport(v: &View) -> String {
    let mut out = format!("transport: {}\n", v.stats.transport.get().name);
    scalars(&mut out, v, TRANSPORT);
    out
}

fn pagestat(v: &View) -> String {
    v.fs.pagestat().iter().map(|(node, pages)| format!("node{node} {pages}\n")).collect()
}

fn migrate(v: &View) -> String {
    let mut out = String::new();
    scalars(&mut out, v, MIGRATE);
    out
}

fn options(v: &View) -> String {
    format!("{}\n", v.options)
}

fn pager(v: &View) -> String {
    let mut out = String::new();
    scalars(&mut out, v, PAGER);
    out
}

/// A quantile for the `ops` file: 0 without requests, `inf` past the last bound.
fn quantile(op: &OpSnapshot, q: f64) -> String {
    match op.quantile_ns(q) {
        None => "0".into(),
        Some(u64::MAX) => "inf".into(),
        Some(ns) => ns.to_string(),
    }
}

fn ops(v: &View) -> String {
    let mut out = format!(
        "{:<16} {:>12} {:>16} {:>10} {:>10} {:>10}\n",
        "op", "count", "total_ns", "mean_ns", "p50_ns", "p99_ns"
    );
    for op in v.stats.ops() {
        let _ = writeln!(
            out,
            "{:<16} {:>12} {:>16} {:>10} {:>10} {:>10}",
            op.op.name(),
            op.count,
            op.total_ns,
            op.mean_ns(),
            quantile(&op, 0.5),
            quantile(&op, 0.99)
        );
    }
    out
}

fn latency(v: &View) -> String {
    let mut out = String::from("op");
    for i in 0..BOUNDED_BUCKETS {
        let _ = write!(out, " {}", bucket_bound_ns(i));
    }
    out.push_str(" inf\n");
    for op in v.stats.ops() {
        out.push_str(op.op.name());
        for n in op.buckets {
            let _ = write!(out, " {n}");
        }
        out.push('\n');
    }
    out
}

fn uid(v: &View) -> String {
    let mut out = format!("{:<10} {:>16} {:>12}\n", "uid", "data_bytes", "inodes");
    for u in v.fs.usage_by_uid() {
        let _ = writeln!(out, "{:<10} {:>16} {:>12}", u.uid, u.pages.saturating_mul(PAGE_SIZE), u.inodes);
    }
    out
}

fn stats_readme(_: &View) -> String {
    let mut out = String::from("Statistics of this memfs, read-only. Every read shows the values at open.\n\nFiles:\n");
    for f in STAT_FILES {
        let _ = writeln!(out, "  {:<12} {}", f.name, f.help);
    }
    for (file, table) in
        [("usage", USAGE), ("io", IO), ("pager", PAGER), ("passthrough", PASSTHROUGH), ("transport", TRANSPORT)]
    {
        let _ = writeln!(out, "\n{file}:");
        for s in table {
            let _ = writeln!(out, "  {:<18} {}", s.key, s.help);
        }
    }
    out
}

/// `opts/README`: every tunable with its description.
pub fn opts_readme(_: &View) -> String {
    let mut out = String::from(
        "Live tunables of this memfs: one value per file. Read for the current value; write a new one\n\
         (e.g. `echo 2G > size`) as the mount's owner or root. An invalid or refused value fails\n\
         with EINVAL and changes nothing.\n\n",
    );
    for t in TUNABLES {
        let _ = writeln!(out, "  {:<10} {}", t.name, t.help);
    }
    out
}

/// The README at the top of the control directory.
pub fn top_readme(_: &View) -> String {
    "memfs control directory (hidden from listings of the root; see docs/CONTROL.md).\n\n  \
     opts/    live tunables, one value per file (see opts/README)\n  \
     stats/   statistics, read-only (see stats/README)\n\n\
     `memfs stat MOUNTPOINT` shows them as a table; `--json` for scripts, `--watch 1` for rates.\n"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Fs, FsConfig};
    use crate::ctl::stats::{Op, Stats};

    fn with_view(f: impl FnOnce(&View)) {
        let fs = Fs::new(FsConfig::with_limits(256, 1000));
        let stats = Stats::default();
        stats.record(Op::Lookup, 3000);
        stats.record(Op::Lookup, 5000);
        let v = View {
            fs: &fs,
            usage: fs.usage(),
            stats: &stats,
            snapshots: 2,
            mountpoint: "/mnt/x",
            options: "size=1G,ram=64M",
            pager: Default::default(),
        };
        f(&v)
    }

    #[test]
    fn usage_is_key_value_lines() {
        with_view(|v| {
            let text = usage(v);
            assert!(text.contains("data_bytes_limit: 1048576\n"), "{text}");
            assert!(text.contains("inodes_limit: 1000\n"));
            assert!(text.contains("inodes_used: 1\n"));
            assert!(text.ends_with('\n'));
            assert!(io(v).contains("ctl_snapshots: 2\n"));
        })
    }

    #[test]
    fn ops_and_latency_have_a_row_per_operation() {
        with_view(|v| {
            let text = ops(v);
            assert_eq!(text.lines().count(), 1 + Op::ALL.len());
            let lookup: Vec<&str> =
                text.lines().find(|l| l.starts_with("lookup ")).unwrap().split_whitespace().collect();
            assert_eq!(lookup, ["lookup", "2", "8000", "4000", "4096", "8192"]);
            let lat = latency(v);
            let header: Vec<&str> = lat.lines().next().unwrap().split_whitespace().collect();
            assert_eq!(header.len(), 1 + BOUNDED_BUCKETS + 1);
            let row: Vec<&str> = lat.lines().find(|l| l.starts_with("lookup ")).unwrap().split_whitespace().collect();
            assert_eq!(row.len(), header.len());
            assert_eq!((row[3], row[4]), ("1", "1"));
        })
    }

    #[test]
    fn readmes_describe_every_file_and_tunable() {
        with_view(|v| {
            let r = stats_readme(v);
            for f in STAT_FILES {
                assert!(r.contains(f.name));
            }
            for s in USAGE.iter().chain(IO).chain(PAGER).chain(PASSTHROUGH).chain(TRANSPORT) {
                assert!(r.contains(s.key));
            }
            let o = opts_readme(v);
            for t in TUNABLES {
                assert!(o.contains(t.name));
            }
        })
    }
}
