//! Model-checked races of the core's name operations (issue 9): rename,
//! rmdir, create and link across the same directories, run on threads
//! whose interleaving Shuttle's schedulers choose (random, then PCT), with
//! the tree's invariants (tests/common: no cycle, every directory reached
//! once, link counts and sizes, "..") checked after every schedule, and
//! deleting everything and forgetting every kernel reference returning the
//! accounting to an empty mount's. The core's locks are Shuttle's under the
//! `shuttle` feature (src/sync.rs), so every lock operation is a point where
//! another thread may run.
//!
//! Run with `make test-model` (`cargo test --release --features shuttle
//! --test model_names`); without the feature this file is empty.
#![cfg(feature = "shuttle")]

mod common;

use std::sync::Mutex as StdMutex;

use memfs::core::{Caller, Fs, FsConfig, Ino, RenameFlags, ROOT_INO};
use shuttle::scheduler::PctScheduler;
use shuttle::sync::Arc;
use shuttle::{check_random, thread, Runner};

const ME: Caller = Caller { uid: 0, gid: 0, pid: 0 };
const KEEP: RenameFlags = RenameFlags { noreplace: false, exchange: false, whiteout: false };
/// Schedules per scheduler.
const RUNS: usize = 1500;

type Op = Box<dyn Fn(&Fs) -> Vec<Ino> + Send + Sync>;

/// `/p/x/`, `/q/y/`, `/p/f`; six threads race over them:
/// - `x` moves into `y` while `y` moves into `x`: the two renames lock
///   disjoint directories, so only the cross-directory rename lock (the
///   kernel's s_vfs_rename_mutex) keeps both from passing their "not into
///   its own subtree" checks and leaving a cycle cut off from the root;
/// - `x` is removed wherever it is, while a file is created in it;
/// - `f` moves into `y` (wherever `y` is by then);
/// - `f` gets a second name in `q`, then is renamed over that name (the
///   same inode on both sides).
fn scenario() {
    let fs = Arc::new(Fs::new(FsConfig::with_limits(64, 64)));
    let p = fs.mkdir(ROOT_INO, b"p", 0o777, 0, &ME).unwrap().ino;
    let q = fs.mkdir(ROOT_INO, b"q", 0o777, 0, &ME).unwrap().ino;
    let x = fs.mkdir(p, b"x", 0o777, 0, &ME).unwrap().ino;
    let y = fs.mkdir(q, b"y", 0o777, 0, &ME).unwrap().ino;
    let f = fs.mknod(p, b"f", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
    let refs = std::sync::Arc::new(StdMutex::new(vec![p, q, x, y, f]));
    let ops: Vec<Op> = vec![
        Box::new(move |fs| {
            let _ = fs.rename(p, b"x", y, b"x", KEEP, &ME);
            vec![]
        }),
        Box::new(move |fs| {
            let _ = fs.rename(q, b"y", x, b"y", KEEP, &ME);
            vec![]
        }),
        Box::new(move |fs| {
            let _ = fs.rmdir(p, b"x");
            let _ = fs.rmdir(y, b"x");
            vec![]
        }),
        Box::new(move |fs| {
            fs.mknod(x, b"n", libc::S_IFREG | 0o644, 0, 0, &ME).map(|a| vec![a.ino]).unwrap_or_default()
        }),
        Box::new(move |fs| {
            let _ = fs.rename(p, b"f", y, b"f", KEEP, &ME);
            vec![]
        }),
        Box::new(move |fs| {
            let linked = fs.link(f, q, b"g").map(|a| vec![a.ino]).unwrap_or_default();
            let _ = fs.rename(p, b"f", q, b"g", KEEP, &ME);
            linked
        }),
    ];
    let threads: Vec<_> = ops
        .into_iter()
        .map(|op| {
            let (fs, refs) = (fs.clone(), refs.clone());
            thread::spawn(move || {
                let made = op(&fs);
                refs.lock().unwrap().extend(made);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let reachable = common::check_tree(&fs);
    for dir in [p, q, x, y] {
        // Reachable from the root, or removed (rmdir): never cut off.
        let removed = fs.getattr(dir).unwrap().nlink == 0;
        assert!(reachable.contains(&dir) || removed, "directory {dir} cut off from the root");
    }
    common::empty_dir(&fs, ROOT_INO);
    for ino in refs.lock().unwrap().drain(..) {
        fs.forget(ino, 1);
    }
    assert_eq!(fs.inode_count(), 1, "inodes left after deleting everything and forgetting every reference");
    let u = fs.usage();
    assert_eq!((u.inodes, u.used_pages), (1, 0));
    assert_eq!(fs.orphans(), 0);
}

#[test]
fn racing_name_operations_keep_the_tree_whole_random_schedules() {
    check_random(scenario, RUNS);
}

#[test]
fn racing_name_operations_keep_the_tree_whole_pct_schedules() {
    // PCT (probabilistic concurrency testing) finds bugs of depth 3 with a
    // known probability per run, where random schedules rarely keep one
    // thread running long enough.
    Runner::new(PctScheduler::new(3, RUNS), Default::default()).run(scenario);
}
