// A space's page states as byte runs: which bytes are resident, written (1) or first touched by
// a read (2, the zero page); untouched bytes hold no run. Exact to the byte, as the model's
// range sets are. Runs live in blocks of a few hundred (flat arrays [start, end, state, ...]),
// so a one-page change costs a binary search and a short splice, not a move of the whole list.
(function (M) {
  const BLOCK = 512; // runs a block is cut into
  const MAX = 3 * 2 * BLOCK; // a block's flat length past which it is cut

  /** First run index in flat block `r` whose end is after `a`. */
  function firstEndAfter(r, a) {
    let lo = 0, hi = r.length / 3;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (r[3 * mid + 1] > a) hi = mid; else lo = mid + 1;
    }
    return lo;
  }

  /** First run index in flat block `r` whose start is at or after `b`. */
  function firstStartFrom(r, b) {
    let lo = 0, hi = r.length / 3;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (r[3 * mid] >= b) hi = mid; else lo = mid + 1;
    }
    return lo;
  }

  class RunSet {
    constructor() {
      this.blocks = [];
      this.resident = 0; // bytes in runs of either state
      this.zero = 0; // bytes in zero-page runs
    }

    clone() {
      const c = new RunSet();
      c.blocks = this.blocks.map((r) => r.slice());
      c.resident = this.resident;
      c.zero = this.zero;
      return c;
    }

    /** First block whose last run ends after `a` (`blocks.length` if none). */
    findBlock(a) {
      const B = this.blocks;
      let lo = 0, hi = B.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        const r = B[mid];
        if (r[r.length - 2] > a) hi = mid; else lo = mid + 1;
      }
      return lo;
    }

    /**
     * Sets `[a, b)` to `add`: flat `[start, end, state, ...]` runs within it, in address order
     * (state 1 or 2; what they leave out is untouched).
     */
    set(a, b, add) {
      if (!(b > a)) return;
      for (let q = 0; q < add.length; q += 3) {
        const n = add[q + 1] - add[q];
        this.resident += n;
        if (add[q + 2] === 2) this.zero += n;
      }
      const B = this.blocks;
      let x = this.findBlock(a);
      if (x === B.length) {
        // Everything held ends at or before `a`: the runs go last.
        if (add.length === 0) return;
        if (B.length === 0) B.push([]);
        x = B.length - 1;
        this.replace(x, B[x].length / 3, B[x].length / 3, add);
        return;
      }
      let first = true;
      while (x < B.length) {
        const r = B[x];
        const n = r.length / 3;
        const i = firstEndAfter(r, a);
        const j = firstStartFrom(r, b);
        const rep = [];
        if (i < j) {
          for (let q = i; q < j; q++) {
            const s = r[3 * q], e = r[3 * q + 1];
            const cut = Math.min(e, b) - Math.max(s, a);
            this.resident -= cut;
            if (r[3 * q + 2] === 2) this.zero -= cut;
          }
          if (r[3 * i] < a) rep.push(r[3 * i], a, r[3 * i + 2]);
        }
        if (first) for (let q = 0; q < add.length; q++) rep.push(add[q]);
        if (i < j && r[3 * (j - 1) + 1] > b) rep.push(b, r[3 * (j - 1) + 1], r[3 * (j - 1) + 2]);
        first = false;
        const blocks = this.replace(x, i, j, rep);
        if (j < n) break; // this block holds runs past `b`: later blocks are untouched
        x += blocks;
      }
    }

    /** Replaces runs `[i, j)` of block `x` by flat `rep`; merges equal neighbours, cuts big
     * blocks; says how many blocks now stand where block `x` was (0 when it emptied). */
    replace(x, i, j, rep) {
      const B = this.blocks;
      let r = B[x];
      if (rep.length < 3000) r.splice(3 * i, 3 * (j - i), ...rep);
      else r = B[x] = r.slice(0, 3 * i).concat(rep, r.slice(3 * j));
      // Equal neighbours touching at the edges of what came in merge, as a range set would.
      const lo = Math.max(1, i), hi = Math.min(r.length / 3 - 1, i + rep.length / 3);
      for (let q = hi; q >= lo; q--) {
        if (r[3 * q - 2] === r[3 * q] && r[3 * q - 1] === r[3 * q + 2]) {
          r[3 * q - 2] = r[3 * q + 1];
          r.splice(3 * q, 3);
        }
      }
      if (r.length === 0) {
        B.splice(x, 1);
        return 0;
      }
      if (r.length > MAX) {
        const parts = [];
        for (let q = 0; q < r.length; q += 3 * BLOCK) parts.push(r.slice(q, q + 3 * BLOCK));
        B.splice(x, 1, ...parts);
        return parts.length;
      }
      return 1;
    }

    /** Calls `f(start, end, state)` for each run overlapping `[a, b)`, clipped to it. */
    each(a, b, f) {
      const B = this.blocks;
      for (let x = this.findBlock(a); x < B.length; x++) {
        const r = B[x];
        if (r[0] >= b) return;
        for (let q = firstEndAfter(r, a); q < r.length / 3; q++) {
          const s = r[3 * q];
          if (s >= b) return;
          f(Math.max(s, a), Math.min(r[3 * q + 1], b), r[3 * q + 2]);
        }
      }
    }

    /** `[resident, zero]` bytes within `[a, b)`. */
    count(a, b) {
      let resident = 0, zero = 0;
      this.each(a, b, (s, e, k) => {
        resident += e - s;
        if (k === 2) zero += e - s;
      });
      return [resident, zero];
    }
  }

  /** A run set from flat runs in address order (a keyframe's). */
  RunSet.from = function (flat) {
    const set = new RunSet();
    let r = [];
    for (let q = 0; q < flat.length; q += 3) {
      const s = flat[q], e = flat[q + 1], k = flat[q + 2];
      const n = r.length;
      if (n && r[n - 2] === s && r[n - 1] === k) r[n - 2] = e;
      else {
        if (n >= 3 * BLOCK) { set.blocks.push(r); r = []; }
        r.push(s, e, k);
      }
      set.resident += e - s;
      if (k === 2) set.zero += e - s;
    }
    if (r.length) set.blocks.push(r);
    return set;
  };

  M.RunSet = RunSet;
})(MEVI);
