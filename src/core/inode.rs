//! One inode: its fixed identity, its metadata and its contents.
//!
//! Locks of an inode (their place in the one lock-order table, docs/DESIGN.md):
//! - content locks (level 2): a directory's `Dir` or a file's `FileData`.
//!   Several directory locks are only ever taken together through
//!   `Fs::lock_dirs`, which sorts them by inode number. A file's data lock
//!   is never held together with a directory lock;
//! - `meta` (level 4): held briefly, one inode at a time, never while
//!   calling into the inode table; inside it only the leaves `linkable`
//!   and the per-uid counters.
//!
//! Accounting is tied to the type: an `Inode` holds the mount's `Usage` and
//! gives back its inode space, xattr space and pages when it is dropped, so
//! memory of a deleted file is released exactly when the last reference
//! (directory entry, kernel lookup, in-flight request) goes.

use std::collections::BTreeMap;

use super::data::FileData;
use super::dir::Dir;
use super::types::{mode, Attr, Caller, Ino, Kind, Stamp, Timespec};
use super::usage::{xattr_cost, Usage};
use crate::sync::{Arc, AtomicU32, AtomicU64, Mutex, MutexGuard, Ordering, RwLock};
use std::fmt;
use std::ops::Deref;
use std::ptr::NonNull;

/// Bytes a directory's size grows by per entry (tmpfs's BOGO_DIRENT_SIZE).
pub const DIRENT_SIZE: u64 = 20;

/// Estimated heap bytes of one directory entry beyond its name: its
/// 24-byte record (core/dir.rs), its index slot, and the growth room of
/// both (measured: 200,000 empty files in 100 directories, daemon RSS 275
/// bytes a file, this estimate with the inode's 271).
pub const DIRENT_META_BYTES: u64 = 32;

/// Estimated heap bytes of one xattr beyond its name and value.
const XATTR_META_BYTES: u64 = 48;

/// Estimated heap bytes of rarely used metadata (xattrs, ACLs). A function
/// of what the box holds, read before and after each change to count it;
/// a box holding nothing but times out of a stamp's range (set without
/// such a count) counts as none.
pub fn extra_bytes(extra: Option<&Extra>) -> u64 {
    let Some(e) = extra else { return 0 };
    let xattrs = e.xattrs.bytes();
    let acls = [&e.acl_access, &e.acl_default].iter().filter_map(|a| a.as_ref()).map(|a| a.len() as u64).sum::<u64>();
    if e.xattrs.is_empty()
        && acls == 0
        && e.acl_access.is_none()
        && e.acl_default.is_none()
        && e.rdev == 0
        && e.fsflags == 0
    {
        return 0;
    }
    std::mem::size_of::<Extra>() as u64 + xattrs + acls
}

/// An inode's user./trusted./security. attributes, sorted by name (as
/// tmpfs lists them), with their estimated heap bytes kept as they change:
/// every setxattr and removexattr counts the metadata before and after
/// ([`extra_bytes`]), and summing over all of them made filling one file
/// with 100,000 xattrs take 24 s (tmpfs: 0.35 s). Reads go through the
/// map; changes through [`Xattrs::insert`] and [`Xattrs::remove`].
#[derive(Debug, Default)]
pub struct Xattrs {
    map: BTreeMap<Box<[u8]>, Box<[u8]>>,
    bytes: u64,
}

impl Xattrs {
    fn cost(name: &[u8], value: &[u8]) -> u64 {
        (name.len() + value.len()) as u64 + XATTR_META_BYTES
    }

    /// Estimated heap bytes of them all.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Set `name` to `value`; the value it had, if any.
    pub fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) -> Option<Box<[u8]>> {
        let (name_len, added) = (name.len() as u64, Xattrs::cost(&name, &value));
        let old = self.map.insert(name, value);
        let removed = old.as_ref().map_or(0, |v| name_len + v.len() as u64 + XATTR_META_BYTES);
        self.bytes = self.bytes + added - removed;
        old
    }

    pub fn remove(&mut self, name: &[u8]) -> Option<Box<[u8]>> {
        let v = self.map.remove(name)?;
        self.bytes -= Xattrs::cost(name, &v);
        Some(v)
    }
}

impl std::ops::Deref for Xattrs {
    type Target = BTreeMap<Box<[u8]>, Box<[u8]>>;
    fn deref(&self) -> &Self::Target {
        &self.map
    }
}

/// Rarely used metadata, boxed so that inodes without it pay one pointer.
#[derive(Debug, Default)]
pub struct Extra {
    /// user./trusted./security. attributes, sorted by name (as tmpfs lists them).
    pub xattrs: Xattrs,
    /// system.posix_acl_access, kept only when the mode cannot express it.
    pub acl_access: Option<Box<[u8]>>,
    /// system.posix_acl_default (directories only).
    pub acl_default: Option<Box<[u8]>>,
    /// A device node's number.
    pub rdev: u32,
    /// Inode flags kept for lsattr/chattr (core/fileattr.rs).
    pub fsflags: u32,
    /// Times outside what a [`Stamp`] holds (before 1697 or after 2242),
    /// in [`Meta`]'s order: atime, mtime, ctime, btime.
    pub(super) wide_times: Option<Box<[Timespec; 4]>>,
}

impl Meta {
    /// The group and whether the file is setgid.
    pub fn gid_and_sgid(&self) -> (u32, bool) {
        (self.gid, self.perm & mode::S_ISGID != 0)
    }
}

impl Extra {
    /// Whether the box holds nothing (and may be freed).
    pub fn is_empty(&self) -> bool {
        self.xattrs.is_empty()
            && self.acl_access.is_none()
            && self.acl_default.is_none()
            && self.rdev == 0
            && self.fsflags == 0
            && self.wide_times.is_none()
    }
}

/// Mutable metadata of an inode (level-2 lock).
#[derive(Debug, Default)]
pub struct Meta {
    /// Permission bits plus suid/sgid/sticky.
    pub perm: u32,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub size: u64,
    /// Pages charged to this inode (data pages, or a long symlink's page).
    pub pages: u64,
    /// atime, mtime, ctime, btime (read and set through the methods of
    /// the same names: a time out of a stamp's range lives in `extra`).
    times: [Stamp; 4],
    pub extra: Option<Box<Extra>>,
}

const ATIME: usize = 0;
const MTIME: usize = 1;
const CTIME: usize = 2;
const BTIME: usize = 3;

impl Meta {
    /// Metadata whose four times are `now`.
    pub fn new(
        perm: u32,
        nlink: u32,
        (uid, gid): (u32, u32),
        size: u64,
        pages: u64,
        now: Timespec,
        extra: Option<Box<Extra>>,
    ) -> Meta {
        let mut m = Meta { perm, nlink, uid, gid, size, pages, extra, times: Default::default() };
        (0..4).for_each(|i| m.set_time(i, now));
        m
    }

    fn time(&self, i: usize) -> Timespec {
        self.times[i].unpack().unwrap_or_else(|| {
            // A wide stamp always has its time in extra (set_time put it there).
            self.extra.as_ref().and_then(|e| e.wide_times.as_ref()).map_or_else(Timespec::default, |w| w[i])
        })
    }

    fn set_time(&mut self, i: usize, t: Timespec) {
        self.times[i] = match Stamp::pack(t) {
            Some(s) => s,
            None => {
                self.extra_mut().wide_times.get_or_insert_with(Default::default)[i] = t;
                Stamp::WIDE
            }
        };
    }

    pub fn atime(&self) -> Timespec {
        self.time(ATIME)
    }

    pub fn mtime(&self) -> Timespec {
        self.time(MTIME)
    }

    pub fn ctime(&self) -> Timespec {
        self.time(CTIME)
    }

    pub fn btime(&self) -> Timespec {
        self.time(BTIME)
    }

    pub fn set_atime(&mut self, t: Timespec) {
        self.set_time(ATIME, t)
    }

    pub fn set_mtime(&mut self, t: Timespec) {
        self.set_time(MTIME, t)
    }

    pub fn set_ctime(&mut self, t: Timespec) {
        self.set_time(CTIME, t)
    }

    pub fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Default::default)
    }

    /// A device node's number (0 for everything else).
    pub fn rdev(&self) -> u32 {
        self.extra.as_ref().map_or(0, |e| e.rdev)
    }

    /// The inode flags (lsattr/chattr), in [`Extra`]: few inodes have any
    /// (issue 14: every byte of an empty file counts).
    pub fn fsflags(&self) -> u32 {
        self.extra.as_ref().map_or(0, |e| e.fsflags)
    }

    pub fn set_fsflags(&mut self, flags: u32) {
        if flags != 0 || self.extra.is_some() {
            self.extra_mut().fsflags = flags;
        }
    }

    /// Mark a change to contents: mtime and ctime are now.
    pub fn touch_modified(&mut self, now: Timespec) {
        self.set_mtime(now);
        self.set_ctime(now);
    }

    /// A write or truncate by a caller without CAP_FSETID clears set-user-id,
    /// and set-group-id when group-execute is set or the caller is outside
    /// the file's group (fs/attr.c setattr_should_drop_suidgid).
    pub fn kill_privs(&mut self, caller: &Caller) {
        if self.perm & (mode::S_ISUID | mode::S_ISGID) == 0 || caller.is_root() {
            return;
        }
        self.perm &= !mode::S_ISUID;
        if self.perm & mode::S_ISGID != 0 && (self.perm & mode::S_IXGRP != 0 || !caller.in_group(self.gid)) {
            self.perm &= !mode::S_ISGID;
        }
    }

    /// chown(2) of a non-directory, by anyone, root included (fs/open.c
    /// chown_common): S_ISUID goes; S_ISGID goes when group-execute is set
    /// or the caller is outside the file's group and not root.
    pub fn kill_privs_on_chown(&mut self, caller_outside_group: bool) {
        self.perm &= !mode::S_ISUID;
        if self.perm & mode::S_ISGID != 0 && (self.perm & mode::S_IXGRP != 0 || caller_outside_group) {
            self.perm &= !mode::S_ISGID;
        }
    }

    /// relatime: update atime only if it is older than mtime/ctime or a day old.
    pub fn touch_accessed(&mut self, now: Timespec) {
        if self.atime_due(now) {
            self.set_atime(now);
        }
    }

    /// Whether a read at `now` changes atime under relatime's rule: atime
    /// not after mtime or ctime, or a day old.
    pub fn atime_due(&self, now: Timespec) -> bool {
        let atime = self.atime();
        atime <= self.mtime() || atime <= self.ctime() || now.sec.saturating_sub(atime.sec) >= 86_400
    }
}

/// What an inode holds, by kind.
// Shuttle's locks (the model checker's, src/sync.rs) are far larger than
// parking_lot's word: only there is the file variant large.
#[cfg_attr(feature = "shuttle", allow(clippy::large_enum_variant))]
#[derive(Debug)]
pub enum Content {
    File(RwLock<FileData>),
    Dir(Box<DirNode>),
    Symlink(Box<[u8]>),
    /// FIFO, socket or device node (which one): no contents.
    Special(Kind),
}

/// What a directory holds beyond its metadata: its entries, and its parent
/// (kept here rather than in every inode's `Meta`: only directories have
/// one, and every byte of an empty file counts, issue 14).
#[derive(Debug)]
pub struct DirNode {
    pub entries: RwLock<Dir>,
    /// The parent directory's inode number (the root is its own parent);
    /// changed only by a rename, under the rename lock.
    parent: AtomicU64,
}

impl DirNode {
    pub fn new(entries: Dir, parent: Ino) -> DirNode {
        DirNode { entries: RwLock::new(entries), parent: AtomicU64::new(parent) }
    }
}

/// An inode. Shared as [`InodeRef`] between the table and in-flight requests.
#[derive(Debug)]
pub struct Inode {
    pub ino: Ino,
    /// References the daemon holds ([`InodeRef`]s), beside `lookups` in
    /// one word.
    refs: AtomicU32,
    /// References the kernel holds (FUSE lookup count). 32 bits, saturating:
    /// the kernel's count is 64 bits, but it gives back all of it in the
    /// FORGET that drops the inode (which then brings this to 0 however far
    /// it had stuck), and partial FORGETs of 1 come only for replies it did
    /// not keep, which no inode sees four billion of.
    lookups: AtomicU32,
    meta: Mutex<Meta>,
    pub content: Content,
    usage: Arc<Usage>,
}

impl Inode {
    /// A new inode; the caller has already charged its inode space and any pages in `meta`.
    pub fn create(ino: Ino, kind: Kind, meta: Meta, content: Content, usage: Arc<Usage>) -> InodeRef {
        usage.inode_created();
        usage.account_uid(meta.uid, meta.pages as i64, 1);
        usage.account_meta(meta_bytes(kind, &content, &meta) as i64);
        let refs = AtomicU32::new(1);
        let inode = Inode { ino, refs, lookups: AtomicU32::new(0), meta: Mutex::new(meta), content, usage };
        debug_assert_eq!(inode.kind(), kind);
        InodeRef(NonNull::from(Box::leak(Box::new(inode))))
    }

    /// What the inode is, from what it holds (one byte less per inode than
    /// a field of its own, with its padding: issue 14).
    pub fn kind(&self) -> Kind {
        match &self.content {
            Content::File(_) => Kind::File,
            Content::Dir(_) => Kind::Dir,
            Content::Symlink(_) => Kind::Symlink,
            Content::Special(k) => *k,
        }
    }

    pub fn meta(&self) -> MutexGuard<'_, Meta> {
        self.meta.lock()
    }

    pub fn add_lookup(&self) {
        let _ = self.lookups.fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| Some(l.saturating_add(1)));
    }

    /// Drop `n` kernel references (saturating: a confused kernel cannot underflow us).
    pub fn forget(&self, n: u64) {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        let _ = self.lookups.fetch_update(Ordering::AcqRel, Ordering::Acquire, |l| Some(l.saturating_sub(n)));
    }

    pub fn lookups(&self) -> u64 {
        u64::from(self.lookups.load(Ordering::Acquire))
    }

    /// Unreachable: no names and no kernel references. Safe to drop from the table.
    pub fn is_unreferenced(&self) -> bool {
        self.lookups() == 0 && self.meta().nlink == 0
    }

    pub fn dir(&self) -> Option<&RwLock<Dir>> {
        match &self.content {
            Content::Dir(d) => Some(&d.entries),
            _ => None,
        }
    }

    /// A directory's parent directory (0 for anything else).
    pub fn parent(&self) -> Ino {
        match &self.content {
            Content::Dir(d) => d.parent.load(Ordering::Acquire),
            _ => 0,
        }
    }

    /// A directory moved under `parent` (a rename; nothing for others).
    pub fn set_parent(&self, parent: Ino) {
        if let Content::Dir(d) = &self.content {
            d.parent.store(parent, Ordering::Release);
        }
    }

    pub fn file(&self) -> Option<&RwLock<FileData>> {
        match &self.content {
            Content::File(f) => Some(f),
            _ => None,
        }
    }

    /// Attributes from already-locked metadata.
    pub fn attr_of(&self, m: &Meta) -> Attr {
        Attr {
            ino: self.ino,
            kind: self.kind(),
            perm: m.perm,
            nlink: m.nlink,
            uid: m.uid,
            gid: m.gid,
            rdev: m.rdev(),
            size: m.size,
            blocks: m.pages * 8,
            atime: m.atime(),
            mtime: m.mtime(),
            ctime: m.ctime(),
            btime: m.btime(),
        }
    }

    pub fn attr(&self) -> Attr {
        self.attr_of(&self.meta())
    }
}

/// Estimated heap bytes of an inode's metadata: the inode, its table slot,
/// a directory's index headers, a symlink's target, xattrs and ACLs, and
/// a file's pager home (every file of a mount with `ram=` has one, from
/// creation to its end: 96 bytes a file that no figure counted).
fn meta_bytes(kind: Kind, content: &Content, m: &Meta) -> u64 {
    // The inode's allocation (its counts are inside it: InodeRef; malloc's
    // 8, in 16-byte steps) and the table's slot with its room (a pointer
    // and a control byte, at about two-thirds load: table.rs).
    let base = (std::mem::size_of::<Inode>() as u64 + 8).next_multiple_of(16) + 14;
    let body = match content {
        Content::Dir(_) => std::mem::size_of::<DirNode>() as u64,
        Content::Symlink(t) => t.len() as u64,
        Content::File(d) => d.read().home_bytes(),
        _ => 0,
    };
    debug_assert_eq!(kind == Kind::Dir, matches!(content, Content::Dir(_)));
    base + body + extra_bytes(m.extra.as_deref())
}

impl Drop for Inode {
    fn drop(&mut self) {
        let bytes = meta_bytes(self.kind(), &self.content, self.meta.get_mut());
        let m = self.meta.get_mut();
        self.usage.account_meta(-(bytes as i64));
        self.usage.account_uid(m.uid, -(m.pages as i64), -1);
        self.usage.uncharge_pages(m.pages);
        if let Content::File(data) = &mut self.content {
            if data.get_mut().kernel().is_some() {
                // A fall even of 0 pages: the kernel may hold pages memfs
                // never counted (passthrough writes not taken in yet) until
                // it drops its last reference (`room_for_new_kernel_file`).
                self.usage.kernel_file_dropped(m.pages);
            }
        }
        let xattr_space: u64 =
            m.extra.as_ref().map(|e| e.xattrs.iter().map(|(k, v)| xattr_cost(k.len(), v.len())).sum()).unwrap_or(0);
        self.usage.uncharge_ispace(xattr_space);
        self.usage.uncharge_inode();
        self.usage.inode_freed();
        if m.nlink == 0 {
            // Last: a statfs waiting for orphans to go finds the space free.
            self.usage.unorphaned();
        }
    }
}

/// A counted reference to an inode: what `InodeRef` would be, 8 bytes
/// smaller. The count is the inode's own `refs` field, sharing a word with
/// its lookup count, and there is no weak count: with them an inode is a
/// 144-byte malloc chunk instead of 160 (issue 14: every byte of an empty
/// file counts, ten million times). Made only by [`Inode::create`].
pub struct InodeRef(NonNull<Inode>);

// SAFETY: an InodeRef is a shared reference to an Inode that is Send and
// Sync (checked below), counted atomically, as InodeRef is.
unsafe impl Send for InodeRef {}
// SAFETY: as above.
unsafe impl Sync for InodeRef {}

const _: () = {
    const fn shareable<T: Send + Sync>() {}
    shareable::<Inode>()
};

impl InodeRef {
    /// Whether two references are to the same inode.
    pub fn ptr_eq(a: &InodeRef, b: &InodeRef) -> bool {
        a.0 == b.0
    }
}

impl Deref for InodeRef {
    type Target = Inode;
    fn deref(&self) -> &Inode {
        // SAFETY: the inode lives while any InodeRef to it does (refs > 0).
        unsafe { self.0.as_ref() }
    }
}

impl Clone for InodeRef {
    fn clone(&self) -> InodeRef {
        // Relaxed, as Arc: a new reference is made from an existing one.
        if self.refs.fetch_add(1, Ordering::Relaxed) > i32::MAX as u32 {
            std::process::abort(); // as Arc does: billions of leaked references
        }
        InodeRef(self.0)
    }
}

impl Drop for InodeRef {
    fn drop(&mut self) {
        if self.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        // As Arc: every other reference's use happens before the free.
        std::sync::atomic::fence(Ordering::Acquire);
        // SAFETY: this was the last reference; the box came from Inode::create.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

impl fmt::Debug for InodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The running count of xattr bytes is what a sum over them all gives,
    /// through sets, replacements and removals.
    #[test]
    fn xattr_bytes_follow_every_change() {
        let sum = |x: &Xattrs| x.iter().map(|(k, v)| Xattrs::cost(k, v)).sum::<u64>();
        let mut x = Xattrs::default();
        for i in 0..100u32 {
            x.insert(format!("user.{i}").into_bytes().into(), vec![0; i as usize].into());
        }
        assert_eq!(x.bytes(), sum(&x));
        assert_eq!(x.insert(b"user.7".to_vec().into(), vec![1; 300].into()).map(|v| v.len()), Some(7));
        assert_eq!(x.bytes(), sum(&x));
        assert_eq!(x.remove(b"user.50").map(|v| v.len()), Some(50));
        assert_eq!(x.remove(b"user.50"), None);
        assert_eq!(x.bytes(), sum(&x));
        for i in 0..100u32 {
            x.remove(format!("user.{i}").as_bytes());
        }
        assert_eq!((x.bytes(), x.len()), (0, 0));
    }
}
