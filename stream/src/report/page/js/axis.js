// The one time axis every view shares: the window [t0, t1] and the cursor (ns), with listeners,
// and the mapping between time and x that every plot uses (same margins, so the views line up).
(function (M) {
  const A = (M.axis = {
    t0: 0,
    t1: 1,
    cursor: 0,
    left: 170, // px of the label column in every plot
    right: 16,
    listeners: [],
  });

  /** `f(what)` after each change; `what` is "cursor" or "window". */
  A.on = (f) => A.listeners.push(f);

  function emit(what) {
    for (const f of A.listeners) f(what);
  }

  A.setWindow = function (t0, t1) {
    if (t0 == null) { t0 = 0; t1 = M.data.end; }
    // Ignored unless both are times (a link's hash may say anything); either order.
    if (!Number.isFinite(t0) || !Number.isFinite(t1)) return;
    const lo = Math.min(t0, t1), hi = Math.max(t0, t1);
    t0 = Math.min(Math.max(0, Math.round(lo)), Number.MAX_SAFE_INTEGER - 1);
    t1 = Math.min(Math.max(t0 + 1, Math.round(hi)), Number.MAX_SAFE_INTEGER);
    if (t0 === A.t0 && t1 === A.t1) return;
    A.t0 = t0;
    A.t1 = t1;
    emit("window");
  };

  A.seek = function (t) {
    if (!Number.isFinite(t)) return;
    t = Math.min(Math.max(0, Math.round(t)), Number.MAX_SAFE_INTEGER);
    if (t === A.cursor) return;
    A.cursor = t;
    emit("cursor");
  };

  /** x (CSS px) of time t in a plot `w` px wide, and back. */
  A.x = (t, w) => A.left + ((t - A.t0) / (A.t1 - A.t0)) * (w - A.left - A.right);
  A.t = (x, w) => A.t0 + ((x - A.left) / (w - A.left - A.right)) * (A.t1 - A.t0);

  /** The whole trace's scale, for overviews. */
  A.whole = {
    x: (t, w) => A.left + (t / M.data.end) * (w - A.left - A.right),
    t: (x, w) => ((x - A.left) / (w - A.left - A.right)) * M.data.end,
  };

  /** Round tick times in the window, about one per 90 px. */
  A.ticks = function (w) {
    const span = A.t1 - A.t0;
    const want = Math.max(2, Math.floor((w - A.left - A.right) / 90));
    const raw = span / want;
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let t = Math.ceil(A.t0 / step) * step; t <= A.t1; t += step) out.push(t);
    return { ticks: out, step };
  };

  /** A tick's label: ms, or s past 10 s of span. */
  A.label = function (t, step) {
    if (step >= 1e9) return (t / 1e9).toFixed(step >= 1e10 ? 0 : 1) + " s";
    const d = step >= 1e6 ? 0 : step >= 1e5 ? 1 : step >= 1e4 ? 2 : 3;
    return (t / 1e6).toFixed(d) + " ms";
  };

  /** Grid lines and labels at `y` (labels) over [top, bottom], then the cursor line. */
  A.drawGrid = function (g, w, top, bottom, labelsAt) {
    const { ticks, step } = A.ticks(w);
    g.save();
    g.font = "11px system-ui, sans-serif";
    g.textAlign = "center";
    g.textBaseline = "top";
    for (const t of ticks) {
      const x = Math.round(A.x(t, w)) + 0.5;
      g.strokeStyle = "#eef0f3";
      g.beginPath();
      g.moveTo(x, top);
      g.lineTo(x, bottom);
      g.stroke();
      if (labelsAt != null) {
        g.fillStyle = "#6b7480";
        const text = A.label(t, step), half = g.measureText(text).width / 2;
        g.fillText(text, Math.min(x, w - half - 2), labelsAt);
      }
    }
    g.restore();
  };

  A.drawCursor = function (g, w, top, bottom) {
    if (A.cursor < A.t0 || A.cursor > A.t1) return;
    const x = Math.round(A.x(A.cursor, w)) + 0.5;
    g.save();
    g.strokeStyle = M.colour.cursor;
    g.lineWidth = 1.5;
    g.beginPath();
    g.moveTo(x, top);
    g.lineTo(x, bottom);
    g.stroke();
    g.restore();
  };

  /**
   * A plot of one row per item over the window (processes, threads) that draws only the rows
   * in view: a scroll box whose canvas, sticky and as high as the box, is redrawn on scroll,
   * above a spacer that gives the box the whole height. (A canvas as high as every row passes
   * the browser's limit, about 65,000 px in Chromium and 32,767 in Firefox, past a few thousand
   * rows, and then shows nothing at all.) The time labels stay at the box's bottom.
   * `paintRow(g, w, i, y)` draws row `i` with its top at `y`; `count()` says how many rows.
   */
  A.RowPlot = class {
    constructor(parent, { row, count, paintRow, label }) {
      this.row = row;
      this.count = count;
      this.paintRow = paintRow;
      this.canvas = M.el("canvas", { class: "plot sticky", "aria-label": label });
      this.spacer = M.el("div");
      this.box = M.el("div", { class: "scroll rows-box" }, this.canvas, this.spacer);
      parent.append(this.box);
      let pending = 0;
      this.box.addEventListener("scroll", () => {
        if (!pending) pending = requestAnimationFrame(() => { pending = 0; this.draw(); });
      });
    }

    /** The canvas's height: every row and the labels, at most the box's 340 px. */
    height() {
      return Math.min(A.ROWS_VIEW, this.count() * this.row + A.ROWS_AXIS + 6);
    }

    draw() {
      const n = this.count(), h = this.height(), all = n * this.row + A.ROWS_AXIS + 6;
      this.box.style.height = h + "px";
      this.spacer.style.height = all - h + "px";
      const { g, w } = M.fitCanvas(this.canvas, h);
      const bottom = h - A.ROWS_AXIS, top = this.box.scrollTop;
      A.drawGrid(g, w, 0, bottom, bottom + 6);
      const first = Math.max(0, Math.floor((top - 4) / this.row));
      const last = Math.min(n, Math.ceil((top + bottom - 4) / this.row));
      g.save();
      g.beginPath();
      g.rect(0, 0, w, bottom);
      g.clip();
      for (let i = first; i < last; i++) this.paintRow(g, w, i, 4 + i * this.row - top);
      g.restore();
      A.drawCursor(g, w, 0, bottom);
    }

    /** The row under `y` (CSS px from the canvas's top), or -1. */
    rowAt(y) {
      if (y >= this.height() - A.ROWS_AXIS) return -1;
      const i = Math.floor((y + this.box.scrollTop - 4) / this.row);
      return i >= 0 && i < this.count() ? i : -1;
    }
  };
  A.ROWS_VIEW = 340; // px: the box's height at most
  A.ROWS_AXIS = 22; // px under the rows for the time labels

  /**
   * Pointer handling shared by the time plots: a click sets the cursor, a drag selects a
   * window (shown while dragging through `onDrag(x0, x1)`); `hover(ev, t, x, y)` for tooltips.
   */
  A.bind = function (canvas, { hover, onDrag, draggable = true, scale = A, labels = false }) {
    let down = null;
    const pos = (ev) => {
      const r = canvas.getBoundingClientRect();
      return { x: ev.clientX - r.left, y: ev.clientY - r.top, w: r.width };
    };
    canvas.addEventListener("pointerdown", (ev) => {
      const p = pos(ev);
      if (p.x < A.left) return;
      down = p;
      canvas.setPointerCapture(ev.pointerId);
    });
    canvas.addEventListener("pointermove", (ev) => {
      const p = pos(ev);
      if (down && draggable && Math.abs(p.x - down.x) > 3) {
        M.tip.hide();
        if (onDrag) onDrag(down.x, p.x);
        return;
      }
      if (!down && hover) {
        if (p.x < A.left && !labels) { M.tip.hide(); return; }
        hover(ev, scale.t(p.x, p.w), p.x, p.y);
      }
    });
    canvas.addEventListener("pointerup", (ev) => {
      if (!down) return;
      const p = pos(ev);
      const start = down;
      down = null;
      if (onDrag) onDrag(null, null);
      if (draggable && Math.abs(p.x - start.x) > 3) {
        const a = scale.t(Math.min(p.x, start.x), p.w), b = scale.t(Math.max(p.x, start.x), p.w);
        A.setWindow(Math.max(0, a), Math.min(M.data.end, b));
      } else {
        A.seek(Math.min(Math.max(0, scale.t(p.x, p.w)), M.data.end));
      }
    });
    canvas.addEventListener("pointerleave", () => M.tip.hide());
  };
})(MEVI);
