//! memfs: a memory file system for Linux in user space over FUSE.
//!
//! Layers, each depending only on those below it:
//! - `main.rs`: command line and the mount.memfs helper;
//! - [`daemon`]: mounting, start-up handshake, signals, serving;
//! - [`fuse`]: the thin adapter from fuser's requests to the core;
//! - [`options`]: the mount option table;
//! - [`core`]: the file system, with no knowledge of FUSE;
//! - [`sync`]: the locks and atomics everything uses.

pub mod core;
pub mod daemon;
pub mod fuse;
pub mod options;
pub mod sync;
