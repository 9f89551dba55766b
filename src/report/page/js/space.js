// The address space at the cursor, as mevi draws it, with time travel: per live space a canvas
// where each tracked mapping starts a line of cells (`ppc` pages a cell, the least power of two
// that fits the space in about 64 lines), each cell a column of written / zero-page / untouched
// shares; runs of untracked mappings are one grey line; gaps are a rule (or, shown, up to
// three lines). Beside it, one DOM row per mapping with the figures as data attributes.
(function (M) {
  const LABEL = 150, CELL = 2, LINE = 7, MAX_LINES = 64, UNTRACKED_H = 14, GAP_H = 12;
  let root, showGaps = false;

  /** Decimal text of an integer, exact past 2^53 too (data attributes). */
  M.dec = (n) => (n == null ? "" : n > Number.MAX_SAFE_INTEGER ? BigInt(n).toString() : String(n));

  /** Rows of a space's canvas: tracked mappings, untracked groups, gaps; `ppc` pages a cell. */
  function layout(space, w, page) {
    const perLine = Math.max(16, Math.floor((w - LABEL - 8) / CELL));
    const tracked = space.mappings.filter((m) => m.tracked);
    const linesAt = (ppc) => tracked.reduce((n, m) => n + Math.ceil(Math.ceil((m.end - m.start) / page / ppc) / perLine), 0);
    let ppc = 1;
    while (linesAt(ppc) > MAX_LINES && ppc < 2 ** 40) ppc *= 2;
    const rows = [];
    let y = 2, prevEnd = null;
    const ms = space.mappings;
    for (let i = 0; i < ms.length;) {
      const m = ms[i];
      if (prevEnd != null && m.start > prevEnd) {
        const bytes = m.start - prevEnd;
        let h = GAP_H, capped = false;
        if (showGaps) {
          const lines = Math.ceil(bytes / page / ppc / perLine);
          capped = lines > 3;
          h = Math.max(GAP_H, Math.min(3, lines) * LINE);
        }
        rows.push({ type: "gap", y, h, start: prevEnd, end: m.start, bytes, capped });
        y += h;
      }
      if (m.tracked) {
        const cells = Math.max(1, Math.ceil((m.end - m.start) / page / ppc));
        const lines = Math.ceil(cells / perLine);
        const h = Math.max(14, lines * LINE + 2);
        rows.push({ type: "tracked", y, h, m, cells, lines });
        y += h;
        prevEnd = m.end;
        i += 1;
        continue;
      }
      const group = [m];
      let j = i + 1;
      while (j < ms.length && !ms[j].tracked) group.push(ms[j++]);
      rows.push({ type: "untracked", y, h: UNTRACKED_H, ms: group, start: group[0].start, end: group[group.length - 1].end });
      y += UNTRACKED_H;
      prevEnd = group[group.length - 1].end;
      i = j;
    }
    return { rows, ppc, perLine, height: y + 2 };
  }

  /** Written and zero bytes per cell of a tracked mapping. */
  function cellShares(space, m, ppc, page, cells) {
    const cb = ppc * page;
    const written = new Float64Array(cells), zero = new Float64Array(cells);
    space.pages.each(m.start, m.end, (s, e, k) => {
      const arr = k === 2 ? zero : written;
      for (let c = Math.floor((s - m.start) / cb); c < cells; c++) {
        const c0 = m.start + c * cb;
        if (c0 >= e) break;
        arr[c] += Math.min(e, c0 + cb) - Math.max(s, c0);
      }
    });
    return { written, zero, cb };
  }

  function draw(canvas, space, page, w) {
    canvas.style.width = w + "px";
    const L = layout(space, w, page);
    const { g } = M.fitCanvas(canvas, L.height, w);
    canvas._layout = L;
    g.textBaseline = "top";
    for (const r of L.rows) {
      if (r.type === "gap") {
        g.fillStyle = M.colour.gap;
        g.fillRect(LABEL, r.y + Math.floor(r.h / 2) - 1, w - LABEL - 8, 2);
        g.font = "10px system-ui, sans-serif";
        g.fillStyle = "#7d8590";
        g.textBaseline = "middle";
        g.fillText((r.capped ? "≈ " : "") + "gap " + M.size(r.bytes), 8, r.y + r.h / 2);
        g.textBaseline = "top";
        continue;
      }
      g.font = "10px ui-monospace, SFMono-Regular, Menlo, monospace";
      g.fillStyle = "#4a525c";
      g.fillText(M.hex(r.type === "tracked" ? r.m.start : r.start), 8, r.y + 1);
      if (r.type === "untracked") {
        g.fillStyle = M.colour.untracked;
        g.fillRect(LABEL, r.y + 2, w - LABEL - 8, r.h - 4);
        const names = [...new Set(r.ms.map((m) => (m.path || "[" + m.kind + "]").split("/").pop()))];
        g.font = "10px system-ui, sans-serif";
        g.fillStyle = "#464d56";
        g.fillText(r.ms.length + " untracked: " + names.slice(0, 6).join(", ") + (names.length > 6 ? " …" : ""), LABEL + 6, r.y + 2);
        continue;
      }
      const m = r.m;
      if (r.lines > 1) {
        g.font = "10px system-ui, sans-serif";
        g.fillStyle = "#7d8590";
        g.fillText(m.kind + " " + m.prot + " " + M.size(m.end - m.start), 8, r.y + 12);
      }
      const { written, zero, cb } = cellShares(space, m, L.ppc, page, r.cells);
      for (let line = 0; line < r.lines; line++) {
        const n = Math.min(L.perLine, r.cells - line * L.perLine);
        g.fillStyle = M.colour.untouched;
        g.fillRect(LABEL, r.y + 1 + line * LINE, n * CELL, LINE - 1);
      }
      // Heights in whole pixels (a cell is LINE - 1 high; any page at all shows as one pixel),
      // so that neighbours alike are drawn as one rectangle.
      const H = LINE - 1;
      const px = (bytes, len) => (bytes <= 0 ? 0 : Math.max(1, Math.round((H * bytes) / len)));
      for (let line = 0; line < r.lines; line++) {
        const yb = r.y + 1 + line * LINE + H; // the cells' bottom
        const c0 = line * L.perLine, c1 = Math.min(r.cells, c0 + L.perLine);
        let from = c0, hw0 = -1, hz0 = -1;
        for (let c = c0; c <= c1; c++) {
          let hw = -2, hz = -2;
          if (c < c1) {
            const len = Math.min(cb, m.end - (m.start + c * cb));
            hw = px(written[c], len);
            hz = Math.min(H - hw, px(zero[c], len));
          }
          if (hw === hw0 && hz === hz0) continue;
          if (hw0 > 0 || hz0 > 0) {
            const x = LABEL + (from - c0) * CELL, wpx = (c - from) * CELL;
            g.fillStyle = M.colour.written;
            g.fillRect(x, yb - hw0, wpx, hw0);
            g.fillStyle = M.colour.zero;
            g.fillRect(x, yb - hw0 - hz0, wpx, hz0);
          }
          from = c;
          hw0 = hw;
          hz0 = hz;
        }
      }
    }
  }

  function mappingLines(space, m, page) {
    const lines = [
      M.hex(m.start) + " – " + M.hex(m.end) + " (" + M.size(m.end - m.start) + ")",
      m.kind + " " + m.prot + (m.path ? " " + m.path : "") + (m.tracked ? "" : " (untracked)"),
    ];
    if (m.tracked) {
      const [res, zero] = space.pages.count(m.start, m.end);
      const resident = Math.floor(res / page);
      const untouched = Math.max(0, Math.floor((m.end - m.start) / page) - resident);
      lines.push(M.exact(resident) + " resident pages (" + M.exact(Math.floor(zero / page)) + " of them zero pages), " + M.exact(untouched) + " untouched");
    }
    lines.push("made at " + M.ms(m.t) + " by thread " + m.tid + " (line " + m.seq + ")");
    return lines.concat(siteLines(space, m.start, m.end));
  }

  /** The sites within `[a, b)`, by bytes, largest first: `[[id, bytes]]`. */
  function sitesWithin(space, a, b) {
    const by = new Map();
    for (const [id, bytes] of space.sitesIn(a, b)) by.set(id, (by.get(id) || 0) + bytes);
    return [...by].sort((x, y) => y[1] - x[1] || x[0] - y[0]);
  }

  /** What made `[a, b)` (a trace with stacks): its largest site's user frame and first callers,
   * and how many others. */
  function siteLines(space, a, b) {
    if (!M.sites.any()) return [];
    const sites = sitesWithin(space, a, b);
    if (!sites.length) return ["call site: none (a line without a stack: exec's mappings, the main stack)"];
    const [first, ...more] = M.sites.describe(sites[0][0], 3);
    const lines = ["call site: " + first].concat(more.map((l) => "   " + l));
    if (sites.length > 1) lines.push("and " + (sites.length - 1) + " other site(s) for " + M.size(sites.slice(1).reduce((n, s) => n + s[1], 0)) + " of it");
    return lines;
  }

  /** A site's user frame, short: `alloc_arena_a (sites_arena.c:45)`. */
  function siteName(id) {
    const site = M.sites.get(id);
    if (!site || !site.frames.length) return "site " + id;
    const f = site.frames[M.sites.userFrame(site)];
    const where = M.sites.where(f);
    return M.sites.name(f) + (where ? " (" + where + ")" : "");
  }

  function hover(ev, canvas, space, page) {
    const L = canvas._layout;
    if (!L) return;
    const rect = canvas.getBoundingClientRect();
    const x = ev.clientX - rect.left, y = ev.clientY - rect.top;
    const r = L.rows.find((row) => y >= row.y && y < row.y + row.h);
    if (!r) { M.tip.hide(); return; }
    if (r.type === "gap") {
      M.tip.show(ev, ["gap " + M.hex(r.start) + " – " + M.hex(r.end), M.size(r.bytes) + " (" + M.exact(r.bytes) + " B) not mapped"]);
      return;
    }
    if (r.type === "untracked") {
      const lines = [r.ms.length + " untracked mapping(s), not followed page by page"];
      for (const m of r.ms.slice(0, 10)) lines.push(M.hex(m.start) + " " + M.size(m.end - m.start) + " " + m.kind + " " + m.prot + (m.path ? " " + m.path : ""));
      if (r.ms.length > 10) lines.push("…");
      M.tip.show(ev, lines);
      return;
    }
    const lines = mappingLines(space, r.m, page);
    if (x >= LABEL) {
      const c = Math.floor((y - r.y - 1) / LINE) * L.perLine + Math.floor((x - LABEL) / CELL);
      if (c >= 0 && c < r.cells && Math.floor((x - LABEL) / CELL) < L.perLine) {
        const a = r.m.start + c * L.ppc * page, b = Math.min(r.m.end, a + L.ppc * page);
        const [res, zero] = space.pages.count(a, b);
        lines.push("cell " + M.hex(a) + ": " + M.exact(Math.ceil((b - a) / page)) + " page(s), " + M.exact(Math.floor((res - zero) / page)) + " written, " + M.exact(Math.floor(zero / page)) + " zero page");
        const cellSites = sitesWithin(space, a, b);
        if (cellSites.length && sitesWithin(space, r.m.start, r.m.end).length > 1) {
          lines.push("cell's site: " + cellSites.map(([id]) => siteName(id)).join(", "));
        }
      }
    }
    M.tip.show(ev, lines);
  }

  /** The table's cell naming the largest site of mapping `m`, its callers in its title. */
  function siteCell(space, m, cell) {
    const sites = sitesWithin(space, m.start, m.end);
    if (!sites.length) return cell("path", "");
    const text = siteName(sites[0][0]) + (sites.length > 1 ? " +" + (sites.length - 1) : "");
    return cell("path", text, M.sites.describe(sites[0][0], 6).join("\n"));
  }

  /** Text safe inside HTML (element content and quoted attributes). */
  const esc = (v) => String(v).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);

  /** The mapping table's HTML: one `tr.mapping` per mapping, its figures as data attributes
   * (built as one string: a trace may have hundreds of spaces of dozens of mappings each). */
  const ROW = "mapping"; // (a name, so that the script's own text never reads as a row)
  function tableHtml(space, page) {
    const d = space.describe(page);
    const id = M.dec(space.id);
    const cell = (cls, text, title) => "<td" + (cls ? ' class="' + cls + '"' : "") + (title ? ' title="' + esc(title) + '"' : "") + ">" + esc(text) + "</td>";
    const stacks = M.sites.any();
    const rows = d.mappings.map((m) => '<tr class="' + (m.tracked ? ROW : ROW + " untracked") + '" data-space="' + id +
      '" data-start="' + M.dec(m.start) + '" data-end="' + M.dec(m.end) + '" data-kind="' + esc(m.kind) +
      '" data-prot="' + esc(m.prot) + '" data-path="' + esc(m.path || "") + '" data-tracked="' + m.tracked +
      '" data-resident="' + M.dec(m.resident_pages) + '" data-zero="' + M.dec(m.zero_pages) +
      '" data-untouched="' + M.dec(m.untouched_pages) + '" data-made-seq="' + M.dec(m.made_seq) +
      '" data-sites="' + sitesWithin(space, m.start, m.end).map(([id]) => id).join(" ") + '">' +
      cell("mono", M.hex(m.start) + "–" + M.hex(m.end)) +
      cell("num", M.size(m.end - m.start), M.exact(m.end - m.start) + " B") +
      cell(null, m.kind) + cell("mono", m.prot) +
      cell("num", m.tracked ? M.exact(m.resident_pages) : "-") +
      cell("num", m.tracked ? M.exact(m.zero_pages) : "-") +
      cell("num", m.tracked ? M.exact(m.untouched_pages) : "-") +
      cell("num", M.ms(m.made_t_ns) + ", " + m.made_tid) +
      cell("path", m.path || "", m.path || "") + (stacks ? siteCell(space, m, cell) : "") + "</tr>");
    const head = ["range", "size", "kind", "prot", "resident", "zero", "untouched", "made (ms, tid)", "path"].concat(stacks ? ["call site"] : [])
      .map((h, i) => "<th" + (i === 1 || (i >= 4 && i <= 7) ? ' class="num"' : "") + ">" + h + "</th>").join("");
    return '<table class="maps"><thead><tr>' + head + "</tr></thead><tbody>" + rows.join("") + "</tbody></table>";
  }

  /** Spaces drawn at once; past that, the smaller ones are listed closed (their rows are
   * there all the same: the page's contract is a `.mapping` per mapping of every live space)
   * and drawn when opened. */
  const DRAWN = 8;

  /** The blocks shown, by space id, each with what it was built from: a block is built again
   * only when its space's state (its stamp), its label, or the view's width or gaps changed,
   * so a step of the cursor rebuilds only the spaces it changed, not hundreds. */
  let shown = new Map();
  const opened = new Set(); // ids of closed blocks the user opened: kept open as they change

  /** A space's block for `shown` entry `b`; what draws later (on hover, on opening) reads
   * `b.space`, the current decoder's space of the same state. */
  function block(b, page, width, drawn) {
    const space = b.space;
    const info = M.data.space(space.id);
    const open = drawn || opened.has(space.id);
    const tracked = space.mappings.filter((m) => m.tracked).length;
    const head = M.el(drawn ? "h3" : "summary", null, M.el("i", { class: "swatch", style: "background:" + info.colour }), info.label,
      M.el("span", { class: "sub" }, " · resident " + M.size(space.resident) + " (" + M.exact(space.resident) + " B) · peak so far " +
        M.size(space.peak) + " · " + space.mappings.length + " mappings, " + tracked + " tracked"));
    const canvas = M.el("canvas", { class: "spacemap", "aria-label": "address space " + space.id });
    canvas.addEventListener("pointermove", (ev) => hover(ev, canvas, b.space, page));
    canvas.addEventListener("pointerleave", () => M.tip.hide());
    const note = M.el("div", { class: "note" });
    const maps = M.el("div", { class: "scroll maps-box" });
    maps.innerHTML = tableHtml(space, page);
    const el = M.el(drawn ? "div" : "details", { class: "space-block", "data-space": M.dec(space.id), open: !drawn && open },
      head, M.el("div", { class: "spacemap-wrap" }, canvas), note, maps);
    const paint = () => {
      draw(canvas, b.space, page, width);
      note.textContent = "one cell = " + M.exact(canvas._layout.ppc) + " page(s) of " + M.size(page) +
        "; " + (showGaps ? "gaps shown (at most three lines each)" : "gaps collapsed");
    };
    if (open) paint();
    if (!drawn) {
      el.addEventListener("toggle", () => {
        if (el.open) opened.add(space.id); else opened.delete(space.id);
        if (el.open && !canvas._layout) paint();
      });
    }
    return el;
  }

  /** The line saying how many spaces are live (kept while it says the same). */
  let countNote = null;
  function countLine(text) {
    if (!countNote || countNote.textContent !== text) countNote = M.el("p", { class: "sub" }, text);
    return countNote;
  }

  function render() {
    const now = M.now;
    const page = M.data.page;
    const blocks = [];
    if (!now.live.length) {
      const last = (M.data.meta.spaces || []).reduce((a, s) => (s.ended_ns != null && (a == null || s.ended_ns > a) ? s.ended_ns : a), null);
      const msg = M.el("p", { class: "empty" }, "No process is alive at " + M.ms(M.axis.cursor) + ". ");
      if (last != null && last > 0 && M.axis.cursor >= last) {
        msg.append(M.el("button", { type: "button", onclick: () => M.axis.seek(last - 1) }, "Show the last instant before the last space ended (" + M.ms(last - 1) + ")"));
      }
      blocks.push(msg);
    }
    const width = root.clientWidth || 900;
    const largest = new Set(now.live.slice().sort((a, b) => b.resident - a.resident || a.id - b.id).slice(0, DRAWN));
    if (now.live.length > DRAWN) {
      blocks.push(countLine(now.live.length + " live spaces: the " + DRAWN + " with the most resident are drawn, the others are listed closed (open one to draw it)."));
    }
    const next = new Map();
    for (const space of now.live) {
      const drawn = largest.has(space), old = shown.get(space.id);
      const key = [space.stamp, M.data.space(space.id).label, width, showGaps, drawn].join(" ");
      let b = old && old.key === key ? old : null;
      if (b) b.space = space;
      else (b = { key, space }).el = block(b, page, width, drawn);
      next.set(space.id, b);
      blocks.push(b.el);
    }
    shown = next;
    for (const id of opened) if (!next.has(id)) opened.delete(id);
    // Blocks that stay where they are are left alone (moving hundreds is a layout of them all).
    const keep = new Set(blocks);
    let at = root.firstChild;
    for (const b of blocks) {
      if (at === b) at = at.nextSibling;
      else if (at && !keep.has(at)) { root.replaceChild(b, at); at = b.nextSibling; }
      else root.insertBefore(b, at);
    }
    while (at) { const next = at.nextSibling; at.remove(); at = next; }
  }

  M.space = {
    init(el) {
      const toggle = M.el("input", { type: "checkbox", id: "gaps-toggle", onchange: (ev) => M.space.setGaps(ev.target.checked) });
      const legend = M.el("div", { class: "legend" },
        ...[["written", M.colour.written], ["zero page (first touched by a read)", M.colour.zero], ["untouched", M.colour.untouched], ["untracked mapping", M.colour.untracked], ["gap", M.colour.gap]]
          .map(([l, c]) => M.el("span", { class: "legend-item" }, M.el("i", { class: "swatch", style: "background:" + c }), l)),
        M.el("label", { class: "legend-item toggle" }, toggle, " show gaps"));
      root = M.el("div", { class: "spaces" });
      el.append(legend, root);
      M.space.toggle = toggle;
    },
    setGaps(on) {
      showGaps = !!on;
      if (M.space.toggle) M.space.toggle.checked = showGaps;
      render();
    },
    gaps: () => showGaps,
    draw: render,
  };
})(MEVI);
