//! `stats/prometheus`: every statistic in the Prometheus text exposition
//! format (version 0.0.4), for node_exporter's textfile collector or any
//! scraper. Every sample carries a `mountpoint` label, so the files of
//! several mounts can be collected side by side.
//!
//! Owns the format only; names and descriptions come from `metrics.rs`.

use std::fmt::Write;

use super::metrics::{
    MetricType, View, IO, MIGRATE, NUMA_PAGES_HELP, NUMA_PAGES_METRIC, OP_DURATION_HELP, OP_DURATION_METRIC, PAGER,
    PASSTHROUGH, TRANSPORT, UID_BYTES_HELP, UID_BYTES_METRIC, UID_INODES_HELP, UID_INODES_METRIC, USAGE,
};
use super::stats::{bucket_bound_ns, BOUNDED_BUCKETS};
use crate::core::types::PAGE_SIZE;

/// A label value with `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Nanoseconds as seconds, in the shortest exact decimal form.
fn seconds(ns: u64) -> String {
    format!("{}", ns as f64 / 1e9)
}

pub fn render(v: &View) -> String {
    let mut out = String::new();
    let mp = format!("mountpoint=\"{}\"", escape(v.mountpoint));
    for s in USAGE.iter().chain(IO).chain(PAGER).chain(PASSTHROUGH).chain(TRANSPORT).chain(MIGRATE) {
        family(&mut out, s.metric, s.kind.name(), s.help);
        let _ = writeln!(out, "{}{{{mp}}} {}", s.metric, (s.get)(v));
    }

    family(&mut out, NUMA_PAGES_METRIC, MetricType::Gauge.name(), NUMA_PAGES_HELP);
    for (node, pages) in v.fs.pagestat() {
        let _ = writeln!(out, "{NUMA_PAGES_METRIC}{{{mp},node=\"{node}\"}} {pages}");
    }

    let by_uid = v.fs.usage_by_uid();
    family(&mut out, UID_BYTES_METRIC, MetricType::Gauge.name(), UID_BYTES_HELP);
    for u in &by_uid {
        let _ = writeln!(out, "{UID_BYTES_METRIC}{{{mp},uid=\"{}\"}} {}", u.uid, u.pages.saturating_mul(PAGE_SIZE));
    }
    family(&mut out, UID_INODES_METRIC, MetricType::Gauge.name(), UID_INODES_HELP);
    for u in &by_uid {
        let _ = writeln!(out, "{UID_INODES_METRIC}{{{mp},uid=\"{}\"}} {}", u.uid, u.inodes);
    }

    let name = OP_DURATION_METRIC;
    family(&mut out, name, "histogram", OP_DURATION_HELP);
    for op in v.stats.ops() {
        let labels = format!("{mp},op=\"{}\"", op.op.name());
        // Buckets are cumulative; _count is the last one, so they always agree.
        let mut cumulative = 0;
        for (i, n) in op.buckets.iter().enumerate() {
            cumulative += n;
            let le = if i < BOUNDED_BUCKETS { seconds(bucket_bound_ns(i)) } else { "+Inf".into() };
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
        }
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", seconds(op.total_ns));
        let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{Fs, FsConfig};
    use crate::ctl::stats::{Op, Stats};

    #[test]
    fn families_have_help_and_type_and_histograms_are_cumulative() {
        let fs = Fs::new(FsConfig::with_limits(0, 0));
        let stats = Stats::default();
        stats.record(Op::Write, 1_500);
        stats.record(Op::Write, 100);
        let v = View {
            fs: &fs,
            usage: fs.usage(),
            stats: &stats,
            snapshots: 0,
            mountpoint: "/a \"b\"\\",
            options: "size=1G,ram=64M",
            pager: Default::default(),
        };
        let text = render(&v);
        assert!(text.contains("memfs_data_limit_bytes{mountpoint=\"/a \\\"b\\\"\\\\\"} 0\n"), "{text}");
        assert!(text.contains("# TYPE memfs_op_duration_seconds histogram\n"));
        let lbl = "mountpoint=\"/a \\\"b\\\"\\\\\",op=\"write\"";
        assert!(text.contains(&format!("memfs_op_duration_seconds_bucket{{{lbl},le=\"0.000001024\"}} 1\n")));
        assert!(text.contains(&format!("memfs_op_duration_seconds_bucket{{{lbl},le=\"0.000002048\"}} 2\n")));
        assert!(text.contains(&format!("memfs_op_duration_seconds_bucket{{{lbl},le=\"+Inf\"}} 2\n")));
        assert!(text.contains(&format!("memfs_op_duration_seconds_sum{{{lbl}}} 0.0000016\n")));
        assert!(text.contains(&format!("memfs_op_duration_seconds_count{{{lbl}}} 2\n")));
        assert!(text.contains("memfs_uid_inodes{mountpoint=\"/a \\\"b\\\"\\\\\",uid=\"0\"} 1\n"));
        // Every sample's family was declared before it.
        let mut declared = vec![];
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                declared.push(rest.split(' ').next().unwrap().to_string());
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(declared.iter().any(|d| name.starts_with(d.as_str())), "{line}");
            }
        }
    }
}
