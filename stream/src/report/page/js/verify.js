// `--verify` results when the trace has them (totals, every failed check and where), then the
// trace's warnings and the problems the stream itself has. A live page builds it anew with
// each new meta.
(function (M) {
  function pointRow(p) {
    const where = (p.first_mismatches || []).slice(0, 4).map((x) =>
      M.hex(x.start) + "–" + M.hex(x.end) + " stream " + JSON.stringify(x.stream) + ", kernel " + JSON.stringify(x.kernel)).join("; ");
    return M.el("tr", { class: p.mismatched_pages ? "failed" : null, onclick: () => M.axis.seek(p.t_ns) },
      M.el("td", { class: "num" }, String(p.seq)), M.el("td", { class: "num" }, M.ms(p.t_ns)),
      M.el("td", { class: "num" }, String(p.pid)), M.el("td", { class: "num" }, String(p.space)),
      M.el("td", null, typeof p.point === "string" ? p.point : JSON.stringify(p.point)),
      M.el("td", { class: "num" }, M.exact(p.checked_pages)), M.el("td", { class: "num" }, M.exact(p.mismatched_pages)),
      M.el("td", { class: "detail", title: where }, p.skipped ? "skipped: " + p.skipped : where));
  }

  function table(headers, rows) {
    const body = M.el("tbody");
    M.fill(body, rows);
    return M.el("div", { class: "scroll maps-box" }, M.el("table", { class: "events" },
      M.el("thead", null, M.el("tr", null, ...headers.map((h) => M.el("th", null, h)))), body));
  }

  let root;

  M.verify = {
    init(el) {
      root = el;
      M.verify.draw();
    },
    /** Builds the section from the meta (again for each new meta of a live page). */
    draw() {
      const meta = M.data.meta;
      const v = meta.verify;
      const parts = [];
      if (!v) {
        parts.push(M.el("p", { class: "empty" }, "This trace has no --verify checks (run with --verify to compare the stream with the kernel's page tables)."));
      } else {
        const t = v.totals || {};
        const failed = (v.points || []).filter((p) => p.mismatched_pages > 0);
        const checked = (v.points || []).reduce((n, p) => n + (p.checked_pages || 0), 0);
        parts.push(M.el("p", { class: failed.length || t.failed_points ? "bad" : "good" },
          (t.failed_points ? M.exact(t.failed_points) + " of " : "") + M.exact(t.points) + " checks" +
          (t.failed_points ? " found mismatches" : ", none found a mismatch") +
          "; " + M.exact(checked) + " pages checked in the checks listed" +
          (t.skipped_points ? "; " + M.exact(t.skipped_points) + " skipped" : "") +
          (t.unchecked_points ? "; " + M.exact(t.unchecked_points) + " could not run" : "")));
        const dl = M.el("dl", { class: "totals" });
        for (const [k, val] of Object.entries(t)) dl.append(M.el("dt", null, k.replace(/_/g, " ")), M.el("dd", null, M.exact(val)));
        parts.push(dl);
        const points = failed.concat((v.points || []).filter((p) => !(p.mismatched_pages > 0)));
        parts.push(table(["seq", "t", "pid", "space", "point", "checked", "mismatched", "where"], points.map(pointRow)));
        if (v.left_out) parts.push(M.el("p", { class: "sub" }, M.exact(v.left_out) + " passed checks are not listed."));
      }
      const warnings = meta.warnings || [];
      if (warnings.length) {
        parts.push(M.el("h3", null, warnings.length + " warning(s)"));
        parts.push(table(["seq", "t", "what", "pid", "space", "message"], warnings.map((w) => M.el("tr", { onclick: () => M.axis.seek(w.t_ns) },
          M.el("td", { class: "num" }, String(w.seq)), M.el("td", { class: "num" }, M.ms(w.t_ns)), M.el("td", null, String(w.what)),
          M.el("td", { class: "num" }, w.pid == null ? "" : String(w.pid)), M.el("td", { class: "num" }, w.space == null ? "" : String(w.space)),
          M.el("td", { class: "detail", title: w.message }, w.message)))));
      }
      for (const p of meta.problems || []) parts.push(M.el("p", { class: "bad" }, "stream problem: " + p));
      M.fill(root, parts);
    },
  };
})(MEVI);
