//! Randomized invariant test of the core (no mount): random operation
//! sequences over a small name pool, then checks that must hold whatever
//! happened: directory link counts and sizes agree with their entries, the
//! pages accounted agree with the pages files hold, per-uid usage adds up,
//! and deleting everything (and forgetting every kernel reference) returns
//! all accounting to its starting point. proptest shrinks a failure to a
//! minimal sequence and prints it.

use std::collections::HashMap;

mod common;

use memfs::core::{Caller, FallocMode, Fs, FsConfig, FsError, Ino, RenameFlags, SetAttr, ROOT_INO};
use proptest::prelude::*;

const NAMES: &[&str] = &["a", "b", "c", "d"];

#[derive(Clone, Debug)]
enum Op {
    Mknod(u8, u8),
    Mkdir(u8, u8),
    Symlink(u8, u8, u16),
    Write(u8, u8, u32, u16),
    Truncate(u8, u8, u32),
    Fallocate(u8, u8, u32, u32, u8),
    Link(u8, u8, u8, u8),
    Unlink(u8, u8),
    Rmdir(u8, u8),
    Rename(u8, u8, u8, u8, u8),
    Chown(u8, u8, u8),
    SetXattr(u8, u8, u16),
}

fn op() -> impl Strategy<Value = Op> {
    let d = 0u8..3;
    let n = 0u8..4;
    prop_oneof![
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Mknod(d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Mkdir(d, n)),
        (d.clone(), n.clone(), 1u16..300).prop_map(|(d, n, l)| Op::Symlink(d, n, l)),
        (d.clone(), n.clone(), 0u32..40_000, 0u16..9000).prop_map(|(d, n, o, l)| Op::Write(d, n, o, l)),
        (d.clone(), n.clone(), 0u32..40_000).prop_map(|(d, n, s)| Op::Truncate(d, n, s)),
        (d.clone(), n.clone(), 0u32..40_000, 1u32..20_000, 0u8..4)
            .prop_map(|(d, n, o, l, m)| Op::Fallocate(d, n, o, l, m)),
        (d.clone(), n.clone(), d.clone(), n.clone()).prop_map(|(a, b, c, e)| Op::Link(a, b, c, e)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Unlink(d, n)),
        (d.clone(), n.clone()).prop_map(|(d, n)| Op::Rmdir(d, n)),
        (d.clone(), n.clone(), d.clone(), n.clone(), 0u8..4).prop_map(|(a, b, c, e, f)| Op::Rename(a, b, c, e, f)),
        (d.clone(), n.clone(), 0u8..3).prop_map(|(d, n, u)| Op::Chown(d, n, u)),
        (d, n, 0u16..3000).prop_map(|(d, n, l)| Op::SetXattr(d, n, l)),
    ]
}

/// The mount under test plus the kernel references it handed out.
struct World {
    fs: Fs,
    /// Lookup references the "kernel" holds, to be forgotten at the end.
    refs: HashMap<Ino, u64>,
    /// Directories used as parents: root and up to two fixed subdirectories.
    dirs: Vec<Ino>,
}

const ME: Caller = Caller { uid: 1000, gid: 1000, pid: 0 };

impl World {
    fn new() -> World {
        let fs = Fs::new(FsConfig::with_limits(64, 40));
        let mut w = World { fs, refs: HashMap::new(), dirs: vec![ROOT_INO] };
        for name in ["p", "q"] {
            let a = w.fs.mkdir(ROOT_INO, name.as_bytes(), 0o777, 0, &ME).unwrap();
            w.took(a.ino);
            w.dirs.push(a.ino);
        }
        w
    }

    fn took(&mut self, ino: Ino) {
        *self.refs.entry(ino).or_default() += 1;
    }

    fn lookup(&mut self, d: u8, n: u8) -> Option<Ino> {
        let a = self.fs.lookup(self.dirs[d as usize], NAMES[n as usize].as_bytes()).ok()?;
        self.took(a.ino);
        Some(a.ino)
    }

    fn apply(&mut self, op: &Op) {
        let dirs = self.dirs.clone();
        let dir = |d: u8| dirs[d as usize];
        let name = |n: u8| NAMES[n as usize].as_bytes();
        let created = match *op {
            Op::Mknod(d, n) => self.fs.mknod(dir(d), name(n), libc::S_IFREG | 0o644, 0o022, 0, &ME).map(|a| a.ino),
            Op::Mkdir(d, n) => self.fs.mkdir(dir(d), name(n), 0o755, 0o022, &ME).map(|a| a.ino),
            Op::Symlink(d, n, l) => {
                let target = vec![b't'; l as usize];
                self.fs.symlink(dir(d), name(n), &target, &ME).map(|a| a.ino)
            }
            Op::Link(d, n, d2, n2) => match self.lookup(d, n) {
                Some(ino) => self.fs.link(ino, dir(d2), name(n2)).map(|a| a.ino),
                None => Err(FsError::NotFound),
            },
            _ => Err(FsError::NotFound),
        };
        if let Ok(ino) = created {
            self.took(ino);
        }
        match *op {
            Op::Write(d, n, off, len) => {
                if let Some(ino) = self.lookup(d, n) {
                    let _ = self.fs.write(ino, u64::from(off), &vec![7u8; len as usize], &ME);
                }
            }
            Op::Truncate(d, n, size) => {
                if let Some(ino) = self.lookup(d, n) {
                    let req = SetAttr { size: Some(u64::from(size)), ..Default::default() };
                    let _ = self.fs.setattr(ino, &req, &ME);
                }
            }
            Op::Fallocate(d, n, off, len, m) => {
                if let Some(ino) = self.lookup(d, n) {
                    let mode = FallocMode { keep_size: m & 1 != 0, punch_hole: m == 3, zero_range: m == 2 };
                    let _ = self.fs.fallocate(ino, u64::from(off), u64::from(len), mode);
                }
            }
            Op::Unlink(d, n) => {
                let _ = self.fs.unlink(dir(d), name(n));
            }
            Op::Rmdir(d, n) => {
                let _ = self.fs.rmdir(dir(d), name(n));
            }
            Op::Rename(d, n, d2, n2, f) => {
                let flags = RenameFlags { noreplace: f == 1, exchange: f == 2, whiteout: f == 3 };
                let _ = self.fs.rename(dir(d), name(n), dir(d2), name(n2), flags, &ME);
            }
            Op::Chown(d, n, u) => {
                if let Some(ino) = self.lookup(d, n) {
                    let req = SetAttr { uid: Some(1000 + u32::from(u)), ..Default::default() };
                    let _ = self.fs.setattr(ino, &req, &Caller::ROOT);
                }
            }
            Op::SetXattr(d, n, l) => {
                if let Some(ino) = self.lookup(d, n) {
                    let _ = self.fs.setxattr(ino, b"user.x", &vec![1u8; l as usize], 0, &ME);
                }
            }
            _ => {}
        }
    }

    /// The tree is whole (common::check_tree); returns every inode
    /// reachable from the root.
    fn check_tree(&self) -> Vec<Ino> {
        common::check_tree(&self.fs)
    }

    /// Delete everything, forget every reference: accounting must return to its start.
    fn tear_down(mut self, baseline_meta: u64) {
        for _ in 0..4 {
            for d in [self.dirs[1], self.dirs[2], ROOT_INO] {
                for n in 0..NAMES.len() as u8 {
                    let _ = self.fs.unlink(d, NAMES[n as usize].as_bytes());
                    let _ = self.fs.rmdir(d, NAMES[n as usize].as_bytes());
                }
            }
        }
        for (d, name) in [(ROOT_INO, "p"), (ROOT_INO, "q")] {
            let _ = self.fs.rename(d, name.as_bytes(), d, name.as_bytes(), RenameFlags::default(), &ME);
        }
        let _ = self.fs.rmdir(ROOT_INO, b"p");
        let _ = self.fs.rmdir(ROOT_INO, b"q");
        for (ino, n) in std::mem::take(&mut self.refs) {
            self.fs.forget(ino, n);
        }
        let u = self.fs.usage();
        assert_eq!(u.used_pages, 0, "pages left after deleting everything");
        assert_eq!(u.used_ispace, 1024, "only the root's inode space is left");
        assert_eq!(u.inodes, 1);
        assert_eq!(u.meta_bytes, baseline_meta, "metadata bytes back to the empty mount's");
        assert_eq!(self.fs.inode_count(), 1);
        let by_uid: u64 = self.fs.usage_by_uid().iter().map(|x| x.pages).sum();
        assert_eq!(by_uid, 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn accounting_and_tree_invariants_hold(ops in prop::collection::vec(op(), 1..80)) {
        let baseline_meta = Fs::new(FsConfig::with_limits(64, 40)).usage().meta_bytes;
        let mut w = World::new();
        let start_meta_dirs = w.fs.usage().meta_bytes;
        prop_assert!(start_meta_dirs > baseline_meta);
        for op in &ops {
            w.apply(op);
            let reachable = w.check_tree();
            // Pages accounted = pages held by reachable or referenced inodes' attrs.
            let mut inos: Vec<Ino> = reachable;
            inos.extend(w.refs.keys().copied());
            inos.sort_unstable();
            inos.dedup();
            let pages: u64 = inos.iter().filter_map(|i| w.fs.getattr(*i).ok()).map(|a| a.blocks / 8).sum();
            prop_assert_eq!(pages, w.fs.usage().used_pages);
            let by_uid: u64 = w.fs.usage_by_uid().iter().map(|x| x.pages).sum();
            prop_assert_eq!(by_uid, w.fs.usage().used_pages);
            prop_assert!(w.fs.usage().used_pages <= 64);
        }
        w.tear_down(baseline_meta);
    }
}
