//! Arenas: the RAM home of file pages held in the daemon.
//!
//! Owns the memory that file pages held by the daemon live in (the `Ram`
//! and `Zip` slots of data.rs) and nothing else: not which file a page
//! belongs to, not the pager's accounting. A buffer is a [`PageBuf`], a
//! slot of one of 64 size classes (every multiple of 64 bytes up to a page:
//! resident pages use the powers of two, as data.rs sizes a page's buffer;
//! compressed pages the class just above their length, so at most 63 bytes
//! are lost per compressed page, zsmalloc's idea), cut from chunks of 2 MiB
//! mapped with `mmap` and aligned to 2 MiB, so that:
//!
//! - a page is never a separate malloc: no per-allocation header, no
//!   interleaving of pages with the daemon's small allocations (which is
//!   what kept glibc from giving freed pages back, trim.rs);
//! - a chunk is cut into spans of one to four OS pages (as many as make
//!   the class's slots fit with the least left over), and a slot is taken
//!   from the fullest span that has room, lowest address first (zsmalloc's
//!   fullness groups): live slots gather in few spans and the others empty
//!   out. Measured on compressed pages coming and going under `ram=`:
//!   reusing the last freed slot, or the lowest, left each class's live
//!   slots spread over twice the pages they needed;
//! - [`trim`] hands every wholly free span back to the kernel
//!   (`MADV_DONTNEED`), so the daemon's RSS follows what is stored; the
//!   pager's reclaimer trims once empty spans pass a sixteenth of what is
//!   in use ([`trim_if_slack`]), an idle mount after deletions (trim.rs);
//!   a chunk that empties is unmapped, but for one spare per class kept
//!   until the next trim;
//! - a chunk is the unit that `huge=` (transparent huge pages, [`Huge`])
//!   and NUMA placement ([`set_placer`]: `mbind` per chunk as it is
//!   mapped; [`chunk_bases`] to place them all again) apply to, and
//!   [`live_pages`] says which OS pages hold pages (`stats/pagestat`,
//!   `memfs migrate`: core/place.rs).
//!
//! Locks: one mutex per size class, a leaf, held for a list operation (and
//! by [`trim`] for one chunk at a time); never held across anything else.
//! A process serves one mount, so the arenas are process-wide, like the
//! allocator they replace; their settings ([`set_huge`]) are the mount's.
//!
//! Figures: [`stats`] (mapped, in use, empty spans not yet given back,
//! given back so far) feed `.memfs/stats/usage`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

use crate::sync::{Arc, AtomicI64, AtomicU64, AtomicU8, OnceLock, Ordering};
// The arenas are process-wide, made in const context, and their lock is a
// leaf held for a few instructions: parking_lot's even under the model
// checker (src/sync.rs).
use parking_lot::Mutex;

/// Bytes per chunk, and its alignment (one transparent huge page on x86-64).
pub const CHUNK: usize = 2 << 20;
const OS_PAGE: usize = 4096;
/// Slot sizes: 64 * (class + 1).
const SMALLEST: usize = 64;
const CLASSES: usize = OS_PAGE / SMALLEST;

/// Transparent huge pages (`huge=`, tmpfs's names): the private tmpfs of
/// memory files takes it as its own; here, what the arenas do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Huge {
    /// Never (`MADV_NOHUGEPAGE`): tmpfs's default; the arenas' start.
    #[default]
    Never,
    /// Full-page chunks ask for huge pages too (`MADV_HUGEPAGE`).
    Always,
    /// Huge pages for a memory file where its size covers them (the
    /// private tmpfs's own rule); the arenas, shared by many small files,
    /// stay in small pages.
    WithinSize,
    /// Only where the user advises it: nobody can advise the daemon's
    /// memory, so the arenas are as `never` (memory files follow the
    /// user's madvise through passthrough mmap).
    Advise,
}

impl Huge {
    pub fn parse(s: &str) -> Result<Huge, String> {
        match s {
            "never" => Ok(Huge::Never),
            "always" => Ok(Huge::Always),
            "within_size" => Ok(Huge::WithinSize),
            "advise" => Ok(Huge::Advise),
            _ => Err("must be never, always, within_size or advise".into()),
        }
    }

    fn arenas_huge(self) -> bool {
        self == Huge::Always
    }
}

impl fmt::Display for Huge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Huge::Never => "never",
            Huge::Always => "always",
            Huge::WithinSize => "within_size",
            Huge::Advise => "advise",
        })
    }
}

/// One page's buffer (resident, or compressed): `len` bytes in an arena
/// slot of the class just above. Packed to 12 bytes (4-aligned) so that a
/// resident page's slot with its reference byte is 16, not 24 (issue 14:
/// every byte of a small file's inode counts); its fields are only ever
/// copied out, never borrowed.
#[repr(C, packed(4))]
pub struct PageBuf {
    ptr: NonNull<u8>,
    len: u32,
}

// SAFETY: a PageBuf owns its slot exclusively, like a Box<[u8]>.
unsafe impl Send for PageBuf {}
// SAFETY: shared access only reads through &[u8].
unsafe impl Sync for PageBuf {}

impl Default for PageBuf {
    fn default() -> PageBuf {
        PageBuf::empty()
    }
}

impl PageBuf {
    /// A buffer of no bytes (a page of zeros that is data): no slot.
    pub fn empty() -> PageBuf {
        PageBuf { ptr: NonNull::dangling(), len: 0 }
    }

    /// A buffer of `len` zero bytes, at most a page.
    pub fn zeroed(len: usize) -> PageBuf {
        let mut b = PageBuf::uninit(len);
        b.fill(0);
        b
    }

    /// A buffer holding `data`, of the smallest class that fits it.
    pub fn copy_of(data: &[u8]) -> PageBuf {
        PageBuf::from_slice(data, if data.is_empty() { 0 } else { data.len().next_power_of_two().max(SMALLEST) })
    }

    /// A buffer of exactly `data`'s bytes (a compressed page).
    pub fn exact(data: &[u8]) -> PageBuf {
        PageBuf::from_slice(data, data.len())
    }

    /// A buffer of `len` bytes starting with `data`, zeros after it.
    pub fn from_slice(data: &[u8], len: usize) -> PageBuf {
        assert!(data.len() <= len, "page buffer of {len} bytes cannot hold {}", data.len());
        let mut b = PageBuf::uninit(len);
        b[..data.len()].copy_from_slice(data);
        b[data.len()..].fill(0);
        b
    }

    /// A buffer of `len` bytes with whatever its slot held last (never
    /// handed out before the caller has written every byte).
    fn uninit(len: usize) -> PageBuf {
        if len == 0 {
            return PageBuf::empty();
        }
        PageBuf { ptr: alloc(class_of(len)), len: len as u32 }
    }
}

impl Deref for PageBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is a live slot of len bytes owned by self.
        unsafe { std::slice::from_raw_parts({ self.ptr }.as_ptr(), { self.len } as usize) }
    }
}

impl DerefMut for PageBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as above, and &mut self is the only access.
        unsafe { std::slice::from_raw_parts_mut({ self.ptr }.as_ptr(), { self.len } as usize) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        let len = self.len;
        if len > 0 {
            free(self.ptr, class_of(len as usize));
        }
    }
}

impl fmt::Debug for PageBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PageBuf({} bytes)", { self.len })
    }
}

/// The class of slots for `len` bytes (1 to a page).
fn class_of(len: usize) -> usize {
    assert!((1..=OS_PAGE).contains(&len), "page buffer length {len} is more than a page");
    len.div_ceil(SMALLEST) - 1
}

fn slot_size(class: usize) -> usize {
    SMALLEST * (class + 1)
}

/// How a class cuts a chunk: OS pages per span, slots per span.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    slot: usize,
    span_pages: usize,
    per_span: usize,
    spans: usize,
}

impl Geometry {
    /// The span of 1-4 pages that wastes the smallest share on slots of `size`.
    fn of(size: usize) -> Geometry {
        let span_pages = (1..=4).min_by_key(|&k| (k * OS_PAGE % size) * 1000 / (k * OS_PAGE)).unwrap_or(1);
        let per_span = span_pages * OS_PAGE / size;
        Geometry { slot: size, span_pages, per_span, spans: CHUNK / (span_pages * OS_PAGE) }
    }

    fn span_bytes(&self) -> usize {
        self.span_pages * OS_PAGE
    }

    /// Offset in its chunk of slot `slot`: slots never cross a span's end
    /// (what a span leaves over stays unused), so that giving back an
    /// empty span cannot touch a slot of the next one.
    fn offset(&self, slot: usize) -> usize {
        slot / self.per_span * self.span_bytes() + slot % self.per_span * self.size()
    }

    fn slot_at(&self, offset: usize) -> usize {
        offset / self.span_bytes() * self.per_span + offset % self.span_bytes() / self.size()
    }

    fn size(&self) -> usize {
        self.slot
    }
}

/// One 2 MiB chunk of a class.
#[derive(Debug)]
struct Chunk {
    /// Slots handed out.
    used: u32,
    /// Free slots per span.
    span_free: Vec<u16>,
    /// Free slots, one bit each.
    free: Vec<u64>,
    /// Spans touched since they were last given back (or mapped), one bit each.
    dirty: Vec<u64>,
    /// A span emptied since the last trim looked at this chunk.
    untrimmed: bool,
}

impl Chunk {
    fn new(g: &Geometry) -> Chunk {
        let slots = g.spans * g.per_span;
        let mut free = vec![u64::MAX; slots.div_ceil(64)];
        if slots % 64 != 0 {
            free[slots / 64] = (1 << (slots % 64)) - 1;
        }
        Chunk {
            used: 0,
            span_free: vec![g.per_span as u16; g.spans],
            free,
            dirty: vec![0; g.spans.div_ceil(64)],
            untrimmed: false,
        }
    }

    /// Take the lowest free slot of `span`.
    fn take_in(&mut self, g: &Geometry, span: usize) -> Option<u32> {
        let (from, to) = (span * g.per_span, (span + 1) * g.per_span);
        let mut slot = from;
        while slot < to {
            let (w, b) = (slot / 64, slot % 64);
            let bits = self.free[w] >> b;
            if bits == 0 {
                slot = (w + 1) * 64;
                continue;
            }
            slot += bits.trailing_zeros() as usize;
            if slot >= to {
                break;
            }
            self.free[slot / 64] &= !(1 << (slot % 64));
            self.span_free[span] -= 1;
            self.dirty[span / 64] |= 1 << (span % 64);
            self.used += 1;
            return Some(slot as u32);
        }
        None
    }

    fn is_dirty(&self, span: usize) -> bool {
        self.dirty[span / 64] & (1 << (span % 64)) != 0
    }

    fn put(&mut self, g: &Geometry, slot: usize) {
        self.free[slot / 64] |= 1 << (slot % 64);
        self.span_free[slot / g.per_span] += 1;
        self.used -= 1;
    }
}

/// A span with room, ordered fullest first, then by address.
type OpenSpan = (u16, usize, u32);

#[derive(Debug)]
struct Class {
    chunks: BTreeMap<usize, Chunk>,
    /// Spans with a free slot: (free slots, chunk, span).
    open: BTreeSet<OpenSpan>,
    /// An empty chunk kept mapped, so that one free and alloc at a chunk
    /// boundary does not map and unmap every time.
    spare: Option<usize>,
}

impl Class {
    const fn new() -> Class {
        Class { chunks: BTreeMap::new(), open: BTreeSet::new(), spare: None }
    }

    /// Forget chunk `base` (no slot of it in use).
    fn drop_chunk(&mut self, base: usize) {
        if let Some(ch) = self.chunks.remove(&base) {
            for (span, &f) in ch.span_free.iter().enumerate() {
                self.open.remove(&(f, base, span as u32));
            }
        }
    }
}

/// The arenas of one process (tests make their own).
struct Arenas {
    classes: [Mutex<Class>; CLASSES],
    /// Bytes of wholly free spans that may still be in RAM (emptied since
    /// the last trim and not used again); approximate, reset by a trim.
    slack: AtomicI64,
    mapped: AtomicU64,
    in_use: AtomicU64,
    /// Bytes of spans touched since they were last given back (or mapped):
    /// what the arenas hold in RAM, slots in use or not.
    resident: AtomicU64,
    trimmed: AtomicU64,
}

static ARENAS: Arenas = Arenas::new();
static HUGE: AtomicU8 = AtomicU8::new(0);

/// Places a chunk (`base`, bytes) as it is mapped: NUMA placement, set
/// once by the mount (core/place.rs).
pub type Placer = Arc<dyn Fn(usize, usize) + Send + Sync>;
static PLACER: OnceLock<Placer> = OnceLock::new();

/// Set what places every chunk mapped from now on (once per process).
pub fn set_placer(p: Placer) {
    let _ = PLACER.set(p);
}

/// The base addresses of the chunks mapped now (each [`CHUNK`] bytes).
pub fn chunk_bases() -> Vec<usize> {
    ARENAS.classes.iter().flat_map(|c| c.lock().chunks.keys().copied().collect::<Vec<_>>()).collect()
}

/// Call `f` with the addresses of the OS pages that hold at least one
/// slot in use, one chunk at a time (each class's lock is held while a
/// chunk's list is made, never while `f` runs: pages may be freed, and
/// chunks unmapped, by the time `f` looks at them).
pub fn live_pages(f: &mut dyn FnMut(&[usize])) {
    ARENAS.live_pages(f)
}

/// Set `huge=` for chunks mapped from now on (a remount applies to new chunks).
pub fn set_huge(h: Huge) {
    HUGE.store(h as u8, Ordering::Relaxed);
}

/// `huge=` as set now.
pub fn huge() -> Huge {
    match HUGE.load(Ordering::Relaxed) {
        1 => Huge::Always,
        2 => Huge::WithinSize,
        3 => Huge::Advise,
        _ => Huge::Never,
    }
}

/// The arenas' figures.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Bytes of chunks mapped (virtual; RAM only where touched).
    pub mapped: u64,
    /// Bytes of slots holding pages.
    pub in_use: u64,
    /// Bytes of wholly free spans that may still be in RAM until a trim.
    pub slack: u64,
    /// Bytes of spans touched and not given back since: the arenas' RAM
    /// (slots in use, free slots of spans in use, and the slack).
    pub resident: u64,
    /// Bytes given back to the kernel so far (cumulative).
    pub trimmed: u64,
}

pub fn stats() -> ArenaStats {
    ARENAS.stats()
}

fn alloc(class: usize) -> NonNull<u8> {
    ARENAS.alloc(class)
}

fn free(ptr: NonNull<u8>, class: usize) {
    ARENAS.free(ptr, class)
}

/// Trim when the empty spans that may still be in RAM exceed [`SLACK_MIN`]
/// and a sixteenth of the bytes in use (the pager's reclaimer calls this
/// after each pass: pages of every size come and go there, and the spans
/// they empty would otherwise stay in RAM until the mount is idle).
pub fn trim_if_slack() -> u64 {
    ARENAS.trim_if_slack()
}

/// Empty-span bytes below which [`trim_if_slack`] does nothing.
pub const SLACK_MIN: u64 = 1 << 20;

/// Give back to the kernel every wholly free span of the arenas (and unmap
/// the spare empty chunks); returns the bytes given back. Takes each
/// class's lock for one chunk at a time.
pub fn trim() -> u64 {
    ARENAS.trim()
}

impl Arenas {
    const fn new() -> Arenas {
        Arenas {
            classes: [const { Mutex::new(Class::new()) }; CLASSES],
            slack: AtomicI64::new(0),
            mapped: AtomicU64::new(0),
            in_use: AtomicU64::new(0),
            resident: AtomicU64::new(0),
            trimmed: AtomicU64::new(0),
        }
    }

    fn stats(&self) -> ArenaStats {
        ArenaStats {
            mapped: self.mapped.load(Ordering::Relaxed),
            in_use: self.in_use.load(Ordering::Relaxed),
            slack: self.slack.load(Ordering::Relaxed).max(0) as u64,
            resident: self.resident.load(Ordering::Relaxed),
            trimmed: self.trimmed.load(Ordering::Relaxed),
        }
    }

    fn alloc(&self, class: usize) -> NonNull<u8> {
        let size = slot_size(class);
        let g = Geometry::of(size);
        let mut c = self.classes[class].lock();
        let (f, base, span) = match c.open.pop_first() {
            Some(o) => o,
            None => {
                let b = self.map_chunk(class == CLASSES - 1);
                let ch = Chunk::new(&g);
                c.open.extend((0..g.spans as u32).map(|span| (g.per_span as u16, b, span)));
                c.chunks.insert(b, ch);
                c.open.pop_first().expect("a new chunk has open spans")
            }
        };
        if c.spare == Some(base) {
            c.spare = None;
        }
        let ch = c.chunks.get_mut(&base).expect("open spans are in mapped chunks");
        if f as usize == g.per_span && ch.is_dirty(span as usize) {
            // An empty span still in RAM is used again: no longer slack.
            self.slack.fetch_sub(g.span_bytes() as i64, Ordering::Relaxed);
        }
        if !ch.is_dirty(span as usize) {
            self.resident.fetch_add(g.span_bytes() as u64, Ordering::Relaxed);
        }
        let slot = ch.take_in(&g, span as usize).expect("an open span has a free slot");
        if f > 1 {
            c.open.insert((f - 1, base, span));
        }
        drop(c);
        self.in_use.fetch_add(size as u64, Ordering::Relaxed);
        NonNull::new((base + g.offset(slot as usize)) as *mut u8).expect("chunks are never at address 0")
    }

    fn free(&self, ptr: NonNull<u8>, class: usize) {
        let size = slot_size(class);
        let g = Geometry::of(size);
        let addr = ptr.as_ptr() as usize;
        let base = addr & !(CHUNK - 1);
        let slot = g.slot_at(addr - base);
        let span = slot / g.per_span;
        let mut c = self.classes[class].lock();
        let Some(ch) = c.chunks.get_mut(&base) else {
            debug_assert!(false, "freeing a slot of no chunk");
            return;
        };
        let f = ch.span_free[span];
        ch.put(&g, slot);
        let emptied = f as usize + 1 == g.per_span;
        if emptied {
            ch.untrimmed = true;
        }
        let chunk_empty = ch.used == 0;
        c.open.remove(&(f, base, span as u32));
        c.open.insert((f + 1, base, span as u32));
        if emptied {
            self.slack.fetch_add(g.span_bytes() as i64, Ordering::Relaxed);
        }
        if chunk_empty {
            self.chunk_emptied(&mut c, &g, base);
        }
        drop(c);
        self.in_use.fetch_sub(size as u64, Ordering::Relaxed);
    }

    /// Chunk `base` has no slot in use: keep it as the spare (its memory
    /// stays for the next allocations, until a trim), or unmap it if there
    /// is a spare already. Giving a lone emptied chunk back at once made a
    /// create/write/delete loop pay an madvise and a page fault per file.
    fn chunk_emptied(&self, c: &mut Class, g: &Geometry, base: usize) {
        match c.spare {
            None => c.spare = Some(base),
            Some(s) if s != base => {
                // Keep the lower one (used first), unmap the other.
                let (keep, gone) = (s.min(base), s.max(base));
                c.spare = Some(keep);
                self.forget_dirty(c, g, gone);
                c.drop_chunk(gone);
                self.unmap_chunk(gone);
            }
            Some(_) => {}
        }
    }

    /// Chunk `base` is about to go: its empty spans in RAM are no longer
    /// slack, and count as given back.
    fn forget_dirty(&self, c: &Class, g: &Geometry, base: usize) -> u64 {
        let Some(ch) = c.chunks.get(&base) else { return 0 };
        let dirty: u32 = ch.dirty.iter().map(|w| w.count_ones()).sum();
        let bytes = (dirty as usize * g.span_bytes()) as u64;
        self.slack.fetch_sub(bytes as i64, Ordering::Relaxed);
        self.trimmed.fetch_add(bytes, Ordering::Relaxed);
        self.resident.fetch_sub(bytes, Ordering::Relaxed);
        bytes
    }

    /// Map a 2 MiB-aligned chunk (map twice the size, cut the ends off).
    fn map_chunk(&self, full_pages: bool) -> usize {
        let len = 2 * CHUNK;
        // SAFETY: an anonymous private mapping; nothing else is touched.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            // As the global allocator does when the address space is exhausted.
            std::alloc::handle_alloc_error(std::alloc::Layout::from_size_align(CHUNK, CHUNK).expect("valid layout"));
        }
        let start = p as usize;
        let base = (start + CHUNK - 1) & !(CHUNK - 1);
        // SAFETY: unmapping the parts of our own fresh mapping outside [base, base+CHUNK).
        unsafe {
            if base > start {
                libc::munmap(p, base - start);
            }
            let end = base + CHUNK;
            if start + len > end {
                libc::munmap(end as *mut libc::c_void, start + len - end);
            }
            let advice = if full_pages && huge().arenas_huge() { libc::MADV_HUGEPAGE } else { libc::MADV_NOHUGEPAGE };
            libc::madvise(base as *mut libc::c_void, CHUNK, advice);
        }
        if let Some(place) = PLACER.get() {
            place(base, CHUNK);
        }
        self.mapped.fetch_add(CHUNK as u64, Ordering::Relaxed);
        base
    }

    fn live_pages(&self, f: &mut dyn FnMut(&[usize])) {
        let mut pages = Vec::new();
        for (class, lock) in self.classes.iter().enumerate() {
            let g = Geometry::of(slot_size(class));
            let bases: Vec<usize> = lock.lock().chunks.keys().copied().collect();
            for base in bases {
                pages.clear();
                {
                    let c = lock.lock();
                    let Some(ch) = c.chunks.get(&base) else { continue };
                    if ch.used == 0 {
                        continue;
                    }
                    for slot in (0..g.spans * g.per_span).filter(|s| ch.free[s / 64] & (1 << (s % 64)) == 0) {
                        let off = g.offset(slot);
                        for page in off / OS_PAGE..=(off + g.size() - 1) / OS_PAGE {
                            let addr = base + page * OS_PAGE;
                            if pages.last() != Some(&addr) {
                                pages.push(addr);
                            }
                        }
                    }
                }
                f(&pages);
            }
        }
    }

    fn unmap_chunk(&self, base: usize) {
        // SAFETY: the chunk has no slot in use, and is no longer listed.
        unsafe {
            libc::munmap(base as *mut libc::c_void, CHUNK);
        }
        self.mapped.fetch_sub(CHUNK as u64, Ordering::Relaxed);
    }

    fn trim_if_slack(&self) -> u64 {
        let slack = self.slack.load(Ordering::Relaxed).max(0) as u64;
        if slack > SLACK_MIN.max(self.in_use.load(Ordering::Relaxed) / 16) {
            self.trim()
        } else {
            0
        }
    }

    fn trim(&self) -> u64 {
        self.slack.store(0, Ordering::Relaxed);
        let (mut given, mut counted) = (0, 0);
        for class in 0..CLASSES {
            let g = Geometry::of(slot_size(class));
            let bases: Vec<usize> = self.classes[class].lock().chunks.keys().copied().collect();
            for base in bases {
                let mut c = self.classes[class].lock();
                if c.spare == Some(base) {
                    c.spare = None;
                    // Counted as given back (and no longer resident) by forget_dirty.
                    let b = self.forget_dirty(&c, &g, base);
                    given += b;
                    counted += b;
                    c.drop_chunk(base);
                    self.unmap_chunk(base);
                    continue;
                }
                let Some(ch) = c.chunks.get_mut(&base) else { continue };
                if !ch.untrimmed {
                    continue;
                }
                ch.untrimmed = false;
                let released = release_empty_spans(base, &g, ch);
                self.resident.fetch_sub(released, Ordering::Relaxed);
                given += released;
                for span in 0..g.spans {
                    if ch.span_free[span] as usize == g.per_span {
                        ch.dirty[span / 64] &= !(1 << (span % 64));
                    }
                }
            }
        }
        self.trimmed.fetch_add(given - counted, Ordering::Relaxed);
        given
    }

    #[cfg(test)]
    fn chunks(&self, class: usize) -> usize {
        self.classes[class].lock().chunks.len()
    }
}

/// MADV_DONTNEED the runs of wholly free spans of a chunk still in RAM.
fn release_empty_spans(base: usize, g: &Geometry, ch: &Chunk) -> u64 {
    let mut given = 0;
    let mut run: Option<usize> = None;
    for span in 0..=g.spans {
        let empty = span < g.spans && ch.span_free[span] as usize == g.per_span && ch.is_dirty(span);
        match (empty, run) {
            (true, None) => run = Some(span),
            (false, Some(from)) => {
                let len = (span - from) * g.span_bytes();
                // SAFETY: no slot in these spans is in use: no PageBuf points there.
                unsafe {
                    libc::madvise((base + from * g.span_bytes()) as *mut libc::c_void, len, libc::MADV_DONTNEED);
                }
                given += len as u64;
                run = None;
            }
            _ => {}
        }
    }
    given
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_hold_their_bytes_and_reuse_slots() {
        let a = PageBuf::from_slice(b"hello", 64);
        assert_eq!(&a[..5], b"hello");
        assert!(a[5..].iter().all(|&b| b == 0));
        assert_eq!(a.len(), 64);
        drop(a);
        let b = PageBuf::zeroed(64);
        assert!(b.iter().all(|&x| x == 0));
        let page = PageBuf::from_slice(&[7u8; 4096], 4096);
        assert_eq!(page.as_ptr() as usize % 4096, 0, "full pages are page-aligned");
        assert!(page.iter().all(|&x| x == 7));
    }

    #[test]
    #[should_panic(expected = "more than a page")]
    fn more_than_a_page_is_refused() {
        PageBuf::zeroed(4097);
    }

    #[test]
    fn live_pages_are_the_pages_that_hold_slots_in_use() {
        let a = Arenas::new();
        let pages_of = |a: &Arenas| {
            let mut got = vec![];
            a.live_pages(&mut |p| got.extend_from_slice(p));
            got
        };
        assert!(pages_of(&a).is_empty());
        let full = CLASSES - 1;
        let (p1, p2) = (a.alloc(full), a.alloc(full));
        // 5 slots of 960 bytes: 4800 bytes over two pages of one span.
        let small = class_of(960);
        let s: Vec<NonNull<u8>> = (0..5).map(|_| a.alloc(small)).collect();
        let page = |p: &NonNull<u8>, off: usize| (p.as_ptr() as usize + off) & !(OS_PAGE - 1);
        let mut want: BTreeSet<usize> = [page(&p1, 0), page(&p2, 0)].into();
        for p in &s {
            want.extend([page(p, 0), page(p, 959)]);
        }
        let got = pages_of(&a);
        assert_eq!(got.len(), want.len(), "each page once: {got:x?}");
        assert_eq!(got.iter().copied().collect::<BTreeSet<_>>(), want);
        a.free(p2, full);
        assert!(!pages_of(&a).contains(&page(&p2, 0)), "a freed page is not live");
        assert_eq!(pages_of(&a).len(), want.len() - 1);
    }

    #[test]
    fn compressed_lengths_take_the_class_above() {
        let a = Arenas::new();
        assert_eq!((class_of(1), class_of(64), class_of(65), class_of(4096)), (0, 0, 1, CLASSES - 1));
        // 1000-byte slots (class of 1024) straddle pages: free slots 0-7
        // (bytes 0-8191) and 9; slot 8 (8192-9215) stays in use.
        let class = class_of(1000);
        let ptrs: Vec<NonNull<u8>> = (0..10).map(|_| a.alloc(class)).collect();
        for p in &ptrs {
            // SAFETY: live slots of 1024 bytes.
            unsafe { std::ptr::write_bytes(p.as_ptr(), 2, 1024) };
        }
        let base = ptrs[0].as_ptr() as usize;
        for (i, p) in ptrs.iter().enumerate() {
            if i != 8 {
                a.free(*p, class);
            }
        }
        assert_eq!(a.trim(), 2 * OS_PAGE as u64, "pages 0 and 1 are wholly free; page 2 holds slot 8");
        assert_eq!(resident(base, 2 * OS_PAGE), 0);
        assert_eq!(resident(base + 2 * OS_PAGE, OS_PAGE), OS_PAGE);
        a.free(ptrs[8], class);
        assert_eq!(resident(base + 2 * OS_PAGE, OS_PAGE), OS_PAGE, "the emptied chunk is kept as the spare");
        assert_eq!(a.trim(), OS_PAGE as u64, "and unmapped by the next trim (its one page in RAM)");
        assert_eq!(a.chunks(class), 0);
        assert_eq!((a.stats().resident, a.stats().trimmed), (0, 3 * OS_PAGE as u64));
    }

    /// Resident bytes of `[addr, addr+len)` (mincore).
    fn resident(addr: usize, len: usize) -> usize {
        let mut v = vec![0u8; len.div_ceil(OS_PAGE)];
        // SAFETY: mincore on a mapped range into a vector of the right length.
        let r = unsafe { libc::mincore(addr as *mut libc::c_void, len, v.as_mut_ptr()) };
        assert_eq!(r, 0);
        v.iter().filter(|&&b| b & 1 == 1).count() * OS_PAGE
    }

    #[test]
    fn slots_span_chunks_and_empty_chunks_are_unmapped() {
        let a = Arenas::new();
        let class = class_of(2048); // 1024 slots per chunk
        let ptrs: Vec<NonNull<u8>> = (0..3000).map(|_| a.alloc(class)).collect();
        let distinct: BTreeSet<usize> = ptrs.iter().map(|p| p.as_ptr() as usize).collect();
        assert_eq!(distinct.len(), 3000);
        assert_eq!(a.chunks(class), 3);
        assert_eq!(a.stats().in_use, 3000 * 2048);
        assert_eq!(a.stats().mapped, 3 * CHUNK as u64);
        // Free the last two chunks' slots: one empty chunk stays as the spare.
        for p in &ptrs[1024..] {
            a.free(*p, class);
        }
        assert_eq!(a.chunks(class), 2);
        // The lower of the two empty chunks is kept, and the next allocation
        // comes from it (the first chunk is full).
        let chunk = |p: NonNull<u8>| p.as_ptr() as usize & !(CHUNK - 1);
        let again = a.alloc(class);
        assert_eq!(chunk(again), chunk(ptrs[1024]).min(chunk(ptrs[2048])));
        a.free(again, class);
        for p in &ptrs[..1024] {
            a.free(*p, class);
        }
        assert_eq!(a.chunks(class), 1, "one empty chunk kept as the spare");
        a.trim();
        assert_eq!(a.chunks(class), 0);
        assert_eq!((a.stats().mapped, a.stats().in_use), (0, 0));
    }

    #[test]
    fn trim_gives_back_whole_free_pages_only() {
        let a = Arenas::new();
        let class = class_of(1024); // four slots per page
        let ptrs: Vec<NonNull<u8>> = (0..8).map(|_| a.alloc(class)).collect();
        for p in &ptrs {
            // SAFETY: a live 1024-byte slot of a.
            unsafe { std::ptr::write_bytes(p.as_ptr(), 1, 1024) };
        }
        let base = ptrs[0].as_ptr() as usize;
        assert_eq!(resident(base, 2 * OS_PAGE), 2 * OS_PAGE);
        assert_eq!(a.stats().resident, 2 * OS_PAGE as u64, "two pages touched");
        // All four slots of the first page free, three of the second.
        for p in &ptrs[..7] {
            a.free(*p, class);
        }
        assert_eq!(a.stats().resident, 2 * OS_PAGE as u64, "freed, not yet given back");
        assert_eq!(a.trim(), OS_PAGE as u64);
        assert_eq!(a.stats().resident, OS_PAGE as u64);
        assert_eq!(resident(base, OS_PAGE), 0, "the wholly free page went back");
        assert_eq!(resident(base + OS_PAGE, OS_PAGE), OS_PAGE, "a page with a live slot stays");
        // SAFETY: the last slot is still live.
        assert_eq!(unsafe { *ptrs[7].as_ptr() }, 1);
        // Nothing freed since: the next trim has nothing to do.
        assert_eq!(a.trim(), 0);
        a.free(ptrs[7], class);
    }

    #[test]
    fn a_span_given_back_never_touches_a_slot_of_the_next() {
        // 1152-byte slots: spans of two pages hold 7 (8064 bytes, 128 left over).
        let a = Arenas::new();
        let class = class_of(1152);
        let g = Geometry::of(1152);
        assert_eq!((g.span_pages, g.per_span), (2, 7));
        let ptrs: Vec<NonNull<u8>> = (0..8).map(|_| a.alloc(class)).collect();
        for (i, p) in ptrs.iter().enumerate() {
            // SAFETY: live slots of 1152 bytes.
            unsafe { std::ptr::write_bytes(p.as_ptr(), i as u8 + 1, 1152) };
        }
        let base = ptrs[0].as_ptr() as usize;
        assert_eq!(ptrs[7].as_ptr() as usize - base, 8192, "slot 7 starts the second span");
        for p in &ptrs[..7] {
            a.free(*p, class);
        }
        assert_eq!(a.trim(), 8192);
        // SAFETY: slot 7 is live.
        let last = unsafe { std::slice::from_raw_parts(ptrs[7].as_ptr(), 1152) };
        assert!(last.iter().all(|&b| b == 8));
        a.free(ptrs[7], class);
    }

    #[test]
    fn huge_names_parse_and_print() {
        for n in ["never", "always", "within_size", "advise"] {
            assert_eq!(Huge::parse(n).unwrap().to_string(), n);
        }
        assert!(Huge::parse("yes").is_err());
    }
}
