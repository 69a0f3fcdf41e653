//! Reference-model test of the pager (no mount): random writes, reads,
//! truncates, hole punches and zero-ranges on a few files, against a plain
//! byte-vector model, with a RAM ceiling of a few pages so that eviction,
//! compression, write-back and page-in happen on almost every operation.
//! Every read must return the model's bytes; at the end the per-tier
//! accounting must be back to zero once the files are gone. Runs for each
//! codec (lz4, zstd, off) with a backing store in a temporary directory,
//! and once without a backing store. proptest shrinks a failure.

use memfs::core::pager::backing::Backing;
use memfs::core::pager::codec::Codec;
use memfs::core::pager::{Pager, PagerConfig};
use memfs::core::{Caller, FallocMode, Fs, FsConfig, FsError, Ino, SetAttr, ROOT_INO};
use proptest::prelude::*;
use std::sync::Arc;

const ME: Caller = Caller { uid: 0, gid: 0, pid: 0 };
const PAGE: u64 = 4096;
const FILES: usize = 3;
const RAM_PAGES: u64 = 6;

#[derive(Clone, Debug)]
enum Op {
    /// file, offset, length, content kind (0 text, 1 noise, 2 zeros), seed
    Write(u8, u32, u16, u8, u8),
    Read(u8, u32, u16),
    Truncate(u8, u32),
    Punch(u8, u32, u16),
    ZeroRange(u8, u32, u16),
}

/// Offsets near the start of a file or a megabyte further: reads that
/// jump between the two are random (more than 64 pages from the last one),
/// and read their misses through (pager/admit.rs); the others are
/// sequential and make them resident.
fn at(near: u32) -> impl Strategy<Value = u32> {
    (0..near, any::<bool>()).prop_map(|(o, far)| if far { o + 1_000_000 } else { o })
}

fn op() -> impl Strategy<Value = Op> {
    let f = 0u8..FILES as u8;
    prop_oneof![
        4 => (f.clone(), at(120_000), 1u16..20_000, 0u8..3, any::<u8>()).prop_map(|(f, o, l, k, s)| Op::Write(f, o, l, k, s)),
        4 => (f.clone(), at(130_000), 1u16..30_000).prop_map(|(f, o, l)| Op::Read(f, o, l)),
        1 => (f.clone(), at(130_000)).prop_map(|(f, s)| Op::Truncate(f, s)),
        1 => (f.clone(), at(120_000), 1u16..20_000).prop_map(|(f, o, l)| Op::Punch(f, o, l)),
        1 => (f, at(120_000), 1u16..20_000).prop_map(|(f, o, l)| Op::ZeroRange(f, o, l)),
    ]
}

fn content(kind: u8, seed: u8, len: usize) -> Vec<u8> {
    match kind {
        0 => b"the quick brown fox pages out to the backing store; "
            .iter()
            .cycle()
            .skip(seed as usize)
            .take(len)
            .copied()
            .collect(),
        1 => {
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(seed);
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        }
        _ => vec![0; len],
    }
}

fn mount(codec: Codec, backing: bool) -> (Fs, Arc<Pager>) {
    mount_ra(codec, backing, 0)
}

fn mount_ra(codec: Codec, backing: bool, readahead: u64) -> (Fs, Arc<Pager>) {
    let backing = backing.then(|| Backing::open(&std::env::temp_dir()).unwrap());
    let pager = Arc::new(Pager::new(PagerConfig { ram: RAM_PAGES * PAGE, codec, backing, readahead }));
    let mut cfg = FsConfig::with_limits(0, 0);
    cfg.pager = Some(pager.clone());
    (Fs::new(cfg), pager)
}

fn run(codec: Codec, backing: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    // Readahead on for the runs with a backing store: it must not change a byte.
    let (fs, pager) = mount_ra(codec, backing, if backing { 4 } else { 0 });
    let inos: Vec<Ino> = (0..FILES)
        .map(|i| fs.mknod(ROOT_INO, format!("f{i}").as_bytes(), libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino)
        .collect();
    let mut model: Vec<Vec<u8>> = vec![vec![]; FILES];
    for op in ops {
        match *op {
            Op::Write(f, off, len, kind, seed) => {
                let data = content(kind, seed, len as usize);
                let m = &mut model[f as usize];
                match fs.write(inos[f as usize], u64::from(off), &data, &ME) {
                    Ok(n) => {
                        let end = off as usize + n;
                        if m.len() < end {
                            m.resize(end, 0);
                        }
                        m[off as usize..end].copy_from_slice(&data[..n]);
                        // Without a backing store incompressible data may not fit.
                        prop_assert!(n == data.len() || !backing, "short write with a backing store");
                    }
                    Err(FsError::NoSpace) => prop_assert!(!backing, "ENOSPC with a backing store"),
                    Err(e) => prop_assert!(false, "write: {e}"),
                }
            }
            Op::Read(f, off, len) => {
                let got = fs.read(inos[f as usize], u64::from(off), u32::from(len)).unwrap();
                let m = &model[f as usize];
                let from = (off as usize).min(m.len());
                let to = (off as usize + len as usize).min(m.len());
                prop_assert_eq!(&got[..], &m[from..to], "read of file {} at {}", f, off);
            }
            Op::Truncate(f, size) => {
                let req = SetAttr { size: Some(u64::from(size)), ..Default::default() };
                fs.setattr(inos[f as usize], &req, &ME).unwrap();
                model[f as usize].resize(size as usize, 0);
            }
            Op::Punch(f, off, len) | Op::ZeroRange(f, off, len) => {
                let punch = matches!(op, Op::Punch(..));
                let mode = FallocMode { keep_size: punch, punch_hole: punch, zero_range: !punch };
                let r = fs.fallocate(inos[f as usize], u64::from(off), u64::from(len), mode);
                if r == Err(FsError::NoSpace) {
                    continue;
                }
                r.unwrap();
                let m = &mut model[f as usize];
                let end = off as usize + len as usize;
                if !punch && m.len() < end {
                    m.resize(end, 0);
                }
                let to = end.min(m.len());
                if (off as usize) < to {
                    m[off as usize..to].fill(0);
                }
            }
        }
        let s = pager.stats();
        // A page-in may pass the ceiling by the pages of one request.
        prop_assert!(s.ram_bytes() <= (RAM_PAGES + 16) * PAGE, "ram {} over the ceiling", s.ram_bytes());
    }
    for (f, m) in model.iter().enumerate() {
        let got = fs.read(inos[f], 0, m.len() as u32 + 10).unwrap();
        prop_assert!(got == *m, "final contents of file {}", f);
    }
    for (i, ino) in inos.iter().enumerate() {
        fs.unlink(ROOT_INO, format!("f{i}").as_bytes()).unwrap();
        fs.forget(*ino, 1); // the reference mknod handed to the "kernel"
    }
    let s = pager.stats();
    prop_assert_eq!((s.resident_pages, s.resident_bytes, s.compressed_pages, s.compressed_bytes), (0, 0, 0, 0));
    prop_assert_eq!(s.backing_pages, 0);
    prop_assert_eq!((s.checksum_errors, s.io_errors), (0, 0));
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pager_matches_model_lz4(ops in prop::collection::vec(op(), 1..120)) {
        run(Codec::Lz4, true, &ops)?;
    }

    #[test]
    fn pager_matches_model_zstd(ops in prop::collection::vec(op(), 1..120)) {
        run(Codec::Zstd(3), true, &ops)?;
    }

    #[test]
    fn pager_matches_model_uncompressed(ops in prop::collection::vec(op(), 1..120)) {
        run(Codec::Off, true, &ops)?;
    }

    #[test]
    fn pager_matches_model_without_backing(ops in prop::collection::vec(op(), 1..120)) {
        run(Codec::Lz4, false, &ops)?;
    }
}

/// Pages really move: a file of 40 pages under a 6-page ceiling ends up
/// mostly out of RAM, and reads it back through page-ins.
#[test]
fn a_file_larger_than_the_ceiling_is_paged_out_and_back() {
    let (fs, pager) = mount(Codec::Lz4, true);
    let ino = fs.mknod(ROOT_INO, b"big", libc::S_IFREG | 0o644, 0, 0, &ME).unwrap().ino;
    let data: Vec<u8> = (0..40).flat_map(|i| content((i % 2) as u8, i as u8, PAGE as usize)).collect();
    assert_eq!(fs.write(ino, 0, &data, &ME).unwrap(), data.len());
    let s = pager.stats();
    assert!(s.ram_bytes() <= RAM_PAGES * PAGE, "{s:?}");
    assert!(s.backing_pages > 0 && s.evictions >= 34, "{s:?}");
    assert_eq!(fs.read(ino, 0, data.len() as u32).unwrap(), data);
    assert!(pager.stats().page_ins >= 34);
    let (ram, zip, disk) = fs.tiers(ino).unwrap();
    assert_eq!(ram + zip + disk, 40);
}
