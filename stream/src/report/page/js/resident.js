// Resident memory over time: each space's resident bytes stacked (labelled by its processes),
// the tree's total as a line (the largest within each bucket, so no peak is lost), an overview
// of the whole trace above it. Drag selects the window, a click sets the cursor, hover gives
// the exact figures of the bucket under the pointer. Curves come from the meta's buckets.
(function (M) {
  const A = M.axis;
  const TOP_SPACES = 8; // spaces drawn apart; the rest are "others"
  const HEIGHT = 190, OVERVIEW = 40;
  let root, chart, overview, legend, drag = null, dragWhole = null;
  let series = []; // {label, colour, level: {max, last} per bucket, ids} bottom to top

  function buckets() {
    return M.data.meta.buckets;
  }

  function treeLevel() {
    return buckets().tree;
  }

  const at = (level, which, i) => M.data.levelAt(level, which, i);

  /** A series' values per bucket over the whole trace: its spaces' added up. */
  function flatten(levels) {
    const n = buckets().n || 0;
    const max = new Float64Array(n), last = new Float64Array(n);
    for (const l of levels) {
      const first = l.first || 0;
      for (let k = 0; k < l.max.length && first + k < n; k++) max[first + k] += l.max[k];
      for (let k = 0; k < l.last.length && first + k < n; k++) last[first + k] += l.last[k];
    }
    return { first: 0, max, last };
  }

  function build() {
    const spaces = buckets().spaces || {};
    const ids = Object.keys(spaces).map(Number);
    const peak = (id) => { const s = M.data.space(id).life; return s ? s.peak_resident_bytes : 0; };
    ids.sort((a, b) => peak(b) - peak(a) || a - b);
    const top = ids.slice(0, TOP_SPACES).sort((a, b) => a - b);
    series = top.map((id) => {
      const info = M.data.space(id);
      return { label: info.label, colour: info.colour, level: flatten([spaces[id]]), ids: [id] };
    });
    const rest = ids.slice(TOP_SPACES);
    if (rest.length) {
      series.push({ label: rest.length + " other spaces", colour: "#b8bec7", level: flatten(rest.map((id) => spaces[id])), ids: rest });
    }
  }

  function columnValues(x, w, scale) {
    const [ba, bb] = M.data.bucketsAt(x, w, scale);
    const tree = treeLevel();
    let max = 0;
    for (let i = ba; i <= bb; i++) max = Math.max(max, at(tree, "max", i));
    // Each space's largest within the columns' buckets, scaled down when they add up to more
    // than the tree's largest (they need not peak at once): a short-lived space still shows.
    const most = series.map((s) => {
      let m = 0;
      for (let i = ba; i <= bb; i++) m = Math.max(m, at(s.level, "max", i));
      return m;
    });
    const last = series.map((s) => at(s.level, "last", bb));
    const total = most.reduce((a, b) => a + b, 0);
    const share = total > max && total > 0 ? max / total : 1;
    return { ba, bb, max, last: at(tree, "last", bb), stack: most.map((v) => v * share), most, lastBy: last };
  }

  function yAxis(g, w, top, bottom, vmax) {
    g.save();
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b7480";
    g.textAlign = "right";
    g.textBaseline = "middle";
    for (let k = 0; k <= 4; k++) {
      const v = (vmax * k) / 4;
      const y = Math.round(bottom - ((bottom - top) * k) / 4) + 0.5;
      g.strokeStyle = "#eef0f3";
      g.beginPath();
      g.moveTo(A.left, y);
      g.lineTo(w - A.right, y);
      g.stroke();
      g.fillText(M.size(Math.round(v)), A.left - 8, y);
    }
    g.restore();
  }

  function drawChart() {
    const { g, w } = M.fitCanvas(chart, HEIGHT);
    const top = 8, bottom = HEIGHT - 22;
    const cols = [];
    let vmax = 1;
    for (let x = A.left; x < w - A.right; x++) {
      const c = columnValues(x, w, A);
      cols.push(c);
      vmax = Math.max(vmax, c.max, c.stack.reduce((a, b) => a + b, 0));
    }
    vmax *= 1.08;
    yAxis(g, w, top, bottom, vmax);
    A.drawGrid(g, w, top, bottom, bottom + 6);
    const y = (v) => bottom - ((bottom - top) * v) / vmax;
    cols.forEach((c, k) => {
      let base = 0;
      c.stack.forEach((v, s) => {
        if (v <= 0) return;
        g.fillStyle = series[s].colour;
        const y0 = y(base), y1 = y(base + v);
        g.fillRect(A.left + k, y1, 1, y0 - y1);
        base += v;
      });
    });
    g.strokeStyle = M.colour.total;
    g.lineWidth = 1.25;
    g.beginPath();
    cols.forEach((c, k) => {
      const yy = y(c.max);
      if (k === 0) g.moveTo(A.left + k, yy); else g.lineTo(A.left + k + 0.5, yy);
    });
    g.stroke();
    if (drag && drag[0] != null) {
      g.fillStyle = M.colour.window;
      g.fillRect(Math.min(drag[0], drag[1]), top, Math.abs(drag[1] - drag[0]), bottom - top);
    }
    A.drawCursor(g, w, top, bottom);
    if (M.now && A.cursor >= A.t0 && A.cursor <= A.t1) {
      // The exact tree total at the cursor, from the decoded state.
      const x = A.x(A.cursor, w), text = M.size(M.now.tree);
      g.font = "600 11px system-ui, sans-serif";
      const tw = g.measureText(text).width;
      const tx = x + 6 + tw > w - A.right ? x - 6 - tw : x + 6;
      g.fillStyle = "rgba(255, 255, 255, 0.85)";
      g.fillRect(tx - 3, top, tw + 6, 15);
      g.fillStyle = M.colour.cursor;
      g.textAlign = "left";
      g.textBaseline = "top";
      g.fillText(text, tx, top + 2);
    }
  }

  function drawOverview() {
    const { g, w } = M.fitCanvas(overview, OVERVIEW);
    const top = 4, bottom = OVERVIEW - 4;
    const S = A.whole;
    let vmax = 1;
    const vals = [];
    for (let x = A.left; x < w - A.right; x++) {
      const c = columnValues(x, w, S);
      vals.push(c.max);
      vmax = Math.max(vmax, c.max);
    }
    g.fillStyle = "#c3d3ea";
    vals.forEach((v, k) => {
      const h = ((bottom - top) * v) / vmax;
      g.fillRect(A.left + k, bottom - h, 1, h);
    });
    g.font = "11px system-ui, sans-serif";
    g.fillStyle = "#6b7480";
    g.textBaseline = "middle";
    g.textAlign = "right";
    g.fillText("whole trace", A.left - 8, OVERVIEW / 2);
    // The window, with what is outside it dimmed.
    const x0 = S.x(A.t0, w), x1 = S.x(A.t1, w);
    g.fillStyle = "rgba(240, 242, 245, 0.7)";
    g.fillRect(A.left, top, x0 - A.left, bottom - top);
    g.fillRect(x1, top, w - A.right - x1, bottom - top);
    g.strokeStyle = M.colour.written;
    g.strokeRect(Math.round(x0) + 0.5, top + 0.5, Math.max(1, x1 - x0 - 1), bottom - top - 1);
    if (dragWhole && dragWhole[0] != null) {
      g.fillStyle = M.colour.window;
      g.fillRect(Math.min(dragWhole[0], dragWhole[1]), top, Math.abs(dragWhole[1] - dragWhole[0]), bottom - top);
    }
    const cx = Math.round(S.x(A.cursor, w)) + 0.5;
    g.strokeStyle = M.colour.cursor;
    g.beginPath();
    g.moveTo(cx, top);
    g.lineTo(cx, bottom);
    g.stroke();
  }

  function hover(ev, t, x, _y, scale) {
    const w = chart.getBoundingClientRect().width;
    const c = columnValues(Math.floor(x), w, scale);
    const width = buckets().width_ns;
    const span = A.t1 - A.t0;
    const lines = [
      M.ms(c.ba * width, span) + " – " + M.ms((c.bb + 1) * width, span),
      "tree total: largest " + M.size(c.max) + " (" + M.exact(c.max) + " B), at the end " + M.size(c.last) + " (" + M.exact(c.last) + " B)",
    ];
    series.forEach((s, k) => {
      if (c.most[k] > 0 || c.lastBy[k] > 0) {
        lines.push(s.label + ": largest " + M.size(c.most[k]) + " (" + M.exact(c.most[k]) + " B), at the end " + M.size(c.lastBy[k]) + " (" + M.exact(c.lastBy[k]) + " B)");
      }
    });
    M.tip.show(ev, lines);
  }

  function buildLegend() {
    const f = M.data.figures();
    const items = series.map((s) => M.el("span", { class: "legend-item" },
      M.el("i", { class: "swatch", style: "background:" + s.colour }), s.label));
    items.push(M.el("span", { class: "legend-item" },
      M.el("i", { class: "swatch line", style: "background:" + M.colour.total }),
      "tree total (largest per bucket; the areas share it by each space's largest)" + (f.tree_peak_resident_bytes != null ? ", peak " + M.size(f.tree_peak_resident_bytes) : "")));
    legend.replaceChildren(...items);
  }

  M.resident = {
    init(el) {
      root = el;
      overview = M.el("canvas", { class: "plot overview", "aria-label": "resident memory, whole trace" });
      chart = M.el("canvas", { class: "plot", "aria-label": "resident memory in the window" });
      legend = M.el("div", { class: "legend" });
      root.append(overview, chart, legend);
      build();
      buildLegend();
      A.bind(chart, {
        hover: (ev, t, x, y) => hover(ev, t, x, y, A),
        onDrag: (a, b) => { drag = [a, b]; drawChart(); },
      });
      A.bind(overview, {
        hover: (ev, t, x, y) => hover(ev, t, x, y, A.whole),
        onDrag: (a, b) => { dragWhole = [a, b]; drawOverview(); },
        scale: A.whole,
      });
    },
    rebuild() {
      build();
      buildLegend();
    },
    draw() {
      drawOverview();
      drawChart();
    },
  };
})(MEVI);
