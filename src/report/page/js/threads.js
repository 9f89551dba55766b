// First touches per thread over the window: one strip per thread (its life as a pale band,
// its first touches per bucket as bars), with its name. From the meta's buckets.touches.
(function (M) {
  const A = M.axis;
  const ROW = 18;
  let canvas, rows = [];

  function build() {
    const touches = (M.data.meta.buckets && M.data.meta.buckets.touches) || {};
    const order = new Map(M.data.processes.map((p, i) => [p.pid, i]));
    rows = (M.data.meta.threads || []).slice().sort((a, b) =>
      (order.get(a.pid) ?? 1e9) - (order.get(b.pid) ?? 1e9) || a.born_ns - b.born_ns || a.tid - b.tid)
      .map((t) => ({ t, touches: touches[t.tid] || null }));
  }

  function draw() {
    const h = Math.max(1, rows.length) * ROW + 28;
    const { g, w } = M.fitCanvas(canvas, h);
    const bottom = h - 22;
    A.drawGrid(g, w, 0, bottom, bottom + 6);
    const width = (M.data.meta.buckets && M.data.meta.buckets.width_ns) || 1;
    // One scale for every strip: the most first touches in a column of the window.
    const cols = Math.max(1, Math.floor(w - A.left - A.right));
    const sums = rows.map((r) => columnSums(r.touches, w, cols, width));
    const most = Math.max(1, ...sums.map((s) => s.reduce((a, b) => Math.max(a, b), 0)));
    g.font = "12px system-ui, sans-serif";
    g.textBaseline = "middle";
    rows.forEach((r, i) => {
      const y = 4 + i * ROW;
      const t = r.t;
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
      g.fillStyle = M.colour.written;
      sums[i].forEach((n, k) => {
        if (n <= 0) return;
        const bh = Math.max(1, ((ROW - 4) * n) / most);
        g.fillRect(A.left + k, y + ROW - 2 - bh, 1, bh);
      });
    });
    A.drawCursor(g, w, 0, bottom);
  }

  /** First touches per pixel column of the window. */
  function columnSums(touches, w, cols, width) {
    const out = new Float64Array(cols);
    if (!touches) return out;
    const first = touches.first || 0;
    touches.n.forEach((n, k) => {
      if (!n) return;
      const t = (first + k + 0.5) * width;
      if (t < A.t0 || t > A.t1) return;
      const c = Math.floor(A.x(t, w) - A.left);
      if (c >= 0 && c < cols) out[c] += n;
    });
    return out;
  }

  function hover(ev, t, x, y) {
    const r = rows[Math.floor((y - 4) / ROW)];
    if (!r) { M.tip.hide(); return; }
    const th = r.t;
    const width = (M.data.meta.buckets && M.data.meta.buckets.width_ns) || 1;
    const lines = [
      "thread " + th.tid + " of pid " + th.pid + (th.name ? ": " + th.name : "") +
        (th.name_at_exit && th.name_at_exit !== th.name ? " (at exit " + th.name_at_exit + ")" : ""),
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
      canvas = M.el("canvas", { class: "plot", "aria-label": "first touches per thread" });
      el.append(M.el("div", { class: "scroll tall" }, canvas));
      build();
      A.bind(canvas, { hover, labels: true });
    },
    rebuild: build,
    draw,
  };
})(MEVI);
