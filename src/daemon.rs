//! Starting and serving a mount: build the core from the options, mount it,
//! tell the starting process the mount is live, serve until unmounted.
//!
//! Without `-f` the process forks first; the parent waits on a pipe and
//! exits 0 only after the child reports the mount is live, or prints the
//! child's error and exits 1. SIGINT, SIGTERM and SIGHUP unmount cleanly
//! (in both modes): a dedicated thread waits for them with sigwait and asks
//! the session to unmount, which ends `Session::run`.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::Path;

use fuser::{Config, MountOption, Session, SessionACL, Transport, UringMode};

use crate::core::memfile::KernelStore;
use crate::core::numa::{self, NumaSys};
use crate::core::pager::Pager;
use crate::core::types::PAGE_SIZE;
use crate::core::{Fs, FsConfig};
use crate::ctl::report::human_bytes;
use crate::ctl::stats::{Stats, TransportState};
use crate::ctl::tunables::Knobs;
use crate::ctl::{Ctl, CtlConfig};
use crate::fuse::awake::Awake;
use crate::fuse::health::Health;
use crate::fuse::invalidate::Invalidator;
use crate::fuse::poll::{Poller, Polling};
use crate::fuse::{Counted, MemFs, PassthroughPlan};
use crate::fuse::{Parked, RETURNING_GRACE};
use crate::options::{MountOptions, PassthroughMode};
use crate::sync::{Arc, OnceLock};

/// Allocations of this size and more are mapped on their own, and unmapped
/// when freed (`M_MMAP_THRESHOLD`, glibc's initial value, held fixed).
const MMAP_THRESHOLD: libc::c_int = 128 << 10;

/// Mount `opts` (parsed from `given`) at `mountpoint` and serve it. Returns
/// when unmounted (foreground) or, in the parent of a daemon, once the
/// mount is live.
pub fn run(mountpoint: &Path, opts: &MountOptions, given: &str, foreground: bool) -> Result<(), String> {
    let mountpoint =
        std::fs::canonicalize(mountpoint).map_err(|e| format!("mount point {}: {e}", mountpoint.display()))?;
    if !mountpoint.is_dir() {
        return Err(format!("mount point {} is not a directory", mountpoint.display()));
    }
    if foreground {
        return serve(&mountpoint, opts, given, None);
    }
    let (read_end, write_end) = pipe()?;
    // SAFETY: no threads exist yet in this process, so fork is safe.
    match unsafe { libc::fork() } {
        -1 => Err(format!("fork: {}", std::io::Error::last_os_error())),
        0 => {
            drop(read_end);
            // SAFETY: setsid has no preconditions; it detaches from the terminal.
            unsafe { libc::setsid() };
            let result = serve(&mountpoint, opts, given, Some(File::from(write_end)));
            std::process::exit(i32::from(result.is_err()));
        }
        _child => {
            drop(write_end);
            // One line: "ok" once the mount is live, or the error. EOF without
            // a line means the child died first.
            let mut line = String::new();
            let _ = BufReader::new(File::from(read_end)).read_line(&mut line);
            match line.trim_end() {
                "ok" => Ok(()),
                "" => Err("the memfs daemon exited before the mount was live".into()),
                l => Err(l.strip_prefix("error: ").unwrap_or(l).to_string()),
            }
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: pipe2 returned two new descriptors that we now own.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The signals that end a mount cleanly.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: sigset operations on a local, initialised set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn fuse_config(opts: &MountOptions) -> Config {
    let root = unsafe { libc::geteuid() } == 0;
    let mut mount_options = vec![MountOption::FSName(opts.fsname.clone()), MountOption::DefaultPermissions];
    if root {
        // fuser's direct mount(2) ignores Subtype; the kernel takes it as an option.
        mount_options.push(MountOption::CUSTOM("subtype=memfs".into()));
        // As tmpfs: device nodes and set-id bits work unless refused.
        mount_options.extend([MountOption::Dev, MountOption::Suid]);
    } else {
        mount_options.push(MountOption::Subtype("memfs".into()));
    }
    for f in &opts.flags {
        mount_options.retain(|m| !same_kind(m, f));
        mount_options.push(f.clone());
    }
    let mut cfg = Config::default();
    cfg.mount_options = mount_options;
    // Root's mount serves every user, as tmpfs does; the kernel checks permissions.
    cfg.acl = if root { SessionACL::All } else { SessionACL::Owner };
    cfg.n_threads = Some(opts.threads);
    cfg.uring = opts.uring;
    cfg
}

/// `uring=on` where the kernel cannot: refuse before mounting, saying how
/// to turn it on. (fuser checks again at FUSE_INIT, where the kernel has
/// the last word.)
fn check_uring(opts: &MountOptions) -> Result<(), String> {
    if opts.uring != UringMode::On {
        return Ok(());
    }
    match fuser::uring_enabled_in_kernel() {
        Some(true) => Ok(()),
        Some(false) => Err("invalid mount option 'uring=on': FUSE over io_uring is disabled in the kernel; \
             as root: echo Y > /sys/module/fuse/parameters/enable_uring \
             (to keep it across reboots: options fuse enable_uring=1 in /etc/modprobe.d/fuse-uring.conf), \
             or mount with uring=auto"
            .into()),
        None => Err("invalid mount option 'uring=on': this kernel has no FUSE over io_uring \
             (it needs Linux 6.14 or later built with CONFIG_FUSE_IO_URING); mount with uring=auto"
            .into()),
    }
}

/// The line the mount logs about its transport.
fn transport_line(status: &fuser::TransportStatus, mountpoint: &Path) -> String {
    let how = match status.get() {
        Transport::IoUring | Transport::IoUringStarting => {
            format!("FUSE over io_uring, {} queues (one per possible CPU)", status.queues())
        }
        _ => "/dev/fuse".to_string(),
    };
    format!("memfs {}: transport {how}", mountpoint.display())
}

/// What to tell the user at mount when `size=` is more than the RAM
/// ceiling and the store it indexes can hold (`Pager::store_bound`: the
/// index of a page on the store is RAM, at most half the ceiling).
fn store_bound_warning(size: u64, p: &Pager) -> Option<String> {
    let b = p.backing()?;
    let most = Pager::store_bound(p.limit()).min(b.capacity().unwrap_or(u64::MAX));
    let holds = p.limit().saturating_add(most.saturating_mul(PAGE_SIZE));
    (size == 0 || size > holds).then(|| {
        format!(
            "size={} is more than ram={} can hold with its backing store: the store's index is kept in RAM, \
             under the ceiling, so it holds at most {} (writes past that get ENOSPC; a larger ram= holds more)",
            if size == 0 { "0 (unlimited)".into() } else { human_bytes(size) },
            human_bytes(p.limit()),
            human_bytes(holds)
        )
    })
}

/// Log `line` at mount: to syslog (the daemon has no terminal), and to
/// stderr as well in the foreground.
fn log_mount_line(line: &str, foreground: bool) {
    if foreground {
        eprintln!("{line}");
    }
    if let Ok(msg) = std::ffi::CString::new(line) {
        // SAFETY: a constant format string and a NUL-terminated argument.
        unsafe { libc::syslog(libc::LOG_DAEMON | libc::LOG_INFO, c"%s".as_ptr(), msg.as_ptr()) };
    }
}

/// Report the session's transport in the statistics.
fn publish_transport(status: fuser::TransportStatus, stats: &Stats) {
    stats.transport.set(Box::new(move || {
        let t = status.get();
        let io_uring = matches!(t, Transport::IoUring | Transport::IoUringStarting);
        TransportState { name: t.name(), io_uring, queues: if io_uring { status.queues() as u64 } else { 0 } }
    }));
}

fn same_kind(a: &MountOption, b: &MountOption) -> bool {
    use MountOption::*;
    matches!((a, b), (Dev | NoDev, Dev | NoDev) | (Suid | NoSuid, Suid | NoSuid))
}

/// Mount and serve in this process; `status` (daemon mode) hears "ok" once
/// the mount is live, or the error that prevented it.
fn serve(mountpoint: &Path, opts: &MountOptions, given: &str, status: Option<File>) -> Result<(), String> {
    let foreground = status.is_none();
    raise_open_file_limit();
    let (session, pager) = match (mount_session(mountpoint, opts, given), status) {
        (Ok(mounted), Some(mut status)) => {
            status.write_all(b"ok\n").map_err(|e| format!("cannot report to the starting process: {e}"))?;
            drop(status);
            detach_stdio();
            mounted
        }
        (Ok(mounted), None) => mounted,
        (Err(e), Some(mut status)) => {
            let _ = writeln!(status, "error: {e}");
            return Err(e);
        }
        (Err(e), None) => return Err(e),
    };
    log_mount_line(&transport_line(&session.transport_status(), mountpoint), foreground);
    let ours = crate::remount::memfs_device_at(mountpoint);
    let _ = std::env::set_current_dir("/");
    let result = session.run();
    // Nothing of the data stays readable in the store once the mount is
    // gone (an unnamed file goes with this process; a device is zeroed).
    if let Some(store) = pager.as_deref().and_then(Pager::backing) {
        if let Err(e) = store.wipe() {
            log::warn!("memfs {}: could not zero the backing device: {e}", mountpoint.display());
        }
    }
    // Only after an abort: a plain umount ends the session too, and by then
    // another memfs may be mounted there with our device number again.
    if result.as_ref().is_err_and(|e| e.raw_os_error() == Some(libc::ECONNABORTED)) {
        detach_if_left(mountpoint, ours);
        return Err(format!("{}: the connection was aborted", mountpoint.display()));
    }
    result.map_err(|e| format!("serving {}: {e}", mountpoint.display()))
}

/// Raise this process's soft limit of open files to its hard limit. Every
/// memory file (a file of `passthrough_min=` or more, docs/PASSTHROUGH.md)
/// is a descriptor the daemon holds, and a shell's soft limit is often
/// 1024 where the hard one is far higher: past the soft limit, new large
/// files stayed in the heap (held twice, by memfs and the page cache).
/// Nothing here uses select(2), which is what the low soft limit protects.
fn raise_open_file_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit only read and write `lim`.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 || lim.rlim_cur >= lim.rlim_max {
        return;
    }
    let before = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    // SAFETY: as above.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } == 0 {
        log::debug!("open files: soft limit raised from {before} to {}", lim.rlim_max);
    }
}

/// After an abort (/sys/fs/fuse/connections/N/abort), which ends the
/// session but leaves a dead mount that answers ENOTCONN until someone
/// unmounts it (a tester found it so after every abort), detach that mount.
/// Only the mount of this daemon's own connection (`ours`, its device
/// noted at mount) is touched: a dead mount keeps its superblock, so no
/// other mount has that device number meanwhile. Detached lazily, as
/// libfuse's daemons do, through fusermount3 where umount2 is not
/// permitted (an unprivileged mount).
fn detach_if_left(mountpoint: &Path, ours: Option<String>) {
    let Some(ours) = ours else { return };
    if crate::remount::memfs_device_at(mountpoint).as_ref() != Some(&ours) {
        return;
    }
    log::info!("{}: the connection ended with the mount still in place: detaching it", mountpoint.display());
    let Ok(path) = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes()) else { return };
    // SAFETY: umount2 on a NUL-terminated path.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
        let _ = std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(mountpoint).status();
    }
}

/// Mount, with the stop signals routed to a thread that unmounts.
/// The live session, and the pager whose store is wiped when it ends.
type Mounted = (Session<Counted<MemFs>>, Option<Arc<Pager>>);

fn mount_session(mountpoint: &Path, opts: &MountOptions, given: &str) -> Result<Mounted, String> {
    let set = stop_signals();
    // SAFETY: blocks the stop signals in this thread; threads created later inherit the mask.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    // The pager asks whether a memory file is still mapped with a write
    // lease it gives back at once (core/memfile.rs `held_elsewhere`); an
    // open that breaks it in that instant sends the lease's owner SIGIO,
    // whose default is to end the process. SAFETY: setting a disposition.
    unsafe { libc::signal(libc::SIGIO, libc::SIG_IGN) };
    check_uring(opts)?;
    let pager = opts.pager_config()?.map(|cfg| Arc::new(Pager::new(cfg)));
    let store = pager.clone();
    if let Some(p) = &pager {
        // This process serves one mount: the arenas' free space in RAM is
        // this pager's, counted under ram= (core/pager/mod.rs).
        p.count_overhead();
        // And the io_uring queues' buffers (0 over /dev/fuse), which get
        // half of the quarter of the ceiling the overhead may take: fewer
        // entries per queue under a small ceiling (vendor/fuser uring.rs).
        // Set from the ceiling at mount; a live ram= does not change it.
        p.count_outside(Box::new(fuser::uring_buffer_bytes));
        fuser::set_uring_buffer_budget(p.limit() / 8);
    }
    // One malloc arena, the main one, for every thread. malloc_trim gives
    // back the free pages of every arena but never the free top of a
    // thread's arena (glibc's mtrim trims only the main arena's top): after
    // deleting 100,000 empty files 24 MB stayed resident in a worker's
    // arena, 4 MB with one arena (issue 14). Under ram= the reclaimer and the
    // workers also free each other's allocations: 208 MB peak RSS with an
    // arena per thread, 150 MB with one (512 MiB through ram=128M). Create,
    // stat and unlink rates with two client threads did not move beyond
    // run-to-run noise. Called before any thread.
    // SAFETY: mallopt only changes allocator settings.
    unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) };
    // Buffers of MMAP_THRESHOLD and more (a batch of pages on its way in or
    // out of RAM, a memory file's READ) mapped and unmapped each time, not
    // cut from the heap. glibc raises this threshold to the size of the
    // largest mapped buffer freed (up to 32 MiB), after which every such
    // buffer came from the heap and left holes there until the next trim:
    // `memfs evict` and `memfs prime` of 48 MiB ten times under ram=16M
    // peaked at 10-17 MiB of heap for 4 MiB in use (heaptrack), 27-34 MiB
    // RSS in all; 4 MiB and 22 with the threshold fixed. Setting it also
    // fixes the trim threshold at twice it: the heap's free top goes back
    // at once. SAFETY: as above.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD) };
    if let Some(p) = &pager {
        let s = p.stats();
        log::info!("pager: ram={} compress={} backing={}", s.ram_limit_bytes, s.codec, s.backing);
        let warnings = [
            store_bound_warning(opts.size, p),
            crate::sysmem::ceiling_warning(p.limit(), crate::sysmem::usable_memory()),
            crate::sysmem::ceiling_above_size_warning(opts.size, p.limit()),
        ];
        for line in warnings.into_iter().flatten() {
            log::warn!("{line}");
            eprintln!("memfs: {line}");
        }
    }
    crate::core::arena::set_huge(opts.huge);
    let numa: Arc<dyn NumaSys> = Arc::new(numa::Kernel);
    opts.mpol.check(&numa.memory_nodes()).map_err(|e| format!("invalid mount option 'mpol={}': {e}", opts.mpol))?;
    let kernel_files = kernel_files(opts)?;
    let wants_passthrough = kernel_files.is_some();
    let fs = Arc::new(Fs::new(FsConfig {
        max_pages: opts.max_pages(),
        max_inodes: opts.nr_inodes,
        root_mode: opts.mode,
        root_uid: opts.uid,
        root_gid: opts.gid,
        noatime: opts.noatime,
        strictatime: opts.strictatime,
        dir_index: opts.dir_index,
        reserved_name: opts.ctldir.as_ref().map(|n| n.as_bytes().to_vec()),
        pager,
        max_meta_bytes: opts.meta_ceiling()?,
        cache: opts.cache,
        kernel_files,
        mpol: opts.mpol.clone(),
        numa,
    }));
    fs.set_kernel_new_files(opts.passthrough_create);
    // Every arena chunk is placed as it is mapped (the arenas are the process's).
    crate::core::arena::set_placer(fs.chunk_placer());
    let stats = Arc::new(Stats::default());
    let activity = stats.clone();
    crate::reclaimer::start(&fs).map_err(|e| format!("cannot start the reclaim thread: {e}"))?;
    crate::trim::start(&fs, move || activity.requests())
        .map_err(|e| format!("cannot start the memory trimming thread: {e}"))?;
    let knobs = Arc::new(Knobs::new(opts.poll_us));
    let ctl = opts.ctldir.as_ref().map(|name| {
        // SAFETY: geteuid/getegid have no preconditions.
        let (owner_uid, owner_gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let cfg = CtlConfig {
            name: name.as_bytes().to_vec(),
            owner_uid,
            owner_gid,
            mountpoint: mountpoint.to_string_lossy().into_owned(),
            options: given.to_string(),
        };
        Ctl::new(cfg, fs.clone(), stats.clone(), knobs.clone())
    });
    let notifier = Arc::new(OnceLock::new());
    let invalidator =
        Invalidator::start(notifier.clone()).map_err(|e| format!("cannot start the invalidation thread: {e}"))?;
    let returning = fs.clone();
    let parked = Parked::start(Box::new(move || returning.kernel_space_still_returning(RETURNING_GRACE)))
        .map_err(|e| format!("cannot start the parked-request thread: {e}"))?;
    let poller = Arc::new(OnceLock::new());
    let pt = PassthroughPlan { wanted: wants_passthrough, required: opts.passthrough == PassthroughMode::On };
    let health = Arc::new(Health::new(opts.errors, stats.clone()));
    let (fs_ro, mp) = (fs.clone(), mountpoint.to_path_buf());
    health.set_on_read_only(Box::new(move || {
        fs_ro.set_noatime(true); // a read must change nothing either
        let mp = mp.clone();
        // Not on the worker that caught the panic: the remount waits for the
        // kernel, which may need requests served meanwhile.
        let _ = std::thread::Builder::new().name("memfs-remount-ro".into()).spawn(move || {
            match crate::remount::make_read_only(&mp) {
                Ok(()) => log::error!("memfs {}: remounted read-only after an internal error", mp.display()),
                Err(e) => log::error!("memfs {}: read-only inside memfs, but {e}", mp.display()),
            }
        });
    }));
    let memfs = Counted::new(
        // SAFETY: geteuid has no preconditions.
        MemFs::new(fs, ctl, stats.clone(), invalidator, parked, pt).allow_idmap(unsafe { libc::geteuid() } == 0),
        stats.clone(),
        poller.clone(),
        health,
    );
    let mut session = Session::new(memfs, mountpoint, &fuse_config(opts))
        .map_err(|e| format!("cannot mount at {}: {e}", mountpoint.display()))?;
    let _ = notifier.set(session.notifier());
    let transport = session.transport_status();
    let io_uring = transport.get() != Transport::DevFuse;
    publish_transport(transport, &stats);
    // The device poller spins the /dev/fuse reader while requests come; over
    // io_uring they come on the queues and /dev/fuse carries only FORGET and
    // INTERRUPT, so spinning there would only burn a CPU: there a helper
    // keeps an idle CPU awake instead (awake.rs). Both for `poll_us` after
    // a request.
    if !io_uring {
        let p = Poller::start(session.as_fd(), knobs).map_err(|e| format!("cannot start the polling thread: {e}"))?;
        let _ = poller.set(p as Arc<dyn Polling>);
    } else {
        // Optional: without it requests are served as well, only their
        // round trips cost more on idle vCPUs (a sandbox that refuses
        // memfd_create, a task limit reached).
        match Awake::start(knobs) {
            Ok(Some(a)) => {
                let counts = a.clone();
                stats.awake.set(Box::new(move || counts.counts()));
                let _ = poller.set(a as Arc<dyn Polling>);
            }
            Ok(None) => {}
            Err(e) => log::warn!(
                "{}: cannot start the memfs-awake helper ({e}): no CPU is kept awake for requests",
                mountpoint.display()
            ),
        }
    }
    let mut unmounter = session.unmount_callable();
    let where_ = mountpoint.to_path_buf();
    let ours = crate::remount::memfs_device_at(mountpoint);
    std::thread::Builder::new()
        .name("memfs-signals".into())
        .spawn(move || loop {
            let mut sig = 0;
            // SAFETY: waits on a valid signal set.
            unsafe { libc::sigwait(&set, &mut sig) };
            // Detached meanwhile (`umount -l`): what is at the path now is
            // not ours to unmount; the daemon ends at the last close.
            if ours.is_some() && crate::remount::memfs_device_at(&where_) != ours {
                log::warn!("memfs {}: detached already; it ends when its last open file closes", where_.display());
                continue;
            }
            // Busy (files open, a working directory in it): it stays
            // mounted and serving, and the next signal tries again (a
            // tester's second SIGTERM stayed pending for good).
            match unmounter.unmount() {
                Ok(()) => break,
                Err(e) => {
                    let line = format!(
                        "memfs {}: not unmounted ({e}): close what holds it and send the signal again, \
                         or `umount -l` it",
                        where_.display()
                    );
                    log::warn!("{line}");
                    eprintln!("{line}");
                }
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok((session, store))
}

/// Where large files keep their bytes for passthrough (`passthrough=`,
/// `passthrough_min=`), or `None` for today's path; an error when
/// `passthrough=on` cannot work here.
fn kernel_files(opts: &MountOptions) -> Result<Option<(KernelStore, u64)>, String> {
    let required = match opts.passthrough {
        PassthroughMode::Off => return Ok(None),
        PassthroughMode::On => true,
        PassthroughMode::Auto => false,
    };
    let why_not = if !has_cap_sys_admin() {
        Some("it needs CAP_SYS_ADMIN (the kernel registers backing files only for it); mount as root")
    } else {
        None
    };
    match why_not {
        Some(why) if required => Err(format!("invalid mount option 'passthrough=on': {why}")),
        Some(why) => {
            log::info!("passthrough: off, {why}");
            Ok(None)
        }
        None => {
            if opts.memory_file_huge() != opts.huge {
                log::info!("memory files: huge=never under a RAM ceiling (the pager pages them a page at a time)");
            }
            let store = KernelStore::new(opts.size, opts.memory_file_huge(), &opts.mpol.to_string());
            if !store.tells_mappings() {
                // A mapping made through a passthrough open outlives the
                // open; memfs must see it before it changes a memory file
                // under it (core/memfile.rs `held_elsewhere`).
                let why = "memfs cannot tell here when a file's memory is still mapped after its close \
                           (no private tmpfs, or file leases are off: fs.leases-enable=0)";
                if required {
                    return Err(format!("invalid mount option 'passthrough=on': {why}"));
                }
                log::info!("passthrough: off, {why}");
                return Ok(None);
            }
            log::info!("passthrough: files of {} bytes or more in {} memory files", opts.passthrough_min, store.kind());
            Ok(Some((store, opts.passthrough_min)))
        }
    }
}

/// Whether this process has CAP_SYS_ADMIN (bit 21) in its effective set.
fn has_cap_sys_admin() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .is_some_and(|caps| caps & (1 << 21) != 0)
}

/// Point stdin/stdout/stderr at /dev/null so the daemon holds no terminal.
fn detach_stdio() {
    if let Ok(null) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        for fd in 0..3 {
            // SAFETY: dup2 onto the standard descriptors.
            unsafe { libc::dup2(null.as_raw_fd(), fd) };
        }
    }
}
