//! Helpers shared by the core's invariant tests (tests/core_model.rs, the
//! proptest of operation sequences, and tests/model_names.rs, the
//! model-checked races): checking that the tree is whole, and deleting it.
//! (Each test crate uses part of it.)
#![allow(dead_code)]

use std::collections::{HashMap, HashSet};

use memfs::core::{Fs, Ino, Kind, ROOT_INO};

/// Every entry of directory `d` but "." and "..": (name, inode, kind).
pub fn entries(fs: &Fs, d: Ino) -> Vec<(Vec<u8>, Ino, Kind)> {
    let mut out = vec![];
    fs.readdir(d, 0, false, &mut |item| {
        out.push((item.name.to_vec(), item.ino, item.kind));
        true
    })
    .unwrap();
    out.into_iter().filter(|(n, _, _)| n != b"." && n != b"..").collect()
}

/// The tree is whole: every directory is reached once from the root (no
/// cycle, none named twice), its ".." is the directory naming it, its link
/// count is 2 + its subdirectories and its size 40 + 20 per entry; every
/// other inode's link count is the number of names it has. Returns every
/// inode reachable from the root.
pub fn check_tree(fs: &Fs) -> Vec<Ino> {
    let mut seen = vec![];
    let mut dirs_seen = HashSet::from([ROOT_INO]);
    let mut names: HashMap<Ino, u32> = HashMap::new();
    let mut stack = vec![(ROOT_INO, ROOT_INO)];
    while let Some((d, parent)) = stack.pop() {
        let mut dotdot = None;
        fs.readdir(d, 0, false, &mut |item| {
            if item.name == b".." {
                dotdot = Some(item.ino);
            }
            true
        })
        .unwrap();
        assert_eq!(dotdot, Some(parent), "\"..\" of directory {d}");
        let children = entries(fs, d);
        let subdirs = children.iter().filter(|(_, _, k)| *k == Kind::Dir).count() as u32;
        let attr = fs.getattr(d).unwrap();
        assert_eq!(attr.nlink, 2 + subdirs, "nlink of dir {d}");
        assert_eq!(attr.size, 40 + 20 * children.len() as u64, "size of dir {d}");
        for (_, ino, kind) in children {
            seen.push(ino);
            if kind == Kind::Dir {
                assert!(dirs_seen.insert(ino), "directory {ino} reached twice: a cycle or a second name");
                stack.push((ino, d));
            } else {
                *names.entry(ino).or_default() += 1;
            }
        }
    }
    for (ino, n) in names {
        assert_eq!(fs.getattr(ino).unwrap().nlink, n, "nlink of inode {ino}");
    }
    seen
}

/// Remove every name under directory `d` (depth first), leaving `d` empty.
pub fn empty_dir(fs: &Fs, d: Ino) {
    for (name, ino, kind) in entries(fs, d) {
        if kind == Kind::Dir {
            empty_dir(fs, ino);
            fs.rmdir(d, &name).unwrap();
        } else {
            fs.unlink(d, &name).unwrap();
        }
    }
}
