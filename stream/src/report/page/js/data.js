// The report's data: the meta (JSON) and the records (base64) from the page's own blocks, and
// what the views derive from them once (processes in tree order, labels and colours of
// spaces). Live mode appends record bytes and meta additions later, then calls `changed()`.
(function (M) {
  const FORMAT = 2; // src/report/meta.rs's FORMAT
  const D = (M.data = {
    meta: null,
    timeline: null,
    page: 4096,
    end: 0, // the last line's t_ns (at least 1, so a window is never empty)
    processes: [], // in tree order, each with `depth`
    byPid: new Map(),
    spaceInfo: new Map(), // id -> {id, label, colour, pids}
    listeners: [],
  });

  function text(id) {
    const e = document.getElementById(id);
    if (!e) throw new Error("the page has no #" + id + " block");
    return e.textContent;
  }

  /** Reads the page's data blocks; throws on a data error. */
  D.load = function () {
    const meta = JSON.parse(text("mevi-meta"));
    if (meta.format !== FORMAT) throw new Error("report format " + meta.format + " is not " + FORMAT);
    const bytes = M.fromBase64(text("mevi-records"));
    // A page served by `run --serve` gets its records from the server's stream: it is live, or
    // (opened after the run) has none inline although the meta counts them.
    const counted = (meta.records && meta.records.bytes) || 0;
    D.streamed = !!meta.live || (bytes.length === 0 && counted > 0 && /^https?:$/.test(location.protocol));
    if (!D.streamed && meta.records && meta.records.bytes != null && meta.records.bytes !== bytes.length) {
      throw new Error("records: " + bytes.length + " bytes, the meta says " + meta.records.bytes);
    }
    D.meta = meta;
    D.page = meta.page_size || 4096;
    D.timeline = new M.Timeline(bytes, (meta.records && meta.records.keyframes) || []);
    derive();
  };

  /** What tells one meta from the next: a meta comes up to 4 times a second, the same while
   * the run is idle (or sent again on a reconnection), and is then not applied at all. */
  const signature = (meta) =>
    [meta.end_ns, meta.records && meta.records.bytes, meta.live, meta.complete].join(" ");

  /** Live mode: record bytes to append and the whole meta anew (either may be missing); the
   * listeners hear `{records, meta}`: whether bytes came, and whether the meta changed. */
  D.update = function (bytes, meta) {
    const records = !!(bytes && bytes.length);
    if (records) D.timeline.append(bytes);
    const fresh = !!meta && signature(meta) !== signature(D.meta);
    if (fresh) {
      D.meta = meta;
      D.timeline.keyframes = (meta.records && meta.records.keyframes) || [];
      derive();
    }
    if (records || fresh) for (const f of D.listeners) f({ records, meta: fresh });
  };

  D.onChange = (f) => D.listeners.push(f);

  function derive() {
    const meta = D.meta;
    D.end = Math.max(1, meta.end_ns || 0);
    M.sites.load(meta);
    const procs = meta.processes || [];
    D.byPid = new Map(procs.map((p) => [p.pid, p]));
    // Tree order: each process after its parent, siblings by birth.
    const children = new Map();
    const roots = [];
    for (const p of procs) {
      if (p.ppid != null && D.byPid.has(p.ppid) && p.ppid !== p.pid) {
        if (!children.has(p.ppid)) children.set(p.ppid, []);
        children.get(p.ppid).push(p);
      } else roots.push(p);
    }
    const byBirth = (a, b) => a.born_ns - b.born_ns || a.pid - b.pid;
    D.processes = [];
    const seen = new Set();
    const walk = (p, depth) => {
      if (seen.has(p.pid)) return;
      seen.add(p.pid);
      p.depth = depth;
      D.processes.push(p);
      for (const c of (children.get(p.pid) || []).sort(byBirth)) walk(c, depth + 1);
    };
    roots.sort(byBirth).forEach((p) => walk(p, 0));
    label(procs);
    D.threadsByTid = new Map((meta.threads || []).map((t) => [t.tid, t]));
    D.spaceInfo = new Map();
    (meta.spaces || []).forEach((s, i) => {
      const pids = s.pids || [];
      const first = D.byPid.get(pids[0]);
      // A shell's space holds each child it forks until the child's exec: name a few.
      const rest = pids.slice(1, 4).join(", ") + (pids.length > 4 ? " and " + (pids.length - 4) + " more" : "");
      const who = !pids.length ? "no process" : (first ? first.label : "pid " + pids[0]) + (rest ? " (and pid " + rest + ")" : "");
      D.spaceInfo.set(s.id, { id: s.id, pids, label: "space " + s.id + " · " + who, colour: M.paletteColour(i), life: s });
    });
  }

  const base = (path) => String(path || "").split("/").pop();

  /** Each process's `label`: its pid, its program, and the argument that tells it from the
   * others of the same program (two cc1 runs by their source files): the first argument not
   * all of them have, preferring one that names a file (not an option, not `-o`'s output);
   * a process alone gets the first file it names. */
  function label(procs) {
    const byName = new Map();
    for (const p of procs) {
      p.short = base(p.name || (p.argv && p.argv[0])) || "?";
      if (!byName.has(p.short)) byName.set(p.short, []);
      byName.get(p.short).push(p);
    }
    const fileLike = (a, prev) => !a.startsWith("-") && prev !== "-o" && /[./]/.test(a) && a.length > 1;
    for (const group of byName.values()) {
      const counts = new Map();
      for (const p of group) for (const a of new Set((p.argv || []).slice(1))) counts.set(a, (counts.get(a) || 0) + 1);
      for (const p of group) {
        const args = (p.argv || []).slice(1);
        const apart = args.map((a, i) => [a, args[i - 1]]).filter(([a]) => group.length === 1 || counts.get(a) < group.length);
        let pick = apart.find(([a, prev]) => fileLike(a, prev));
        if (!pick && group.length > 1) pick = apart.find(([a, prev]) => !a.startsWith("-") && prev !== "-o") || apart[0];
        let arg = pick ? pick[0] : "";
        if (fileLike(arg, null) && !/\s/.test(arg)) arg = base(arg) || arg;
        if (arg.length > 40) arg = arg.slice(0, 39) + "…";
        p.label = "pid " + p.pid + " " + p.short + (arg ? " " + arg : "");
      }
    }
  }

  /** A space's label and colour (one the meta does not name gets a plain one). */
  D.space = function (id) {
    let s = D.spaceInfo.get(id);
    if (!s) {
      s = { id, pids: [], label: "space " + id, colour: M.paletteColour(D.spaceInfo.size), life: null };
      D.spaceInfo.set(id, s);
    }
    return s;
  };

  /** The name a thread is known by (at its exit, the last it gave itself, at its start), or null. */
  D.threadName = function (tid) {
    const t = D.threadsByTid.get(tid);
    const last = t && t.renamed && t.renamed.length ? t.renamed[t.renamed.length - 1][1] : null;
    if (t && (t.name_at_exit || last || t.name)) return t.name_at_exit || last || t.name;
    // A main thread without a name of its own goes by its program's.
    const p = D.byPid.get(tid);
    return p ? (p.name || "").split("/").pop() || null : null;
  };

  /** A level of the meta's buckets (`{first, max, last}`) in bucket i (`which` = "max" or
   * "last"); 0 outside its life. */
  D.levelAt = function (level, which, i) {
    const k = i - (level.first || 0);
    const arr = level[which];
    return k >= 0 && k < arr.length ? arr[k] : 0;
  };

  /** Whether a level has a value in any bucket of [ba, bb]. */
  D.levelWithin = function (level, ba, bb) {
    if (!level) return false;
    const first = level.first || 0;
    return first <= bb && first + level.max.length - 1 >= ba;
  };

  /** Buckets [ba, bb] under x columns [x, x+1) of a plot w wide on `scale` (M.axis or its
   * `whole`). */
  D.bucketsAt = function (x, w, scale) {
    const b = D.meta.buckets;
    const ta = scale.t(x, w), tb = scale.t(x + 1, w);
    const ba = Math.max(0, Math.floor(ta / b.width_ns));
    const bb = Math.max(ba, Math.ceil(tb / b.width_ns) - 1);
    return [ba, Math.min(bb, Math.max(0, b.n - 1))];
  };

  /** The figures the page shows as the trace gives them (never recomputed). */
  D.figures = function () {
    const meta = D.meta;
    const totals = meta.summary && meta.summary.totals;
    const tree = meta.buckets.tree;
    const treeLast = tree.last;
    let peak = totals && totals.tree_peak_resident_bytes;
    if (peak == null) peak = meta.tree_peak_resident_bytes;
    return {
      processes: (meta.processes || []).map((p) => ({
        pid: p.pid, peak_resident_bytes: p.peak_resident_bytes, resident_bytes: p.resident_bytes,
      })),
      tree_peak_resident_bytes: peak == null ? null : peak,
      final_tree_resident_bytes: treeLast && treeLast.length ? treeLast[treeLast.length - 1] : null,
    };
  };
})(MEVI);
