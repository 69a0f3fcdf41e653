//! memfs: a memory file system for Linux in user space over FUSE.
//!
//! Layers, each depending only on those below it:
//! - `main.rs`: command line and the mount.memfs helper;
//! - [`daemon`]: mounting, start-up handshake, signals, serving;
//! - [`fuse`]: the thin adapter from fuser's requests to the core (and to
//!   the control directory), with every operation counted and timed;
//! - [`ctl`]: the hidden control directory: live tunables and statistics;
//! - [`options`]: the mount option table;
//! - [`core`]: the file system, with no knowledge of FUSE;
//! - [`sync`]: the locks and atomics everything uses; [`fault`]: the
//!   fault-injection points tests use; [`sysmem`]: the memory the process
//!   may use (RAM, its memory cgroup's limit).

pub mod core;
pub mod ctl;
pub mod daemon;
pub mod fault;
pub mod fuse;
pub mod options;
pub mod reclaimer;
pub mod remount;
pub mod sync;
pub mod sysmem;
pub mod trim;
