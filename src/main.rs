//! The `memfs` command: mount a new memory file system, or act as
//! `mount.memfs` when mount(8) calls it by that name.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

use memfs::options::{self, MountOptions};

#[derive(Parser, Debug)]
#[command(
    name = "memfs",
    version,
    about = "Mount a new, empty memory file system (like tmpfs, in user space over FUSE).",
    after_help = format!(
        "Mount options (-o, comma-separated; tmpfs's names):\n{}\nUnmount with `umount MOUNTPOINT` (root) or `fusermount3 -u MOUNTPOINT`.",
        options::help_table()
    )
)]
struct Cli {
    /// Mount options, comma-separated (may be repeated).
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Stay in the foreground; unmount on SIGINT/SIGTERM.
    #[arg(short = 'f', long = "foreground")]
    foreground: bool,
    /// Where to mount.
    mountpoint: PathBuf,
}

fn defaults() -> MountOptions {
    // SAFETY: geteuid/getegid have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    MountOptions::defaults(uid, gid)
}

fn mount(mountpoint: &std::path::Path, opts: &str, foreground: bool) -> ExitCode {
    let result = options::parse(opts, defaults()).and_then(|o| memfs::daemon::run(mountpoint, &o, foreground));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memfs: {e}");
            ExitCode::FAILURE
        }
    }
}

/// mount(8) calls `mount.memfs SOURCE DIR [-sfnv] [-N NS] [-o OPTIONS] [-t TYPE]`.
fn mount_helper(args: Vec<String>) -> ExitCode {
    let mut positional = vec![];
    let mut opts = vec![];
    let mut fake = false;
    let mut it = args.into_iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-o" => opts.extend(it.next()),
            "-t" | "-N" => {
                it.next();
            }
            s if s.starts_with('-') && s.len() > 1 => fake |= s.contains('f'),
            _ => positional.push(a),
        }
    }
    let [_source, dir] = positional.as_slice() else {
        eprintln!("usage: mount.memfs SOURCE MOUNTPOINT [-o OPTIONS]");
        return ExitCode::from(1);
    };
    let opts = opts.join(",");
    if fake {
        return match options::parse(&opts, defaults()) {
            Ok(_) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("memfs: {e}");
                ExitCode::FAILURE
            }
        };
    }
    mount(std::path::Path::new(dir), &opts, false)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let invoked_as = args.first().and_then(|a| a.rsplit('/').next()).unwrap_or("memfs");
    if invoked_as.starts_with("mount.") {
        return mount_helper(args);
    }
    let cli = Cli::parse();
    mount(&cli.mountpoint, &cli.options.join(","), cli.foreground)
}
