//! Adaptive polling of the FUSE device: the worker spins on `read(2)` while
//! requests keep coming, and sleeps in it when they stop.
//!
//! Why: on a virtual machine whose idle vCPUs halt (this project's machines
//! run with guest halt-polling off), waking a task that sleeps on another
//! vCPU costs an inter-processor interrupt and a VM exit. A FUSE round trip
//! has two such wakeups: the client wakes the daemon, the daemon's reply
//! wakes the client. Measured on 2 vCPUs (docs/TUNABLES.md, `poll_us`): a
//! GETATTR round trip took about 49 us with the daemon sleeping in read,
//! 12-20 us with it polling, 11 us with client and daemon on one vCPU.
//!
//! How: while polling, the device's open file description is switched to
//! O_NONBLOCK; fuser's loop retries EAGAIN at once, so the worker spins on
//! read and takes the next request without being woken. A controller thread
//! switches back to blocking reads once a whole window (`poll_us`) passes
//! without a request, or as soon as tasks were kept waiting for a CPU
//! during a window (cpuload.rs): polling must only use a CPU that would
//! otherwise be idle. After such a refusal it waits before polling again,
//! twice as long after each consecutive refusal (10 ms up to 640 ms). The
//! first request after an idle period wakes the controller, which starts
//! polling again. An idle mount therefore costs nothing.
//!
//! Owns: the O_NONBLOCK state of the device and the controller thread.
//! Reads the window from the live tunables (`ctl::tunables::Knobs`); knows
//! nothing of requests beyond [`Poller::touch`].

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::time::Duration;

use super::cpuload::{CpuLoad, SystemLoad};
use crate::ctl::tunables::Knobs;
use crate::sync::{Arc, AtomicBool, AtomicU64, Condvar, Mutex, Ordering};

/// After a refusal for lack of idle CPUs, how long before polling may start
/// again; doubled after each consecutive refusal, up to the maximum.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(640);

/// What every request tells the transport's polling: the /dev/fuse
/// [`Poller`] here, or the helper that keeps a CPU awake over io_uring
/// (awake.rs).
pub trait Polling: Send + Sync {
    /// Called on every request; must cost a few atomic operations.
    fn touch(&self);
}

impl Polling for Poller {
    fn touch(&self) {
        Poller::touch(self)
    }
}

/// The polling state of one FUSE session.
pub struct Poller {
    /// A duplicate of the session's device descriptor: same open file
    /// description (so its O_NONBLOCK is the worker's), but ours to keep.
    fd: OwnedFd,
    knobs: Arc<Knobs>,
    /// Requests seen, for the controller's "any request in this window?".
    requests: AtomicU64,
    /// Whether the device is in polling (non-blocking) mode.
    polling: AtomicBool,
    /// How many times polling started.
    starts: AtomicU64,
    /// Set by the controller before it sleeps waiting for a request.
    waiting: AtomicBool,
    /// "A request came": set by [`Poller::touch`], awaited by the controller.
    wake: Mutex<bool>,
    wake_cv: Condvar,
}

impl Poller {
    /// Duplicate `device` and start the controller thread.
    pub fn start(device: BorrowedFd<'_>, knobs: Arc<Knobs>) -> std::io::Result<Arc<Poller>> {
        Poller::start_with(device, knobs, Box::new(SystemLoad::open()))
    }

    fn start_with(device: BorrowedFd<'_>, knobs: Arc<Knobs>, load: Box<dyn CpuLoad>) -> std::io::Result<Arc<Poller>> {
        // SAFETY: F_DUPFD_CLOEXEC on a valid descriptor returns a new one we own.
        let dup = unsafe { libc::fcntl(device.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 0) };
        if dup < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `dup` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(dup) };
        let poller = Arc::new(Poller {
            fd,
            knobs,
            requests: AtomicU64::new(0),
            polling: AtomicBool::new(false),
            starts: AtomicU64::new(0),
            waiting: AtomicBool::new(false),
            wake: Mutex::new(false),
            wake_cv: Condvar::new(),
        });
        let controller = poller.clone();
        std::thread::Builder::new().name("memfs-poll".into()).spawn(move || controller.control(load))?;
        Ok(poller)
    }

    /// Called on every request: counts it and, after an idle period, wakes
    /// the controller. Costs one relaxed add and two loads while polling.
    pub fn touch(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        // With polling off (poll_us = 0) the controller is never woken: a
        // wakeup per request would cost more than polling saves.
        if !self.polling.load(Ordering::Relaxed)
            && self.knobs.poll_us.load(Ordering::Relaxed) > 0
            && self.waiting.swap(false, Ordering::AcqRel)
        {
            *self.wake.lock() = true;
            self.wake_cv.notify_one();
        }
    }

    /// Whether the device is in polling mode now (for tests and statistics).
    pub fn is_polling(&self) -> bool {
        self.polling.load(Ordering::Relaxed)
    }

    /// How many times polling has started since the mount.
    pub fn starts(&self) -> u64 {
        self.starts.load(Ordering::Relaxed)
    }

    fn window(&self) -> Duration {
        Duration::from_micros(self.knobs.poll_us.load(Ordering::Relaxed))
    }

    /// The controller: wait for a request, poll while they keep coming.
    fn control(&self, mut load: Box<dyn CpuLoad>) {
        let mut backoff = BACKOFF_MIN;
        loop {
            self.wait_for_request();
            if self.window().is_zero() {
                continue;
            }
            load.begin();
            self.starts.fetch_add(1, Ordering::Relaxed);
            self.set_polling(true);
            let refused = loop {
                let before = self.requests.load(Ordering::Relaxed);
                let window = self.window();
                if window.is_zero() {
                    break false;
                }
                std::thread::sleep(window);
                if load.busy() {
                    break true;
                }
                if self.requests.load(Ordering::Relaxed) == before {
                    break false;
                }
            };
            self.set_polling(false);
            if refused {
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
            } else {
                backoff = BACKOFF_MIN;
            }
        }
    }

    /// Sleep until [`Poller::touch`] sees a request.
    fn wait_for_request(&self) {
        let mut woken = self.wake.lock();
        *woken = false;
        // Stored under the lock: a touch that sees it must wait for our
        // `wait` to release the lock, so its notification cannot be lost.
        self.waiting.store(true, Ordering::Release);
        while !*woken {
            self.wake_cv.wait(&mut woken);
        }
    }

    fn set_polling(&self, on: bool) {
        let fd = self.fd.as_raw_fd();
        // SAFETY: F_GETFL/F_SETFL on a descriptor we own.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            if flags >= 0 {
                let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
                libc::fcntl(fd, libc::F_SETFL, flags);
            }
        }
        self.polling.store(on, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    /// A machine that is always, or never, busy.
    struct Fixed(bool);

    impl CpuLoad for Fixed {
        fn begin(&mut self) {}
        fn busy(&mut self) -> bool {
            self.0
        }
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills two fresh descriptors, which we then own.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    fn nonblocking(fd: &OwnedFd) -> bool {
        // SAFETY: F_GETFL on a valid descriptor.
        unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) & libc::O_NONBLOCK != 0 }
    }

    #[test]
    fn backs_off_while_the_cpus_are_busy() {
        let (r, _w) = pipe();
        let p = Poller::start_with(r.as_fd(), Arc::new(Knobs::new(2_000)), Box::new(Fixed(true))).unwrap();
        // Requests without pause for 300 ms: each attempt lasts one window
        // and is followed by 10, 20, 40, 80, 160 ms of waiting, so polling
        // can start at most 6 times (about 60 times without the backoff).
        let t0 = std::time::Instant::now();
        while t0.elapsed() < Duration::from_millis(300) {
            p.touch();
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!((1..=6).contains(&p.starts()), "{} starts", p.starts());
        std::thread::sleep(Duration::from_millis(10));
        assert!(!p.is_polling() && !nonblocking(&r));
    }

    #[test]
    fn polls_while_requests_come_and_stops_when_they_stop() {
        let (r, _w) = pipe();
        let knobs = Arc::new(Knobs::new(2_000));
        let p = Poller::start_with(r.as_fd(), knobs.clone(), Box::new(Fixed(false))).unwrap();
        assert!(!p.is_polling() && !nonblocking(&r));
        // Requests every 0.5 ms for 50 ms start polling.
        let mut seen_polling = false;
        for _ in 0..100 {
            p.touch();
            std::thread::sleep(Duration::from_micros(500));
            if p.is_polling() {
                seen_polling = true;
                assert!(nonblocking(&r), "polling must set O_NONBLOCK on the shared description");
            }
        }
        // Quiet for many windows: back to blocking reads.
        std::thread::sleep(Duration::from_millis(60));
        assert!(!p.is_polling());
        assert!(!nonblocking(&r));
        assert!(seen_polling);
        // Window 0 disables polling altogether, and requests no longer even
        // wake the controller.
        knobs.poll_us.store(0, Ordering::Relaxed);
        let starts = p.starts();
        for _ in 0..20 {
            p.touch();
            std::thread::sleep(Duration::from_micros(500));
            assert!(!p.is_polling());
        }
        assert_eq!(p.starts(), starts);
        // Turned on again live: the next requests start polling.
        knobs.poll_us.store(2_000, Ordering::Relaxed);
        for _ in 0..40 {
            p.touch();
            std::thread::sleep(Duration::from_micros(500));
        }
        assert!(p.starts() > starts);
    }
}
