// The address space at the cursor, as mevi draws it, with time travel: per live space a canvas
// of its mappings in address order, each page a cell (a column of written / zero-page /
// untouched shares). Small mappings flow one after another along the lines, the gaps between
// them collapsed to a tick, as a memory map viewer draws them; a mapping of more than a line
// starts its own block, and one of more than BLOCK_LINES lines gets its own scale (a power of
// two of pages a cell), written beside it. Runs of untracked mappings are one grey line; gaps
// between blocks are a rule (or, shown, up to three lines). Only what is in view of a space's
// scroll box is drawn, so a space of tens of thousands of mappings draws as fast as one of ten.
// Beside it, one DOM row per mapping with the figures as data attributes.
(function (M) {
  const LABEL = 150, CELL = 3, LINE = 8, UNTRACKED_H = 14, GAP_H = 12, RIGHT = 8, TEXT = 12;
  const BLOCK_LINES = 8; // the most lines a mapping takes at one page a cell
  const VIEW = 560; // px of a space's drawing in view at once (a scroll box past that)
  let root, showGaps = false;

  /** Decimal text of an integer, exact past 2^53 too (data attributes). */
  M.dec = (n) => (n == null ? "" : n > Number.MAX_SAFE_INTEGER ? BigInt(n).toString() : String(n));

  /** Pages a cell of a mapping of `pages` pages: 1, or the least power of two that draws it in
   * BLOCK_LINES lines. */
  function scaleOf(pages, perLine) {
    let ppc = 1;
    while (Math.ceil(pages / ppc) > perLine * BLOCK_LINES && ppc < 2 ** 52) ppc *= 2;
    return ppc;
  }

  /**
   * Rows of a space's canvas, in address order: `map` rows (segments, each a tracked mapping
   * at `ppc` pages a cell from cell `at` of the row's grid of `perLine` cells a line: several
   * small ones in a run, or one that needs a line or more), `untracked` rows and `gap` rows.
   */
  function layout(space, w, page) {
    const perLine = Math.max(16, Math.floor((w - LABEL - RIGHT) / CELL));
    const ms = space.mappings;
    // Gaps, when shown, are drawn at the scale that would fit the space's tracked pages in
    // about 64 lines (in proportion to what is mapped, whatever each mapping's own scale).
    let trackedPages = 0;
    for (const m of ms) if (m.tracked) trackedPages += Math.ceil((m.end - m.start) / page);
    let gapPpc = 1;
    while (trackedPages / gapPpc > perLine * 64 && gapPpc < 2 ** 52) gapPpc *= 2;
    const rows = [];
    let y = 2, prevEnd = null, run = null;
    const push = (r) => { r.y = y; rows.push(r); y += r.h; };
    const close = () => {
      if (!run) return;
      run.lines = Math.ceil(run.next / perLine);
      run.end = run.segs[run.segs.length - 1].m.end;
      run.h = Math.max(14, run.lines * LINE + 2);
      push(run);
      run = null;
    };
    for (let i = 0; i < ms.length;) {
      const m = ms[i];
      const gap = prevEnd != null && m.start > prevEnd ? m.start - prevEnd : 0;
      if (m.tracked) {
        const pages = Math.max(1, Math.ceil((m.end - m.start) / page));
        const ppc = scaleOf(pages, perLine);
        const cells = Math.ceil(pages / ppc);
        const small = ppc === 1 && cells <= perLine;
        if (run && small && !(showGaps && gap)) {
          // After a cell of space (a tick in it for a gap), on this line if it fits.
          let at = run.next + 1;
          if ((at % perLine) + cells > perLine || run.next % perLine === 0) at = Math.ceil(run.next / perLine) * perLine;
          run.segs.push({ m, ppc, cells, at, gap: gap > 0 && at % perLine !== 0 });
          run.next = at + cells;
        } else {
          close();
          if (gap) gapRow(push, prevEnd, m.start, page, gapPpc, perLine);
          const seg = { m, ppc, cells, at: 0, gap: false };
          if (small) run = { type: "map", segs: [seg], next: cells, start: m.start };
          else {
            const lines = Math.ceil(cells / perLine);
            // Room for its labels: address, then kind and size, then its scale.
            const h = Math.max(lines * LINE + 2, 2 + (ppc > 1 ? 3 : 2) * TEXT);
            push({ type: "map", segs: [seg], lines, h, start: m.start, end: m.end, block: true });
          }
        }
        prevEnd = m.end;
        i += 1;
        continue;
      }
      close();
      if (gap) gapRow(push, prevEnd, m.start, page, gapPpc, perLine);
      const group = [m];
      let j = i + 1;
      while (j < ms.length && !ms[j].tracked) group.push(ms[j++]);
      push({ type: "untracked", h: UNTRACKED_H, ms: group, start: group[0].start, end: group[group.length - 1].end });
      prevEnd = group[group.length - 1].end;
      i = j;
    }
    close();
    return { rows, perLine, gapPpc, height: y + 2 };
  }

  function gapRow(push, start, end, page, ppc, perLine) {
    const bytes = end - start;
    let h = GAP_H, capped = false;
    if (showGaps) {
      const lines = Math.ceil(bytes / page / ppc / perLine);
      capped = lines > 3;
      h = Math.max(GAP_H, Math.min(3, lines) * LINE);
    }
    push({ type: "gap", h, start, end, bytes, capped });
  }

  /** Written and zero bytes per cell of segment `s`. */
  function cellShares(space, s, page) {
    const m = s.m, cb = s.ppc * page, cells = s.cells;
    const written = new Float64Array(cells), zero = new Float64Array(cells);
    space.pages.each(m.start, m.end, (a, e, k) => {
      const arr = k === 2 ? zero : written;
      for (let c = Math.floor((a - m.start) / cb); c < cells; c++) {
        const c0 = m.start + c * cb;
        if (c0 >= e) break;
        arr[c] += Math.min(e, c0 + cb) - Math.max(a, c0);
      }
    });
    return { written, zero, cb };
  }

  /** The segments of map row `r` with a cell on lines [l0, l1]. */
  function segsOn(r, perLine, l0, l1) {
    const segs = r.segs;
    const from = M.lowerBound(segs, (s) => s.at + s.cells > l0 * perLine);
    const out = [];
    for (let k = from; k < segs.length && segs[k].at < (l1 + 1) * perLine; k++) out.push(segs[k]);
    return out;
  }

  /** Where cell `c` of segment `s` is drawn in its row: x, and the top of its line. */
  function cellAt(s, c, perLine) {
    const g = s.at + c;
    return { x: LABEL + (g % perLine) * CELL, line: Math.floor(g / perLine) };
  }

  /** The label lines of map row `r`. */
  function labelOf(r, page) {
    if (r.block) {
      const s = r.segs[0], m = s.m;
      const lines = [M.hex(m.start), m.kind + " " + m.prot + " " + M.size(m.end - m.start)];
      if (s.ppc > 1) lines.push("1 cell = " + M.exact(s.ppc) + " pages");
      return lines;
    }
    if (r.segs.length === 1) return [M.hex(r.start)];
    let bytes = 0;
    for (const s of r.segs) bytes += s.m.end - s.m.start;
    return [M.hex(r.start), r.segs.length + " mappings, " + M.size(bytes)];
  }

  /** Draws the rows of view `v` in its box's scroll window. */
  function paint(v) {
    const L = v.L, w = v.width, h = Math.min(L.height, VIEW);
    v.canvas.style.width = w + "px";
    v.wrap.style.height = h + "px";
    v.spacer.style.height = L.height - h + "px";
    const { g } = M.fitCanvas(v.canvas, h, w);
    const top = Math.min(v.wrap.scrollTop, L.height - h);
    v.top = top;
    g.textBaseline = "top";
    const rows = L.rows;
    for (let i = M.lowerBound(rows, (r) => r.y + r.h > top); i < rows.length && rows[i].y < top + h; i++) {
      drawRow(g, v, rows[i], rows[i].y - top, top, h);
    }
  }

  function drawRow(g, v, r, y, top, viewH) {
    const w = v.width, L = v.L, page = v.page;
    if (r.type === "gap") {
      g.fillStyle = M.colour.gap;
      g.fillRect(LABEL, y + Math.floor(r.h / 2) - 1, w - LABEL - RIGHT, 2);
      g.font = "10px system-ui, sans-serif";
      g.fillStyle = "#7d8590";
      g.textBaseline = "middle";
      g.fillText((r.capped ? "≈ " : "") + "gap " + M.size(r.bytes), 8, y + r.h / 2);
      g.textBaseline = "top";
      return;
    }
    g.font = "10px ui-monospace, SFMono-Regular, Menlo, monospace";
    g.fillStyle = "#4a525c";
    if (r.type === "untracked") {
      g.fillText(M.hex(r.start), 8, y + 1);
      g.fillStyle = M.colour.untracked;
      g.fillRect(LABEL, y + 2, w - LABEL - RIGHT, r.h - 4);
      const names = [...new Set(r.ms.map((m) => (m.path || "[" + m.kind + "]").split("/").pop()))];
      g.font = "10px system-ui, sans-serif";
      g.fillStyle = "#464d56";
      g.fillText(r.ms.length + " untracked: " + names.slice(0, 6).join(", ") + (names.length > 6 ? " …" : ""), LABEL + 6, y + 2);
      return;
    }
    const perLine = L.perLine;
    // Only the lines in view (a run may be hundreds of lines long).
    const l0 = Math.max(0, Math.floor((top - r.y - 1) / LINE));
    const l1 = Math.min(r.lines - 1, Math.floor((top + viewH - r.y - 1) / LINE));
    if (r.block) {
      labelOf(r, page).forEach((text, k) => {
        g.font = k === 0 ? "10px ui-monospace, SFMono-Regular, Menlo, monospace" : "10px system-ui, sans-serif";
        g.fillStyle = k === 0 ? "#4a525c" : k === 2 ? "#b5651d" : "#7d8590";
        g.fillText(text, 8, y + 1 + k * TEXT);
      });
    } else {
      // A run: its first address and count, then each other line's first mapping, every other
      // line (a label is higher than a line).
      const label = labelOf(r, page);
      g.fillText(label[0], 8, y + 1);
      const more = r.lines > 2 && label.length > 1;
      if (more) {
        g.font = "10px system-ui, sans-serif";
        g.fillStyle = "#7d8590";
        g.fillText(label[1], 8, y + 1 + TEXT);
        g.font = "10px ui-monospace, SFMono-Regular, Menlo, monospace";
        g.fillStyle = "#98a0a9";
      }
      for (let line = Math.max(l0 - (l0 % 2), more ? 4 : 2); line <= Math.min(l1, r.lines - 2); line += 2) {
        const first = segsOn(r, perLine, line, line).find((s) => s.at >= line * perLine);
        if (first) g.fillText(M.hex(first.m.start), 8, y + 1 + line * LINE);
      }
    }
    const H = LINE - 1;
    // Heights in whole pixels (any page at all shows as one), so that neighbours alike are
    // drawn as one rectangle.
    const px = (bytes, len) => (bytes <= 0 ? 0 : Math.max(1, Math.round((H * bytes) / len)));
    for (const s of segsOn(r, perLine, l0, l1)) {
      const m = s.m;
      const { written, zero, cb } = cellShares(v.space, s, page);
      if (s.gap) {
        const { x, line } = cellAt(s, 0, perLine);
        g.fillStyle = M.colour.gap;
        g.fillRect(x - CELL + 1, y + 1 + line * LINE, 1, H);
      }
      // Line by line: the untouched ground, then runs of cells alike.
      for (let c0 = 0; c0 < s.cells;) {
        const { x: x0, line } = cellAt(s, c0, perLine);
        const c1 = Math.min(s.cells, c0 + (perLine - ((s.at + c0) % perLine)));
        if (line >= l0 && line <= l1) {
          const yb = y + 1 + line * LINE + H; // the cells' bottom
          g.fillStyle = M.colour.untouched;
          g.fillRect(x0, yb - H, (c1 - c0) * CELL, H);
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
              const x = x0 + (from - c0) * CELL, wpx = (c - from) * CELL;
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
        c0 = c1;
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

  /** The row and, in a map row, the segment and cell under `(x, y)` (CSS px in view `v`'s
   * canvas), or null. */
  function hit(v, x, y) {
    const L = v.L;
    if (!L) return null;
    const yy = y + v.top;
    const i = M.lowerBound(L.rows, (r) => r.y + r.h > yy);
    const r = L.rows[i];
    if (!r || yy < r.y) return null;
    if (r.type !== "map") return { r };
    const line = Math.floor((yy - r.y - 1) / LINE), col = Math.floor((x - LABEL) / CELL);
    if (x < LABEL || col >= L.perLine || line < 0 || line >= r.lines) return { r, label: true };
    const g = line * L.perLine + col;
    const s = r.segs[M.lowerBound(r.segs, (q) => q.at > g) - 1];
    if (!s || g >= s.at + s.cells) return { r };
    return { r, s, c: g - s.at };
  }

  function hover(ev, v) {
    const rect = v.canvas.getBoundingClientRect();
    const h = hit(v, ev.clientX - rect.left, ev.clientY - rect.top);
    if (!h) { M.tip.hide(); return; }
    const { r, s, c } = h, space = v.space, page = v.page;
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
    if (!s) {
      if (r.block) { M.tip.show(ev, mappingLines(space, r.segs[0].m, page)); return; }
      let bytes = 0, gaps = 0;
      for (const q of r.segs) { bytes += q.m.end - q.m.start; if (q.gap) gaps += 1; }
      M.tip.show(ev, [r.segs.length + " small mapping(s), " + M.hex(r.start) + " – " + M.hex(r.end),
        M.size(bytes) + " mapped; one cell a page; a tick between two mappings is a gap (" + gaps + " here), a blank cell none",
        "hover a mapping for its figures"]);
      return;
    }
    const m = s.m, lines = mappingLines(space, m, page);
    if (s.ppc > 1) lines.push("drawn at 1 cell = " + M.exact(s.ppc) + " pages (a mapping of more than " + BLOCK_LINES + " lines)");
    const a = m.start + c * s.ppc * page, b = Math.min(m.end, a + s.ppc * page);
    const [res, zero] = space.pages.count(a, b);
    lines.push("cell " + M.hex(a) + ": " + M.exact(Math.ceil((b - a) / page)) + " page(s), " + M.exact(Math.floor((res - zero) / page)) + " written, " + M.exact(Math.floor(zero / page)) + " zero page");
    const cellSites = sitesWithin(space, a, b);
    if (cellSites.length && sitesWithin(space, m.start, m.end).length > 1) {
      lines.push("cell's site: " + cellSites.map(([id]) => siteName(id)).join(", "));
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

  /** The mapping table: one `tr.mapping` per mapping, its figures as data attributes (built
   * as one string). Only the rows near the box's view are in the document (a space may have
   * tens of thousands of mappings, and a table that long takes seconds to lay out), with
   * padding rows standing for the rest: those in view and OVERSCAN either side, so that a
   * table of a few hundred rows is there whole. */
  const ROW = "mapping"; // (a name, so that the script's own text never reads as a row)
  const ROW_H = 22, OVERSCAN = 200, BOX_H = 260;
  function table(space, page, box) {
    const d = space.describe(page);
    const id = M.dec(space.id);
    const cell = (cls, text, title) => "<td" + (cls ? ' class="' + cls + '"' : "") + (title ? ' title="' + esc(title) + '"' : "") + ">" + esc(text) + "</td>";
    const stacks = M.sites.any();
    const rowHtml = (m) => '<tr class="' + (m.tracked ? ROW : ROW + " untracked") + '" data-space="' + id +
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
      cell("path", m.path || "", m.path || "") + (stacks ? siteCell(space, m, cell) : "") + "</tr>";
    const head = ["range", "size", "kind", "prot", "resident", "zero", "untouched", "made (ms, tid)", "path"].concat(stacks ? ["call site"] : [])
      .map((h, i) => "<th" + (i === 1 || (i >= 4 && i <= 7) ? ' class="num"' : "") + ">" + h + "</th>").join("");
    const pad = (rows) => (rows > 0 ? '<tr class="pad"><td colspan="10" style="height:' + rows * ROW_H + 'px"></td></tr>' : "");
    const n = d.mappings.length;
    let from = -1, to = -1;
    const paint = () => {
      const first = Math.floor(box.scrollTop / ROW_H), last = first + Math.ceil(BOX_H / ROW_H);
      // Drawn again only when the view nears the edge of what is there.
      if (from >= 0 && (from === 0 || first - from > OVERSCAN / 4) && (to === n || to - last > OVERSCAN / 4)) return;
      from = Math.max(0, first - OVERSCAN);
      to = Math.min(n, last + OVERSCAN);
      let html = "";
      for (let i = from; i < to; i++) html += rowHtml(d.mappings[i]);
      box.innerHTML = '<table class="maps"><thead><tr>' + head + "</tr></thead><tbody>" + pad(from) + html + pad(n - to) + "</tbody></table>";
    };
    paint();
    let pending = 0;
    box.addEventListener("scroll", () => {
      if (!pending) pending = requestAnimationFrame(() => { pending = 0; paint(); });
    });
  }

  /** Spaces drawn at once; past that, the smaller ones are listed closed (their rows are
   * there all the same: the page's contract is a `.mapping` per mapping of every live space,
   * up to OVERSCAN past the view of its table) and drawn when opened. */
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
    const canvas = M.el("canvas", { class: "spacemap sticky", "aria-label": "address space " + space.id });
    const spacer = M.el("div");
    const wrap = M.el("div", { class: "spacemap-wrap scroll" }, canvas, spacer);
    // What hovering and scrolling read: `b.space` is the current decoder's space of this state.
    const v = b.view = { canvas, wrap, spacer, page, width, L: null, top: 0, get space() { return b.space; } };
    canvas.addEventListener("pointermove", (ev) => hover(ev, v));
    canvas.addEventListener("pointerleave", () => M.tip.hide());
    let pending = 0;
    wrap.addEventListener("scroll", () => {
      if (!pending && v.L) pending = requestAnimationFrame(() => { pending = 0; paint(v); });
    });
    const note = M.el("div", { class: "note" });
    const maps = M.el("div", { class: "scroll maps-box" });
    table(space, page, maps);
    const el = M.el(drawn ? "div" : "details", { class: "space-block", "data-space": M.dec(space.id), open: !drawn && open },
      head, wrap, note, maps);
    v.draw = () => {
      if (!v.L) {
        v.L = layout(b.space, width, page);
        let most = 1;
        for (const r of v.L.rows) if (r.block && r.segs[0].ppc > most) most = r.segs[0].ppc;
        note.textContent = "one cell = one page of " + M.size(page) +
          (most > 1 ? "; a mapping of more than " + BLOCK_LINES + " lines at more pages a cell, as its label says (up to " + M.exact(most) + ")" : "") +
          "; small mappings follow one another, a tick for a gap between two; " +
          (showGaps ? "gaps shown (at most three lines each)" : "other gaps collapsed");
      }
      paint(v);
    };
    if (open) v.draw();
    if (!drawn) {
      el.addEventListener("toggle", () => {
        if (el.open) opened.add(space.id); else opened.delete(space.id);
        if (el.open && !v.L) v.draw();
      });
    }
    return el;
  }

  /** Where mapping `start` of space `id` is drawn, scrolled into its box's view first (for
   * tests): its pages a cell, a cell's size, the labels of its row, and per cell its pages,
   * those written and zero, and its box in the canvas (CSS px); null when not drawn. */
  function cells(id, start) {
    const b = shown.get(Number(id));
    const v = b && b.view;
    if (!v || !v.L) return null;
    start = Number(start);
    for (const r of v.L.rows) {
      if (r.type !== "map" || start < r.start || start >= r.end) continue;
      const s = r.segs.find((q) => q.m.start === start);
      if (!s) continue;
      const line0 = cellAt(s, 0, v.L.perLine).line;
      v.wrap.scrollTop = Math.max(0, r.y + 1 + line0 * LINE - 40);
      paint(v);
      const { written, zero } = cellShares(v.space, s, v.page);
      const out = [];
      for (let c = 0; c < s.cells; c++) {
        const { x, line } = cellAt(s, c, v.L.perLine);
        const a = s.m.start + c * s.ppc * v.page, e = Math.min(s.m.end, a + s.ppc * v.page);
        out.push({
          first_page: c * s.ppc, pages: Math.ceil((e - a) / v.page),
          written_pages: Math.round(written[c] / v.page), zero_pages: Math.round(zero[c] / v.page),
          x, y: r.y + 1 + line * LINE - v.top, w: CELL, h: LINE - 1,
        });
      }
      return { space: id, start, ppc: s.ppc, label: r.block ? labelOf(r, v.page) : null, run: !r.block, cells: out };
    }
    return null;
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
      else {
        (b = { key, space }).el = block(b, page, width, drawn);
        // A space rebuilt as the cursor moves stays scrolled where it was.
        if (old && old.view && old.view.wrap.scrollTop > 0) b.scrollTo = old.view.wrap.scrollTop;
      }
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
    while (at) { const after = at.nextSibling; at.remove(); at = after; }
    for (const b of next.values()) {
      if (b.scrollTo == null) continue;
      b.view.wrap.scrollTop = b.scrollTo;
      b.scrollTo = null;
      if (b.view.L) paint(b.view);
    }
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
    cells,
  };
})(MEVI);
