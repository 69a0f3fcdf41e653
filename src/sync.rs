//! The one place locks and atomics come from, so that a model checker can
//! replace them in tests. parking_lot locks do not poison: a panic while
//! one is held cannot wedge every later request.
//!
//! With the `shuttle` feature (model-checked tests only: `make
//! test-model`), the locks and the condition variable are Shuttle's,
//! behind parking_lot's API ([`model`]): every lock operation becomes a
//! point where Shuttle may switch threads, so its scheduler explores the
//! interleavings of the core's name operations. Atomics, `Arc` and
//! `OnceLock` stay std's (no lock is built on them), and so does the page
//! arenas' leaf lock (core/arena.rs), which is global, taken in const
//! context and never held across another lock.

#[cfg(not(feature = "shuttle"))]
pub use parking_lot::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
pub use std::sync::{Arc, OnceLock};

#[cfg(feature = "shuttle")]
pub use model::{Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

#[cfg(feature = "shuttle")]
mod model {
    //! Shuttle's locks with the part of parking_lot's API memfs uses:
    //! guards without poisoning, `try_lock`/`try_read`/`try_write` as `Option`,
    //! `Condvar::wait(&mut guard)`, `RwLockWriteGuard::downgrade`. Only
    //! for runs under `shuttle::check_*`: outside one, Shuttle's locks
    //! panic.
    use std::fmt;
    use std::ops::{Deref, DerefMut};
    use std::time::Duration;

    fn unpoisoned<G>(r: Result<G, std::sync::PoisonError<G>>) -> G {
        r.unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub struct Mutex<T>(shuttle::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub fn new(value: T) -> Mutex<T> {
            Mutex(shuttle::sync::Mutex::new(value))
        }

        pub fn lock(&self) -> MutexGuard<'_, T> {
            MutexGuard(Some(unpoisoned(self.0.lock())))
        }

        pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
            match self.0.try_lock() {
                Ok(g) => Some(MutexGuard(Some(g))),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(MutexGuard(Some(p.into_inner()))),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }

        pub fn get_mut(&mut self) -> &mut T {
            unpoisoned(self.0.get_mut())
        }
    }

    impl<T: Default> Default for Mutex<T> {
        fn default() -> Mutex<T> {
            Mutex::new(T::default())
        }
    }

    impl<T> fmt::Debug for Mutex<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Mutex")
        }
    }

    /// `None` only inside [`Condvar::wait`], while the lock is given up.
    pub struct MutexGuard<'a, T>(Option<shuttle::sync::MutexGuard<'a, T>>);

    impl<T> Deref for MutexGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            self.0.as_deref().expect("a guard holds its lock")
        }
    }

    impl<T> DerefMut for MutexGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            self.0.as_deref_mut().expect("a guard holds its lock")
        }
    }

    pub struct RwLock<T>(shuttle::sync::RwLock<T>);

    impl<T> RwLock<T> {
        pub fn new(value: T) -> RwLock<T> {
            RwLock(shuttle::sync::RwLock::new(value))
        }

        pub fn read(&self) -> RwLockReadGuard<'_, T> {
            RwLockReadGuard(unpoisoned(self.0.read()))
        }

        pub fn write(&self) -> RwLockWriteGuard<'_, T> {
            RwLockWriteGuard { lock: self, guard: unpoisoned(self.0.write()) }
        }

        pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
            match self.0.try_read() {
                Ok(g) => Some(RwLockReadGuard(g)),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(RwLockReadGuard(p.into_inner())),
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }

        pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
            match self.0.try_write() {
                Ok(guard) => Some(RwLockWriteGuard { lock: self, guard }),
                Err(std::sync::TryLockError::Poisoned(p)) => {
                    Some(RwLockWriteGuard { lock: self, guard: p.into_inner() })
                }
                Err(std::sync::TryLockError::WouldBlock) => None,
            }
        }

        /// Shuttle has no time: as [`RwLock::try_read`].
        pub fn try_read_for(&self, _: std::time::Duration) -> Option<RwLockReadGuard<'_, T>> {
            self.try_read()
        }

        /// Shuttle has no time: as [`RwLock::try_write`].
        pub fn try_write_for(&self, _: std::time::Duration) -> Option<RwLockWriteGuard<'_, T>> {
            self.try_write()
        }

        pub fn get_mut(&mut self) -> &mut T {
            unpoisoned(self.0.get_mut())
        }
    }

    impl<T: Default> Default for RwLock<T> {
        fn default() -> RwLock<T> {
            RwLock::new(T::default())
        }
    }

    impl<T> fmt::Debug for RwLock<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("RwLock")
        }
    }

    pub struct RwLockReadGuard<'a, T>(shuttle::sync::RwLockReadGuard<'a, T>);

    impl<T> Deref for RwLockReadGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            &self.0
        }
    }

    pub struct RwLockWriteGuard<'a, T> {
        lock: &'a RwLock<T>,
        guard: shuttle::sync::RwLockWriteGuard<'a, T>,
    }

    impl<'a, T> RwLockWriteGuard<'a, T> {
        /// parking_lot's downgrade is atomic; this one lets go of the lock
        /// and reads it again, so other writers may come in between: the
        /// model explores more interleavings than can happen, never fewer.
        pub fn downgrade(w: RwLockWriteGuard<'a, T>) -> RwLockReadGuard<'a, T> {
            let lock = w.lock;
            drop(w.guard);
            lock.read()
        }
    }

    impl<T> Deref for RwLockWriteGuard<'_, T> {
        type Target = T;
        fn deref(&self) -> &T {
            &self.guard
        }
    }

    impl<T> DerefMut for RwLockWriteGuard<'_, T> {
        fn deref_mut(&mut self) -> &mut T {
            &mut self.guard
        }
    }

    #[derive(Default)]
    pub struct Condvar(shuttle::sync::Condvar);

    impl Condvar {
        pub fn new() -> Condvar {
            Condvar(shuttle::sync::Condvar::new())
        }

        pub fn wait<T>(&self, guard: &mut MutexGuard<'_, T>) {
            let g = guard.0.take().expect("a guard holds its lock");
            guard.0 = Some(unpoisoned(self.0.wait(g)));
        }

        /// Whether the wait timed out.
        pub fn wait_for<T>(&self, guard: &mut MutexGuard<'_, T>, timeout: Duration) -> bool {
            let g = guard.0.take().expect("a guard holds its lock");
            let (g, result) = unpoisoned(self.0.wait_timeout(g, timeout));
            guard.0 = Some(g);
            result.timed_out()
        }

        pub fn notify_one(&self) {
            self.0.notify_one();
        }

        pub fn notify_all(&self) {
            self.0.notify_all();
        }
    }

    impl fmt::Debug for Condvar {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("Condvar")
        }
    }
}
