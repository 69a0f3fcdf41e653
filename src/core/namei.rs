//! Names and directories: lookup, creating every file type, link, unlink,
//! rmdir, rename (NOREPLACE, EXCHANGE, WHITEOUT), readdir and readlink.
//!
//! Link counts, directory sizes and timestamps follow mm/shmem.c: a
//! directory's size is 20 bytes per entry plus 40, its link count is 2 plus
//! its subdirectories, and every name change sets the parents' mtime and
//! ctime and the moved inode's ctime.

use super::acl::Acl;
use super::cache::CACHE_XATTR;
use super::dir::{self, Dir, DirIndex};
use super::fileattr::{self, Change};
use super::inode::{Content, DirNode, Inode, InodeRef, Meta, DIRENT_META_BYTES, DIRENT_SIZE};
use super::types::{check_name, mode, Attr, Caller, Ino, Kind, Timespec, NAME_MAX, PAGE_SIZE, SYMLINK_MAX};
use super::usage::xattr_cost;
use super::usage::Usage;
use super::{DirLocks, Fs, FsError, FsResult};

/// Symlink targets this long or longer (with their NUL) take a page, as in tmpfs.
const SHORT_SYMLINK_LEN: usize = 128;

/// rename(2) flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RenameFlags {
    pub noreplace: bool,
    pub exchange: bool,
    pub whiteout: bool,
}

/// One entry handed to a readdir consumer.
#[derive(Clone, Copy, Debug)]
pub struct DirItem<'a> {
    pub name: &'a [u8],
    pub ino: Ino,
    pub kind: Kind,
    /// The offset to resume after this entry.
    pub offset: u64,
    /// Present for readdirplus.
    pub attr: Option<Attr>,
}

/// What a new inode is, before it exists.
struct NewNode<'a> {
    kind: Kind,
    perm: u32,
    umask: u32,
    rdev: u32,
    symlink: Option<&'a [u8]>,
    /// O_TMPFILE: a regular file that starts without a name (link count 0).
    unnamed: bool,
}

/// Ownership, permissions and ACLs of a new inode, from its parent and caller.
struct Inherited {
    perm: u32,
    gid: u32,
    fsflags: u32,
    acl_access: Option<Box<[u8]>>,
    acl_default: Option<Box<[u8]>>,
    /// The directory's `user.memfs.cache`, copied to files and directories.
    cache_xattr: Option<Box<[u8]>>,
}

fn inherit(node: &NewNode<'_>, parent: &Meta, caller: &Caller) -> Inherited {
    let sgid_dir = parent.perm & mode::S_ISGID != 0;
    let gid = if sgid_dir { parent.gid } else { caller.gid };
    let mut perm = node.perm & mode::PERM_MASK;
    let fsflags = fileattr::inherit(parent.fsflags());
    if node.kind == Kind::Symlink {
        return Inherited { perm: 0o777, gid, fsflags, acl_access: None, acl_default: None, cache_xattr: None };
    }
    let cache_xattr = match node.kind {
        Kind::File | Kind::Dir => parent.extra.as_ref().and_then(|e| e.xattrs.get(CACHE_XATTR)).cloned(),
        _ => None,
    };
    if node.kind == Kind::Dir && sgid_dir {
        perm |= mode::S_ISGID;
    }
    let default = parent.extra.as_ref().and_then(|e| e.acl_default.as_ref());
    let mut acl_access = None;
    let mut acl_default = None;
    match default.map(|d| (d, Acl::parse(d))) {
        Some((raw, Ok(mut acl))) => {
            let (masked, keep) = acl.create_masq(perm);
            perm = masked;
            if keep {
                acl_access = Some(acl.to_bytes().into_boxed_slice());
            }
            if node.kind == Kind::Dir {
                acl_default = Some(raw.clone());
            }
        }
        _ => perm &= !(node.umask & 0o777),
    }
    Inherited { perm, gid, fsflags, acl_access, acl_default, cache_xattr }
}

/// The metadata and contents of a new inode (charged already): `nlink` 1
/// for a name in `parent` (2 for a directory), 0 for O_TMPFILE's unnamed file.
fn new_inode(
    node: &NewNode<'_>,
    inherited: Inherited,
    caller: &Caller,
    parent: Ino,
    pages: u64,
    now: Timespec,
    dir_index: DirIndex,
) -> (Meta, Content) {
    let (size, nlink, content) = match (node.kind, node.symlink) {
        (Kind::Dir, _) => (2 * DIRENT_SIZE, 2, Content::Dir(Box::new(DirNode::new(Dir::new(dir_index), parent)))),
        (Kind::File, _) => (0, u32::from(!node.unnamed), Content::File(Default::default())),
        (Kind::Symlink, Some(t)) => (t.len() as u64, 1, Content::Symlink(t.into())),
        (k, _) => (0, 1, Content::Special(k)),
    };
    let extra = (inherited.acl_access.is_some()
        || inherited.acl_default.is_some()
        || inherited.cache_xattr.is_some()
        || inherited.fsflags != 0
        || node.rdev != 0)
        .then(|| {
            let mut e = super::inode::Extra {
                acl_access: inherited.acl_access,
                acl_default: inherited.acl_default,
                rdev: node.rdev,
                fsflags: inherited.fsflags,
                ..Default::default()
            };
            if let Some(v) = inherited.cache_xattr {
                e.xattrs.insert(CACHE_XATTR.into(), v);
            }
            Box::new(e)
        });
    let meta = Meta::new(inherited.perm, nlink, (caller.uid, inherited.gid), size, pages, now, extra);
    (meta, content)
}

impl Fs {
    /// Charge the inode space of an inherited `user.memfs.cache` (as any
    /// xattr's); without room the new inode simply does not inherit it.
    fn charge_inherited_xattr(&self, inherited: &mut Inherited) {
        if let Some(v) = &inherited.cache_xattr {
            if !self.usage.charge_ispace(xattr_cost(CACHE_XATTR.len(), v.len())) {
                inherited.cache_xattr = None;
            }
        }
    }

    /// Find `name` in `parent`; the kernel now holds one more reference to it.
    pub fn lookup(&self, parent: Ino, name: &[u8]) -> FsResult<Attr> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let p = self.get(parent)?;
        let dir = p.dir().ok_or(FsError::NotDir)?.read();
        let entry = dir.get(name).ok_or(FsError::NotFound)?;
        let child = self.get(entry.ino)?;
        // Counted while the entry is locked in place, so the child cannot be evicted meanwhile.
        child.add_lookup();
        drop(dir);
        Ok(child.attr())
    }

    /// The kernel's lookup of "." in `ino` (FUSE_EXPORT_SUPPORT: a file
    /// handle of an inode the kernel has forgotten, open_by_handle_at or an
    /// NFS server): the inode itself while it has a name, so a handle lasts
    /// as long as the file; ESTALE once it has none. Inode numbers are
    /// never reused, so an old handle never reaches a new file.
    pub fn lookup_self(&self, ino: Ino) -> FsResult<Attr> {
        let inode = self.get(ino)?;
        if inode.meta().nlink == 0 {
            return Err(FsError::Stale);
        }
        inode.add_lookup();
        Ok(inode.attr())
    }

    /// The kernel's lookup of ".." in directory `ino` (reconnecting a
    /// directory's handle): its parent.
    pub fn lookup_parent(&self, ino: Ino) -> FsResult<Attr> {
        let inode = self.get(ino)?;
        if inode.kind() != Kind::Dir {
            return Err(FsError::NotDir);
        }
        let parent = self.get(inode.parent())?;
        parent.add_lookup();
        Ok(parent.attr())
    }

    /// Create a regular file, FIFO, socket or device node.
    pub fn mknod(&self, parent: Ino, name: &[u8], mode: u32, umask: u32, rdev: u32, caller: &Caller) -> FsResult<Attr> {
        let kind = Kind::from_mode(mode).ok_or(FsError::Invalid)?;
        if matches!(kind, Kind::Dir | Kind::Symlink) {
            return Err(FsError::Invalid);
        }
        let rdev = if matches!(kind, Kind::CharDev | Kind::BlockDev) { rdev } else { 0 };
        self.create_node(parent, name, caller, NewNode { kind, perm: mode, umask, rdev, symlink: None, unnamed: false })
    }

    pub fn mkdir(&self, parent: Ino, name: &[u8], mode: u32, umask: u32, caller: &Caller) -> FsResult<Attr> {
        self.create_node(
            parent,
            name,
            caller,
            NewNode { kind: Kind::Dir, perm: mode, umask, rdev: 0, symlink: None, unnamed: false },
        )
    }

    pub fn symlink(&self, parent: Ino, name: &[u8], target: &[u8], caller: &Caller) -> FsResult<Attr> {
        if target.len() > SYMLINK_MAX {
            return Err(FsError::NameTooLong);
        }
        if target.is_empty() || target.contains(&0) {
            return Err(FsError::Invalid);
        }
        let node =
            NewNode { kind: Kind::Symlink, perm: 0o777, umask: 0, rdev: 0, symlink: Some(target), unnamed: false };
        self.create_node(parent, name, caller, node)
    }

    /// O_TMPFILE: a regular file "in" `parent` that has no name (link count
    /// 0, as shmem_tmpfile leaves it) and lives while the kernel holds it,
    /// unless link(2) names it first. The directory is not changed.
    pub fn tmpfile(&self, parent: Ino, mode: u32, umask: u32, caller: &Caller) -> FsResult<Attr> {
        let p = self.get(parent)?;
        if p.kind() != Kind::Dir {
            return Err(FsError::NotDir);
        }
        let node = NewNode { kind: Kind::File, perm: mode, umask, rdev: 0, symlink: None, unnamed: true };
        let mut inherited = {
            let pm = p.meta();
            if pm.nlink == 0 {
                return Err(FsError::NotFound);
            }
            inherit(&node, &pm, caller)
        };
        if !self.usage.charge_inode() {
            return Err(FsError::NoSpace);
        }
        self.charge_inherited_xattr(&mut inherited);
        let (meta, content) = new_inode(&node, inherited, caller, parent, 0, Timespec::now(), self.dir_index);
        let inode = self.register(Kind::File, meta, content);
        inode.add_lookup();
        self.orphaned();
        self.linkable.lock().insert(inode.ino);
        Ok(inode.attr())
    }

    fn create_node(&self, parent: Ino, name: &[u8], caller: &Caller, node: NewNode<'_>) -> FsResult<Attr> {
        check_name(name)?;
        if self.is_reserved(parent, name) {
            return Err(FsError::Exists);
        }
        let p = self.get(parent)?;
        let mut dir = p.dir().ok_or(FsError::NotDir)?.write();
        let mut inherited = {
            let pm = p.meta();
            if pm.nlink == 0 {
                return Err(FsError::NotFound);
            }
            inherit(&node, &pm, caller)
        };
        if dir.get(name).is_some() {
            return Err(FsError::Exists);
        }
        self.check_flags(&p, Change::AddEntry)?;
        let pages = u64::from(node.symlink.is_some_and(|t| t.len() + 1 > SHORT_SYMLINK_LEN));
        if !self.usage.charge_inode() {
            return Err(FsError::NoSpace);
        }
        if !self.usage.charge_pages(pages) {
            self.usage.uncharge_inode();
            return Err(FsError::NoSpace);
        }
        self.charge_inherited_xattr(&mut inherited);
        let now = Timespec::now();
        let (meta, content) = new_inode(&node, inherited, caller, parent, pages, now, self.dir_index);
        let inode = self.register(node.kind, meta, content);
        inode.add_lookup();
        self.insert_entry(&mut dir, name, inode.ino, node.kind);
        let mut pm = p.meta();
        pm.size += DIRENT_SIZE;
        if node.kind == Kind::Dir {
            pm.nlink += 1;
        }
        pm.touch_modified(now);
        drop(pm);
        drop(dir);
        Ok(inode.attr())
    }

    /// Give `ino` another name.
    pub fn link(&self, ino: Ino, newparent: Ino, newname: &[u8]) -> FsResult<Attr> {
        check_name(newname)?;
        if self.is_reserved(newparent, newname) {
            return Err(FsError::Exists);
        }
        let inode = self.get(ino)?;
        if inode.kind() == Kind::Dir {
            return Err(FsError::NotPermitted);
        }
        let p = self.get(newparent)?;
        let mut dir = p.dir().ok_or(FsError::NotDir)?.write();
        if p.meta().nlink == 0 {
            return Err(FsError::NotFound);
        }
        if dir.get(newname).is_some() {
            return Err(FsError::Exists);
        }
        self.check_flags(&inode, Change::Inode)?;
        self.check_flags(&p, Change::AddEntry)?;
        let now = Timespec::now();
        {
            let mut m = inode.meta();
            // An unnamed O_TMPFILE inode gets its first name; any other
            // inode without links is gone. Its inode space is already paid.
            let first_name = m.nlink == 0 && self.linkable.lock().remove(&inode.ino);
            if m.nlink == 0 && !first_name {
                return Err(FsError::NotFound);
            }
            let nlink = m.nlink.checked_add(1).ok_or(FsError::TooManyLinks)?;
            // As shmem_link: every extra name costs an inode's worth of inode space.
            if !first_name && !self.usage.charge_inode() {
                return Err(FsError::NoSpace);
            }
            m.nlink = nlink;
            m.set_ctime(now);
            if first_name {
                self.unorphaned();
            }
        }
        inode.add_lookup();
        self.insert_entry(&mut dir, newname, inode.ino, inode.kind());
        let mut pm = p.meta();
        pm.size += DIRENT_SIZE;
        pm.touch_modified(now);
        drop(pm);
        drop(dir);
        Ok(inode.attr())
    }

    /// Remove a non-directory name.
    pub fn unlink(&self, parent: Ino, name: &[u8]) -> FsResult<()> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let p = self.get(parent)?;
        let mut dir = p.dir().ok_or(FsError::NotDir)?.write();
        let entry = dir.get(name).ok_or(FsError::NotFound)?;
        if entry.kind == Kind::Dir {
            return Err(FsError::IsDir);
        }
        let child = self.get(entry.ino)?;
        self.check_flags(&p, Change::RemoveEntry)?;
        self.check_flags(&child, Change::Inode)?;
        self.remove_entry(&mut dir, name);
        let now = Timespec::now();
        if drop_link(&child, &self.usage, now) {
            self.orphaned_file(&child);
        }
        let mut pm = p.meta();
        pm.size -= DIRENT_SIZE;
        pm.touch_modified(now);
        drop(pm);
        drop(dir);
        self.evict_if_unreferenced(child.ino);
        Ok(())
    }

    /// Remove an empty directory.
    pub fn rmdir(&self, parent: Ino, name: &[u8]) -> FsResult<()> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        let p = self.get(parent)?;
        let pdir = p.dir().ok_or(FsError::NotDir)?;
        loop {
            let entry = pdir.read().get(name).ok_or(FsError::NotFound)?;
            if entry.kind != Kind::Dir {
                return Err(FsError::NotDir);
            }
            let child = self.get(entry.ino)?;
            let mut locks = DirLocks::lock(&[&p, &child])?;
            if locks.get(parent).get(name).map(|e| e.ino) != Some(child.ino) {
                continue; // changed while unlocked: look again
            }
            self.check_flags(&p, Change::RemoveEntry)?;
            self.check_flags(&child, Change::Inode)?;
            if !locks.get(child.ino).is_empty() {
                return Err(FsError::NotEmpty);
            }
            self.remove_entry(locks.get(parent), name);
            let now = Timespec::now();
            {
                let mut m = child.meta();
                m.nlink = 0;
                m.set_ctime(now);
            }
            self.orphaned();
            let mut pm = p.meta();
            pm.nlink -= 1;
            pm.size -= DIRENT_SIZE;
            pm.touch_modified(now);
            drop(pm);
            drop(locks);
            self.evict_if_unreferenced(child.ino);
            return Ok(());
        }
    }

    /// rename(2) / renameat2(2).
    pub fn rename(
        &self,
        parent: Ino,
        name: &[u8],
        newparent: Ino,
        newname: &[u8],
        flags: RenameFlags,
        caller: &Caller,
    ) -> FsResult<()> {
        if name.len() > NAME_MAX {
            return Err(FsError::NameTooLong);
        }
        check_name(newname)?;
        if self.is_reserved(newparent, newname) {
            return Err(FsError::Exists);
        }
        if flags.exchange && (flags.noreplace || flags.whiteout) {
            return Err(FsError::Invalid);
        }
        let op = self.get(parent)?;
        let np = self.get(newparent)?;
        let (odir, ndir) = (op.dir().ok_or(FsError::NotDir)?, np.dir().ok_or(FsError::NotDir)?);
        let _cross = (parent != newparent).then(|| self.rename_lock.lock());
        loop {
            let src = odir.read().get(name).ok_or(FsError::NotFound)?;
            let dst = ndir.read().get(newname);
            let src_inode = self.get(src.ino)?;
            let dst_inode = dst.map(|d| self.get(d.ino)).transpose()?;
            let mut set = vec![&op, &np];
            if let Some(d) = dst_inode.as_ref().filter(|d| d.kind() == Kind::Dir) {
                set.push(d);
            }
            let mut locks = DirLocks::lock(&set)?;
            let still_src = locks.get(parent).get(name).map(|e| e.ino) == Some(src.ino);
            let still_dst = locks.get(newparent).get(newname).map(|e| e.ino) == dst.map(|d| d.ino);
            if !(still_src && still_dst) {
                continue; // changed while unlocked: look again
            }
            let moved = Moved { op: &op, np: &np, name, newname, src: &src_inode, dst: dst_inode.as_ref() };
            self.rename_locked(&mut locks, &moved, flags, caller)?;
            drop(locks);
            if let Some(d) = dst_inode.filter(|d| d.ino != src.ino) {
                self.evict_if_unreferenced(d.ino);
            }
            return Ok(());
        }
    }

    fn rename_locked(
        &self,
        locks: &mut DirLocks<'_>,
        mv: &Moved<'_>,
        flags: RenameFlags,
        caller: &Caller,
    ) -> FsResult<()> {
        let (src, op, np) = (mv.src, mv.op, mv.np);
        if mv.dst.is_some_and(|d| d.ino == src.ino) {
            return Ok(()); // two names of one inode: POSIX says do nothing
        }
        // Into a directory removed meanwhile (its lock was free between the
        // rmdir and ours): ENOENT, as the VFS's IS_DEADDIR check gives;
        // otherwise what moved there would be cut off from the tree (the
        // model-checked test, tests/model_names.rs, found it).
        if np.meta().nlink == 0 {
            return Err(FsError::NotFound);
        }
        // As the VFS's may_delete and may_create, for tmpfs.
        self.check_flags(op, Change::RemoveEntry)?;
        self.check_flags(src, Change::Inode)?;
        match mv.dst {
            Some(d) => {
                self.check_flags(np, Change::RemoveEntry)?;
                self.check_flags(d, Change::Inode)?;
            }
            None => self.check_flags(np, Change::AddEntry)?,
        }
        let cross = op.ino != np.ino;
        let now = Timespec::now();
        if flags.exchange {
            let dst = mv.dst.ok_or(FsError::NotFound)?;
            if cross
                && ((src.kind() == Kind::Dir && self.is_ancestor(src.ino, np.ino))
                    || (dst.kind() == Kind::Dir && self.is_ancestor(dst.ino, op.ino)))
            {
                return Err(FsError::Invalid);
            }
            locks.get(op.ino).replace(mv.name, dst.ino, dst.kind());
            locks.get(np.ino).replace(mv.newname, src.ino, src.kind());
            if cross {
                let (sd, dd) = (i32::from(src.kind() == Kind::Dir), i32::from(dst.kind() == Kind::Dir));
                adjust_nlink(op, dd - sd);
                adjust_nlink(np, sd - dd);
                set_parent(src, np.ino);
                set_parent(dst, op.ino);
            }
            for i in [op, np] {
                i.meta().touch_modified(now);
            }
            src.meta().set_ctime(now);
            dst.meta().set_ctime(now);
            return Ok(());
        }
        if let Some(dst) = mv.dst {
            if flags.noreplace {
                return Err(FsError::Exists);
            }
            match (src.kind() == Kind::Dir, dst.kind() == Kind::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                (true, true) if !locks.get(dst.ino).is_empty() => return Err(FsError::NotEmpty),
                _ => {}
            }
        }
        if src.kind() == Kind::Dir && cross && self.is_ancestor(src.ino, np.ino) {
            return Err(FsError::Invalid);
        }
        if flags.whiteout && !self.usage.charge_inode() {
            return Err(FsError::NoSpace);
        }
        // Commit: nothing below can fail.
        self.remove_entry(locks.get(op.ino), mv.name);
        crate::fault::point("rename");
        let src_is_dir = src.kind() == Kind::Dir;
        match mv.dst {
            Some(dst) => {
                locks.get(np.ino).replace(mv.newname, src.ino, src.kind());
                if dst.kind() == Kind::Dir {
                    let mut dm = dst.meta();
                    dm.nlink = 0;
                    dm.set_ctime(now);
                    drop(dm);
                    self.orphaned();
                } else if drop_link(dst, &self.usage, now) {
                    self.orphaned_file(dst);
                }
                if src_is_dir {
                    adjust_nlink(op, -1);
                }
                op.meta().size -= DIRENT_SIZE;
            }
            None => {
                self.insert_entry(locks.get(np.ino), mv.newname, src.ino, src.kind());
                if src_is_dir {
                    adjust_nlink(op, -1);
                    adjust_nlink(np, 1);
                }
                op.meta().size -= DIRENT_SIZE;
                np.meta().size += DIRENT_SIZE;
            }
        }
        if src_is_dir {
            set_parent(src, np.ino);
        }
        src.meta().set_ctime(now);
        if flags.whiteout {
            // The whiteout is a char device 0:0 of mode 0 made as mknod
            // would make it (shmem_whiteout): the group of a set-group-id
            // directory, its default ACL, its inherited flags.
            let node = NewNode { kind: Kind::CharDev, perm: 0, umask: 0, rdev: 0, symlink: None, unnamed: false };
            let inherited = inherit(&node, &op.meta(), caller);
            let (meta, content) = new_inode(&node, inherited, caller, op.ino, 0, now, self.dir_index);
            let w = self.register(Kind::CharDev, meta, content);
            self.insert_entry(locks.get(op.ino), mv.name, w.ino, Kind::CharDev);
            op.meta().size += DIRENT_SIZE;
        }
        op.meta().touch_modified(now);
        np.meta().touch_modified(now);
        Ok(())
    }

    /// Add a directory entry, counting its metadata bytes.
    fn insert_entry(&self, dir: &mut Dir, name: &[u8], ino: Ino, kind: Kind) {
        dir.insert(name, ino, kind);
        self.usage.account_meta((name.len() as u64 + DIRENT_META_BYTES) as i64);
    }

    /// Remove a directory entry, counting its metadata bytes.
    fn remove_entry(&self, dir: &mut Dir, name: &[u8]) {
        if dir.remove(name).is_some() {
            self.usage.account_meta(-((name.len() as u64 + DIRENT_META_BYTES) as i64));
        }
    }

    /// Whether directory `ancestor` is `dir` or one of its ancestors.
    /// Callers hold the rename lock, so the parent chain cannot change under us.
    fn is_ancestor(&self, ancestor: Ino, mut dir: Ino) -> bool {
        for _ in 0..=(1u64 << 32) {
            if dir == ancestor {
                return true;
            }
            if dir == super::ROOT_INO {
                return false;
            }
            match self.get(dir) {
                Ok(d) => dir = d.parent(),
                Err(_) => return false,
            }
        }
        false
    }

    /// List `ino` from `offset`. `emit` returns false when its buffer is full;
    /// with `plus`, each entry it accepts (except "." and "..") holds a new
    /// kernel reference, as readdirplus requires.
    pub fn readdir(
        &self,
        ino: Ino,
        offset: u64,
        plus: bool,
        emit: &mut dyn FnMut(DirItem<'_>) -> bool,
    ) -> FsResult<()> {
        let inode = self.get(ino)?;
        let dir = inode.dir().ok_or(FsError::NotDir)?.read();
        let parent = {
            let mut m = inode.meta();
            if m.nlink == 0 {
                return Err(FsError::NotFound);
            }
            self.read_accessed(&mut m);
            drop(m);
            inode.parent()
        };
        if offset < 1 {
            let attr = plus.then(|| inode.attr());
            if !emit(DirItem { name: b".", ino, kind: Kind::Dir, offset: 1, attr }) {
                return Ok(());
            }
        }
        if offset < 2 {
            let attr = if plus { Some(self.get(parent)?.attr()) } else { None };
            if !emit(DirItem { name: b"..", ino: parent, kind: Kind::Dir, offset: 2, attr }) {
                return Ok(());
            }
        }
        for (name, e) in dir.iter_after(offset.max(2)) {
            let child = if plus { Some(self.get(e.ino)?) } else { None };
            let attr = child.as_ref().map(|c| c.attr());
            if !emit(DirItem { name, ino: e.ino, kind: e.kind, offset: dir::position(e.cookie), attr }) {
                break;
            }
            if let Some(c) = child {
                c.add_lookup();
            }
        }
        Ok(())
    }

    /// A symlink's target.
    pub fn readlink(&self, ino: Ino) -> FsResult<Vec<u8>> {
        let inode = self.get(ino)?;
        let Content::Symlink(target) = &inode.content else {
            return Err(FsError::Invalid);
        };
        self.read_accessed(&mut inode.meta());
        Ok(target.to_vec())
    }
}

/// The inodes one rename works on.
struct Moved<'a> {
    op: &'a InodeRef,
    np: &'a InodeRef,
    name: &'a [u8],
    newname: &'a [u8],
    src: &'a InodeRef,
    dst: Option<&'a InodeRef>,
}

/// One name of a non-directory is gone. As shmem_unlink, a name other than
/// the last gives back the inode space its link took; the last one's goes
/// when the inode is freed. Returns whether that was the last name.
fn drop_link(inode: &Inode, usage: &Usage, now: Timespec) -> bool {
    let mut m = inode.meta();
    if m.nlink > 1 {
        usage.uncharge_inode();
    }
    m.nlink = m.nlink.saturating_sub(1);
    m.set_ctime(now);
    m.nlink == 0
}

fn adjust_nlink(dir: &Inode, delta: i32) {
    let mut m = dir.meta();
    m.nlink = m.nlink.saturating_add_signed(delta);
}

fn set_parent(inode: &Inode, parent: Ino) {
    inode.set_parent(parent);
}

const _: () = assert!(PAGE_SIZE as usize > SHORT_SYMLINK_LEN);
