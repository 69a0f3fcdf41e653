//! `memfs migrate MOUNTPOINT`: move the mount's file pages onto the NUMA
//! nodes its policy allows, through the control directory (write `1` to
//! `opts/migrate`, which starts the move on a thread of the daemon's own),
//! showing progress from `stats/migrate` and where the pages are
//! (`stats/pagestat`) before and after.
//!
//! Owns the command's output only; the move is core/place.rs's.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// `stats/migrate` as (key, value) pairs.
fn status(dir: &Path) -> Result<Vec<(String, u64)>, String> {
    let file = dir.join("stats/migrate");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(": "))
        .filter_map(|(k, v)| Some((k.to_string(), v.trim().parse().ok()?)))
        .collect())
}

fn get(s: &[(String, u64)], key: &str) -> u64 {
    s.iter().find(|(k, _)| k == key).map_or(0, |(_, v)| *v)
}

fn read(dir: &Path, file: &str) -> Result<String, String> {
    let path = dir.join(file);
    std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Run one migration of the memfs whose control directory is `dir`.
pub fn run(dir: &Path, out: &mut dyn Write, tty: bool) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let policy = read(dir, "opts/mpol")?;
    let mask = read(dir, "opts/nodemask")?;
    writeln!(out, "policy {} (nodemask {})", policy.trim(), mask.trim()).map_err(io)?;
    write!(out, "before:\n{}", read(dir, "stats/pagestat")?).map_err(io)?;
    let runs = get(&status(dir)?, "migrations_total");
    let start = dir.join("opts/migrate");
    if let Err(e) = std::fs::write(&start, "1") {
        return Err(match e.raw_os_error() {
            Some(libc::EBUSY) => "a migration of this mount is running already (see stats/migrate)".into(),
            _ => format!("{}: {e}", start.display()),
        });
    }
    let total = get(&status(dir)?, "data_pages");
    loop {
        let s = status(dir)?;
        let done = get(&s, "migrations_total") > runs && get(&s, "running") == 0;
        if tty || done {
            let line = format!(
                "pages looked at {} of about {total}, moved {}, failed {}",
                get(&s, "pages"),
                get(&s, "moved"),
                get(&s, "failed")
            );
            if tty {
                write!(out, "\r{line}").map_err(io)?;
            } else {
                write!(out, "{line}").map_err(io)?;
            }
            if done {
                writeln!(out).map_err(io)?;
            }
            out.flush().map_err(io)?;
        }
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    write!(out, "after:\n{}", read(dir, "stats/pagestat")?).map_err(io)?;
    Ok(())
}
