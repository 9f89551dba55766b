// Resident memory by call stack at the cursor, as an icicle flame graph (root on top, callees
// below, as memray draws it): the bytes resident in each range, filed under the stack of the
// line that mapped it (the records' sites, by replay --by-site's rules), from the outermost
// frame in. System frames (libc, the loader, allocators, runtimes) are folded away unless
// asked for, so a stack ends at the program's own code that asked for the memory. A click
// zooms into a node (and the ancestors above it zoom out); the view follows the cursor.
(function (M) {
  const ROW = 18, MIN_PX = 0.5, FONT = "11px system-ui, sans-serif", FOLDED = "#e6d8bd";
  const FOLD = 3; // a chain of more frames than this is folded into one box
  const unfolded = new Set(); // the chains (by their first node's path) clicked open
  let root, canvas, info, note, systemBox, resetButton;
  let showSystem = false;
  let zoom = []; // the names from the root's child down to the node zoomed into
  let drawnKey = null, rects = [], tree = null;

  /** Resident bytes per site at the cursor (0: ranges without a site), over every space
   * the records hold (their total is the tree's at the cursor). */
  function weights() {
    const w = new Map();
    const add = (id, bytes) => { if (bytes > 0) w.set(id, (w.get(id) || 0) + bytes); };
    for (const s of M.now.dec.spaces.values()) {
      let sited = 0;
      for (const p of s.sites) {
        const bytes = s.pages.count(p.start, p.end)[0];
        add(p.site, bytes);
        sited += bytes;
      }
      add(0, s.resident - sited);
    }
    return w;
  }

  function node(name, frame, parent) {
    return { name, frame, parent, bytes: 0, self: 0, children: new Map(), places: new Map(), sites: new Set() };
  }

  /** The tree of `weights` by the sites' paths: each node holds what its callees hold. */
  function build(w, system) {
    const top = node("all resident memory", null, null);
    for (const [id, bytes] of w) {
      top.bytes += bytes;
      let n = top;
      for (const step of M.sites.path(id, system)) {
        let c = n.children.get(step.name);
        if (!c) n.children.set(step.name, (c = node(step.name, step.frame, n)));
        c.bytes += bytes;
        if (step.frame) {
          const place = M.sites.where(step.frame) || "";
          c.places.set(place, (c.places.get(place) || 0) + bytes);
        }
        n = c;
      }
      n.self += bytes;
      n.sites.add(id);
    }
    return top;
  }

  const byBytes = (a, b) => b.bytes - a.bytes || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const kids = (n) => [...n.children.values()].sort(byBytes);

  /** The node zoomed into: the deepest node of `zoom` that holds bytes now. */
  function focusOf(top) {
    let n = top;
    for (const name of zoom) {
      const c = n.children.get(name);
      if (!c || c.bytes <= 0) break;
      n = c;
    }
    return n;
  }

  function pathOf(n) {
    const names = [];
    for (; n && n.parent; n = n.parent) names.unshift(n.name);
    return names;
  }

  /** The nodes of a chain below `n`: while a node has one child and no bytes of its own,
   * that child (the last one listed has more than one child, or bytes of its own). */
  function chainBelow(n) {
    const chain = [];
    let c = n;
    while (c.children.size === 1 && c.self === 0) {
      c = c.children.values().next().value;
      chain.push(c);
    }
    return chain;
  }

  /** A stable warm colour for the program's frames, a cool grey for the system's and grey
   * for what is not a frame (the root, "(no stack)", a cut). */
  function colour(n) {
    if (!n.frame) return n.parent ? "#c9ccd1" : "#8b949e";
    if (n.frame.system) return "#aebdcc";
    let h = 0;
    for (let i = 0; i < n.name.length; i++) h = (h * 31 + n.name.charCodeAt(i)) >>> 0;
    return "hsl(" + (10 + (h % 40)) + ", " + (70 + (h >> 8) % 20) + "%, " + (62 + (h >> 16) % 12) + "%)";
  }

  function draw() {
    if (!root) return;
    const any = M.sites.any();
    root.classList.toggle("no-stacks", !any);
    if (!any) {
      note.textContent = "This trace has no call stacks: trace the program with `mevi-actors run` (without `--no-stacks`) to see its resident memory by the code that mapped it.";
      info.textContent = "";
      canvas.hidden = true;
      drawnKey = null;
      tree = null;
      return;
    }
    canvas.hidden = false;
    const width = root.clientWidth || 900;
    const stamps = [...M.now.dec.spaces.values()].map((s) => s.id + ":" + s.stamp).join(",");
    const key = [stamps, showSystem, zoom.join("\u0000"), [...unfolded].join("\u0001"), width, M.data.meta.stacks.sites.length].join(" ");
    if (key === drawnKey) return;
    drawnKey = key;
    tree = build(weights(), showSystem);
    const focus = focusOf(tree);
    const ancestors = [];
    for (let n = focus; n; n = n.parent) ancestors.unshift(n);
    // Laid out first, drawn after: the canvas is as high as the deepest box drawn, not the
    // deepest stack (one too narrow to draw would leave the rest of the canvas empty), and a
    // chain of frames that each only call the next (a deep stack, a recursion) is one box
    // until clicked, so that what it leads to stays in view.
    const w = width, boxes = [];
    // Above the focus, its ancestors across the whole width (a click there zooms out); a long
    // line of them keeps the first two and the last two, the rest one box.
    let arow = 0;
    ancestors.forEach((n, i) => {
      const inner = ancestors.length > FOLD + 4 && i >= 2 && i < ancestors.length - 2;
      if (!inner) boxes.push({ x: 0, row: arow++, w, n });
      else if (i === 2) boxes.push({ x: 0, row: arow++, w, n, folded: ancestors.slice(2, -2), up: true });
    });
    const scale = focus.bytes > 0 ? w / focus.bytes : 0;
    // (`open`: how many levels below are still a chain clicked open, drawn unfolded.)
    const below = (n, x, row, open) => {
      let at = x;
      for (const c of kids(n)) {
        const wpx = c.bytes * scale;
        if (wpx >= MIN_PX) {
          boxes.push({ x: at, row, w: wpx, n: c });
          const chain = open > 0 ? [] : chainBelow(c);
          const key = pathOf(c).join("\u0000");
          if (chain.length > FOLD && !unfolded.has(key)) {
            // The chain's middle as one box, then its last node (where it branches or ends).
            const last = chain[chain.length - 1];
            boxes.push({ x: at, row: row + 1, w: wpx, n: chain[chain.length - 2], folded: chain.slice(0, -1), key });
            boxes.push({ x: at, row: row + 2, w: wpx, n: last });
            below(last, at, row + 3, 0);
          } else below(c, at, row + 1, open > 0 ? open - 1 : chain.length > FOLD ? chain.length : 0);
        }
        at += wpx;
      }
    };
    below(focus, 0, arow, 0);
    const rows = boxes.reduce((most, b) => Math.max(most, b.row + 1), 1);
    const { g } = M.fitCanvas(canvas, rows * ROW + 2, width);
    g.font = FONT;
    g.textBaseline = "middle";
    rects = [];
    for (const b of boxes) {
      const y = b.row * ROW;
      g.fillStyle = b.folded ? FOLDED : colour(b.n);
      g.fillRect(b.x, y, Math.max(b.w - 1, 0.5), ROW - 1);
      rects.push({ x: b.x, y, w: b.w, n: b.n, folded: b.folded, key: b.key, up: b.up });
      if (b.w > 24) {
        const f = b.folded;
        const text = f ? "⋯ " + f.length + " frames folded: " + f[0].name + " … " + f[f.length - 1].name + (b.up ? " (click to zoom out)" : " (click to show)")
          : b.n.name + (b.n.parent ? " " + M.size(b.n.bytes) : "");
        g.fillStyle = "#1d2530";
        g.fillText(fit(g, text, b.w - 6), b.x + 3, y + ROW / 2);
      }
    }
    resetButton.hidden = focus === tree;
    const total = tree.bytes;
    info.textContent = "resident at the cursor: " + M.size(total) + " (" + M.exact(total) + " B)" +
      (focus !== tree ? " · zoomed into " + focus.name + ": " + M.size(focus.bytes) + ", " + percent(focus.bytes, total) : "");
    note.textContent = "Each range's resident bytes under the call stack of the line that mapped it (as replay --by-site); " +
      (showSystem ? "all frames shown." : "frames of libc, the loader, allocators and runtimes folded away.") +
      " Click a frame to zoom into it, one above to zoom out; a chain of frames that each only call the next is folded into one box (⋯), which a click opens.";
  }

  /** `text` cut (with …) to fit `px`. */
  function fit(g, text, px) {
    if (g.measureText(text).width <= px) return text;
    let lo = 0, hi = text.length;
    while (lo < hi) {
      const mid = (lo + hi + 1) >>> 1;
      if (g.measureText(text.slice(0, mid) + "…").width <= px) lo = mid; else hi = mid - 1;
    }
    return lo > 0 ? text.slice(0, lo) + "…" : "";
  }

  const percent = (part, all) => (all > 0 ? ((100 * part) / all).toFixed(part * 1000 < all ? 2 : 1) : "0") + "%";

  function at(ev) {
    const r = canvas.getBoundingClientRect();
    const x = ev.clientX - r.left, y = ev.clientY - r.top;
    return rects.find((b) => x >= b.x && x < b.x + b.w && y >= b.y && y < b.y + ROW) || null;
  }

  /** The tooltip's lines for a node. */
  function describe(n) {
    const lines = [n.name];
    if (n.frame) {
      const places = [...n.places].filter(([p]) => p).sort((a, b) => b[1] - a[1]);
      if (places.length) lines.push(places[0][0] + (places.length > 1 ? " (and " + (places.length - 1) + " other line(s))" : ""));
      if (n.frame.module) lines.push("in " + n.frame.module + (n.frame.system ? " (system)" : ""));
    }
    lines.push(M.size(n.bytes) + " (" + M.exact(n.bytes) + " B) resident, " + percent(n.bytes, tree.bytes) + " of all");
    if (n.self > 0 && n.children.size) lines.push(M.size(n.self) + " of it mapped here, the rest by its callees");
    return lines;
  }

  /** The tooltip's lines for a folded chain: its frames, outermost first. */
  function describeFolded(chain, up) {
    const lines = [up ? chain.length + " callers of the frame zoomed into, folded (click to zoom out to the first)"
      : chain.length + " frames folded, each calling only the next (click to show them)"];
    const names = chain.map((n) => n.name);
    for (const name of names.length > 12 ? names.slice(0, 6).concat(["…"], names.slice(-5)) : names) lines.push("  " + name);
    lines.push(M.size(chain[0].bytes) + " (" + M.exact(chain[0].bytes) + " B) resident, " + percent(chain[0].bytes, tree.bytes) + " of all");
    return lines;
  }

  function init(el) {
    root = el;
    systemBox = M.el("input", { type: "checkbox", id: "flame-system" });
    systemBox.addEventListener("change", () => setSystem(systemBox.checked));
    resetButton = M.el("button", { type: "button", hidden: true, onclick: () => setZoom([]) }, "zoom out to all");
    info = M.el("span", { class: "readout" });
    canvas = M.el("canvas", { class: "flame", "aria-label": "resident memory by call stack at the cursor" });
    note = M.el("p", { class: "note" });
    canvas.addEventListener("pointermove", (ev) => {
      const b = at(ev);
      canvas.style.cursor = b ? "pointer" : "default";
      if (b && b.folded) M.tip.show(ev, describeFolded(b.folded, b.up));
      else if (b) M.tip.show(ev, describe(b.n));
      else M.tip.hide();
    });
    canvas.addEventListener("pointerleave", () => M.tip.hide());
    canvas.addEventListener("click", (ev) => {
      const b = at(ev);
      if (b && b.up) setZoom(pathOf(b.n));
      else if (b && b.folded) {
        unfolded.add(b.key);
        M.tip.hide();
        draw();
      } else if (b) setZoom(pathOf(b.n));
    });
    root.append(
      M.el("div", { class: "flame-bar" },
        M.el("label", null, systemBox, " show system frames (libc, the loader, allocators, runtimes)"), resetButton, info),
      canvas, note);
  }

  function setSystem(on) {
    showSystem = !!on;
    systemBox.checked = showSystem;
    draw();
  }

  function setZoom(names) {
    zoom = (names || []).slice();
    M.tip.hide();
    draw();
  }

  /** Every node at the cursor (the whole tree, whatever the zoom), depth first, largest first:
   * `path` from the root, `function`, `file`, `line` (its largest place), `module`, `bytes`
   * (with its callees'), `self_bytes` (of stacks that end there), `sites`. */
  function nodes() {
    const t = build(weights(), showSystem);
    const out = [];
    const walk = (n, path) => {
      for (const c of kids(n)) {
        const p = path.concat([c.name]);
        const f = c.frame;
        out.push({
          path: p, depth: p.length - 1, name: c.name, function: f ? f.function : null,
          file: f ? f.file : null, line: f ? f.line : null, module: f ? f.module : null,
          system: f ? f.system : false, bytes: c.bytes, self_bytes: c.self, sites: [...c.sites].sort((a, b) => a - b),
        });
        walk(c, p);
      }
    };
    walk(t, []);
    return out;
  }

  /** What is drawn: the canvas's rows, and per box its node's path, the frames it folds
   * (0 for a node's own box) and its place in CSS px. */
  function drawn() {
    return {
      rows: Math.round((canvas.getBoundingClientRect().height - 2) / ROW),
      boxes: rects.map((r) => ({ path: pathOf(r.n), name: r.n.name, folded: r.folded ? r.folded.length : 0, x: r.x, y: r.y, w: r.w, h: ROW - 1 })),
    };
  }

  M.flame = {
    init,
    draw,
    nodes,
    drawn,
    setSystem,
    setZoom,
    system: () => showSystem,
    zoomed: () => zoom.slice(),
  };
})(MEVI);
