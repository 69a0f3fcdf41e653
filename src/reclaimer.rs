//! The pager's background reclaimer: one thread per mount with `ram=`,
//! woken when file data passes a high watermark under the ceiling and
//! reclaiming down to a low one (core/pager/mod.rs, "Pressure"), so that
//! compression and store writes overlap the writers' own work instead of
//! running inside their requests. It holds the file system only weakly and
//! ends within a second of the mount going away. After each pass it gives
//! back the arena memory that pages leaving RAM freed (core/arena.rs), and
//! the malloc heap's free memory when much came free (trim.rs, `HeapTrim`).

use std::time::Duration;

use crate::core::Fs;
use crate::sync::Arc;
use crate::trim::HeapTrim;

/// How often an idle reclaimer checks that its mount still exists.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Free bytes in the malloc heap above which it is given back: a 32nd of
/// the ceiling (a third of the promise's 10% slack), at least 1 MiB.
const HEAP_FREE_SHARE: u64 = 32;
const HEAP_FREE_MIN: u64 = 1 << 20;

/// Start the reclaimer for `fs` (nothing to do without a pager).
pub fn start(fs: &Arc<Fs>) -> std::io::Result<()> {
    if fs.pager_stats().is_none() {
        return Ok(());
    }
    let fs = Arc::downgrade(fs);
    std::thread::Builder::new().name("memfs-reclaim".into()).spawn(move || {
        let mut heap = HeapTrim::new();
        while let Some(fs) = fs.upgrade() {
            if !fs.reclaim_ahead(IDLE_CHECK) {
                break;
            }
            // Pages left RAM: give back what their freed slots held, and
            // what the buffers of page-ins and page-outs left in the heap.
            crate::core::arena::trim_if_slack();
            let ceiling = fs.ram_ceiling();
            if ceiling > 0 {
                heap.maybe((ceiling / HEAP_FREE_SHARE).max(HEAP_FREE_MIN));
            }
        }
    })?;
    Ok(())
}
