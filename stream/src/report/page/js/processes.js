// The process tree as bars on the time axis: born to ended (to the trace's end when it never
// said), exec ticks, coloured by how each ended. Hover gives argv, threads and figures. Only
// the rows in view are drawn (A.RowPlot): a tree may have thousands of processes.
(function (M) {
  const A = M.axis;
  const ROW = 20;
  let plot;

  /** The colour of an end: exit 0, another status, a signal, or unknown. */
  M.endColour = function (p) {
    if (p.signal) return M.colour.signal;
    if (p.status === 0) return M.colour.exit0;
    if (p.status != null) return M.colour.exitN;
    return M.colour.unknown;
  };

  /** Row `i`: its label (indented by depth), its life as a bar, a tick at each exec. */
  function paintRow(g, w, i, y) {
    const p = M.data.processes[i];
    const mid = y + ROW / 2;
    g.font = "12px system-ui, sans-serif";
    g.textBaseline = "middle";
    g.fillStyle = "#2b333d";
    g.textAlign = "left";
    g.save();
    g.beginPath();
    g.rect(0, y, A.left - 6, ROW);
    g.clip();
    g.fillText(p.label.replace(/^pid /, ""), 6 + 10 * Math.min(p.depth || 0, 6), mid);
    g.restore();
    const end = p.ended_ns == null ? M.data.end : p.ended_ns;
    const x0 = Math.max(A.left, A.x(p.born_ns, w));
    const x1 = Math.min(w - A.right, A.x(end, w));
    if (x1 < A.left || x0 > w - A.right) return;
    g.fillStyle = M.endColour(p);
    g.globalAlpha = p.ended_ns == null ? 0.55 : 0.9;
    g.fillRect(x0, y + 4, Math.max(1.5, x1 - x0), ROW - 8);
    g.globalAlpha = 1;
    g.fillStyle = "#1d2530";
    for (const t of p.execs || []) {
      const x = A.x(t, w);
      if (x >= A.left && x <= w - A.right) g.fillRect(Math.round(x) - 1, y + 2, 2, ROW - 4);
    }
  }

  function hover(ev, t, x, y) {
    const p = M.data.processes[plot.rowAt(y)];
    if (!p) { M.tip.hide(); return; }
    const threads = (p.threads || []).map((tid) => tid + (M.data.threadName(tid) ? " " + M.data.threadName(tid) : ""));
    const lines = [
      "pid " + p.pid + (p.ppid != null ? " (parent " + p.ppid + ")" : "") + ": " + (p.argv || []).join(" "),
      "born " + M.ms(p.born_ns) + ", " + (p.ended_ns == null ? "still running at the trace's end" : "ended " + M.ms(p.ended_ns)) + ": " + (p.end || "-"),
      "peak " + M.size(p.peak_resident_bytes) + ", final " + M.size(p.resident_bytes) + ", " + M.exact(p.first_touches) + " first touches, " + p.maps + " maps, " + p.unmaps + " unmaps",
    ];
    if ((p.execs || []).length) lines.push("exec at " + p.execs.map((e) => M.ms(e)).join(", "));
    if (threads.length) lines.push("threads: " + threads.slice(0, 12).join(", ") + (threads.length > 12 ? " … (" + threads.length + ")" : ""));
    M.tip.show(ev, lines);
  }

  M.processes = {
    init(el) {
      plot = new A.RowPlot(el, { row: ROW, count: () => M.data.processes.length, paintRow, label: "processes over time" });
      const legend = M.el("div", { class: "legend" },
        ...[["exit 0", M.colour.exit0], ["other exit status", M.colour.exitN], ["killed by a signal", M.colour.signal], ["end unknown", M.colour.unknown]]
          .map(([l, c]) => M.el("span", { class: "legend-item" }, M.el("i", { class: "swatch", style: "background:" + c }), l)),
        M.el("span", { class: "legend-item" }, M.el("i", { class: "swatch tick" }), "exec"));
      el.append(legend);
      A.bind(plot.canvas, { hover, labels: true });
    },
    draw: () => plot.draw(),
    /** Each row's process and label, in tree order (what the rows say). */
    rows: () => M.data.processes.map((p) => ({ pid: p.pid, label: p.label, depth: p.depth })),
  };
})(MEVI);
