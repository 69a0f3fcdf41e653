//! NUMA placement of the mount's file pages, applied (issue 10): the
//! policy set at mount (`mpol=`) and changed live (`opts/mpol`,
//! `opts/nodemask`, remount), where pages are (`stats/pagestat`), and the
//! move of existing pages onto the allowed nodes (`memfs migrate`).
//!
//! File pages live in two places, and both are placed and counted:
//! - the daemon's page arenas (core/arena.rs: resident and compressed
//!   pages): every 2 MiB chunk is `mbind`-ed to the policy when it is
//!   mapped and again when the policy changes, so new pages follow a
//!   change at once;
//! - kernel memory files (core/memfile.rs: large files, passthrough): the
//!   private tmpfs instance has the policy as its own `mpol=` (for files
//!   made from now on), and each existing file gets it as its shared
//!   policy (`mbind` through a mapping of it).
//!
//! Counting asks the kernel where each page is (`move_pages` with no
//! target) for the OS pages that hold data: the arenas' pages with a slot
//! in use, and the memory files' pages in RAM. Metadata (inodes, names:
//! the heap) is not file data and is not placed. The decisions are
//! core/numa.rs's; this file only walks the pages.

use std::collections::BTreeMap;

use super::numa::{self, Migrated, Placement, Policy};
use super::{arena, Fs};
use crate::sync::Arc;

/// Where the last (or running) migration is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MigrationStatus {
    pub running: bool,
    /// Migrations started since mount.
    pub runs: u64,
    /// Of the current or last one: pages looked at, moved, failed.
    pub done: Migrated,
}

/// Pages of data up to which `stats/pagestat` asks about every page (1 GiB);
/// above, it samples (about 0.1-0.5 s a read here).
pub const PAGESTAT_EXACT_PAGES: u64 = 1 << 18;

/// Span of file offsets an existing memory file's policy covers when the
/// policy changes: the mount's size, or this much when it has none.
const UNLIMITED_SPAN: u64 = 1 << 40;

impl Fs {
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// What places the arenas' chunks as they are mapped (the mount sets
    /// it once: the arenas are the process's).
    pub fn chunk_placer(&self) -> arena::Placer {
        let p: Arc<Placement> = self.placement.clone();
        Arc::new(move |base, len| {
            if let Err(e) = p.sys().bind(base, len, &p.policy(), false) {
                log::debug!("mbind of an arena chunk: {e}");
            }
        })
    }

    /// Make `p` the policy (a node without memory is refused, with why, and
    /// changes nothing) and apply it to what is mapped now.
    pub fn set_policy(&self, p: Policy) -> Result<(), String> {
        self.placement.set(p.clone())?;
        let sys = self.placement.sys();
        for base in arena::chunk_bases() {
            if let Err(e) = sys.bind(base, arena::CHUNK, &p, false) {
                log::warn!("placement {p}: mbind of an arena chunk: {e}");
            }
        }
        if let Some(store) = &self.kernel_store {
            if let Err(e) = store.set_mpol(&p.to_string()) {
                log::warn!("placement {p}: the memory files' tmpfs refused mpol={p}: {e}");
            }
            let span = match self.usage.snapshot().max_pages {
                0 => UNLIMITED_SPAN,
                n => n * super::types::PAGE_SIZE,
            };
            self.each_memory_file(|f| {
                if let Err(e) = f.set_policy(sys, &p, span) {
                    log::warn!("placement {p}: a memory file's policy: {e}");
                }
            });
        }
        log::info!("placement: mpol={p} (nodes {})", self.placement.nodemask());
        Ok(())
    }

    /// Run `f` on every memory file, each under its file's data lock.
    fn each_memory_file(&self, mut f: impl FnMut(&super::memfile::MemFile)) {
        for ino in self.kernel_file_inos() {
            let Ok(inode) = self.get(ino) else { continue };
            let Some(lock) = inode.file() else { continue };
            let data = lock.read();
            if let Some(k) = data.kernel() {
                f(k);
            }
        }
    }

    /// Pages of file data per node, as the kernel says: every node with
    /// memory, with 0 where there are none. Exact up to
    /// [`PAGESTAT_EXACT_PAGES`] pages of data; above, one page in k is asked
    /// about (k = data pages / that, rounded up) and the counts are scaled
    /// by k, so that a read costs about the same on any mount.
    pub fn pagestat(&self) -> BTreeMap<u32, u64> {
        let sys = self.placement.sys();
        let mut by_node: BTreeMap<u32, u64> = sys.memory_nodes().into_iter().map(|n| (n, 0)).collect();
        let k = self.usage.snapshot().used_pages.div_ceil(PAGESTAT_EXACT_PAGES).max(1);
        let mut seen = 0u64;
        let mut pick = || {
            seen += 1;
            (seen - 1) % k == 0
        };
        let mut sample = Vec::new();
        arena::live_pages(&mut |pages| {
            sample.clear();
            sample.extend(pages.iter().copied().filter(|_| pick()));
            numa::count(sys, &sample, &mut by_node)
        });
        self.each_memory_file(|f| {
            let _ = f.with_resident_pages(&mut pick, &mut |pages| numa::count(sys, pages, &mut by_node));
        });
        by_node.values_mut().for_each(|n| *n *= k);
        by_node
    }

    /// Move every page of file data that the policy does not allow onto a
    /// node it does; progress in [`Fs::migration`]. One at a time: false
    /// if one is running already.
    pub fn migrate(&self) -> bool {
        {
            let mut m = self.migration.lock();
            if m.running {
                return false;
            }
            *m = MigrationStatus { running: true, runs: m.runs + 1, done: Migrated::default() };
        }
        let policy = self.placement.policy();
        let sys = self.placement.sys();
        let memory = sys.memory_nodes();
        let mut turn = 0;
        let mut step = |pages: &[usize]| {
            let d = numa::migrate(sys, &policy, &memory, pages, &mut turn);
            self.migration.lock().done.add(d);
        };
        arena::live_pages(&mut step);
        self.each_memory_file(|f| {
            let _ = f.with_resident_pages(&mut || true, &mut step);
        });
        let mut m = self.migration.lock();
        m.running = false;
        log::info!("migrate: {} pages looked at, {} moved, {} failed", m.done.pages, m.done.moved, m.done.failed);
        true
    }

    /// Start [`Fs::migrate`] on a thread of its own (a control-file write
    /// must not hold a FUSE worker for the whole move); false if one runs.
    pub fn start_migration(self: &Arc<Self>) -> bool {
        if self.migration.lock().running {
            return false;
        }
        let fs = self.clone();
        std::thread::Builder::new().name("memfs-migrate".into()).spawn(move || fs.migrate()).is_ok()
    }

    pub fn migration(&self) -> MigrationStatus {
        *self.migration.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::super::numa::tests::Fake;
    use super::super::numa::Nodes;
    use super::super::{Caller, FsConfig, ROOT_INO};
    use super::*;

    const ME: Caller = Caller { uid: 0, gid: 0, pid: 0 };

    fn mount(nodes: u32) -> (Arc<Fs>, Arc<Fake>) {
        let fake = Arc::new(Fake::new(nodes));
        let mut cfg = FsConfig::with_limits(0, 0);
        cfg.numa = fake.clone();
        cfg.kernel_files = Some((super::super::memfile::KernelStore::memfd(), 0));
        (Arc::new(Fs::new(cfg)), fake)
    }

    #[test]
    fn a_policy_change_rebinds_the_chunks_and_the_memory_files() {
        let (fs, fake) = mount(4);
        let ino = fs.mknod(ROOT_INO, b"f", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
        assert_eq!(fs.write(ino, 0, &[1u8; 8192], &ME), Ok(8192));
        assert!(fs.in_kernel_file(ino));
        // Something in the arenas, so that a chunk is mapped.
        let _page = arena::PageBuf::zeroed(4096);
        fs.set_policy(Policy::Interleave([1, 3].into())).unwrap();
        let bound = fake.bound.lock().clone();
        assert!(bound.iter().all(|(_, _, p, mv)| p == "interleave:1,3" && !mv), "{bound:?}");
        assert!(bound.iter().any(|&(_, len, _, _)| len == arena::CHUNK), "arena chunks: {bound:?}");
        assert!(bound.iter().any(|&(_, len, _, _)| len == UNLIMITED_SPAN as usize), "the memory file: {bound:?}");
        assert_eq!(fs.placement().nodemask(), "0000000a");
    }

    #[test]
    fn a_missing_node_is_refused_and_nothing_changes() {
        let (fs, fake) = mount(2);
        let e = fs.set_policy(Policy::Bind([2].into())).unwrap_err();
        assert!(e.contains("node 2"), "{e}");
        assert!(fake.bound.lock().is_empty());
        assert_eq!(fs.placement().policy(), Policy::Default);
        let all: Nodes = [0, 1].into();
        assert_eq!(fs.pagestat().keys().copied().collect::<Nodes>(), all, "every node has a line");
    }

    #[test]
    fn one_migration_at_a_time_and_its_counts_are_kept() {
        let (fs, _fake) = mount(2);
        assert!(fs.migrate());
        let m = fs.migration();
        assert_eq!((m.running, m.runs), (false, 1));
        assert_eq!(m.done.moved, 0, "the fake knows no page of this process: nothing to move");
        fs.migration.lock().running = true;
        assert!(!fs.migrate(), "a second one while one runs");
        assert!(!fs.start_migration());
    }
}
