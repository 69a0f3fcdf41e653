//! Page compression for the pager's compressed tier.
//!
//! Owns the format of a compressed page and nothing else: a tag byte (the
//! codec), the original length (u16, little endian; a page buffer may be
//! shorter than a page, see data.rs) and the codec's block. The tag makes
//! every stored page self-describing, so changing `compress=` live leaves
//! pages compressed earlier readable.

use std::fmt;

use super::super::arena::PageBuf;
use super::super::types::PAGE_SIZE;

const TAG_LZ4: u8 = 1;
const TAG_ZSTD: u8 = 2;
const HEADER: usize = 3;

/// Default zstd level (`compress=zstd`): zstd's own default.
pub const ZSTD_DEFAULT_LEVEL: i32 = 3;

/// `compress=`: how cold pages are compressed before anything touches a disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    Off,
    Lz4,
    Zstd(i32),
}

impl Codec {
    /// Parse `lz4`, `zstd`, `zstd:LEVEL` (1-19) or `off`.
    pub fn parse(v: &str) -> Result<Codec, String> {
        match v {
            "off" => Ok(Codec::Off),
            "lz4" => Ok(Codec::Lz4),
            "zstd" => Ok(Codec::Zstd(ZSTD_DEFAULT_LEVEL)),
            _ => {
                let level = v.strip_prefix("zstd:").ok_or("must be lz4, zstd, zstd:LEVEL or off")?;
                level
                    .parse()
                    .ok()
                    .filter(|l| (1..=19).contains(l))
                    .map(Codec::Zstd)
                    .ok_or_else(|| "zstd level must be a number from 1 to 19".to_string())
            }
        }
    }

    /// Compress `page`; `None` when the codec is off or the result would not
    /// save at least an eighth of the page (it then skips this tier, as
    /// zram stores such pages whole).
    pub fn compress(self, page: &[u8]) -> Option<Vec<u8>> {
        debug_assert!(page.len() <= PAGE_SIZE as usize);
        let (tag, block) = match self {
            Codec::Off => return None,
            Codec::Lz4 => (TAG_LZ4, lz4_flex::block::compress(page)),
            Codec::Zstd(level) => (TAG_ZSTD, zstd::bulk::compress(page, level).ok()?),
        };
        if HEADER + block.len() > page.len() - page.len() / 8 {
            return None;
        }
        let mut out = Vec::with_capacity(HEADER + block.len());
        out.push(tag);
        out.extend_from_slice(&(page.len() as u16).to_le_bytes());
        out.extend_from_slice(&block);
        Some(out)
    }
}

impl fmt::Display for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Codec::Off => write!(f, "off"),
            Codec::Lz4 => write!(f, "lz4"),
            Codec::Zstd(l) if *l == ZSTD_DEFAULT_LEVEL => write!(f, "zstd"),
            Codec::Zstd(l) => write!(f, "zstd:{l}"),
        }
    }
}

/// Length of the page `zipped` decompresses to.
pub fn original_len(zipped: &[u8]) -> usize {
    zipped.get(1..3).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
}

/// Decompress a page made by [`Codec::compress`] straight into an arena
/// buffer; `None` if it is corrupt.
pub fn decompress(zipped: &[u8]) -> Option<PageBuf> {
    let len = original_len(zipped);
    if zipped.len() < HEADER || len == 0 || len > PAGE_SIZE as usize {
        return None;
    }
    let block = &zipped[HEADER..];
    // A memory file's last page may be any length: its buffer is the class above.
    let mut out = PageBuf::zeroed(len.next_power_of_two().max(64));
    let n = match zipped[0] {
        TAG_LZ4 => lz4_flex::block::decompress_into(block, &mut out[..len]).ok()?,
        TAG_ZSTD => zstd::bulk::decompress_to_buffer(block, &mut out[..len]).ok()?,
        _ => return None,
    };
    (n == len).then_some(out)
}

/// `n` bytes of a xorshift stream: data no codec compresses (tests).
#[cfg(test)]
pub fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_refusal_of_incompressible_pages() {
        let text: Vec<u8> = b"memfs pages compress ".iter().cycle().take(4096).copied().collect();
        for codec in [Codec::Lz4, Codec::Zstd(3), Codec::Zstd(19)] {
            let z = codec.compress(&text).unwrap();
            assert!(z.len() < 512, "{codec}: {}", z.len());
            assert_eq!(&*decompress(&z).unwrap(), &text[..]);
            let short = codec.compress(&text[..1024]).unwrap();
            assert_eq!(decompress(&short).unwrap().len(), 1024);
            // A length that is no size class comes back in the class above, zero-padded.
            let odd = decompress(&codec.compress(&text[..1000]).unwrap()).unwrap();
            assert_eq!((odd.len(), &odd[..1000], &odd[1000..]), (1024, &text[..1000], &[0u8; 24][..]));
        }
        // A xorshift stream does not compress: the tier is skipped.
        let noise = noise(4096);
        assert_eq!(Codec::Lz4.compress(&noise), None);
        assert_eq!(Codec::Off.compress(&text), None);
    }

    #[test]
    fn corrupt_input_is_refused_not_a_panic() {
        let z = Codec::Lz4.compress(&[7u8; 4096]).unwrap();
        assert!(decompress(&z[..2]).is_none());
        assert!(decompress(&[9, 0, 16, 1, 2, 3]).is_none());
        let mut bad = z.clone();
        bad[1] = 0xff; // claims a longer page than it holds
        bad[2] = 0x0f;
        assert!(decompress(&bad).is_none());
    }

    #[test]
    fn parse_names_and_levels() {
        assert_eq!(Codec::parse("lz4"), Ok(Codec::Lz4));
        assert_eq!(Codec::parse("zstd"), Ok(Codec::Zstd(3)));
        assert_eq!(Codec::parse("zstd:9"), Ok(Codec::Zstd(9)));
        assert_eq!(Codec::parse("off"), Ok(Codec::Off));
        for bad in ["gzip", "zstd:0", "zstd:20", "zstd:", "LZ4", ""] {
            assert!(Codec::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Codec::Zstd(9).to_string(), "zstd:9");
    }
}
