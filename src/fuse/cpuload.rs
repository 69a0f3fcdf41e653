//! Whether the machine has a CPU to spare, for the device poller (poll.rs).
//!
//! Preferred source: the kernel's CPU pressure (`/proc/pressure/cpu`, PSI),
//! whose `some ... total=` is the time, in microseconds, during which at
//! least one task was runnable but had no CPU. If that grew by more than a
//! tenth of the time since the last look, tasks are waiting for CPUs, and
//! a polling worker is one of the reasons or would make it worse. PSI is
//! live to the microsecond, so a window of a millisecond can be judged.
//!
//! Without PSI (a kernel built or booted without it): the instantaneous
//! runnable count of `/proc/loadavg`, busy when more tasks are runnable
//! than there are CPUs (not counting the asking thread). A single sample
//! can miss a client that is just waiting for its reply, so this fallback
//! is coarser. With neither file, the machine always counts as idle.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

/// A judge of CPU contention over an interval.
pub trait CpuLoad: Send {
    /// Start an interval now.
    fn begin(&mut self);
    /// Whether CPUs were contended since `begin` or the last call.
    fn busy(&mut self) -> bool;
}

/// The system's own view: PSI, else the runnable count.
pub enum SystemLoad {
    Pressure { file: File, total_us: u64, since: Instant },
    Runnable { file: File, cpus: usize },
    Unknown,
}

impl SystemLoad {
    pub fn open() -> SystemLoad {
        if let Ok(file) = File::open("/proc/pressure/cpu") {
            if read_text(&file).as_deref().and_then(some_total_us).is_some() {
                return SystemLoad::Pressure { file, total_us: 0, since: Instant::now() };
            }
        }
        match File::open("/proc/loadavg") {
            Ok(file) => {
                SystemLoad::Runnable { file, cpus: std::thread::available_parallelism().map_or(1, |n| n.get()) }
            }
            Err(_) => SystemLoad::Unknown,
        }
    }
}

impl CpuLoad for SystemLoad {
    fn begin(&mut self) {
        if let SystemLoad::Pressure { file, total_us, since } = self {
            *total_us = read_text(file).as_deref().and_then(some_total_us).unwrap_or(*total_us);
            *since = Instant::now();
        }
    }

    fn busy(&mut self) -> bool {
        match self {
            SystemLoad::Pressure { file, total_us, since } => {
                let Some(now_us) = read_text(file).as_deref().and_then(some_total_us) else { return false };
                let stalled = now_us.saturating_sub(*total_us);
                let elapsed = since.elapsed();
                *total_us = now_us;
                *since = Instant::now();
                Duration::from_micros(stalled.saturating_mul(10)) > elapsed
            }
            SystemLoad::Runnable { file, cpus } => {
                read_text(file).as_deref().and_then(runnable).is_some_and(|r| r.saturating_sub(1) > *cpus)
            }
            SystemLoad::Unknown => false,
        }
    }
}

/// A small /proc file's text, read from the start.
fn read_text(file: &File) -> Option<String> {
    let mut buf = [0u8; 256];
    let n = file.read_at(&mut buf, 0).ok()?;
    String::from_utf8(buf[..n].to_vec()).ok()
}

/// `total=` of the `some` line of /proc/pressure/cpu.
fn some_total_us(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_ascii_whitespace().find_map(|f| f.strip_prefix("total="))?.parse().ok()
}

/// The runnable count from /proc/loadavg's text ("0.5 0.3 0.2 3/120 4567").
fn runnable(text: &str) -> Option<usize> {
    let field = text.split_ascii_whitespace().nth(3)?;
    field.split('/').next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pressure_total_is_read() {
        let text = "some avg10=1.00 avg60=0.50 avg300=0.10 total=44623478\n\
                    full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
        assert_eq!(some_total_us(text), Some(44623478));
        assert_eq!(some_total_us("full avg10=0 total=5\n"), None);
        assert_eq!(some_total_us("some avg10=0 total=x\n"), None);
    }

    #[test]
    fn runnable_is_read_from_loadavg() {
        assert_eq!(runnable("0.52 0.33 0.21 3/120 4567\n"), Some(3));
        assert_eq!(runnable("0.00 0.00 0.00 1/1 1"), Some(1));
        assert_eq!(runnable("garbage"), None);
        assert_eq!(runnable("1 2 3 x/4 5"), None);
    }

    #[test]
    fn pressure_is_preferred_where_the_kernel_has_it() {
        let psi = std::fs::read_to_string("/proc/pressure/cpu").ok();
        let load = SystemLoad::open();
        match psi.as_deref().and_then(some_total_us) {
            Some(_) => assert!(matches!(load, SystemLoad::Pressure { .. })),
            None => assert!(!matches!(load, SystemLoad::Pressure { .. })),
        }
    }
}
