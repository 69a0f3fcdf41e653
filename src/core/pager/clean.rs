//! Clean copies: the store slot a page was loaded from, kept while the
//! page is resident, so that paging it out again writes nothing.
//!
//! The kernel's swap cache does this for anonymous memory: a page read
//! back from swap keeps its swap slot, and reclaim drops it without a
//! write while it is unchanged. Here, a page loaded from the backing store
//! keeps its [`DiskRef`] in this table with a 128-bit hash of the bytes
//! loaded; when the page leaves RAM again, that slot takes the place of a
//! write if, and only if, the bytes leaving hash the same. So a copy that
//! went stale unseen (a memory file written where memfs does not look)
//! costs a write, never wrong bytes. Trailing zeros are left out of the
//! hash: a heap page holds only the bytes up to its length, a memory
//! file's page is read whole, and both read as zeros past them.
//!
//! The hash is XXH3-128 keyed with a secret drawn from the kernel's random
//! source at mount, which never leaves the daemon: a chance collision is
//! 2^-128, and a writer has nothing to aim one at (it sees no hash, and
//! learns of a collision only by losing its own write, an eviction later).
//! ZFS's nop-write asks a cryptographic checksum for the same decision
//! because its checksums are unkeyed and on disk. BLAKE3 took 1.4 us a
//! page here, XXH3 0.15: a 64 KiB random read pages in 16.
//!
//! Copies are given up (their slots freed by the pager) as soon as memfs
//! changes their page, when their file goes, and when the store runs
//! short: a copy never takes the room a page that must be written needs.
//! Owns only the table; which slots to free and when is the pager's
//! (mod.rs), which holds it.
//!
//! Lock order: taken under a file's content lock (a page-in keeps a copy,
//! a write gives one up), and never held while taking another lock but the
//! store's slot lock, which the caller takes after letting this one go.

use std::collections::BTreeMap;

use super::super::types::Ino;
use super::backing::DiskRef;
use super::policy::PageId;
use crate::sync::{AtomicU64, Mutex, Ordering};

/// The hash a copy is checked by.
pub type PageHash = u128;

/// Bytes of the hash's secret (XXH3 takes at least 136).
const SECRET_BYTES: usize = 192;

/// A secret for [`CleanCopies`]'s hash: from the kernel's random source,
/// or, where that cannot be read, from std's per-process random keys
/// (SipHash keys, themselves from the kernel) and the time.
fn draw_secret() -> Box<[u8; SECRET_BYTES]> {
    let mut secret = Box::new([0u8; SECRET_BYTES]);
    let drawn =
        std::fs::File::open("/dev/urandom").and_then(|mut f| std::io::Read::read_exact(&mut f, &mut secret[..]));
    if drawn.is_err() {
        use std::hash::{BuildHasher, Hasher};
        let state = std::collections::hash_map::RandomState::new();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos();
        for (k, chunk) in secret.chunks_mut(8).enumerate() {
            let mut h = state.build_hasher();
            h.write_u128(now);
            h.write_usize(k);
            chunk.copy_from_slice(&h.finish().to_le_bytes()[..chunk.len()]);
        }
    }
    secret
}

/// RAM one copy costs in the table (its key, slot and hash in a B-tree
/// node, with the node's spare room), for the pager's overhead figure.
pub const COPY_BYTES: u64 = 72;

#[derive(Clone, Copy, Debug)]
struct Kept {
    r: DiskRef,
    hash: PageHash,
}

/// The clean copies of one mount's pages, by page.
pub struct CleanCopies {
    map: Mutex<BTreeMap<(Ino, u64), Kept>>,
    /// The map's length, read without its lock (every page change asks).
    len: AtomicU64,
    secret: Box<[u8; SECRET_BYTES]>,
}

impl std::fmt::Debug for CleanCopies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CleanCopies({} held)", self.len()) // not the secret
    }
}

impl Default for CleanCopies {
    fn default() -> CleanCopies {
        CleanCopies { map: Mutex::default(), len: AtomicU64::new(0), secret: draw_secret() }
    }
}

impl CleanCopies {
    /// The hash of a page's bytes, trailing zeros left out.
    pub fn hash(&self, bytes: &[u8]) -> PageHash {
        let used = bytes.iter().rposition(|&b| b != 0).map_or(0, |last| last + 1);
        xxhash_rust::xxh3::xxh3_128_with_secret(&bytes[..used], &self.secret[..])
    }

    /// Copies held.
    pub fn len(&self) -> u64 {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn set_len(&self, map: &BTreeMap<(Ino, u64), Kept>) {
        self.len.store(map.len() as u64, Ordering::Relaxed);
    }

    /// Keep `r` as the copy of page `id`, whose bytes hash to `hash`.
    /// Returns a copy it replaces, whose slot the caller frees.
    pub fn keep(&self, id: PageId, r: DiskRef, hash: PageHash) -> Option<DiskRef> {
        let mut map = self.map.lock();
        let old = map.insert((id.ino, id.idx), Kept { r, hash });
        self.set_len(&map);
        old.map(|c| c.r)
    }

    /// Take page `id`'s copy as it leaves RAM with `bytes`: `Ok(r)` when
    /// it is still the same page (its slot is the page's now), `Err(Some(r))`
    /// when it went stale (the caller frees `r`), `Err(None)` when there is
    /// none. The hash is taken with no lock held.
    pub fn take(&self, id: PageId, bytes: &[u8]) -> Result<DiskRef, Option<DiskRef>> {
        if self.is_empty() {
            return Err(None);
        }
        let copy = {
            let mut map = self.map.lock();
            let c = map.remove(&(id.ino, id.idx));
            self.set_len(&map);
            c
        };
        let copy = copy.ok_or(None)?;
        if self.hash(bytes) == copy.hash {
            Ok(copy.r)
        } else {
            Err(Some(copy.r))
        }
    }

    /// Whether page `id` has a copy (a hint: it may go meanwhile).
    pub fn has(&self, id: PageId) -> bool {
        !self.is_empty() && self.map.lock().contains_key(&(id.ino, id.idx))
    }

    /// Whether page `id`'s copy holds `bytes`, leaving it in place (the
    /// page leaves RAM compressed, and its copy stays its slot-to-be):
    /// `Ok(true)` it does, `Ok(false)` there is none, `Err(r)` it went
    /// stale and is dropped (the caller frees `r`).
    pub fn check(&self, id: PageId, bytes: &[u8]) -> Result<bool, DiskRef> {
        if self.is_empty() {
            return Ok(false);
        }
        let Some(copy) = self.map.lock().get(&(id.ino, id.idx)).copied() else { return Ok(false) };
        if self.hash(bytes) == copy.hash {
            return Ok(true);
        }
        let mut map = self.map.lock();
        // Dropped only if it is still the copy looked at.
        if map.get(&(id.ino, id.idx)).is_some_and(|c| c.r == copy.r) {
            map.remove(&(id.ino, id.idx));
            self.set_len(&map);
            return Err(copy.r);
        }
        Ok(false)
    }

    /// Give up the copies of pages `[from, to)` of file `ino`; returns
    /// their slots, for the caller to free.
    pub fn drop_range(&self, ino: Ino, from: u64, to: u64) -> Vec<DiskRef> {
        if self.is_empty() || from >= to {
            return vec![];
        }
        let mut map = self.map.lock();
        let keys: Vec<(Ino, u64)> = map.range((ino, from)..(ino, to)).map(|(k, _)| *k).collect();
        let gone = keys.iter().filter_map(|k| map.remove(k)).map(|c| c.r).collect();
        self.set_len(&map);
        gone
    }

    /// Give up every copy, or (`keep`) all but that many; returns their
    /// slots, for the caller to free.
    pub fn drop_down_to(&self, keep: u64) -> Vec<DiskRef> {
        if self.len() <= keep {
            return vec![];
        }
        let mut map = self.map.lock();
        let excess = map.len().saturating_sub(keep as usize);
        // Any will do: each is one slot, and none is worth more than
        // another to the store. The first keys are the oldest files'.
        let keys: Vec<(Ino, u64)> = map.keys().take(excess).copied().collect();
        let gone = keys.iter().filter_map(|k| map.remove(k)).map(|c| c.r).collect();
        self.set_len(&map);
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(slot: u32) -> DiskRef {
        DiskRef { slot, len: 4096, raw: true, crc: slot }
    }

    fn id(ino: Ino, idx: u64) -> PageId {
        PageId { ino, idx }
    }

    #[test]
    fn a_copy_is_used_only_for_the_same_bytes() {
        let c = CleanCopies::default();
        let page_hash = |b: &[u8]| c.hash(b);
        let page = vec![7u8; 4096];
        assert!(c.keep(id(2, 0), r(1), page_hash(&page)).is_none());
        assert_eq!(c.take(id(2, 0), &page).map(|r| r.slot), Ok(1));
        assert!(c.is_empty(), "taken");
        let mut changed = page.clone();
        c.keep(id(2, 0), r(1), page_hash(&page));
        changed[4000] = 8;
        assert_eq!(c.take(id(2, 0), &changed).map_err(|e| e.map(|r| r.slot)), Err(Some(1)), "stale: to free");
        assert_eq!(c.take(id(2, 0), &page).map_err(|e| e.map(|r| r.slot)), Err(None), "gone");
    }

    #[test]
    fn trailing_zeros_do_not_count_but_other_bytes_do() {
        let c = CleanCopies::default();
        let page_hash = |b: &[u8]| c.hash(b);
        let mut whole = vec![0u8; 4096];
        whole[..100].fill(3);
        assert_eq!(page_hash(&whole), page_hash(&whole[..128]), "a short buffer reads as the whole page");
        assert_ne!(page_hash(&whole), page_hash(&whole[..99]));
        let mut moved = whole.clone();
        moved[100] = 3;
        assert_ne!(page_hash(&whole), page_hash(&moved));
        assert_eq!(page_hash(&[]), page_hash(&[0; 4096]));
        let other = CleanCopies::default();
        assert_ne!(other.hash(&whole), page_hash(&whole), "each mount has its own secret");
    }

    #[test]
    fn copies_go_by_file_range_and_down_to_a_count() {
        let c = CleanCopies::default();
        let h = c.hash(b"x");
        for (k, (ino, idx)) in [(2, 0), (2, 5), (2, 9), (3, 0), (3, 1)].into_iter().enumerate() {
            c.keep(id(ino, idx), r(k as u32), h);
        }
        let mut gone: Vec<u32> = c.drop_range(2, 1, 9).iter().map(|r| r.slot).collect();
        assert_eq!(gone, vec![1]);
        gone = c.drop_range(2, 0, u64::MAX).iter().map(|r| r.slot).collect();
        assert_eq!(gone, vec![0, 2]);
        assert_eq!(c.len(), 2);
        assert_eq!(c.drop_down_to(1).len(), 1);
        assert_eq!(c.len(), 1);
        assert!(c.drop_down_to(1).is_empty());
        assert_eq!(c.drop_down_to(0).len(), 1);
        assert!(c.is_empty());
    }
}
