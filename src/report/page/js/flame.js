// Resident memory by call stack at the cursor, as an icicle flame graph (root on top, callees
// below, as memray draws it): the bytes resident in each range, filed under the stack of the
// line that mapped it (the records' sites, by replay --by-site's rules), from the outermost
// frame in. System frames (libc, the loader, allocators, runtimes) are folded away unless
// asked for, so a stack ends at the program's own code that asked for the memory. A click
// zooms into a node (and the ancestors above it zoom out); the view follows the cursor.
(function (M) {
  const ROW = 18, MIN_PX = 0.5, FONT = "11px system-ui, sans-serif";
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

  function depthBelow(n) {
    let d = 0;
    for (const c of n.children.values()) d = Math.max(d, 1 + depthBelow(c));
    return d;
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
    const key = [stamps, showSystem, zoom.join("\u0000"), width, M.data.meta.stacks.sites.length].join(" ");
    if (key === drawnKey) return;
    drawnKey = key;
    tree = build(weights(), showSystem);
    const focus = focusOf(tree);
    const ancestors = [];
    for (let n = focus; n; n = n.parent) ancestors.unshift(n);
    const rows = ancestors.length + depthBelow(focus);
    const { g, w } = M.fitCanvas(canvas, Math.max(1, rows) * ROW + 2, width);
    g.font = FONT;
    g.textBaseline = "middle";
    rects = [];
    const box = (n, x, y, wpx) => {
      g.fillStyle = colour(n);
      g.fillRect(x, y, Math.max(wpx - 1, 0.5), ROW - 1);
      rects.push({ x, y, w: wpx, n });
      if (wpx > 24) {
        const label = fit(g, n.name + (n.parent ? " " + M.size(n.bytes) : ""), wpx - 6);
        g.fillStyle = "#1d2530";
        g.fillText(label, x + 3, y + ROW / 2);
      }
    };
    // Above the focus, its ancestors across the whole width (a click there zooms out).
    ancestors.forEach((n, i) => box(n, 0, i * ROW, w));
    const scale = focus.bytes > 0 ? w / focus.bytes : 0;
    const below = (n, x, y) => {
      let at = x;
      for (const c of kids(n)) {
        const wpx = c.bytes * scale;
        if (wpx >= MIN_PX) {
          box(c, at, y, wpx);
          below(c, at, y + ROW);
        }
        at += wpx;
      }
    };
    below(focus, 0, ancestors.length * ROW);
    resetButton.hidden = focus === tree;
    const total = tree.bytes;
    info.textContent = "resident at the cursor: " + M.size(total) + " (" + M.exact(total) + " B)" +
      (focus !== tree ? " · zoomed into " + focus.name + ": " + M.size(focus.bytes) + ", " + percent(focus.bytes, total) : "");
    note.textContent = "Each range's resident bytes under the call stack of the line that mapped it (as replay --by-site); " +
      (showSystem ? "all frames shown." : "frames of libc, the loader, allocators and runtimes folded away.") +
      " Click a frame to zoom into it, one above to zoom out.";
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
      if (b) M.tip.show(ev, describe(b.n)); else M.tip.hide();
    });
    canvas.addEventListener("pointerleave", () => M.tip.hide());
    canvas.addEventListener("click", (ev) => {
      const b = at(ev);
      if (b) setZoom(pathOf(b.n));
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

  M.flame = {
    init,
    draw,
    nodes,
    setSystem,
    setZoom,
    system: () => showSystem,
    zoomed: () => zoom.slice(),
  };
})(MEVI);
