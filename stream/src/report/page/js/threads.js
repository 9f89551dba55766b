// First touches per thread over the window: one strip per thread (its life as a pale band,
// its first touches per bucket as bars), with its name. From the meta's buckets.touches. Only
// the strips in view are drawn (A.RowPlot): a run may have many thousands of threads.
(function (M) {
  const A = M.axis;
  const ROW = 18;
  let plot, rows = [];
  let scale = { key: null, most: 1 }; // the strips' common scale, for one window and width

  function build() {
    const touches = (M.data.meta.buckets && M.data.meta.buckets.touches) || {};
    const order = new Map(M.data.processes.map((p, i) => [p.pid, i]));
    rows = (M.data.meta.threads || []).slice().sort((a, b) =>
      (order.get(a.pid) ?? 1e9) - (order.get(b.pid) ?? 1e9) || a.born_ns - b.born_ns || a.tid - b.tid)
      .map((t) => ({ t, touches: touches[t.tid] || null }));
    scale.key = null;
  }

  function bucketWidth() {
    return (M.data.meta.buckets && M.data.meta.buckets.width_ns) || 1;
  }

  /** Calls `f(column, n)` for each bucket of `touches` in the window with first touches, in
   * time order (so columns never decrease). */
  function eachColumn(touches, w, cols, f) {
    if (!touches) return;
    const width = bucketWidth(), first = touches.first || 0, n = touches.n;
    const k0 = Math.max(0, Math.floor(A.t0 / width) - first - 1);
    const k1 = Math.min(n.length, Math.ceil(A.t1 / width) - first + 1);
    for (let k = k0; k < k1; k++) {
      if (!n[k]) continue;
      const t = (first + k + 0.5) * width;
      if (t < A.t0 || t > A.t1) continue;
      const c = Math.floor(A.x(t, w) - A.left);
      if (c >= 0 && c < cols) f(c, n[k]);
    }
  }

  /** One scale for every strip: the most first touches of one thread in a column of the
   * window (computed again only when the window, the width or the threads change). */
  function most(w, cols) {
    const key = A.t0 + " " + A.t1 + " " + w;
    if (scale.key === key) return scale.most;
    let most = 1;
    for (const r of rows) {
      let col = -1, sum = 0;
      eachColumn(r.touches, w, cols, (c, n) => {
        if (c !== col) { col = c; sum = 0; }
        sum += n;
        if (sum > most) most = sum;
      });
    }
    scale = { key, most };
    return most;
  }

  function paintRow(g, w, i, y) {
    const { t, touches } = rows[i];
    g.font = "12px system-ui, sans-serif";
    g.textBaseline = "middle";
    g.fillStyle = "#2b333d";
    g.save();
    g.beginPath();
    g.rect(0, y, A.left - 6, ROW);
    g.clip();
    g.fillText(t.tid + " " + (M.data.threadName(t.tid) || ""), 6, y + ROW / 2);
    g.restore();
    const end = t.ended_ns == null ? M.data.end : t.ended_ns;
    const x0 = Math.max(A.left, A.x(t.born_ns, w)), x1 = Math.min(w - A.right, A.x(end, w));
    if (x1 > x0) {
      g.fillStyle = "#eef2f8";
      g.fillRect(x0, y + 2, x1 - x0, ROW - 4);
    }
    const cols = Math.max(1, Math.floor(w - A.left - A.right));
    const top = most(w, cols);
    const sums = new Float64Array(cols);
    eachColumn(touches, w, cols, (c, n) => { sums[c] += n; });
    g.fillStyle = M.colour.written;
    sums.forEach((n, k) => {
      if (n <= 0) return;
      const bh = Math.max(1, ((ROW - 4) * n) / top);
      g.fillRect(A.left + k, y + ROW - 2 - bh, 1, bh);
    });
  }

  function hover(ev, t, x, y) {
    const r = rows[plot.rowAt(y)];
    if (!r) { M.tip.hide(); return; }
    const th = r.t;
    const width = bucketWidth();
    const lines = [
      "thread " + th.tid + " of pid " + th.pid + (th.name ? ": " + th.name : "") +
        (th.name_at_exit && th.name_at_exit !== th.name ? " (at exit " + th.name_at_exit + ")" : ""),
      ...(th.renamed || []).map(([t, name]) => "named itself " + name + " at " + M.ms(t)),
      "born " + M.ms(th.born_ns) + (th.ended_ns == null ? "" : ", ended " + M.ms(th.ended_ns)) + ", " + M.exact(th.first_touches) + " first touches",
    ];
    if (r.touches && x >= A.left) {
      const i = Math.floor(t / width) - (r.touches.first || 0);
      const n = r.touches.n[i] || 0;
      lines.push(M.exact(n) + " first touches in " + M.ms((i + (r.touches.first || 0)) * width) + " – " + M.ms((i + 1 + (r.touches.first || 0)) * width));
    }
    M.tip.show(ev, lines);
  }

  M.threads = {
    init(el) {
      plot = new A.RowPlot(el, { row: ROW, count: () => rows.length, paintRow, label: "first touches per thread" });
      build();
      A.bind(plot.canvas, { hover, labels: true });
    },
    rebuild: build,
    draw: () => plot.draw(),
  };
})(MEVI);
