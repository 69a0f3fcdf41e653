//! Which files the kernel may keep in its page cache (`cache=`, and per
//! directory tree the `user.memfs.cache` extended attribute).
//!
//! Owns the policy's names and how a file's policy is found; the FUSE layer
//! turns it into OPEN reply flags. As ZFS's `primarycache`:
//! - `all`: the kernel caches file data (memfs's default, the fastest for
//!   data that is read again): each byte read may be held twice, once in
//!   memfs's tiers and once in the kernel's page cache over the mount;
//! - `metadata`: file data bypasses the kernel's page cache (direct I/O,
//!   shared mmap still allowed), so each byte is held once, in memfs's
//!   tiers, under `ram=`;
//! - `none`: as `metadata`, and attributes and names are not cached by the
//!   kernel either.
//!
//! The attribute on a directory is copied to every file and directory made
//! in it afterwards, so a build tree can be metadata-only while its sources
//! stay cached. It takes effect only on a mount with a `cache=` option:
//! only such a mount answers OPEN (the others answer ENOSYS once, which
//! spares every later open a round trip, docs/TUNABLES.md).

/// The extended attribute that sets a file's or directory tree's policy.
pub const CACHE_XATTR: &[u8] = b"user.memfs.cache";

/// A file's kernel page-cache policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachePolicy {
    All,
    Metadata,
    None,
}

impl CachePolicy {
    /// `all`, `metadata` or `none` (a trailing newline is allowed, as
    /// `setfattr -v` and shells leave one).
    pub fn parse(v: &[u8]) -> Option<CachePolicy> {
        match v.strip_suffix(b"\n").unwrap_or(v) {
            b"all" => Some(CachePolicy::All),
            b"metadata" => Some(CachePolicy::Metadata),
            b"none" => Some(CachePolicy::None),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CachePolicy::All => "all",
            CachePolicy::Metadata => "metadata",
            CachePolicy::None => "none",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in [CachePolicy::All, CachePolicy::Metadata, CachePolicy::None] {
            assert_eq!(CachePolicy::parse(p.name().as_bytes()), Some(p));
        }
        assert_eq!(CachePolicy::parse(b"metadata\n"), Some(CachePolicy::Metadata));
        assert_eq!(CachePolicy::parse(b"most"), None);
        assert_eq!(CachePolicy::parse(b""), None);
    }
}
