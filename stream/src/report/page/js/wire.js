// The byte-level pieces of the record stream (docs/report.md, "Records"; src/report/wire.rs):
// base64 to bytes, LEB128 varints read as Numbers (by multiplication: no 32-bit bit operations
// past 32 bits), zigzag, lengths in pages with an exact remainder, strings.
(function (M) {
  /** Standard base64 (with padding) to bytes. */
  M.fromBase64 = function (text) {
    text = text.replace(/\s+/g, "");
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text);
    const bin = atob(text);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  };

  const utf8 = new TextDecoder("utf-8", { fatal: true });

  /** Reads `bytes` from `at`; every read fails with where and what on bytes that end early. */
  class Reader {
    constructor(bytes, at) {
      this.bytes = bytes;
      this.at = at;
    }

    fail(what) {
      throw new Error("records: " + what + " at byte " + this.at);
    }

    byte() {
      if (this.at >= this.bytes.length) this.fail("the records end early");
      return this.bytes[this.at++];
    }

    /** An unsigned varint (exact up to 2^53). */
    u() {
      const bytes = this.bytes;
      let b = bytes[this.at++];
      if (b < 0x80) return b;
      if (b === undefined) { this.at--; this.fail("the records end early"); }
      let v = b & 0x7f, mul = 0x80;
      for (let i = 1; i < 10; i++) {
        b = bytes[this.at++];
        if (b === undefined) { this.at--; this.fail("the records end early"); }
        v += (b & 0x7f) * mul;
        if (b < 0x80) return v;
        mul *= 0x80;
      }
      this.fail("a varint longer than 64 bits");
    }

    /** A zigzag-encoded signed varint. */
    i() {
      const z = this.u();
      return z % 2 === 0 ? z / 2 : -(z + 1) / 2;
    }

    /** A byte count: `pages << 1 | odd`, then the remainder when odd. */
    len(page) {
      const v = this.u();
      const odd = v % 2;
      const pages = (v - odd) / 2;
      return pages * page + (odd ? this.u() : 0);
    }

    str() {
      const n = this.u();
      const end = this.at + n;
      if (end > this.bytes.length) this.fail("a string runs past the end");
      const s = utf8.decode(this.bytes.subarray(this.at, end));
      this.at = end;
      return s;
    }
  }
  M.Reader = Reader;
})(MEVI);
