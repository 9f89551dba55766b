// What tests and scripts drive the page by: `window.mevi`, the `<body>` data attributes kept
// current, and the URL hash (`#t=150&w=100-200&gaps=1`, milliseconds) read at load and kept
// up to date, so a view can be linked.
(function (M) {
  let settle, fail;
  const ready = new Promise((resolve, reject) => { settle = resolve; fail = reject; });

  /** The state at the cursor: the decoder, the live spaces in order, the tree's total. */
  M.refresh = function () {
    const dec = M.data.timeline.at(M.axis.cursor);
    let tree = 0;
    const live = [];
    for (const s of dec.spaces.values()) {
      tree += s.resident;
      if (s.live) live.push(s);
    }
    live.sort((a, b) => a.id - b.id);
    M.now = { dec, live, tree };
  };

  M.api = {
    ready,
    settle,
    fail,
    /** Keeps the body's attributes and the hash current. */
    mark() {
      const b = document.body, A = M.axis;
      b.setAttribute("data-t-ns", M.dec(A.cursor));
      b.setAttribute("data-window", M.dec(A.t0) + "-" + M.dec(A.t1));
      b.setAttribute("data-tree-resident-bytes", M.dec(M.now.tree));
      b.setAttribute("data-gaps", M.space.gaps() ? "1" : "0");
      M.markErrors();
      writeHash();
    },
    /** Applies `#t=…&w=…-…&gaps=…` (ms); says whether it named anything. */
    readHash() {
      const h = new URLSearchParams(location.hash.replace(/^#/, ""));
      const ms = (v) => (v == null || v === "" || isNaN(Number(v)) ? null : Math.round(Number(v) * 1e6));
      if (h.has("w")) {
        const [a, b] = (h.get("w") || "").split("-").map(ms);
        if (a != null && b != null) M.axis.setWindow(a, b);
      }
      if (h.has("t") && ms(h.get("t")) != null) M.axis.seek(ms(h.get("t")));
      if (h.has("gaps")) M.space.setGaps(h.get("gaps") === "1" || h.get("gaps") === "true");
    },
  };

  // The hash follows the view a moment later (Chromium throttles, and warns about, more than
  // about 100 history changes in 10 s: a drag of the scrubber makes one a frame).
  let lastHash = null, hashTimer = 0;
  function writeHash() {
    if (!hashTimer) hashTimer = setTimeout(writeHashNow, 250);
  }
  function writeHashNow() {
    hashTimer = 0;
    const A = M.axis;
    const whole = A.t0 === 0 && A.t1 === M.data.end;
    const ms = (ns) => String(+(ns / 1e6).toFixed(6));
    const h = "#t=" + ms(A.cursor) + (whole ? "" : "&w=" + ms(A.t0) + "-" + ms(A.t1)) + (M.space.gaps() ? "&gaps=1" : "");
    if (h === lastHash) return;
    lastHash = h;
    try {
      history.replaceState(null, "", h);
    } catch (_) {
      // A page that may not rewrite its URL (some file:// settings) keeps working without it.
    }
  }
  M.api.hashWritten = () => lastHash;

  window.mevi = {
    ready,
    seek(t_ns) {
      M.axis.seek(Number(t_ns));
    },
    setWindow(t0, t1) {
      if (t0 == null) M.axis.setWindow(null);
      else M.axis.setWindow(Number(t0), Number(t1));
    },
    setGaps(on) {
      M.space.setGaps(!!on);
      M.api.mark();
    },
    state() {
      return M.now.live.map((s) => s.describe(M.data.page));
    },
    figures() {
      return M.data.figures();
    },
    /** Where the address-space view draws mapping `start` of space `id` (space.js). */
    mapCells(id, start) {
      return M.space.cells(id, start);
    },
    /** Each space's label and colour, as every view shows them (data.js). */
    spaces() {
      return [...M.data.spaceInfo.values()].map((s) => ({ space: s.id, label: s.label, colour: s.colour, pids: s.pids }));
    },
    /** The process rows: pid, label, depth in the tree (processes.js). */
    processes() {
      return M.processes.rows();
    },
    /** The kernel's count per space (rss.js). */
    rss() {
      return M.rss.figures();
    },
    events() {
      return M.events.rows();
    },
    /** The flame graph's nodes at the cursor (flame.js). */
    flame() {
      return M.flame.nodes();
    },
    /** The flame graph as drawn: rows and boxes (flame.js). */
    flameDrawn() {
      return M.flame.drawn();
    },
    setSystemFrames(on) {
      M.flame.setSystem(!!on);
    },
    flameZoom(path) {
      M.flame.setZoom(path);
    },
    cursor: () => M.axis.cursor,
    window: () => [M.axis.t0, M.axis.t1],
  };
})(MEVI);
