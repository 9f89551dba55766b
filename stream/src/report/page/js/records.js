// Rebuilds every space's state at a time from the record bytes, as src/report/decode.rs does
// (docs/report.md, "Records"). The state at T is the `replay --at T` rule: after every record
// with t <= T (records without a time apply in order), from the last keyframe with t <= T.
(function (M) {
  const KIND = { PAGE_SIZE: 0, SPACE: 1, STRING: 2, PAGES: 3, RANGE: 4, CREATE: 5, LIVE: 6, ENDED: 7, KEYFRAME: 8 };
  M.MAP_KINDS = ["anon", "heap", "stack", "shmem", "file", "hugetlb"];

  /** Removes every range of sorted `list` ({start, end, ...}) within `[a, b)`, keeping the
   * parts outside it. */
  function removeWithin(list, a, b) {
    const i = M.lowerBound(list, (m) => m.end > a);
    const keep = [];
    let j = i;
    for (; j < list.length && list[j].start < b; j++) {
      const m = list[j];
      if (m.start < a) keep.push(Object.assign({}, m, { end: a }));
      if (m.end > b) keep.push(Object.assign({}, m, { start: b }));
    }
    list.splice(i, j - i, ...keep);
  }

  /** Inserts `m` into a hole of sorted `list`, merging with neighbours it touches that are
   * `same` (as a RangeMap does). */
  function insertInto(list, m, same) {
    let i = M.lowerBound(list, (x) => x.start >= m.start);
    if (i > 0 && list[i - 1].end === m.start && same(list[i - 1], m)) {
      i -= 1;
      list[i].end = m.end;
    } else {
      list.splice(i, 0, m);
    }
    if (i + 1 < list.length && list[i + 1].start === list[i].end && same(list[i], list[i + 1])) {
      list[i].end = list[i + 1].end;
      list.splice(i + 1, 1);
    }
  }

  const sameSite = (x, y) => x.site === y.site;

  /** A space as the records left it: mappings in address order, page runs, peak, liveness,
   * and the call site of each range made by one (`run --stacks`). */
  class Space {
    constructor(id, stamp) {
      this.id = id;
      // The byte offset of the last record (or keyframe) that changed it: the same stamp means
      // the same state, whichever decoder read it (views reuse what they drew for it).
      this.stamp = stamp;
      this.live = false;
      this.mappings = []; // {start, end, kind, tracked, prot, path, seq, t, tid}
      this.sites = []; // {start, end, site}, in address order
      this.pages = new M.RunSet();
      this.peak = 0;
    }

    get resident() {
      return this.pages.resident;
    }

    copyFrom(other) {
      this.mappings = other.mappings.map((m) => Object.assign({}, m));
      this.sites = other.sites.map((p) => Object.assign({}, p));
      this.pages = other.pages.clone();
    }

    /** Sets the sites of `[a, b)` to `pieces` ({start, end, site}, in address order). */
    setSites(a, b, pieces) {
      removeWithin(this.sites, a, b);
      for (const p of pieces) insertInto(this.sites, p, sameSite);
    }

    /** `[site, bytes]` of the ranges within `[a, b)` that have a site, in address order. */
    sitesIn(a, b) {
      const out = [];
      for (let i = M.lowerBound(this.sites, (p) => p.end > a); i < this.sites.length && this.sites[i].start < b; i++) {
        const p = this.sites[i];
        out.push([p.site, Math.min(p.end, b) - Math.max(p.start, a)]);
      }
      return out;
    }

    /** Sets the pages of `[a, b)`; the peak follows. */
    setPages(a, b, runs) {
      this.pages.set(a, b, runs);
      if (this.pages.resident > this.peak) this.peak = this.pages.resident;
    }

    /** The space as `replay --at T --json` lists it (pages null where untracked). */
    describe(page) {
      return {
        space: this.id,
        resident_bytes: this.resident,
        peak_resident_bytes: this.peak,
        mappings: this.mappings.map((m) => {
          let resident = null, zero = null, untouched = null;
          if (m.tracked) {
            const [rb, zb] = this.pages.count(m.start, m.end);
            resident = Math.floor(rb / page);
            zero = Math.floor(zb / page);
            untouched = Math.max(0, Math.floor((m.end - m.start) / page) - resident);
          }
          return {
            start: m.start, end: m.end, kind: m.kind, prot: m.prot, path: m.path,
            tracked: m.tracked, resident_pages: resident, zero_pages: zero,
            untouched_pages: untouched, made_seq: m.seq, made_t_ns: m.t, made_tid: m.tid,
          };
        }),
      };
    }

    /** Removes every mapping within `[a, b)`, keeping the parts outside it. */
    removeMappings(a, b) {
      removeWithin(this.mappings, a, b);
    }

    /** Inserts `m` into a hole, merging with equal neighbours it touches (as a RangeMap does). */
    insertMapping(m) {
      insertInto(this.mappings, m, sameMapping);
    }
  }

  function sameMapping(x, y) {
    return x.kind === y.kind && x.tracked === y.tracked && x.prot === y.prot && x.path === y.path &&
      x.seq === y.seq && x.t === y.t && x.tid === y.tid;
  }

  /** Decodes records in order from a record boundary (0 or a keyframe's offset). */
  class Decoder {
    constructor(bytes, offset) {
      this.r = new M.Reader(bytes, offset);
      this.page = 4096; // the deltas' bases, as src/report/wire.rs's Cursor
      this.tBase = 0;
      this.startBase = 0;
      this.space = null;
      this.strings = [];
      this.spaces = new Map();
      this.lastT = 0; // the time of the last timed record applied
      this.target = -1; // the T of the last advance: every record with t <= target is applied
    }

    string(id) {
      if (id >= this.strings.length) this.r.fail("unknown string id " + id);
      return this.strings[id];
    }

    /** The space the records are about, stamped as changed by the record at `at`. */
    current(at) {
      if (this.space === null) this.r.fail("a record before any SPACE record");
      let s = this.spaces.get(this.space);
      if (!s) this.spaces.set(this.space, (s = new Space(this.space)));
      s.stamp = at;
      return s;
    }

    dt() {
      this.tBase += this.r.u();
      return this.tBase;
    }

    start() {
      const r = this.r;
      const v = r.i();
      const odd = Math.abs(v % 2);
      const q = Math.floor(v / 2), rem = odd ? r.u() : 0;
      let s = this.startBase + q * this.page + rem;
      if (s < 0 || s > Number.MAX_SAFE_INTEGER) {
        // Past 2^53 (the vsyscall page sits at 0xffffffffff600000) the u64 wraps, as in Rust.
        const big = BigInt(this.startBase) + BigInt(q) * BigInt(this.page) + BigInt(rem);
        s = Number(BigInt.asUintN(64, big));
      }
      this.startBase = s;
      return s;
    }

    /** Page runs covering `[a, a+len)`: flat [start, end, state] of the resident ones. */
    runs(a, len) {
      const r = this.r, page = this.page, out = [];
      let at = a;
      const end = a + len;
      while (at < end) {
        const v = r.u();
        const state = v % 4;
        const odd = Math.floor(v / 4) % 2;
        const n = Math.floor(v / 8) * page + (odd ? r.u() : 0);
        if (state > 2 || n === 0 || at + n > end) r.fail("a bad page run");
        if (state !== 0) {
          const k = out.length;
          if (k && out[k - 2] === at && out[k - 1] === state) out[k - 2] = at + n;
          else out.push(at, at + n, state);
        }
        at += n;
      }
      return out;
    }

    /** The mappings of a record's pieces, from `a`. */
    pieces(a) {
      const r = this.r, page = this.page, out = [];
      let at = a;
      const n = r.u();
      for (let q = 0; q < n; q++) {
        const begin = at + r.len(page);
        const len = r.len(page);
        const flags = r.u();
        const prot = this.string(r.u());
        const pathId = r.u();
        const seq = r.u(), t = r.u(), tid = r.i();
        const kind = M.MAP_KINDS[Math.floor(flags / 2)];
        if (kind === undefined) r.fail("unknown mapping kind " + Math.floor(flags / 2));
        at = begin + len;
        if (len > 0) {
          out.push({
            start: begin, end: at, kind, tracked: flags % 2 === 1, prot,
            path: pathId === 0 ? null : this.string(pathId - 1), seq, t, tid,
          });
        }
      }
      return out;
    }

    /** A record's site pieces, from `a`: {start, end, site}. */
    sitePieces(a) {
      const r = this.r, page = this.page, out = [];
      let at = a;
      const n = r.u();
      for (let q = 0; q < n; q++) {
        const begin = at + r.len(page);
        at = begin + r.len(page);
        const site = r.u();
        if (at > begin) out.push({ start: begin, end: at, site });
      }
      return out;
    }

    /** Applies records up to the first with a time after `T` (left unread). */
    advanceTo(T) {
      const r = this.r, bytes = r.bytes;
      while (r.at < bytes.length) {
        const at = r.at, tBase = this.tBase;
        const kind = r.byte();
        if (kind >= KIND.PAGES && kind <= KIND.ENDED) {
          const t = this.dt();
          if (t > T) { r.at = at; this.tBase = tBase; break; }
          this.lastT = t;
        } else if (kind === KIND.KEYFRAME) {
          const t = r.u();
          if (t > T) { r.at = at; break; }
          this.lastT = t;
          this.keyframe(t, at);
          continue;
        }
        this.apply(kind, at);
      }
      this.target = T;
    }

    /** The time of the next timed record (null at the end). */
    nextT() {
      const save = [this.r.at, this.tBase, this.startBase, this.space, this.strings.length, this.page];
      const bytes = this.r.bytes;
      let t = null;
      try {
        while (this.r.at < bytes.length) {
          const kind = this.r.byte();
          if (kind >= KIND.PAGES && kind <= KIND.ENDED) { t = this.dt(); break; }
          if (kind === KIND.KEYFRAME) { t = this.r.u(); break; }
          this.apply(kind, -1);
        }
      } finally {
        [this.r.at, this.tBase, this.startBase, this.space] = save;
        this.strings.length = save[4];
        this.page = save[5];
      }
      return t;
    }

    /** A record's fields after its kind (and time) byte, applied to the state; the record
     * starts at byte `at`. */
    apply(kind, at) {
      const r = this.r;
      switch (kind) {
        case KIND.PAGE_SIZE:
          this.page = Math.max(2, r.u());
          break;
        case KIND.SPACE:
          this.space = r.u();
          break;
        case KIND.STRING:
          this.strings.push(r.str());
          break;
        case KIND.PAGES: {
          const a = this.start();
          const len = r.len(this.page);
          const runs = this.runs(a, len);
          this.current(at).setPages(a, a + len, runs);
          break;
        }
        case KIND.RANGE: {
          const a = this.start();
          const len = r.len(this.page);
          const maps = this.pieces(a);
          const runs = this.runs(a, len);
          const sites = this.sitePieces(a);
          const s = this.current(at);
          s.removeMappings(a, a + len);
          for (const m of maps) s.insertMapping(m);
          s.setPages(a, a + len, runs);
          s.setSites(a, a + len, sites);
          break;
        }
        case KIND.CREATE: {
          const id = r.u();
          const copy = r.u();
          const was = this.spaces.get(id);
          const s = new Space(id, at);
          s.live = was ? was.live : false;
          const parent = copy === 0 ? null : this.spaces.get(copy - 1);
          if (parent) s.copyFrom(parent);
          s.peak = s.resident;
          this.spaces.set(id, s);
          break;
        }
        case KIND.LIVE: {
          const id = r.u();
          let s = this.spaces.get(id);
          if (!s) this.spaces.set(id, (s = new Space(id)));
          s.live = true;
          s.stamp = at;
          break;
        }
        case KIND.ENDED: {
          const id = r.u();
          const was = this.spaces.get(id);
          const s = new Space(id, at);
          s.peak = was ? was.peak : 0;
          this.spaces.set(id, s);
          break;
        }
        default:
          r.at -= 1;
          r.fail("unknown record kind " + kind);
      }
    }

    /** A keyframe's body after its time (it starts at byte `at`): the whole state, string
     * table and bases anew. */
    keyframe(t, at) {
      const r = this.r;
      this.page = Math.max(2, r.u());
      this.tBase = t;
      this.startBase = 0;
      this.space = null;
      this.strings = [];
      this.spaces = new Map();
      const ns = r.u();
      for (let q = 0; q < ns; q++) this.strings.push(r.str());
      const n = r.u();
      for (let q = 0; q < n; q++) {
        const s = new Space(r.u(), at);
        s.live = r.u() === 1;
        const peak = r.u();
        const a = r.u();
        const len = r.len(this.page);
        for (const m of this.pieces(a)) s.insertMapping(m);
        s.pages = M.RunSet.from(this.runs(a, len));
        s.setSites(a, a + len, this.sitePieces(a));
        s.peak = peak;
        this.spaces.set(s.id, s);
      }
    }
  }

  /** The state at any time, reusing the last decoder when it can (forward, or the same state). */
  class Timeline {
    constructor(bytes, keyframes) {
      this.bytes = bytes;
      this.keyframes = keyframes || []; // [t_ns, record index, byte offset], ascending
      this.dec = null;
    }

    /** The decoder holding the state at `T`. */
    at(T) {
      let k = -1;
      for (let lo = 0, hi = this.keyframes.length; lo < hi;) {
        const mid = (lo + hi) >>> 1;
        if (this.keyframes[mid][0] <= T) { k = mid; lo = mid + 1; } else hi = mid;
      }
      // Live mode: a keyframe the bytes have not reached yet cannot be read from.
      while (k >= 0 && this.keyframes[k][2] >= this.bytes.length) k--;
      const offset = k < 0 ? 0 : this.keyframes[k][2];
      const d = this.dec;
      const reusable = d && (T >= d.target ? offset <= d.r.at : d.lastT <= T);
      if (!reusable) this.dec = new Decoder(this.bytes, offset);
      // At the same T again it reads on all the same: live mode may have appended records.
      if (!reusable || T >= this.dec.target) this.dec.advanceTo(T);
      else this.dec.target = T;
      return this.dec;
    }

    /** Records appended (live mode): the decoder reads on from where it stopped. */
    append(bytes) {
      // Room grows by doubling: a run's updates copy its bytes a few times, not once each.
      const len = this.bytes.length, need = len + bytes.length;
      if (!this.room || need > this.room.length) {
        const room = new Uint8Array(Math.max(need, 2 * len, 1 << 16));
        room.set(this.bytes);
        this.room = room;
      }
      this.room.set(bytes, len);
      this.bytes = this.room.subarray(0, need);
      if (this.dec) this.dec.r.bytes = this.bytes;
    }
  }

  M.Space = Space;
  M.Decoder = Decoder;
  M.Timeline = Timeline;
})(MEVI);
