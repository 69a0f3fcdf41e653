//! POSIX ACLs in their xattr form (`system.posix_acl_access` / `_default`).
//!
//! The kernel enforces ACLs (the mount uses FUSE_POSIX_ACL with
//! default_permissions) and validates an ACL before sending it; the file
//! system keeps them and does what fs/posix_acl.c does for tmpfs: derive
//! the mode from an access ACL (and drop an ACL the mode expresses fully),
//! rewrite the ACL on chmod, and apply a directory's default ACL to what is
//! created in it. Owns the byte format and these three rules only.

use super::error::{FsError, FsResult};
use super::types::mode::{S_IRWXG, S_IRWXO, S_IRWXU};

pub const ACCESS: &[u8] = b"system.posix_acl_access";
pub const DEFAULT: &[u8] = b"system.posix_acl_default";

const VERSION: u32 = 2;
const USER_OBJ: u16 = 0x01;
const USER: u16 = 0x02;
const GROUP_OBJ: u16 = 0x04;
const GROUP: u16 = 0x08;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AclEntry {
    tag: u16,
    perm: u16,
    id: u32,
}

/// A parsed ACL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acl {
    entries: Vec<AclEntry>,
}

impl Acl {
    /// Parse the xattr form; EINVAL on a malformed value.
    pub fn parse(bytes: &[u8]) -> FsResult<Acl> {
        if bytes.len() < 4 || (bytes.len() - 4) % 8 != 0 {
            return Err(FsError::Invalid);
        }
        let version = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if version != VERSION {
            return Err(FsError::NotSupported);
        }
        let entries: Vec<AclEntry> = bytes[4..]
            .chunks_exact(8)
            .map(|c| AclEntry {
                tag: u16::from_le_bytes([c[0], c[1]]),
                perm: u16::from_le_bytes([c[2], c[3]]),
                id: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        let has = |t| entries.iter().filter(|e| e.tag == t).count();
        let named = has(USER) + has(GROUP);
        let valid_tags =
            entries.iter().all(|e| matches!(e.tag, USER_OBJ | USER | GROUP_OBJ | GROUP | MASK | OTHER) && e.perm <= 7);
        let required = has(USER_OBJ) == 1 && has(GROUP_OBJ) == 1 && has(OTHER) == 1;
        let mask_ok = has(MASK) == usize::from(named > 0) || (named == 0 && has(MASK) <= 1);
        let well_formed = valid_tags && required && mask_ok;
        if !entries.is_empty() && !well_formed {
            return Err(FsError::Invalid);
        }
        Ok(Acl { entries })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + 8 * self.entries.len());
        out.extend_from_slice(&VERSION.to_le_bytes());
        for e in &self.entries {
            out.extend_from_slice(&e.tag.to_le_bytes());
            out.extend_from_slice(&e.perm.to_le_bytes());
            out.extend_from_slice(&e.id.to_le_bytes());
        }
        out
    }

    /// posix_acl_equiv_mode: the permission bits this ACL implies, and
    /// whether the ACL says more than the mode can (named entries or a mask).
    pub fn equiv_mode(&self) -> (u32, bool) {
        let mut mode = 0u32;
        let mut not_equiv = false;
        for e in &self.entries {
            let p = u32::from(e.perm & 7);
            match e.tag {
                USER_OBJ => mode |= p << 6,
                GROUP_OBJ => mode |= p << 3,
                OTHER => mode |= p,
                MASK => {
                    mode = (mode & !S_IRWXG) | (p << 3);
                    not_equiv = true;
                }
                _ => not_equiv = true,
            }
        }
        (mode, not_equiv)
    }

    /// posix_acl_chmod: make the ACL agree with new permission bits.
    pub fn chmod(&mut self, mode: u32) {
        let has_mask = self.entries.iter().any(|e| e.tag == MASK);
        for e in &mut self.entries {
            match e.tag {
                USER_OBJ => e.perm = ((mode & S_IRWXU) >> 6) as u16,
                OTHER => e.perm = (mode & S_IRWXO) as u16,
                MASK => e.perm = ((mode & S_IRWXG) >> 3) as u16,
                GROUP_OBJ if !has_mask => e.perm = ((mode & S_IRWXG) >> 3) as u16,
                _ => {}
            }
        }
    }

    /// posix_acl_create_masq: restrict this (inherited default) ACL by the
    /// requested mode; returns the new permission bits and whether the
    /// resulting ACL must be kept (it says more than the mode).
    pub fn create_masq(&mut self, mode: u32) -> (u32, bool) {
        let mut m = mode & 0o777;
        let mut not_equiv = false;
        let has_mask = self.entries.iter().any(|e| e.tag == MASK);
        for e in &mut self.entries {
            let p = u32::from(e.perm);
            match e.tag {
                USER_OBJ => {
                    let np = p & (m >> 6);
                    e.perm = np as u16;
                    m &= (np << 6) | !S_IRWXU;
                }
                USER | GROUP => not_equiv = true,
                OTHER => {
                    let np = p & m & S_IRWXO;
                    e.perm = np as u16;
                    m &= np | !S_IRWXO;
                }
                MASK => not_equiv = true,
                _ => {}
            }
        }
        let group_tag = if has_mask { MASK } else { GROUP_OBJ };
        if let Some(e) = self.entries.iter_mut().find(|e| e.tag == group_tag) {
            let np = u32::from(e.perm) & ((m >> 3) & 7);
            e.perm = np as u16;
            m &= (np << 3) | !S_IRWXG;
        }
        ((mode & !0o777) | (m & 0o777), not_equiv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(entries: &[(u16, u16, u32)]) -> Acl {
        Acl { entries: entries.iter().map(|&(tag, perm, id)| AclEntry { tag, perm, id }).collect() }
    }

    #[test]
    fn roundtrip_and_validation() {
        let a = acl(&[
            (USER_OBJ, 7, u32::MAX),
            (USER, 5, 1000),
            (GROUP_OBJ, 5, u32::MAX),
            (MASK, 5, u32::MAX),
            (OTHER, 0, u32::MAX),
        ]);
        assert_eq!(Acl::parse(&a.to_bytes()).unwrap(), a);
        let missing_mask = acl(&[(USER_OBJ, 7, 0), (USER, 5, 1000), (GROUP_OBJ, 5, 0), (OTHER, 0, 0)]);
        assert_eq!(Acl::parse(&missing_mask.to_bytes()), Err(FsError::Invalid));
        assert_eq!(Acl::parse(&[2, 0, 0, 0, 1]), Err(FsError::Invalid));
    }

    #[test]
    fn equiv_mode_uses_mask_for_group_bits() {
        let a = acl(&[(USER_OBJ, 6, 0), (USER, 7, 1000), (GROUP_OBJ, 7, 0), (MASK, 4, 0), (OTHER, 1, 0)]);
        assert_eq!(a.equiv_mode(), (0o641, true));
        let plain = acl(&[(USER_OBJ, 6, 0), (GROUP_OBJ, 4, 0), (OTHER, 4, 0)]);
        assert_eq!(plain.equiv_mode(), (0o644, false));
    }

    #[test]
    fn chmod_rewrites_mask_not_group() {
        let mut a = acl(&[(USER_OBJ, 7, 0), (USER, 7, 1000), (GROUP_OBJ, 7, 0), (MASK, 7, 0), (OTHER, 7, 0)]);
        a.chmod(0o640);
        assert_eq!(a.equiv_mode().0, 0o640);
        assert_eq!(a.entries[2].perm, 7, "group_obj keeps its perms when a mask exists");
    }

    #[test]
    fn create_masq_restricts_by_mode() {
        let mut a = acl(&[(USER_OBJ, 7, 0), (USER, 7, 1000), (GROUP_OBJ, 5, 0), (MASK, 7, 0), (OTHER, 5, 0)]);
        let (mode, keep) = a.create_masq(0o100_644);
        assert!(keep);
        assert_eq!(mode, 0o100_644);
        assert_eq!(a.equiv_mode().0, 0o644);
    }
}
