//! Unit tests of the control tree, without a mount: lookups, snapshots,
//! writes, permissions, listings.

use super::*;
use crate::core::FsConfig;

const OWNER: u32 = 1000;

fn ctl() -> Ctl {
    let fs = Arc::new(Fs::new(FsConfig::with_limits(256, 1000)));
    let cfg = CtlConfig {
        name: b".memfs".to_vec(),
        owner_uid: OWNER,
        owner_gid: OWNER,
        mountpoint: "/mnt".into(),
        options: String::new(),
    };
    Ctl::new(cfg, fs, Arc::new(Stats::default()), Arc::new(super::tunables::Knobs::new(0)))
}

fn who(uid: u32) -> Caller {
    Caller { uid, gid: uid, pid: 1 }
}

fn path(c: &Ctl, p: &[&str]) -> FsResult<Attr> {
    let mut attr = c.lookup(ROOT_INO, b".memfs", false)?;
    for name in p {
        attr = c.lookup(attr.ino, name.as_bytes(), false)?;
    }
    Ok(attr)
}

fn content(c: &Ctl, p: &[&str]) -> String {
    let a = path(c, p).unwrap();
    String::from_utf8(c.read(a.ino, 0, 0, u32::MAX).unwrap()).unwrap()
}

#[test]
fn names_are_owned_only_in_the_root_or_inside() {
    let c = ctl();
    assert!(c.owns_name(ROOT_INO, b".memfs"));
    assert!(!c.owns_name(ROOT_INO, b"memfs"));
    assert!(!c.owns_name(2, b".memfs"));
    assert!(c.owns_name(CTL_BIT, b"anything"));
    assert_eq!(c.lookup(ROOT_INO, b"x", false), Err(FsError::NotFound));
}

#[test]
fn directories_have_fixed_numbers_and_files_new_ones_each_lookup() {
    let c = ctl();
    let top = path(&c, &[]).unwrap();
    assert_eq!((top.kind, top.perm, top.nlink, top.uid), (Kind::Dir, 0o555, 4, OWNER));
    assert_eq!(path(&c, &[]).unwrap().ino, top.ino);
    assert_eq!(path(&c, &["stats"]).unwrap().ino, path(&c, &["stats"]).unwrap().ino);
    let a = path(&c, &["stats", "usage"]).unwrap();
    let b = path(&c, &["stats", "usage"]).unwrap();
    assert_ne!(a.ino, b.ino);
    assert!(is_ctl_ino(a.ino) && is_ctl_ino(b.ino));
    assert_eq!((a.kind, a.perm), (Kind::File, 0o444));
    assert_eq!(path(&c, &["opts", "size"]).unwrap().perm, 0o644);
    assert_eq!(path(&c, &["opts", "nope"]), Err(FsError::NotFound));
    assert_eq!(c.lookup(a.ino, b"x", false), Err(FsError::NotDir));
}

#[test]
fn a_snapshot_keeps_its_content_until_forgotten() {
    let c = ctl();
    let old = path(&c, &["opts", "size"]).unwrap();
    assert_eq!(c.read(old.ino, 0, 0, 100).unwrap(), b"1048576\n");
    assert_eq!(old.size, 8);
    c.write(path(&c, &["opts", "size"]).unwrap().ino, 0, b"2M\n", &who(OWNER)).unwrap();
    // The old inode still shows what was there when it was looked up...
    assert_eq!(c.read(old.ino, 0, 0, 100).unwrap(), b"1048576\n");
    assert_eq!(c.read(old.ino, 0, 3, 2).unwrap(), b"85");
    assert_eq!(c.read(old.ino, 0, 100, 2).unwrap(), b"");
    assert_eq!(c.read(old.ino, 0, u64::MAX, u32::MAX).unwrap(), b"");
    // ...a new lookup shows the new value.
    assert_eq!(content(&c, &["opts", "size"]), "2097152\n");
    // After FORGET a late read renders again rather than failing.
    c.forget(old.ino);
    assert_eq!(c.read(old.ino, 0, 0, 100).unwrap(), b"2097152\n");
}

/// Where the mount answers OPEN: a file keeps its inode number from
/// lookup to lookup, FORGET or not (the kernel forgets a control file as
/// soon as a stat of it is done, and `cp` opens it after: the open must
/// find the number the stat saw), and each open reads what was there at
/// that open, whatever others render meanwhile.
#[test]
fn kept_inode_numbers_with_a_snapshot_per_open() {
    let c = ctl();
    let opts = path(&c, &["opts"]).unwrap().ino;
    let size = c.lookup(opts, b"size", true).unwrap();
    c.forget(size.ino);
    assert_eq!(c.lookup(opts, b"size", true).unwrap().ino, size.ino);
    let before = c.open(size.ino).unwrap();
    c.write(size.ino, 0, b"64M\n", &who(OWNER)).unwrap();
    assert_eq!(c.getattr(size.ino, None).unwrap().size, 8, "the size the last open read");
    let after = c.open(size.ino).unwrap();
    assert_eq!(c.getattr(size.ino, None).unwrap().size, 9);
    assert_eq!(c.getattr(size.ino, Some(before)).unwrap().size, 8, "fstat of the first open");
    c.forget(size.ino);
    // Many other opens and lookups meanwhile: each open keeps its own.
    for _ in 0..(MAX_SNAPSHOTS + 10) {
        let _ = c.lookup(opts, b"nr_inodes", false).unwrap();
    }
    assert_eq!(c.read(size.ino, before, 0, 100).unwrap(), b"1048576\n");
    assert_eq!(c.read(size.ino, after, 0, 100).unwrap(), b"67108864\n");
    assert_eq!(c.lseek(size.ino, before, 0, Whence::Hole), Ok(8));
    assert_eq!(c.lseek(size.ino, after, 0, Whence::Hole), Ok(9));
    c.release(before);
    c.release(after);
    assert_eq!(c.lookup(opts, b"size", true).unwrap().ino, size.ino);
    // Without kept numbers every lookup gives a new one.
    assert_ne!(c.lookup(opts, b"size", false).unwrap().ino, size.ino);
}

#[test]
fn writes_are_checked() {
    let c = ctl();
    let size = path(&c, &["opts", "size"]).unwrap().ino;
    assert_eq!(c.write(size, 0, b"4M", &who(OWNER + 1)), Err(FsError::Access));
    assert_eq!(c.write(size, 1, b"4M", &who(OWNER)), Err(FsError::Invalid));
    assert_eq!(c.write(size, 0, b"4Q", &who(OWNER)), Err(FsError::Invalid));
    assert_eq!(c.write(size, 0, &[0xff; 1 << 20], &who(OWNER)), Err(FsError::Invalid));
    assert_eq!(content(&c, &["opts", "size"]), "1048576\n");
    assert_eq!(c.write(size, 0, b"4M\n", &who(0)), Ok(3));
    assert_eq!(content(&c, &["opts", "size"]), "4194304\n");
    let usage = path(&c, &["stats", "usage"]).unwrap().ino;
    assert_eq!(c.write(usage, 0, b"1", &who(0)), Err(FsError::Access));
    let stats = path(&c, &["stats"]).unwrap().ino;
    assert_eq!(c.write(stats, 0, b"1", &who(0)), Err(FsError::IsDir));
    assert_eq!(c.read(stats, 0, 0, 1), Err(FsError::IsDir));
}

#[test]
fn setattr_accepts_only_truncation_of_tunables() {
    let c = ctl();
    let size = path(&c, &["opts", "size"]).unwrap().ino;
    let trunc = |n| SetAttr { size: Some(n), ..Default::default() };
    assert_eq!(c.setattr(size, &trunc(0), &who(OWNER)).unwrap().size, 0);
    assert_eq!(c.setattr(size, &trunc(0), &who(OWNER + 1)), Err(FsError::Access));
    assert_eq!(c.setattr(size, &trunc(5), &who(OWNER)), Err(FsError::Invalid));
    let chmod = SetAttr { mode: Some(0o777), ..Default::default() };
    assert_eq!(c.setattr(size, &chmod, &who(0)), Err(FsError::NotPermitted));
    let usage = path(&c, &["stats", "usage"]).unwrap().ino;
    assert_eq!(c.setattr(usage, &trunc(0), &who(0)), Err(FsError::Access));
    assert_eq!(content(&c, &["opts", "size"]), "1048576\n");
}

#[test]
fn stale_numbers_are_refused() {
    let c = ctl();
    assert_eq!(c.getattr(5, None), Err(FsError::Stale));
    assert_eq!(c.getattr(CTL_BIT | 0x7fff << SEQ_BITS, None), Err(FsError::Stale));
    // A directory's number with a sequence, and a file's without one.
    assert_eq!(c.getattr(CTL_BIT | 1, None), Err(FsError::Stale));
    let file = path(&c, &["opts", "size"]).unwrap().ino;
    assert_eq!(c.getattr(file & !SEQ_MASK, None), Err(FsError::Stale));
}

fn listing(c: &Ctl, dir: u64, offset: u64, plus: bool, room: usize) -> Vec<(String, u64, Option<Attr>)> {
    let mut out = vec![];
    c.readdir(dir, offset, plus, false, &mut |item| {
        if out.len() == room {
            return false;
        }
        out.push((String::from_utf8_lossy(item.name).into_owned(), item.offset, item.attr));
        true
    })
    .unwrap();
    out
}

#[test]
fn readdir_lists_and_resumes() {
    let c = ctl();
    let opts = path(&c, &["opts"]).unwrap().ino;
    let names: Vec<String> = listing(&c, opts, 0, false, 100).into_iter().map(|e| e.0).collect();
    let want = [
        ".",
        "..",
        "README",
        "size",
        "nr_inodes",
        "ram",
        "meta",
        "compress",
        "readahead",
        "no_data",
        "noatime",
        "strictatime",
        "poll_us",
        "huge",
        "passthrough_create",
        "mpol",
        "nodemask",
        "migrate",
    ];
    assert_eq!(names, want);
    let rest = listing(&c, opts, 3, false, 100);
    assert_eq!(rest[0].0, "size");
    let top = path(&c, &[]).unwrap().ino;
    let names: Vec<String> = listing(&c, top, 0, false, 100).into_iter().map(|e| e.0).collect();
    assert_eq!(names, [".", "..", "opts", "stats", "README"]);
}

#[test]
fn readdirplus_gives_snapshots_with_sizes_and_drops_unsent_ones() {
    let c = ctl();
    let opts = path(&c, &["opts"]).unwrap().ino;
    let before = c.snapshots.len();
    let all = listing(&c, opts, 0, true, 100);
    let files = 1 + super::tunables::TUNABLES.len(); // README and one per tunable
    assert_eq!(c.snapshots.len(), before + files);
    let size = all.iter().find(|e| e.0 == "size").unwrap().2.unwrap();
    assert_eq!(size.size, 8);
    assert_eq!(c.read(size.ino, 0, 0, 100).unwrap(), b"1048576\n");
    // A reply buffer with room for 3 entries: README is sent, size is not.
    let partial = listing(&c, opts, 0, true, 3);
    assert_eq!(partial.len(), 3);
    assert_eq!(c.snapshots.len(), before + files + 1);
    let top = path(&c, &[]).unwrap().ino;
    let dotdot = listing(&c, top, 0, true, 100).into_iter().find(|e| e.0 == "..").unwrap();
    assert_eq!(dotdot.2.unwrap().ino, ROOT_INO);
}

#[test]
fn statistics_files_render() {
    let c = ctl();
    assert!(content(&c, &["stats", "usage"]).contains("data_bytes_limit: 1048576\n"));
    assert!(content(&c, &["stats", "prometheus"]).contains("# TYPE memfs_data_used_bytes gauge\n"));
    assert!(content(&c, &["opts", "README"]).contains("no_data"));
    assert!(content(&c, &["README"]).contains("opts/"));
    assert!(content(&c, &["stats", "uid"]).starts_with("uid "));
}
