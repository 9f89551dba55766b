//! The byte-level pieces of the record stream (docs/report.md, "Records"): LEB128 varints,
//! zigzag deltas, and addresses and lengths counted in pages with an exact remainder, so the
//! common page-aligned case costs no bytes for the low 12 bits and an odd one is still exact.

/// Appends `v` as an unsigned LEB128 varint.
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-encoded (small negatives stay small).
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, ((v << 1) ^ (v >> 63)) as u64);
}

/// Appends a byte count (an address delta's magnitude or a length) as `pages << 1 | odd`,
/// followed by the remainder when `odd`.
pub fn put_len(out: &mut Vec<u8>, bytes: u64, page: u64) {
    let rem = bytes % page;
    put_u64(out, (bytes / page) << 1 | u64::from(rem != 0));
    if rem != 0 {
        put_u64(out, rem);
    }
}

/// Appends a string as its length and UTF-8 bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Reads the record stream: every read fails with where and what, never panics, on bytes that
/// end early or do not parse.
pub struct Reader<'a> {
    bytes: &'a [u8],
    pub at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8], at: usize) -> Self {
        Reader { bytes, at }
    }

    pub fn done(&self) -> bool {
        self.at >= self.bytes.len()
    }

    pub fn byte(&mut self) -> Result<u8, String> {
        let b = *self
            .bytes
            .get(self.at)
            .ok_or_else(|| format!("records end early at byte {}", self.at))?;
        self.at += 1;
        Ok(b)
    }

    pub fn u64(&mut self) -> Result<u64, String> {
        let start = self.at;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint at byte {start} is longer than 64 bits"))
    }

    pub fn i64(&mut self) -> Result<i64, String> {
        let z = self.u64()?;
        Ok((z >> 1) as i64 ^ -((z & 1) as i64))
    }

    pub fn len(&mut self, page: u64) -> Result<u64, String> {
        let v = self.u64()?;
        let rem = if v & 1 == 1 { self.u64()? } else { 0 };
        (v >> 1)
            .checked_mul(page)
            .and_then(|b| b.checked_add(rem))
            .ok_or_else(|| format!("length before byte {} overflows", self.at))
    }

    pub fn str(&mut self) -> Result<String, String> {
        let n = self.u64()? as usize;
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| format!("string at byte {} runs past the end", self.at))?;
        let s = std::str::from_utf8(&self.bytes[self.at..end])
            .map_err(|e| format!("string at byte {}: {e}", self.at))?;
        self.at = end;
        Ok(s.to_string())
    }
}

/// What both sides carry from one record to the next: the deltas' bases.
#[derive(Clone, Copy, Debug)]
pub struct Cursor {
    pub page: u64,
    pub t_ns: u64,
    pub start: u64,
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor {
            page: 4096,
            t_ns: 0,
            start: 0,
        }
    }
}

impl Cursor {
    pub fn put_dt(&mut self, out: &mut Vec<u8>, t_ns: u64) {
        put_u64(out, t_ns.saturating_sub(self.t_ns));
        self.t_ns = self.t_ns.max(t_ns);
    }

    /// The start as a zigzag delta from the last, in pages with an exact remainder.
    pub fn put_start(&mut self, out: &mut Vec<u8>, start: u64) {
        let delta = start.wrapping_sub(self.start) as i64;
        let page = self.page as i64;
        let rem = delta.rem_euclid(page);
        put_i64(out, delta.div_euclid(page) * 2 + i64::from(rem != 0));
        if rem != 0 {
            put_u64(out, rem as u64);
        }
        self.start = start;
    }

    pub fn get_dt(&mut self, r: &mut Reader) -> Result<u64, String> {
        self.t_ns = self.t_ns.saturating_add(r.u64()?);
        Ok(self.t_ns)
    }

    pub fn get_start(&mut self, r: &mut Reader) -> Result<u64, String> {
        let v = r.i64()?;
        let rem = if v & 1 == 1 { r.u64()? } else { 0 };
        let delta = (v >> 1).wrapping_mul(self.page as i64) as u64;
        self.start = self.start.wrapping_add(delta).wrapping_add(rem);
        Ok(self.start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_zigzags_lengths_and_strings_read_back() {
        let mut out = Vec::new();
        let values = [0u64, 1, 127, 128, 300, u64::MAX];
        for v in values {
            put_u64(&mut out, v);
        }
        let signed = [0i64, -1, 1, -4096, i64::MAX, i64::MIN];
        for v in signed {
            put_i64(&mut out, v);
        }
        let lens = [0u64, 4096, 8192, 4097, 12, u64::MAX - 4095];
        for v in lens {
            put_len(&mut out, v, 4096);
        }
        put_str(&mut out, "/usr/lib/libc.so.6");
        let mut r = Reader::new(&out, 0);
        for v in values {
            assert_eq!(r.u64().unwrap(), v);
        }
        for v in signed {
            assert_eq!(r.i64().unwrap(), v);
        }
        for v in lens {
            assert_eq!(r.len(4096).unwrap(), v);
        }
        assert_eq!(r.str().unwrap(), "/usr/lib/libc.so.6");
        assert!(r.done());
        assert!(r.u64().is_err(), "reading past the end is an error");
    }

    #[test]
    fn a_page_aligned_length_costs_no_remainder() {
        let mut out = Vec::new();
        put_len(&mut out, 4096, 4096);
        assert_eq!(out, [2]);
    }
}
