//! Keeping an idle vCPU awake while requests come over io_uring: what
//! polling means for that transport (poll.rs is the /dev/fuse one).
//!
//! Why: over io_uring a request is served on the client's own CPU by that
//! CPU's queue thread, and the reply wakes the client while the queue
//! thread still runs there; the scheduler then moves the client to an idle
//! CPU. On a virtual machine whose idle vCPUs halt, that CPU must first be
//! woken by the hypervisor: a lone round trip cost 22-30 us where the
//! polling /dev/fuse worker made it 6-8 (docs/TRANSPORT.md).
//!
//! How: a helper process (this binary again, as `memfs-awake`) spins
//! while requests keep coming (one within the last `poll_us`), so that one
//! more vCPU than the client's is running and a client woken onto it runs
//! at once; then it sleeps on a futex until the next request. A process,
//! not a thread of the daemon, because of the kernel's autogroups: CPU
//! time is shared between sessions first, so a SCHED_IDLE thread of the
//! daemon still took the daemon session's equal share from CPU-bound
//! processes of other sessions (measured: one client beside two such
//! processes 21,100 -> 14,600 operations a second). The helper makes a
//! session of its own, sets that session's autogroup to nice 19 and itself
//! to SCHED_IDLE: it runs only on a CPU nothing else wants, and gives it up
//! at once.
//!
//! It does not spin, or stops, when the machine is crowded: when it waited
//! for a CPU more than 5 ms between a wake-up and its first run, or more
//! than half of a 10 ms interval while spinning ([`Crowd`]: no CPU was idle for it;
//! the CPU pressure the /dev/fuse poller reads grew by only 1.5% of the
//! time while CPU-bound processes waited behind a spinner). It then
//! sleeps, 10 ms the first time and twice as long after each crowd in a
//! row up to 640 ms (a row ends when 50 ms pass without one), before
//! it spins for requests again.
//!
//! The helper decides all of this itself: the daemon's part of a request
//! is an atomic add on the page they share (a memfd, the helper's fd 3),
//! and a futex wake only when the helper sleeps waiting for a request. The
//! page also carries `poll_us`, copied by the daemon when it changes. The
//! helper exits with the daemon: it is set, before exec, to get SIGKILL
//! when the daemon dies (and checks its parent every 100 ms while it
//! spins). Asleep, it costs nothing: no timer, no wake-up.
//!
//! Owns: the helper process and the shared page.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::time::{Duration, Instant};

use super::poll::Polling;
use crate::ctl::stats::AwakeCounts;
use crate::ctl::tunables::Knobs;
use crate::sync::{Arc, Mutex, Ordering};

/// The name the helper runs under (its argv[0] and its thread name).
pub const HELPER_NAME: &str = "memfs-awake";
/// The argument that marks the helper's command line.
pub const HELPER_ARG: &str = "--keep-a-cpu-awake";
/// The helper's descriptor of the shared page.
const SHARED_FD: i32 = 3;

/// How often the spinning helper looks at the requests, its wait for a CPU
/// and the clock.
const SAMPLE: Duration = Duration::from_micros(100);
/// Samples between two checks of the parent while spinning (100 ms).
const PARENT_CHECK_SAMPLES: u32 = 1000;
/// After a crowd, how long the helper sleeps before it spins again;
/// doubled after each crowd, up to the maximum, until [`CALM`] passes
/// without one.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_millis(640);
/// This long without a crowd ends a run of crowds.
const CALM: Duration = Duration::from_millis(50);

/// The shared page's words.
#[repr(C)]
struct Shared {
    /// Requests seen by the daemon (wrapping); the futex word the helper
    /// sleeps on while it waits for one.
    requests: AtomicU32,
    /// 1 while the helper sleeps waiting for a request: the daemon's next
    /// request clears it and wakes the helper.
    asleep: AtomicU32,
    /// `poll_us`: how long after the last request the helper keeps spinning.
    window_us: AtomicU32,
    /// Counted by the helper: spins started, and stopped for a crowd.
    spins: AtomicU64,
    crowded: AtomicU64,
}

/// The shared page, mapped.
struct Page(*const Shared);

// SAFETY: the page holds only atomics, and stays mapped as long as this value.
unsafe impl Send for Page {}
// SAFETY: as above.
unsafe impl Sync for Page {}

impl Page {
    /// Map `fd`'s first page, shared.
    fn map(fd: i32) -> std::io::Result<Page> {
        // SAFETY: a fresh shared mapping of a descriptor we were given; the
        // result is checked before use.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), page_size(), libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Page(p as *const Shared))
    }

    fn get(&self) -> &Shared {
        // SAFETY: mapped (page-aligned, zero-filled, so valid atomics) for as long as `self`.
        unsafe { &*self.0 }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping made in `map`, which nothing uses after this.
        unsafe { libc::munmap(self.0 as *mut libc::c_void, page_size()) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Sleep while `word` holds `value` (returns at once if it does not).
fn futex_wait(word: &AtomicU32, value: u32) {
    // SAFETY: FUTEX_WAIT (shared: the page is mapped in two processes) on a
    // live, aligned word, with no timeout.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, value, std::ptr::null::<libc::timespec>())
    };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: FUTEX_WAKE on a live, aligned word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
}

/// The daemon's side: the helper and the page it shares with it.
pub struct Awake {
    page: Page,
    knobs: Arc<Knobs>,
    /// None once reaped.
    child: Mutex<Option<Child>>,
}

impl Awake {
    /// Start the helper. None where there is nothing to gain: one CPU, or
    /// no scheduler statistics for the helper to judge the machine by.
    pub fn start(knobs: Arc<Knobs>) -> std::io::Result<Option<Arc<Awake>>> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 2 || File::open("/proc/self/schedstat").is_err() {
            return Ok(None);
        }
        // SAFETY: memfd_create with a NUL-terminated name; checked.
        let fd = unsafe { libc::memfd_create(c"memfs-awake".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // Above the standard streams: the child's stdio is set up before
        // `pre_exec`, and would replace a descriptor 0-2 (a daemon started
        // with them closed).
        // SAFETY: F_DUPFD_CLOEXEC on a descriptor we own; checked.
        let dup = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, SHARED_FD) };
        if dup < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(dup) };
        // SAFETY: ftruncate on a descriptor we own.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), page_size() as libc::off_t) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let page = Page::map(fd.as_raw_fd())?;
        page.get().window_us.store(window_us(&knobs), Ordering::Relaxed);
        let raw = fd.as_raw_fd();
        // SAFETY: getpid has no preconditions.
        let daemon = unsafe { libc::getpid() };
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg0(HELPER_NAME).arg(HELPER_ARG).arg(daemon.to_string());
        // Not the directory memfs was started from: the helper would keep
        // that file system busy for the mount's life.
        cmd.current_dir("/").stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        // SAFETY: between fork and exec only prctl, setsid,
        // sched_setscheduler (its parameter outlives the call), dup2 and
        // fcntl, all async-signal-safe system calls. SIGKILL when the daemon's thread
        // that spawns it (the main thread, which ends with the daemon)
        // ends, asked for before exec so that no moment is uncovered (the
        // helper then checks that its parent is still the daemon); the
        // page's descriptor becomes the child's fd 3, without close-on-exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Its own session and SCHED_IDLE already for the exec and
                // its start-up, which ran beside the io_uring queues'
                // registration at mount and delayed it (seen in CI).
                libc::setsid();
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                    // Never a spinner at normal priority: no helper then.
                    return Err(std::io::Error::last_os_error());
                }
                let r = if raw == SHARED_FD { libc::fcntl(raw, libc::F_SETFD, 0) } else { libc::dup2(raw, SHARED_FD) };
                if r < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        Ok(Some(Arc::new(Awake { page, knobs, child: Mutex::new(Some(child)) })))
    }

    /// What the helper did since it started. Also reaps a helper that
    /// ended (it should not before the daemon does), and says so once.
    pub fn counts(&self) -> AwakeCounts {
        let mut child = self.child.lock();
        if let Some(Ok(Some(status))) = child.as_mut().map(Child::try_wait) {
            log::warn!("the memfs-awake helper ended ({status}): no CPU is kept awake for requests any more");
            *child = None;
        }
        drop(child);
        let s = self.page.get();
        AwakeCounts { spins: s.spins.load(Ordering::Relaxed), crowded: s.crowded.load(Ordering::Relaxed) }
    }
}

impl Polling for Awake {
    /// An atomic add; a futex wake only when the helper sleeps.
    fn touch(&self) {
        let s = self.page.get();
        // SeqCst both: the helper stores `asleep` and then loads `requests`;
        // either it sees this request or this sees it asleep.
        s.requests.fetch_add(1, Ordering::SeqCst);
        let w = window_us(&self.knobs);
        if s.window_us.load(Ordering::Relaxed) != w {
            s.window_us.store(w, Ordering::Relaxed);
        }
        // poll_us=0: no spinning, so no waking either.
        if w != 0 && s.asleep.load(Ordering::SeqCst) != 0 && s.asleep.swap(0, Ordering::SeqCst) != 0 {
            futex_wake(&s.requests);
        }
    }
}

fn window_us(knobs: &Knobs) -> u32 {
    knobs.poll_us.load(Ordering::Relaxed).min(u32::MAX as u64) as u32
}

impl Drop for Awake {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.lock().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Whether the helper could not get a CPU: the share of the wall time in
/// which it was runnable but waiting (its `run_delay` in
/// `/proc/self/schedstat`), judged over intervals of [`CROWD_INTERVAL`].
/// The helper's question is exactly whether some CPU was idle for it: with
/// a lone client it waits only while the client runs on its CPU, before
/// the scheduler moves it to the idle one; with CPU-bound processes on
/// every CPU it hardly runs at all. Not the runnable count of
/// `/proc/loadavg`: a lone client and memfs's queue thread are both
/// runnable at each hand-off, which made every CPU look wanted in most
/// samples of an idle machine (measured).
struct Crowd {
    schedstat: File,
    /// Start of the interval: wall time and run_delay (ns).
    since: Instant,
    delay_ns: u64,
}

/// How long an interval the helper judges its waiting over.
const CROWD_INTERVAL: Duration = Duration::from_millis(10);
/// The share of an interval spent waiting for a CPU that makes it crowded.
const CROWDED_SHARE: f64 = 0.5;
/// A wait for a CPU this long between the helper's wake-up and its first
/// run makes the machine crowded at once.
const WAKE_WAIT: Duration = Duration::from_millis(5);

impl Crowd {
    /// Start an interval now; the wait read (None: unreadable, the last kept).
    fn begin(&mut self) -> Option<u64> {
        self.since = Instant::now();
        let delay = run_delay_ns(&self.schedstat);
        self.delay_ns = delay.unwrap_or(self.delay_ns);
        delay
    }

    /// Whether the interval that just ended was crowded (false while it lasts).
    fn crowded(&mut self, now: Instant) -> bool {
        let wall = now - self.since;
        if wall < CROWD_INTERVAL {
            return false;
        }
        let Some(delay) = run_delay_ns(&self.schedstat) else { return false };
        let waited = delay.saturating_sub(self.delay_ns);
        (self.since, self.delay_ns) = (now, delay);
        waited as f64 > CROWDED_SHARE * wall.as_nanos() as f64
    }
}

/// The second field of /proc/self/schedstat: nanoseconds spent runnable
/// but waiting for a CPU.
fn run_delay_ns(file: &File) -> Option<u64> {
    let mut buf = [0u8; 128];
    let n = file.read_at(&mut buf, 0).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The helper's life (`memfs-awake --keep-a-cpu-awake DAEMON_PID`, fd 3
/// the shared page): sleep until a request, spin while they come, stop for
/// a crowd. It ends with the daemon: SIGKILL when it dies (asked for
/// before exec), and at once if the daemon died before that.
pub fn helper_main(daemon: Option<&str>) -> ExitCode {
    let Some(parent) = daemon.and_then(|p| p.parse::<libc::pid_t>().ok()) else { return ExitCode::FAILURE };
    // SAFETY: getppid has no preconditions. (Its session and SCHED_IDLE
    // were set before exec.)
    unsafe {
        if libc::getppid() != parent {
            return ExitCode::SUCCESS; // the daemon died before we were set to die with it
        }
    }
    // Best effort: without it the helper still yields to a crowd. Before
    // it takes its name, by which it is found (tests, ps): found, it is set.
    let _ = std::fs::write("/proc/self/autogroup", "19");
    // SAFETY: prctl on this process; the name outlives the call.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"memfs-awake".as_ptr()) };
    let Ok(page) = Page::map(SHARED_FD) else { return ExitCode::FAILURE };
    // SAFETY: fd 3 was given to us for the page, now mapped.
    unsafe { libc::close(SHARED_FD) };
    let Ok(schedstat) = File::open("/proc/self/schedstat") else { return ExitCode::FAILURE };
    let mut crowd = Crowd { schedstat, since: Instant::now(), delay_ns: 0 };
    let s = page.get();
    // SAFETY: getppid has no preconditions.
    let orphaned = || unsafe { libc::getppid() } != parent;
    let mut seen = s.requests.load(Ordering::SeqCst);
    let mut waited_before = run_delay_ns(&crowd.schedstat);
    let (mut backoff, mut last_crowd) = (BACKOFF_MIN, Instant::now());
    loop {
        // Asleep until a request comes (or came meanwhile). Its wait for
        // a CPU is read just before each sleep (here, or the backoff's
        // below), so that what it measures after is the wait since its
        // last wake-up alone.
        s.asleep.store(1, Ordering::SeqCst);
        loop {
            let now = s.requests.load(Ordering::SeqCst);
            if now != seen {
                seen = now;
                break;
            }
            waited_before = run_delay_ns(&crowd.schedstat);
            futex_wait(&s.requests, now);
        }
        s.asleep.store(0, Ordering::Relaxed);
        if s.window_us.load(Ordering::Relaxed) == 0 {
            continue; // poll_us=0 (set since the request that woke it)
        }
        // Woken, it waited that long for a CPU before it ran: on an idle
        // machine microseconds; beside CPU-bound processes on every CPU,
        // tens of milliseconds. Then it does not spin at all.
        // (Not judged when a reading failed.)
        let slow_start = matches!((waited_before, crowd.begin()),
            (Some(before), Some(now)) if now.saturating_sub(before) > WAKE_WAIT.as_nanos() as u64);
        if !slow_start {
            s.spins.fetch_add(1, Ordering::Relaxed);
        }
        // Spin while requests keep coming.
        let began = Instant::now();
        let (mut next, mut last_request, mut samples) = (began, began, 0u32);
        let crowded = slow_start
            || loop {
                for _ in 0..64 {
                    std::hint::spin_loop();
                }
                let now = Instant::now();
                if now < next {
                    continue;
                }
                next = now + SAMPLE;
                if crowd.crowded(now) {
                    break true;
                }
                let window = s.window_us.load(Ordering::Relaxed);
                let r = s.requests.load(Ordering::Relaxed);
                if window == 0 {
                    break false;
                }
                if r != seen {
                    (seen, last_request) = (r, now);
                } else if now - last_request >= Duration::from_micros(window.into()) {
                    break false;
                }
                samples += 1;
                if samples % PARENT_CHECK_SAMPLES == 0 && orphaned() {
                    return ExitCode::SUCCESS;
                }
            };
        if crowded {
            s.crowded.fetch_add(1, Ordering::Relaxed);
            waited_before = run_delay_ns(&crowd.schedstat);
            std::thread::sleep(backoff);
            backoff = (backoff * 2).min(BACKOFF_MAX);
            last_crowd = Instant::now();
        } else {
            if last_crowd.elapsed() >= CALM {
                backoff = BACKOFF_MIN;
            }
            waited_before = run_delay_ns(&crowd.schedstat);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_for_a_cpu_is_read_from_schedstat() {
        let file = File::open("/proc/self/schedstat").unwrap();
        assert!(run_delay_ns(&file).is_some());
    }

    /// A schedstat-like file (in memory) whose run_delay the test sets.
    fn schedstat(delay_ns: u64) -> File {
        // SAFETY: memfd_create with a NUL-terminated name; checked.
        let fd = unsafe { libc::memfd_create(c"schedstat".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor nobody else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        file.write_all_at(format!("123456 {delay_ns} 7\n").as_bytes(), 0).unwrap();
        file
    }

    #[test]
    fn crowded_when_it_waited_more_than_half_of_an_interval() {
        let mut crowd = Crowd { schedstat: schedstat(1_000_000), since: Instant::now(), delay_ns: 0 };
        crowd.begin();
        assert_eq!(crowd.delay_ns, 1_000_000);
        let end = crowd.since + CROWD_INTERVAL;
        let half = CROWD_INTERVAL.as_nanos() as u64 / 2;
        // Not judged before the interval ends, whatever it waited.
        crowd.schedstat = schedstat(1_000_000 + 2 * half);
        assert!(!crowd.crowded(end - Duration::from_micros(1)));
        // Waited less than half: not crowded; the next interval starts there.
        crowd.schedstat = schedstat(1_000_000 + half - 1000);
        assert!(!crowd.crowded(end));
        assert_eq!((crowd.since, crowd.delay_ns), (end, 1_000_000 + half - 1000));
        // Then more than half of the next one.
        crowd.schedstat = schedstat(crowd.delay_ns + half + 1000);
        assert!(crowd.crowded(end + CROWD_INTERVAL));
    }
}
