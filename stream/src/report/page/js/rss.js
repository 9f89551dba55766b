// The kernel's count over the window, a strip per space: what /proc/PID/status said of its
// memory (`rss` lines) as stacked bands, anon, file, shmem and swap, with the stream's own
// resident bytes as a line over them, so that memory the stream does not follow page by page
// (file pages, shared memory, swap) shows beside what it does. From the meta's buckets.rss
// (running sums: the bands' tops are each a true largest) and buckets.spaces. Each strip has
// its own scale, written under its label. Only the strips in view are drawn (A.RowPlot).
(function (M) {
  const A = M.axis;
  const ROW = 60;
  const KINDS = ["anon", "file", "shmem", "swap"];
  let plot, note, rows = [];

  /** A space's running sums as levels (`{first, max, last}`): each `null` is the one below
   * it, and `max` is `last` but where `peaks` (`[k, max]`) says otherwise. */
  function sums(levels) {
    const out = [];
    levels.forEach((l, k) => {
      if (!l) { out.push(out[k - 1]); return; }
      const max = l.last.slice();
      for (const [i, v] of l.peaks || []) max[i] = v;
      out.push({ first: l.first || 0, max, last: l.last });
    });
    return out;
  }

  function build() {
    const b = M.data.meta.buckets || {};
    const rss = b.rss || {};
    rows = (M.data.meta.spaces || [])
      .filter((s) => rss[s.id])
      .map((s) => ({ life: s, info: M.data.space(s.id), sums: sums(rss[s.id]), resident: (b.spaces || {})[s.id] || null }));
    note.hidden = rows.length > 0;
  }

  /** A strip's figures under column x: each running sum's largest, the stream's largest, and
   * whether either curve is there at all. */
  function column(r, x, w) {
    const [ba, bb] = M.data.bucketsAt(x, w, A);
    const tops = [0, 0, 0, 0];
    let resident = 0;
    for (let i = ba; i <= bb; i++) {
      r.sums.forEach((l, k) => { tops[k] = Math.max(tops[k], M.data.levelAt(l, "max", i)); });
      if (r.resident) resident = Math.max(resident, M.data.levelAt(r.resident, "max", i));
    }
    return {
      ba, bb, tops, resident,
      kernel: M.data.levelWithin(r.sums[0], ba, bb),
      stream: M.data.levelWithin(r.resident, ba, bb),
    };
  }

  /** The four figures at the end of bucket i (0 outside the curve). */
  function figuresAt(r, i) {
    const f = {};
    let below = 0;
    KINDS.forEach((kind, k) => {
      const sum = M.data.levelAt(r.sums[k], "last", i);
      f[kind] = sum - below;
      below = sum;
    });
    return f;
  }

  function paintRow(g, w, i, y) {
    const r = rows[i];
    const cols = [];
    let vmax = 1;
    for (let x = A.left; x < w - A.right; x++) {
      const c = column(r, x, w);
      cols.push(c);
      vmax = Math.max(vmax, c.tops[3], c.resident);
    }
    vmax *= 1.08;
    const top = y + 4, bottom = y + ROW - 4;
    const Y = (v) => bottom - ((bottom - top) * v) / vmax;
    g.save();
    g.beginPath();
    g.rect(0, y, A.left - 6, ROW);
    g.clip();
    g.font = "12px system-ui, sans-serif";
    g.textBaseline = "middle";
    g.textAlign = "left";
    g.fillStyle = "#2b333d";
    const pids = r.life.pids || [];
    const first = M.data.byPid.get(pids[0]);
    g.fillText("space " + r.life.id + (pids.length ? " · pid " + pids[0] + (pids.length > 1 ? " +" + (pids.length - 1) : "") : ""), 6, y + 12);
    g.fillText(first ? first.label.replace(/^pid \d+ /, "") : "", 6, y + 28);
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b7480";
    g.fillText("scale " + M.size(Math.round(vmax)), 6, y + 44);
    g.restore();
    g.fillStyle = "#eef0f3";
    g.fillRect(A.left, Math.round(bottom) + 0.5, w - A.left - A.right, 1);
    cols.forEach((c, k) => {
      if (!c.kernel) return;
      let below = 0;
      c.tops.forEach((sum, kind) => {
        if (sum > below) {
          g.fillStyle = M.colour.rss[KINDS[kind]];
          const y0 = Y(below), y1 = Y(sum);
          g.fillRect(A.left + k, y1, 1, y0 - y1);
        }
        below = Math.max(below, sum);
      });
    });
    g.strokeStyle = M.colour.total;
    g.lineWidth = 1.25;
    g.beginPath();
    let drawing = false;
    cols.forEach((c, k) => {
      if (!c.stream) { drawing = false; return; }
      const yy = Y(c.resident);
      if (drawing) g.lineTo(A.left + k + 0.5, yy); else g.moveTo(A.left + k + 0.5, yy);
      drawing = true;
    });
    g.stroke();
  }

  function hover(ev, t, x, y) {
    const r = rows[plot.rowAt(y)];
    if (!r) { M.tip.hide(); return; }
    const lines = [r.info.label];
    if (x >= A.left) {
      const w = plot.canvas.getBoundingClientRect().width;
      const c = column(r, Math.floor(x), w);
      const width = M.data.meta.buckets.width_ns, span = A.t1 - A.t0;
      lines.push(M.ms(c.ba * width, span) + " – " + M.ms((c.bb + 1) * width, span));
      if (c.kernel) {
        const f = figuresAt(r, c.bb);
        const total = KINDS.reduce((a, k) => a + f[k], 0);
        lines.push("the kernel at its end: " + KINDS.map((k) => k + " " + M.size(f[k])).join(", ") + " (" + M.size(total) + ")");
        lines.push("the kernel's largest total in it: " + M.size(c.tops[3]) + " (" + M.exact(c.tops[3]) + " B)");
      } else {
        lines.push("no rss line of this space yet");
      }
      if (c.stream) {
        const last = M.data.levelAt(r.resident, "last", c.bb);
        lines.push("the stream's resident: largest " + M.size(c.resident) + ", at its end " + M.size(last));
      }
    }
    const said = r.life.rss;
    if (said) lines.push("its last rss line: " + KINDS.map((k) => k + " " + M.size(said[k])).join(", "));
    M.tip.show(ev, lines);
  }

  M.rss = {
    init(el) {
      note = M.el("div", { class: "note", hidden: true },
        "No rss lines in this trace: a stream written before mevi-actors wrote them.");
      plot = new A.RowPlot(el, { row: ROW, count: () => rows.length, paintRow, label: "the kernel's count per space" });
      const items = KINDS.map((k) => M.el("span", { class: "legend-item" },
        M.el("i", { class: "swatch", "data-kind": k, style: "background:" + M.colour.rss[k] }), k));
      items.push(M.el("span", { class: "legend-item" },
        M.el("i", { class: "swatch line", "data-kind": "resident", style: "background:" + M.colour.total }),
        "the stream's resident bytes"));
      el.append(M.el("div", { class: "legend" }, ...items), note);
      build();
      A.bind(plot.canvas, { hover, labels: true });
    },
    rebuild: build,
    draw: () => plot.draw(),
    /** Per space with rss lines: its last line's figures (the meta's), the figures its curve
     * ends with (its last bucket's), and the largest total drawn. */
    figures() {
      return rows.map((r) => {
        const end = (r.sums[0].first || 0) + r.sums[0].last.length - 1;
        return {
          space: r.life.id,
          pids: r.life.pids,
          last_line: r.life.rss,
          curve_end: figuresAt(r, end),
          peak_total: Math.max(0, ...r.sums[3].max),
        };
      });
    },
  };
})(MEVI);
