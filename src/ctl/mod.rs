//! The control directory: a hidden directory in the root (`/.memfs` by
//! default, `-o ctldir=NAME`, `-o ctldir=off`) with live tunables in `opts/`
//! and statistics in `stats/`. docs/CONTROL.md describes the files.
//!
//! Owns the control tree (its virtual inodes, never in the core's table),
//! the tunables table, the rendering of statistics files and the parsing of
//! writes. Knows the core's API but nothing of fuser: every operation
//! returns a core value or an [`FsError`], and the FUSE adapter routes to it
//! (a lookup of the control name in the root, or any inode number with
//! [`CTL_BIT`] set) and replies. The core never lists the name (it is not
//! in the core at all) and refuses to create anything under it.
//!
//! Inode numbers: [`CTL_BIT`] | node << 48 | sequence. Directories have
//! sequence 0 and a fixed number. Where the mount answers OPEN (control
//! files are then opened with direct I/O, never cached), a file keeps its
//! inode number while the kernel holds it, and each open reads a snapshot
//! of its own, rendered at the open: `cp` checks that the file it opened
//! is the one it looked at, and refused every control file when each
//! lookup gave a new inode number. Where it does not (the kernel then keeps
//! a file's page cache across opens), files get a new sequence, with a
//! snapshot of their content, on every lookup (see `snapshots.rs` for why).
//!
//! Permissions: files are owned by whoever mounted; tunables are 0644,
//! everything else 0444, directories 0555. The kernel enforces them
//! (`default_permissions`); writes are checked here again (owner or root),
//! and a read-only file refuses even root.

mod metrics;
pub mod migrate;
pub mod pages;
mod prometheus;
mod render;
pub mod report;
mod snapshots;
pub mod stats;
pub mod tunables;

use crate::core::{Attr, Caller, DirItem, Fs, FsError, FsResult, Kind, SetAttr, Timespec, Whence, ROOT_INO};
use crate::sync::{Arc, Mutex};
use metrics::View;
use snapshots::{Snapshot, Snapshots, MAX_SNAPSHOTS, SEQ_BITS};
use stats::Stats;
use std::collections::HashMap;
use tunables::{Knobs, Target, Tunable};

/// Set in every control inode number, never in the core's.
pub const CTL_BIT: u64 = 1 << 63;
const NODE_MASK: u64 = (1 << (63 - SEQ_BITS)) - 1;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// Statistics files that show the pager's figures.
const PAGER_FILES: [&[u8]; 2] = [b"pager", b"prometheus"];

/// Whether `ino` belongs to the control directory.
pub fn is_ctl_ino(ino: u64) -> bool {
    ino & CTL_BIT != 0
}

/// The control directory's settings, from the mount options.
#[derive(Clone, Debug)]
pub struct CtlConfig {
    /// Name of the directory in the root.
    pub name: Vec<u8>,
    /// Who mounted: owns the control files.
    pub owner_uid: u32,
    pub owner_gid: u32,
    /// Where the file system is mounted (a label in `stats/prometheus`).
    pub mountpoint: String,
    /// The mount options as the daemon was given them (`stats/options`;
    /// a remount checks the options fixed at mount against them).
    pub options: String,
}

/// What a node of the tree is.
enum Body {
    Dir,
    Tunable(&'static Tunable),
    Text(fn(&View) -> String),
}

struct Node {
    name: Box<[u8]>,
    /// `None` for the control directory itself (its parent is the root).
    parent: Option<usize>,
    body: Body,
}

/// The control directory of one mount.
pub struct Ctl {
    cfg: CtlConfig,
    fs: Arc<Fs>,
    stats: Arc<Stats>,
    /// Live settings of the FUSE layer, changed through `opts/`.
    knobs: Arc<Knobs>,
    nodes: Vec<Node>,
    snapshots: Snapshots,
    /// The inode number each file node keeps where the mount answers OPEN
    /// (for good: FORGET drops only its snapshot, since the kernel forgets
    /// a control file as soon as a stat of it is done, TTL 0, and `cp`'s
    /// open comes after).
    kept: Mutex<HashMap<usize, u64>>,
    /// Each open's snapshot, by its file handle, until its RELEASE (not
    /// in `snapshots`, whose bound could drop one in the middle of a read).
    opened: Mutex<HashMap<u64, Arc<Snapshot>>>,
    created: Timespec,
}

fn tree(name: &[u8]) -> Vec<Node> {
    let mut nodes = vec![];
    let mut add = |name: &[u8], parent: Option<usize>, body: Body| {
        nodes.push(Node { name: name.into(), parent, body });
        nodes.len() - 1
    };
    let top = add(name, None, Body::Dir);
    let opts = add(b"opts", Some(top), Body::Dir);
    let stats = add(b"stats", Some(top), Body::Dir);
    add(b"README", Some(top), Body::Text(render::top_readme));
    add(b"README", Some(opts), Body::Text(render::opts_readme));
    for t in tunables::TUNABLES {
        add(t.name.as_bytes(), Some(opts), Body::Tunable(t));
    }
    for f in render::STAT_FILES {
        add(f.name.as_bytes(), Some(stats), Body::Text(f.render));
    }
    nodes
}

fn node_ino(id: usize, seq: u64) -> u64 {
    CTL_BIT | (id as u64) << SEQ_BITS | seq
}

impl Ctl {
    pub fn new(cfg: CtlConfig, fs: Arc<Fs>, stats: Arc<Stats>, knobs: Arc<Knobs>) -> Ctl {
        let nodes = tree(&cfg.name);
        let snapshots = Snapshots::new(MAX_SNAPSHOTS);
        let (kept, opened) = (Mutex::new(HashMap::new()), Mutex::new(HashMap::new()));
        Ctl { cfg, fs, stats, knobs, nodes, snapshots, kept, opened, created: Timespec::now() }
    }

    fn target(&self) -> Target<'_> {
        Target { fs: &self.fs, knobs: &self.knobs }
    }

    /// Whether a request about `name` in `parent` is the control directory's:
    /// the directory itself, or anything inside it.
    pub fn owns_name(&self, parent: u64, name: &[u8]) -> bool {
        is_ctl_ino(parent) || (parent == ROOT_INO && name == &*self.cfg.name)
    }

    /// The error for changing the tree's names (mkdir, unlink, rename, link...).
    pub fn refuse(&self) -> FsError {
        FsError::NotPermitted
    }

    fn node(&self, ino: u64) -> FsResult<(usize, &Node)> {
        if !is_ctl_ino(ino) {
            return Err(FsError::Stale);
        }
        let id = ((ino >> SEQ_BITS) & NODE_MASK) as usize;
        let node = self.nodes.get(id).ok_or(FsError::Stale)?;
        let is_dir = matches!(node.body, Body::Dir);
        if is_dir != (ino & SEQ_MASK == 0) {
            return Err(FsError::Stale);
        }
        Ok((id, node))
    }

    /// What statistics files render from; `pager_now`: the pager's figures
    /// with what passthrough writers added taken in first (for the files
    /// that show them: [`PAGER_FILES`]).
    fn view(&self, pager_now: bool) -> View<'_> {
        View {
            fs: &self.fs,
            usage: self.fs.usage(),
            stats: &self.stats,
            snapshots: self.snapshots.len(),
            mountpoint: &self.cfg.mountpoint,
            options: &self.cfg.options,
            pager: if pager_now { self.fs.pager_stats_now() } else { self.fs.pager_stats() }.unwrap_or_default(),
        }
    }

    fn render(&self, id: usize) -> Vec<u8> {
        match self.nodes[id].body {
            Body::Dir => vec![],
            Body::Tunable(t) => format!("{}\n", (t.get)(&self.target())).into_bytes(),
            Body::Text(f) => f(&self.view(PAGER_FILES.contains(&&*self.nodes[id].name))).into_bytes(),
        }
    }

    fn base_attr(&self, ino: u64, kind: Kind, perm: u32, time: Timespec) -> Attr {
        Attr {
            ino,
            kind,
            perm,
            nlink: 1,
            uid: self.cfg.owner_uid,
            gid: self.cfg.owner_gid,
            rdev: 0,
            size: 0,
            blocks: 0,
            atime: time,
            mtime: time,
            ctime: time,
            btime: time,
        }
    }

    fn children(&self, id: usize) -> impl Iterator<Item = (usize, &Node)> {
        self.nodes.iter().enumerate().filter(move |(_, n)| n.parent == Some(id))
    }

    fn dir_attr(&self, id: usize) -> Attr {
        let subdirs = self.children(id).filter(|(_, n)| matches!(n.body, Body::Dir)).count() as u32;
        Attr { nlink: 2 + subdirs, ..self.base_attr(node_ino(id, 0), Kind::Dir, 0o555, self.created) }
    }

    fn file_attr(&self, id: usize, ino: u64, snap: &Snapshot) -> Attr {
        let perm = if matches!(self.nodes[id].body, Body::Tunable(_)) { 0o644 } else { 0o444 };
        let size = snap.content.len() as u64;
        Attr { size, blocks: size.div_ceil(512), ..self.base_attr(ino, Kind::File, perm, snap.time) }
    }

    /// Render file `id` under a new inode number.
    fn new_snapshot(&self, id: usize) -> Attr {
        let ino = node_ino(id, self.snapshots.next_seq());
        let snap = Arc::new(Snapshot { content: self.render(id), time: Timespec::now() });
        self.snapshots.insert(ino, snap.clone());
        self.file_attr(id, ino, &snap)
    }

    /// File `id` as a lookup gives it: `kept` (the mount answers OPEN, and
    /// each open reads its own snapshot): under the inode number it keeps,
    /// its snapshot rendered again (for the size a stat shows); else under
    /// a new inode number.
    fn looked_up(&self, id: usize, kept: bool) -> Attr {
        if !kept {
            return self.new_snapshot(id);
        }
        let ino = *self.kept.lock().entry(id).or_insert_with(|| node_ino(id, self.snapshots.next_seq()));
        let snap = Arc::new(Snapshot { content: self.render(id), time: Timespec::now() });
        self.snapshots.insert(ino, snap.clone());
        self.file_attr(id, ino, &snap)
    }

    /// The snapshot of file inode `ino`, rendered again if it was dropped.
    fn snapshot(&self, id: usize, ino: u64) -> Arc<Snapshot> {
        self.snapshots.get(ino).unwrap_or_else(|| {
            let snap = Arc::new(Snapshot { content: self.render(id), time: Timespec::now() });
            self.snapshots.insert(ino, snap.clone());
            snap
        })
    }

    fn attr(&self, id: usize, ino: u64) -> Attr {
        match self.nodes[id].body {
            Body::Dir => self.dir_attr(id),
            _ => self.file_attr(id, ino, &self.snapshot(id, ino)),
        }
    }

    fn check_writer(&self, caller: &Caller) -> FsResult<()> {
        if caller.fsuid().is_some_and(|uid| uid == 0 || uid == self.cfg.owner_uid) {
            Ok(())
        } else {
            Err(FsError::Access)
        }
    }

    /// `name` in `parent`, where [`Ctl::owns_name`] said yes. `kept`: the
    /// mount answers OPEN ([`Ctl::open`]), so a file keeps its inode number.
    pub fn lookup(&self, parent: u64, name: &[u8], kept: bool) -> FsResult<Attr> {
        if parent == ROOT_INO {
            return if name == &*self.cfg.name { Ok(self.dir_attr(0)) } else { Err(FsError::NotFound) };
        }
        let (pid, p) = self.node(parent)?;
        if !matches!(p.body, Body::Dir) {
            return Err(FsError::NotDir);
        }
        let (id, node) = self.children(pid).find(|(_, n)| &*n.name == name).ok_or(FsError::NotFound)?;
        Ok(match node.body {
            Body::Dir => self.dir_attr(id),
            _ => self.looked_up(id, kept),
        })
    }

    /// The kernel dropped its references to `ino`. A kept inode number
    /// stays its file's (only its snapshot goes): the kernel forgets a
    /// control file as soon as a stat of it is done, and may look it up
    /// again under the same number.
    pub fn forget(&self, ino: u64) {
        if ino & SEQ_MASK != 0 {
            self.snapshots.remove(ino);
        }
    }

    /// An open of file `ino` (where the mount answers OPEN): its content
    /// rendered now, for this open's reads, and for the inode's size as
    /// a stat shows it (fstat of the open file matches what it reads).
    /// Returns the handle its reads and release carry.
    pub fn open(&self, ino: u64) -> FsResult<u64> {
        let (id, node) = self.node(ino)?;
        if matches!(node.body, Body::Dir) {
            return Err(FsError::IsDir);
        }
        let fh = node_ino(id, self.snapshots.next_seq());
        let snap = Arc::new(Snapshot { content: self.render(id), time: Timespec::now() });
        self.snapshots.insert(ino, snap.clone());
        self.opened.lock().insert(fh, snap);
        Ok(fh)
    }

    /// The open with handle `fh` ended.
    pub fn release(&self, fh: u64) {
        self.opened.lock().remove(&fh);
    }

    /// What file `ino` reads through the open with handle `fh` (0: none,
    /// the mount does not answer OPEN): that open's snapshot, else the
    /// inode's.
    fn content_of(&self, id: usize, ino: u64, fh: u64) -> Arc<Snapshot> {
        let own = self.opened.lock().get(&fh).filter(|_| fh & !SEQ_MASK == ino & !SEQ_MASK).cloned();
        own.unwrap_or_else(|| self.snapshot(id, ino))
    }

    /// Attributes of `ino`; as seen through the open with handle `fh`
    /// (fstat: the size that open reads), where there is one.
    pub fn getattr(&self, ino: u64, fh: Option<u64>) -> FsResult<Attr> {
        let (id, node) = self.node(ino)?;
        Ok(match (fh, &node.body) {
            (Some(fh), Body::Tunable(_) | Body::Text(_)) => self.file_attr(id, ino, &self.content_of(id, ino, fh)),
            _ => self.attr(id, ino),
        })
    }

    /// Only truncation to 0 of a tunable (the shell's `>`) and time changes
    /// are accepted, and both change nothing.
    pub fn setattr(&self, ino: u64, set: &SetAttr, caller: &Caller) -> FsResult<Attr> {
        let (id, node) = self.node(ino)?;
        if set.mode.is_some() || set.uid.is_some() || set.gid.is_some() {
            return Err(FsError::NotPermitted);
        }
        let mut attr = self.attr(id, ino);
        match (&node.body, set.size) {
            (_, None) => {}
            (Body::Dir, Some(_)) => return Err(FsError::IsDir),
            (Body::Text(_), Some(_)) => return Err(FsError::Access),
            (Body::Tunable(_), Some(0)) => {
                self.check_writer(caller)?;
                attr.size = 0;
                attr.blocks = 0;
            }
            (Body::Tunable(_), Some(_)) => return Err(FsError::Invalid),
        }
        Ok(attr)
    }

    /// Read file `ino` through the open with handle `fh` (0: none, the
    /// mount does not answer OPEN): that open's snapshot, else the inode's.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32) -> FsResult<Vec<u8>> {
        let (id, node) = self.node(ino)?;
        if matches!(node.body, Body::Dir) {
            return Err(FsError::IsDir);
        }
        let snap = self.content_of(id, ino, fh);
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(snap.content.len());
        let end = start.saturating_add(size as usize).min(snap.content.len());
        Ok(snap.content[start..end].to_vec())
    }

    /// A new value for a tunable: the whole value at offset 0.
    pub fn write(&self, ino: u64, offset: u64, data: &[u8], caller: &Caller) -> FsResult<usize> {
        let (_, node) = self.node(ino)?;
        let tunable = match node.body {
            Body::Dir => return Err(FsError::IsDir),
            Body::Text(_) => return Err(FsError::Access),
            Body::Tunable(t) => t,
        };
        self.check_writer(caller)?;
        if offset != 0 {
            return Err(FsError::Invalid);
        }
        (tunable.set)(&self.target(), tunables::value_of(data)?)?;
        Ok(data.len())
    }

    /// SEEK_DATA / SEEK_HOLE: a control file is all data.
    /// SEEK_DATA/SEEK_HOLE in file `ino` as read through handle `fh`.
    pub fn lseek(&self, ino: u64, fh: u64, offset: u64, whence: Whence) -> FsResult<u64> {
        let (id, node) = self.node(ino)?;
        if matches!(node.body, Body::Dir) {
            return Err(FsError::Invalid);
        }
        let len = self.content_of(id, ino, fh).content.len() as u64;
        if offset >= len {
            return Err(FsError::NoDataAtOffset);
        }
        Ok(match whence {
            Whence::Data => offset,
            Whence::Hole => len,
        })
    }

    /// There are no symlinks in the control directory.
    pub fn readlink(&self, ino: u64) -> FsResult<Vec<u8>> {
        self.node(ino).and(Err(FsError::Invalid))
    }

    pub fn getxattr(&self, ino: u64) -> FsResult<Vec<u8>> {
        self.node(ino).and(Err(FsError::NoXattr))
    }

    pub fn listxattr(&self, ino: u64) -> FsResult<Vec<u8>> {
        self.node(ino).map(|_| vec![])
    }

    /// List a control directory. With `plus`, every file entry is a lookup
    /// (the kernel counts it), so it gets a fresh snapshot like one.
    pub fn readdir(
        &self,
        ino: u64,
        offset: u64,
        plus: bool,
        kept: bool,
        emit: &mut dyn FnMut(DirItem<'_>) -> bool,
    ) -> FsResult<()> {
        let (id, node) = self.node(ino)?;
        if !matches!(node.body, Body::Dir) {
            return Err(FsError::NotDir);
        }
        // ".." of the control directory is the root, a core inode.
        let root_attr = if plus && node.parent.is_none() { Some(self.fs.getattr(ROOT_INO)?) } else { None };
        let mut entries: Vec<(&[u8], Option<usize>)> = vec![(b".", Some(id)), (b"..", node.parent)];
        entries.extend(self.children(id).map(|(cid, n)| (&*n.name, Some(cid))));
        for (i, (name, target)) in entries.into_iter().enumerate().skip(usize::try_from(offset).unwrap_or(usize::MAX)) {
            let next = i as u64 + 1;
            let item = match target {
                None => DirItem { name, ino: ROOT_INO, kind: Kind::Dir, offset: next, attr: root_attr },
                Some(t) if matches!(self.nodes[t].body, Body::Dir) => DirItem {
                    name,
                    ino: node_ino(t, 0),
                    kind: Kind::Dir,
                    offset: next,
                    attr: plus.then(|| self.dir_attr(t)),
                },
                Some(t) if plus => {
                    let attr = self.looked_up(t, kept);
                    let ino = attr.ino;
                    if !emit(DirItem { name, ino, kind: Kind::File, offset: next, attr: Some(attr) }) {
                        self.snapshots.remove(ino); // not sent: the kernel holds no reference
                        return Ok(());
                    }
                    continue;
                }
                Some(t) => DirItem { name, ino: node_ino(t, 0), kind: Kind::File, offset: next, attr: None },
            };
            if !emit(item) {
                return Ok(());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
