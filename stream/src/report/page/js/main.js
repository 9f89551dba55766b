// Wiring: read the data, build the views, follow the axis, apply the URL hash, then say ready.
(function (M) {
  const $ = (id) => document.getElementById(id);

  function header() {
    const meta = M.data.meta;
    const f = M.data.figures();
    $("title").textContent = meta.title || (meta.argv || []).join(" ") || "mevi-actors report";
    const facts = [
      (meta.wall ? "started " + meta.wall.replace("T", " ").replace(/\.\d+Z$/, " UTC") + " · " : "") +
        "lasted " + M.ms(meta.end_ns) + " · " + (meta.processes || []).length + " process(es), " +
        (meta.spaces || []).length + " space(s), " + (meta.threads || []).length + " thread(s)",
    ];
    if (meta.live) facts.push("live");
    if (!meta.complete) facts.push("the trace ends early: some processes' ends are unknown");
    if (meta.faults === false) facts.push("recorded with --no-faults: resident memory was not measured");
    $("facts").textContent = facts.join(" · ");
    $("figures").replaceChildren(
      figure("tree peak", f.tree_peak_resident_bytes),
      figure("tree at the end", f.final_tree_resident_bytes),
      M.el("span", { class: "figure" }, M.el("b", { id: "now-tree" }), M.el("small", null, "tree at the cursor")));
  }

  function figure(label, bytes) {
    return M.el("span", { class: "figure", title: M.exact(bytes) + " B" }, M.el("b", null, M.size(bytes)), M.el("small", null, label));
  }

  /** What changed since the views were last drawn; `frame()` draws it, once per animation
   * frame however many changes came (scrubber input, seeks, live updates). `mevi.seek` and
   * `mevi.state()` do not wait for it: the state at the cursor and the body's attributes
   * follow at once (the axis listener in `start`). */
  const dirty = { cursor: false, window: false, records: false, meta: false, layout: false };
  let frameId = 0, scrubTo = null;

  function redraw(...what) {
    for (const w of what) dirty[w] = true;
    if (!frameId) frameId = requestAnimationFrame(frame);
  }

  function frame() {
    // The scrubber's last position moves the cursor, once a frame however fast it is dragged.
    if (scrubTo != null) {
      const A = M.axis, at = scrubTo;
      scrubTo = null;
      A.seek(A.t0 + (at / 10000) * (A.t1 - A.t0));
    }
    frameId = 0;
    const d = Object.assign({}, dirty);
    for (const k of Object.keys(dirty)) dirty[k] = false;
    if (Object.values(d).some(Boolean)) draw(d);
  }

  function draw(d) {
    if (d.meta) {
      header();
      M.resident.rebuild();
      M.rss.rebuild();
      M.threads.rebuild();
      M.events.rebuild();
      M.verify.draw();
    }
    // The space view rebuilds only the spaces whose state changed (space.js).
    if (d.cursor || d.records || d.meta || d.layout) {
      M.space.draw();
      M.flame.draw();
    }
    if (d.window || d.meta) M.events.draw();
    M.resident.draw();
    M.rss.draw();
    M.processes.draw();
    M.threads.draw();
    showCursor();
  }

  /** The scrubber (over the window) and its step buttons, and the cursor's readout. */
  function scrubber() {
    const range = $("scrubber");
    range.min = "0";
    range.max = "10000";
    range.step = "1";
    range.addEventListener("input", () => {
      scrubTo = Number(range.value);
      redraw();
    });
    $("step-back").addEventListener("click", () => {
      const d = M.now.dec;
      // Before the last record applied: the state the one before it left.
      M.axis.seek(Math.max(0, Math.min(M.axis.cursor, d.lastT) - 1));
      const back = M.now.dec.lastT;
      if (back < M.axis.cursor) M.axis.seek(back);
    });
    $("step-next").addEventListener("click", () => {
      const next = M.now.dec.nextT();
      if (next != null) M.axis.seek(Math.max(next, M.axis.cursor + 1));
    });
    $("whole").addEventListener("click", () => M.axis.setWindow(null));
  }

  function showCursor() {
    const A = M.axis, span = A.t1 - A.t0;
    const range = $("scrubber");
    range.value = String(Math.round(((Math.min(Math.max(A.cursor, A.t0), A.t1) - A.t0) / span) * 10000));
    $("cursor-at").textContent = "t = " + M.ms(A.cursor, span);
    $("window-at").textContent = "window " + M.ms(A.t0, span) + " – " + M.ms(A.t1, span);
    const nowTree = $("now-tree");
    if (nowTree) {
      nowTree.textContent = M.size(M.now.tree);
      nowTree.parentElement.title = M.exact(M.now.tree) + " B";
    }
  }

  function start() {
    M.data.load();
    header();
    M.resident.init($("resident"));
    M.rss.init($("rss"));
    M.processes.init($("processes"));
    M.threads.init($("threads"));
    M.space.init($("space"));
    M.flame.init($("flame"));
    M.events.init($("events"));
    M.verify.init($("verify"));
    scrubber();
    M.axis.t0 = 0;
    M.axis.t1 = M.data.end;
    // A finished trace opens at the tree's peak (at its end no process is alive); a live one
    // follows the end: the data's, which is at least 1 ns (a page opened before the run's first
    // line, its meta's end 0, would otherwise start behind it and never follow).
    const meta = M.data.meta;
    M.axis.cursor = M.data.streamed ? M.data.end : (meta.tree_peak_t_ns ?? meta.end_ns) || 0;
    M.refresh();
    M.api.readHash();
    M.refresh();
    M.axis.on((what) => {
      if (what === "cursor") M.refresh();
      M.api.mark();
      redraw(what);
    });
    draw({ cursor: true, window: true });
    M.api.mark();
    // Live mode: more data came. A window over the whole trace and a cursor at its end follow
    // the new end; with a new meta every view takes the new processes, threads and events.
    let end = M.data.end;
    M.data.onChange((what) => {
      const A = M.axis;
      const whole = A.t0 === 0 && A.t1 === end, atEnd = A.cursor >= end;
      end = M.data.end;
      if (whole) A.t1 = end;
      if (atEnd) A.cursor = end;
      M.refresh();
      M.api.mark();
      if (what.meta) redraw("meta", "window", "cursor");
      else redraw("records");
    });
    window.addEventListener("resize", () => redraw("layout"));
    window.addEventListener("hashchange", () => {
      if (location.hash !== M.api.hashWritten()) M.api.readHash();
    });
    document.body.setAttribute("data-ready", "1");
    // When the page became usable, in ms since navigation started (the bench reads it).
    document.body.setAttribute("data-ready-ms", performance.now().toFixed(1));
    M.api.settle();
    if (M.data.streamed) M.live.start();
  }

  try {
    start();
  } catch (e) {
    const box = $("error");
    if (box) {
      box.textContent = "This report could not be shown: " + e.message;
      box.hidden = false;
    }
    document.body.setAttribute("data-ready", "error");
    M.api.fail(e);
  }
})(MEVI);
