//! The pager's background reclaimer: one thread per mount with `ram=`,
//! woken when file data passes a high watermark under the ceiling and
//! reclaiming down to a low one (core/pager/mod.rs, "Pressure"), so that
//! compression and store writes overlap the writers' own work instead of
//! running inside their requests. It holds the file system only weakly and
//! ends within a second of the mount going away. After each pass it gives
//! back the arena memory that pages leaving RAM freed (core/arena.rs).

use std::time::Duration;

use crate::core::Fs;
use crate::sync::Arc;

/// How often an idle reclaimer checks that its mount still exists.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Start the reclaimer for `fs` (nothing to do without a pager).
pub fn start(fs: &Arc<Fs>) -> std::io::Result<()> {
    if fs.pager_stats().is_none() {
        return Ok(());
    }
    let fs = Arc::downgrade(fs);
    std::thread::Builder::new().name("memfs-reclaim".into()).spawn(move || {
        while let Some(fs) = fs.upgrade() {
            if !fs.reclaim_ahead(IDLE_CHECK) {
                break;
            }
            // Pages left RAM: give back what their freed slots held.
            crate::core::arena::trim_if_slack();
        }
    })?;
    Ok(())
}
