//! NUMA placement of file pages (`mpol=`, `opts/nodemask`, `stats/pagestat`,
//! `memfs migrate`).
//!
//! Owns the policy (tmpfs's `mpol=` syntax and meaning), the nodemask
//! format (the kernel's `%*pb`: 32-bit hex groups, most significant first),
//! the decisions (which nodes a policy allows, where a misplaced page goes,
//! how per-page answers add up to per-node counts) and the system calls
//! behind them, reached only through [`NumaSys`] so that tests can inject a
//! topology of several nodes. What is placed: the page arenas' chunks
//! (arena.rs, `mbind` per 2 MiB chunk) and the private tmpfs of memory files
//! (memfile.rs, its own `mpol=`); where pages are is asked of the kernel
//! page by page (`move_pages` with no target), never inferred from the
//! policy.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io;

use crate::sync::{Arc, Mutex};

/// A set of NUMA node numbers.
pub type Nodes = BTreeSet<u32>;

// linux/mempolicy.h
const MPOL_DEFAULT: i32 = 0;
const MPOL_PREFERRED: i32 = 1;
const MPOL_BIND: i32 = 2;
const MPOL_INTERLEAVE: i32 = 3;
const MPOL_LOCAL: i32 = 4;
const MPOL_MF_MOVE: u32 = 1 << 1;
const MPOL_MF_MOVE_ALL: u32 = 1 << 2;

/// A placement policy: tmpfs's `mpol=` modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Policy {
    /// The allocating task's policy (normally: the node it runs on).
    Default,
    /// This node first, others when it is full.
    Prefer(u32),
    /// Only these nodes.
    Bind(Nodes),
    /// Page by page across these nodes (empty: every node with memory).
    Interleave(Nodes),
    /// The node of the CPU that allocates.
    Local,
}

impl Policy {
    /// Parse tmpfs's syntax: `default`, `prefer:N`, `bind:LIST`,
    /// `interleave[:LIST]`, `local`; LIST as `0-3,5`.
    pub fn parse(s: &str) -> Result<Policy, String> {
        let (mode, list) = s.split_once(':').map_or((s, None), |(m, l)| (m, Some(l)));
        let nodes = |l: Option<&str>| -> Result<Nodes, String> {
            let l = l.ok_or_else(|| format!("{mode} needs a node list, as {mode}:0-1"))?;
            parse_list(l)
        };
        Ok(match mode {
            "default" | "local" if list.is_some() => return Err(format!("{mode} takes no node list")),
            "default" => Policy::Default,
            "local" => Policy::Local,
            "prefer" => {
                let n = nodes(list)?;
                match n.len() {
                    1 => Policy::Prefer(*n.first().expect("one node")),
                    _ => return Err("prefer takes exactly one node, as prefer:0".into()),
                }
            }
            "bind" => Policy::Bind(nodes(list)?),
            "interleave" => Policy::Interleave(if list.is_some() { nodes(list)? } else { Nodes::new() }),
            _ => {
                return Err(format!(
                    "unknown policy '{mode}': must be default, prefer:N, bind:LIST, interleave[:LIST] or local"
                ))
            }
        })
    }

    /// The nodes the policy names (none for default and local).
    pub fn named(&self) -> Nodes {
        match self {
            Policy::Prefer(n) => [*n].into(),
            Policy::Bind(n) | Policy::Interleave(n) => n.clone(),
            Policy::Default | Policy::Local => Nodes::new(),
        }
    }

    /// Where new pages may go, of `memory` (the nodes with memory): the
    /// named nodes for prefer, bind and interleave with a list; all of them
    /// otherwise.
    pub fn allowed(&self, memory: &Nodes) -> Nodes {
        let named = self.named();
        if named.is_empty() {
            memory.clone()
        } else {
            named
        }
    }

    /// The same mode over `nodes` (a nodemask write): default and local
    /// become bind, prefer must get one node.
    pub fn with_nodes(&self, nodes: Nodes) -> Result<Policy, String> {
        if nodes.is_empty() {
            return Err("a nodemask names at least one node".into());
        }
        Ok(match self {
            Policy::Prefer(_) if nodes.len() != 1 => return Err("prefer takes exactly one node".into()),
            Policy::Prefer(_) => Policy::Prefer(*nodes.first().expect("one node")),
            Policy::Interleave(_) => Policy::Interleave(nodes),
            Policy::Bind(_) | Policy::Default | Policy::Local => Policy::Bind(nodes),
        })
    }

    /// Every node the policy names has memory, else why not.
    pub fn check(&self, memory: &Nodes) -> Result<(), String> {
        match self.named().iter().find(|n| !memory.contains(n)) {
            Some(n) => Err(format!("node {n} does not exist or has no memory (nodes with memory: {})", list(memory))),
            None => Ok(()),
        }
    }

    fn mode(&self) -> i32 {
        match self {
            Policy::Default => MPOL_DEFAULT,
            Policy::Prefer(_) => MPOL_PREFERRED,
            Policy::Bind(_) => MPOL_BIND,
            Policy::Interleave(_) => MPOL_INTERLEAVE,
            Policy::Local => MPOL_LOCAL,
        }
    }

    /// Where a page on `node` goes on `memory` (None: it may stay): the
    /// first allowed node for prefer and bind, the allowed nodes in turn
    /// (`turn` counts the pages moved so far) for interleave.
    pub fn target(&self, node: u32, memory: &Nodes, turn: usize) -> Option<u32> {
        let allowed = self.allowed(memory);
        if allowed.contains(&node) || allowed.is_empty() {
            return None;
        }
        match self {
            Policy::Interleave(_) => allowed.iter().nth(turn % allowed.len()).copied(),
            _ => allowed.first().copied(),
        }
    }
}

impl fmt::Display for Policy {
    /// tmpfs's syntax, as /proc/mounts shows it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Default => write!(f, "default"),
            Policy::Local => write!(f, "local"),
            Policy::Prefer(n) => write!(f, "prefer:{n}"),
            Policy::Bind(n) => write!(f, "bind:{}", list(n)),
            Policy::Interleave(n) if n.is_empty() => write!(f, "interleave"),
            Policy::Interleave(n) => write!(f, "interleave:{}", list(n)),
        }
    }
}

/// Parse a node list: `0`, `0-3`, `0,2-3`.
pub fn parse_list(s: &str) -> Result<Nodes, String> {
    let bad = || format!("bad node list '{s}': use numbers and ranges, as 0-1,3");
    let mut nodes = Nodes::new();
    for part in s.split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
        if a > b || b >= MAX_NODES {
            return Err(bad());
        }
        nodes.extend(a..=b);
    }
    Ok(nodes)
}

/// The kernel's node list format: `0-3,5`.
pub fn list(nodes: &Nodes) -> String {
    let mut out: Vec<String> = vec![];
    let mut it = nodes.iter().copied().peekable();
    while let Some(a) = it.next() {
        let mut b = a;
        while it.peek() == Some(&(b + 1)) {
            b = it.next().expect("peeked");
        }
        out.push(if a == b { a.to_string() } else { format!("{a}-{b}") });
    }
    out.join(",")
}

/// Node numbers above this are refused (the kernel's MAX_NUMNODES on
/// distribution kernels is 1024).
pub const MAX_NODES: u32 = 1024;

/// A nodemask as the kernel prints one (`%*pb`): `width` bits (the
/// kernel's nr_node_ids) in 32-bit hex groups, most significant first.
pub fn format_mask(nodes: &Nodes, width: u32) -> String {
    let groups = width.max(1).div_ceil(32);
    (0..groups)
        .rev()
        .map(|g| {
            let word = nodes.iter().filter(|&&n| n / 32 == g).fold(0u32, |w, &n| w | 1 << (n % 32));
            format!("{word:08x}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Parse a nodemask: hex groups of up to 8 digits separated by commas,
/// most significant first (what [`format_mask`] writes), or one hex number
/// of up to 8 digits.
pub fn parse_mask(s: &str) -> Result<Nodes, String> {
    let s = s.trim();
    let bad = || format!("bad nodemask '{s}': hex groups of 8 digits, as 00000000,00000003");
    let groups: Vec<&str> = s.split(',').collect();
    if groups.len() as u32 > MAX_NODES / 32 {
        return Err(bad());
    }
    let mut nodes = Nodes::new();
    for (i, g) in groups.iter().rev().enumerate() {
        if g.is_empty() || g.len() > 8 {
            return Err(bad());
        }
        let word = u32::from_str_radix(g, 16).map_err(|_| bad())?;
        nodes.extend((0..32).filter(|b| word & 1 << b != 0).map(|b| i as u32 * 32 + b));
    }
    Ok(nodes)
}

/// Per-node page counts from `move_pages` answers (a node number, or a
/// negative errno for a page the kernel does not have in RAM: not counted).
pub fn tally(statuses: &[i32], into: &mut BTreeMap<u32, u64>) {
    for &s in statuses.iter().filter(|&&s| s >= 0) {
        *into.entry(s as u32).or_default() += 1;
    }
}

/// What a migration did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Migrated {
    /// Pages looked at (in RAM).
    pub pages: u64,
    /// Pages moved to an allowed node.
    pub moved: u64,
    /// Pages that should have moved and did not (busy, or no room there).
    pub failed: u64,
}

impl Migrated {
    pub fn add(&mut self, o: Migrated) {
        self.pages += o.pages;
        self.moved += o.moved;
        self.failed += o.failed;
    }
}

/// The NUMA system calls memfs uses, as an interface (tests inject a
/// topology of several nodes; [`Kernel`] is the real one).
pub trait NumaSys: Send + Sync + fmt::Debug {
    /// Nodes that have memory (N_MEMORY).
    fn memory_nodes(&self) -> Nodes;
    /// The kernel's nr_node_ids: the width of a printed nodemask.
    fn node_ids(&self) -> u32;
    /// `mbind` [addr, addr+len) to `policy`; `move_existing` also moves the
    /// pages already there.
    fn bind(&self, addr: usize, len: usize, policy: &Policy, move_existing: bool) -> io::Result<()>;
    /// `move_pages` of our own pages: with `to`, move page i to node to[i];
    /// without, only ask. `status[i]` gets the node the page is on after,
    /// or a negative errno.
    fn move_pages(&self, pages: &[usize], to: Option<&[i32]>, status: &mut [i32]) -> io::Result<()>;
}

/// Where each of `pages` is: per-node counts added to `into`.
pub fn count(sys: &dyn NumaSys, pages: &[usize], into: &mut BTreeMap<u32, u64>) {
    let mut status = vec![0i32; pages.len()];
    if sys.move_pages(pages, None, &mut status).is_ok() {
        tally(&status, into);
    }
}

/// Move those of `pages` that `policy` does not allow onto nodes it does.
pub fn migrate(sys: &dyn NumaSys, policy: &Policy, memory: &Nodes, pages: &[usize], turn: &mut usize) -> Migrated {
    let mut status = vec![0i32; pages.len()];
    if sys.move_pages(pages, None, &mut status).is_err() {
        return Migrated::default();
    }
    let mut done = Migrated::default();
    let (mut which, mut to) = (vec![], vec![]);
    for (i, &s) in status.iter().enumerate().filter(|(_, &s)| s >= 0) {
        done.pages += 1;
        if let Some(t) = policy.target(s as u32, memory, *turn) {
            *turn += 1;
            which.push(pages[i]);
            to.push(t as i32);
        }
    }
    if which.is_empty() {
        return done;
    }
    let mut after = vec![0i32; which.len()];
    if sys.move_pages(&which, Some(&to), &mut after).is_err() {
        done.failed += which.len() as u64;
        return done;
    }
    for (want, got) in to.iter().zip(&after) {
        if want == got {
            done.moved += 1;
        } else {
            done.failed += 1;
        }
    }
    done
}

/// The mount's placement: its policy and the system it applies to.
#[derive(Debug)]
pub struct Placement {
    sys: Arc<dyn NumaSys>,
    policy: Mutex<Policy>,
}

impl Placement {
    pub fn new(sys: Arc<dyn NumaSys>, policy: Policy) -> Placement {
        Placement { sys, policy: Mutex::new(policy) }
    }

    pub fn sys(&self) -> &dyn NumaSys {
        &*self.sys
    }

    pub fn policy(&self) -> Policy {
        self.policy.lock().clone()
    }

    /// Nodes that may hold new pages, as a nodemask.
    pub fn nodemask(&self) -> String {
        format_mask(&self.policy().allowed(&self.sys.memory_nodes()), self.sys.node_ids())
    }

    /// Check `p` against the nodes there are and make it the policy; the
    /// old one. The caller applies it to what is mapped.
    pub fn set(&self, p: Policy) -> Result<Policy, String> {
        p.check(&self.sys.memory_nodes())?;
        Ok(std::mem::replace(&mut self.policy.lock(), p))
    }
}

/// The real system calls, and the topology from /sys.
#[derive(Debug, Default)]
pub struct Kernel;

fn sys_nodes(file: &str) -> Option<Nodes> {
    let s = std::fs::read_to_string(format!("/sys/devices/system/node/{file}")).ok()?;
    parse_list(s.trim()).ok()
}

/// A nodemask as mbind wants it: words of 64 bits, and its `maxnode`.
fn mask_words(nodes: &Nodes) -> (Vec<u64>, u64) {
    let words = nodes.last().map_or(1, |&n| n as usize / 64 + 1);
    let mut mask = vec![0u64; words];
    for &n in nodes {
        mask[n as usize / 64] |= 1 << (n % 64);
    }
    (mask, words as u64 * 64 + 1)
}

impl NumaSys for Kernel {
    fn memory_nodes(&self) -> Nodes {
        // A kernel without NUMA has no /sys/devices/system/node: one node, 0.
        sys_nodes("has_memory").unwrap_or_else(|| [0].into())
    }

    fn node_ids(&self) -> u32 {
        sys_nodes("possible").and_then(|n| n.last().copied()).map_or(1, |n| n + 1)
    }

    fn bind(&self, addr: usize, len: usize, policy: &Policy, move_existing: bool) -> io::Result<()> {
        // Interleave without a list is over every node with memory (mbind needs them named).
        let nodes = match policy {
            Policy::Interleave(n) if n.is_empty() => self.memory_nodes(),
            _ => policy.named(),
        };
        let (mask, maxnode) = mask_words(&nodes);
        let (ptr, maxnode) = if nodes.is_empty() { (std::ptr::null(), 0) } else { (mask.as_ptr(), maxnode) };
        let flags = if move_existing { MPOL_MF_MOVE } else { 0 };
        // SAFETY: mbind of our own mapping with a valid mask of `maxnode` bits.
        let r = unsafe { libc::syscall(libc::SYS_mbind, addr, len, policy.mode(), ptr, maxnode, flags) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    fn move_pages(&self, pages: &[usize], to: Option<&[i32]>, status: &mut [i32]) -> io::Result<()> {
        assert_eq!(pages.len(), status.len());
        let nodes = to.map_or(std::ptr::null(), |t| {
            assert_eq!(t.len(), pages.len());
            t.as_ptr()
        });
        let mut call = |flags: u32| {
            // SAFETY: move_pages of this process (pid 0) with arrays of `pages.len()` entries.
            unsafe {
                libc::syscall(
                    libc::SYS_move_pages,
                    0,
                    pages.len() as libc::c_ulong,
                    pages.as_ptr(),
                    nodes,
                    status.as_mut_ptr(),
                    flags,
                )
            }
        };
        // MOVE_ALL also moves pages other processes map (a passthrough
        // mmap); it needs CAP_SYS_NICE, else MOVE.
        let mut r = if to.is_some() { call(MPOL_MF_MOVE_ALL) } else { call(0) };
        if r < 0 && to.is_some() && io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
            r = call(MPOL_MF_MOVE);
        }
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use std::collections::HashMap;

    /// An injected topology: `nodes` nodes with memory; pages live where
    /// `place` puts them; moves to a node in `full` fail.
    #[derive(Debug)]
    pub struct Fake {
        pub nodes: u32,
        pub pages: Mutex<HashMap<usize, i32>>,
        pub full: Nodes,
        pub bound: Mutex<Vec<(usize, usize, String, bool)>>,
    }

    impl Fake {
        pub fn new(nodes: u32) -> Fake {
            Fake { nodes, pages: Mutex::default(), full: Nodes::new(), bound: Mutex::default() }
        }
        fn place(&self, page: usize, node: i32) {
            self.pages.lock().insert(page, node);
        }
    }

    impl NumaSys for Fake {
        fn memory_nodes(&self) -> Nodes {
            (0..self.nodes).collect()
        }
        fn node_ids(&self) -> u32 {
            self.nodes
        }
        fn bind(&self, addr: usize, len: usize, policy: &Policy, mv: bool) -> io::Result<()> {
            self.bound.lock().push((addr, len, policy.to_string(), mv));
            Ok(())
        }
        fn move_pages(&self, pages: &[usize], to: Option<&[i32]>, status: &mut [i32]) -> io::Result<()> {
            let mut map = self.pages.lock();
            for (i, p) in pages.iter().enumerate() {
                status[i] = match (map.get_mut(p), to) {
                    (None, _) => -libc::ENOENT,
                    (Some(n), None) => *n,
                    (Some(_), Some(t)) if self.full.contains(&(t[i] as u32)) => -libc::ENOMEM,
                    (Some(n), Some(t)) => {
                        *n = t[i];
                        *n
                    }
                };
            }
            Ok(())
        }
    }

    #[test]
    fn every_tmpfs_form_parses_and_prints_back() {
        for s in ["default", "local", "prefer:1", "bind:0-2", "bind:0,2", "interleave", "interleave:1-3,5"] {
            assert_eq!(Policy::parse(s).unwrap().to_string(), s);
        }
        assert_eq!(Policy::parse("bind:2,0,1").unwrap().to_string(), "bind:0-2");
        for bad in ["", "bind", "bind:", "prefer:0-1", "prefer", "local:0", "default:1", "bind:3-1", "bind:x", "weird"]
        {
            assert!(Policy::parse(bad).is_err(), "{bad}");
        }
        assert!(Policy::parse("bind:1024").is_err(), "past MAX_NODES");
    }

    #[test]
    fn a_node_without_memory_is_refused_by_name() {
        let memory: Nodes = [0, 1].into();
        assert!(Policy::parse("bind:0-1").unwrap().check(&memory).is_ok());
        let e = Policy::parse("interleave:1-2").unwrap().check(&memory).unwrap_err();
        assert!(e.contains("node 2") && e.contains("0-1"), "{e}");
        assert!(Policy::Default.check(&memory).is_ok());
    }

    #[test]
    fn nodemasks_print_and_parse_as_the_kernel_does() {
        let n: Nodes = [0, 1].into();
        assert_eq!(format_mask(&n, 64), "00000000,00000003");
        assert_eq!(format_mask(&[0].into(), 1), "00000001");
        assert_eq!(format_mask(&[33].into(), 40), "00000002,00000000");
        assert_eq!(parse_mask("00000000,00000003").unwrap(), n);
        assert_eq!(parse_mask("3\n").unwrap(), n);
        assert_eq!(parse_mask("2,0").unwrap(), [33].into());
        for bad in ["", "g", "000000001", "1,,1", ",1", "-1"] {
            assert!(parse_mask(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allowed_nodes_and_nodemask_writes_follow_the_mode() {
        let memory: Nodes = (0..4).collect();
        assert_eq!(Policy::Default.allowed(&memory), memory);
        assert_eq!(Policy::Interleave(Nodes::new()).allowed(&memory), memory);
        assert_eq!(Policy::Prefer(2).allowed(&memory), [2].into());
        assert_eq!(Policy::Default.with_nodes([1, 2].into()).unwrap(), Policy::Bind([1, 2].into()));
        assert_eq!(Policy::Interleave(Nodes::new()).with_nodes([3].into()).unwrap(), Policy::Interleave([3].into()));
        assert!(Policy::Prefer(0).with_nodes([1, 2].into()).is_err());
        assert!(Policy::Bind([0].into()).with_nodes(Nodes::new()).is_err());
    }

    #[test]
    fn pagestat_counts_where_the_kernel_says_pages_are() {
        let fake = Fake::new(3);
        for (p, n) in [(0x1000, 0), (0x2000, 2), (0x3000, 2)] {
            fake.place(p, n);
        }
        let mut by_node = BTreeMap::new();
        count(&fake, &[0x1000, 0x2000, 0x3000, 0x4000], &mut by_node);
        assert_eq!(by_node, [(0, 1), (2, 2)].into(), "a page not in RAM is not counted");
    }

    #[test]
    fn migration_moves_only_misplaced_pages_and_counts_failures() {
        let mut fake = Fake::new(4);
        fake.full = [3].into();
        let pages: Vec<usize> = (1..=8).map(|i| i * 0x1000).collect();
        for (i, &p) in pages.iter().enumerate() {
            fake.place(p, (i % 4) as i32);
        }
        let memory = fake.memory_nodes();
        // bind:1 -> everything to node 1.
        let mut turn = 0;
        let done = migrate(&fake, &Policy::Bind([1].into()), &memory, &pages, &mut turn);
        assert_eq!(done, Migrated { pages: 8, moved: 6, failed: 0 });
        let mut by_node = BTreeMap::new();
        count(&fake, &pages, &mut by_node);
        assert_eq!(by_node, [(1, 8)].into());
        // interleave:2-3 -> alternately 2 and 3; node 3 is full.
        let done = migrate(&fake, &Policy::Interleave([2, 3].into()), &memory, &pages, &mut turn);
        assert_eq!(done, Migrated { pages: 8, moved: 4, failed: 4 });
        // Default: every node is allowed, nothing moves.
        assert_eq!(migrate(&fake, &Policy::Default, &memory, &pages, &mut 0).moved, 0);
    }

    #[test]
    fn placement_refuses_a_missing_node_and_keeps_the_old_policy() {
        let p = Placement::new(Arc::new(Fake::new(2)), Policy::Default);
        assert_eq!(p.nodemask(), "00000003");
        assert!(p.set(Policy::Bind([5].into())).is_err());
        assert_eq!(p.policy(), Policy::Default);
        assert_eq!(p.set(Policy::Bind([1].into())).unwrap(), Policy::Default);
        assert_eq!(p.nodemask(), "00000002");
    }

    #[test]
    fn the_real_kernel_answers_for_this_machine() {
        let k = Kernel;
        let memory = k.memory_nodes();
        assert!(memory.contains(&0), "{memory:?}");
        assert!(k.node_ids() as usize >= memory.len());
        // A page of our own heap is on a node with memory.
        let v = vec![1u8; 4096 * 2];
        let page = (v.as_ptr() as usize + 4095) & !4095;
        let mut by_node = BTreeMap::new();
        count(&k, &[page], &mut by_node);
        assert_eq!(by_node.values().sum::<u64>(), 1);
        assert!(memory.contains(by_node.keys().next().unwrap()));
    }
}
