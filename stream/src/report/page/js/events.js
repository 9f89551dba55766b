// The layout and lifecycle events in the window, filtered by pid and kind, addresses in hex.
// The table draws only the rows in view (virtual scrolling): a trace keeps up to 40,000 rows.
// A click on a row moves the cursor to its time.
(function (M) {
  const ROW = 22, VIEW = 320;
  let box, body, count, pidSel, kindSel, topPad, bottomPad;
  let shown = []; // the rows matching window and filters, as arrays
  let filter = { pid: null, kind: null };
  let choices = null; // the pids and kinds the filters offer, as last filled

  function all() {
    return M.data.meta.events.rows;
  }

  function select() {
    const rows = all();
    const A = M.axis;
    // Rows are in stream order, so by time: bisect the window's ends.
    const lo = M.lowerBound(rows, (r) => r[1] >= A.t0);
    const hi = M.lowerBound(rows, (r) => r[1] > A.t1);
    shown = [];
    for (let i = lo; i < hi; i++) {
      const r = rows[i];
      if (filter.pid != null && r[3] !== filter.pid) continue;
      if (filter.kind != null && r[2] !== filter.kind) continue;
      shown.push(r);
    }
  }

  function rowEl(r) {
    const [seq, t, ev, pid, tid, space, a, b, detail] = r;
    // A range in address order, whichever order the row gives (a shrinking brk may give the
    // old break first).
    const start = a != null && b != null ? Math.min(a, b) : a, end = a != null && b != null ? Math.max(a, b) : b;
    const size = start != null && end != null ? M.size(end - start) : "";
    return M.el("tr", { class: "event ev-" + ev, "data-seq": M.dec(seq), onclick: () => M.axis.seek(t) },
      M.el("td", { class: "num" }, String(seq)),
      M.el("td", { class: "num" }, M.ms(t)),
      M.el("td", null, ev),
      M.el("td", { class: "num" }, pid == null ? "" : String(pid)),
      M.el("td", { class: "num" }, tid == null ? "" : String(tid)),
      M.el("td", { class: "num" }, space == null ? "" : String(space)),
      M.el("td", { class: "mono" }, start == null ? "" : M.hex(start)),
      M.el("td", { class: "mono" }, end == null ? "" : M.hex(end)),
      M.el("td", { class: "num" }, size),
      M.el("td", { class: "detail", title: detail || "" }, detail || ""));
  }

  /** Draws the rows in view, with padding rows standing for the rest. */
  function paint() {
    const first = Math.max(0, Math.floor(box.scrollTop / ROW) - 10);
    const last = Math.min(shown.length, first + Math.ceil(VIEW / ROW) + 20);
    topPad.firstChild.style.height = first * ROW + "px";
    bottomPad.firstChild.style.height = (shown.length - last) * ROW + "px";
    const rows = [];
    for (let i = first; i < last; i++) rows.push(rowEl(shown[i]));
    rows.unshift(topPad);
    rows.push(bottomPad);
    M.fill(body, rows);
  }

  /** The filters' choices: every pid and kind in the rows, and the ones chosen. Filled again
   * only when they change (a live page gets new rows 4 times a second: refilling each time
   * would close an open list), keeping what is chosen. */
  function fillFilters() {
    const pids = new Set(), kinds = new Set();
    for (const r of all()) {
      if (r[3] != null) pids.add(r[3]);
      kinds.add(r[2]);
    }
    // A chosen pid or kind whose rows left the live page's last rows stays a choice.
    if (filter.pid != null) pids.add(filter.pid);
    if (filter.kind != null) kinds.add(filter.kind);
    const p = [...pids].sort((a, b) => a - b), k = [...kinds].sort();
    const now = p.join(" ") + "|" + k.join(" ");
    if (now === choices) return;
    choices = now;
    M.fill(pidSel, [M.el("option", { value: "" }, "every pid")].concat(p.map((x) => M.el("option", { value: x }, String(x)))));
    M.fill(kindSel, [M.el("option", { value: "" }, "every kind")].concat(k.map((x) => M.el("option", { value: x }, x))));
    pidSel.value = filter.pid == null ? "" : String(filter.pid);
    kindSel.value = filter.kind == null ? "" : filter.kind;
  }

  function render() {
    select();
    const total = all().length;
    const left = M.data.meta.events.left_out;
    count.textContent = M.exact(shown.length) + " of " + M.exact(total) + " events in the window" +
      (left ? " (" + M.exact(left) + " in the middle of the trace are not in the report)" : "");
    paint();
  }

  M.events = {
    init(el) {
      pidSel = M.el("select", { id: "events-pid", "aria-label": "pid", onchange: (ev) => M.events.setFilter({ pid: ev.target.value === "" ? null : Number(ev.target.value) }) });
      kindSel = M.el("select", { id: "events-kind", "aria-label": "kind", onchange: (ev) => M.events.setFilter({ kind: ev.target.value === "" ? null : ev.target.value }) });
      count = M.el("span", { class: "sub" });
      topPad = M.el("tr", { class: "pad" }, M.el("td", { colspan: 10 }));
      bottomPad = M.el("tr", { class: "pad" }, M.el("td", { colspan: 10 }));
      body = M.el("tbody");
      const head = M.el("tr", null, ...["seq", "t", "event", "pid", "tid", "space", "start", "end", "size", "detail"]
        .map((h, i) => M.el("th", { class: [0, 1, 3, 4, 5, 8].includes(i) ? "num" : null }, h)));
      box = M.el("div", { class: "scroll events-box", style: "height:" + VIEW + "px" },
        M.el("table", { class: "events" }, M.el("thead", null, head), body));
      box.addEventListener("scroll", () => requestAnimationFrame(paint));
      el.append(M.el("div", { class: "filters" }, pidSel, kindSel, count), box);
      fillFilters();
    },
    setFilter(f) {
      Object.assign(filter, f);
      fillFilters();
      pidSel.value = filter.pid == null ? "" : String(filter.pid);
      kindSel.value = filter.kind == null ? "" : filter.kind;
      box.scrollTop = 0;
      render();
    },
    /** The rows the table shows now (window and filters), as objects. */
    rows() {
      const cols = M.data.meta.events.columns;
      return shown.map((r) => Object.fromEntries(cols.map((c, i) => [c, r[i] === undefined ? null : r[i]])));
    },
    rebuild: fillFilters,
    draw: render,
  };
})(MEVI);
