//! The one place locks and atomics come from, so a model checker can
//! replace them in tests later. parking_lot locks do not poison: a panic
//! while one is held cannot wedge every later request.

pub use parking_lot::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
pub use std::sync::{Arc, OnceLock};
