// The call stacks of a `run --stacks` trace, from the meta's `stacks` table (strings and frames
// kept once, docs/report.md): each site's frames, innermost first, as objects; names for a
// person; and the path a flame graph files a site's bytes under, from the outermost frame in.
(function (M) {
  const SYSTEM = 1, INLINED = 2, NO_MODULE = 4; // a frame's flags (src/report/stacks.rs)
  let byId = new Map(); // site id -> {id, frames, truncated}

  /** Reads the meta's table (again, for a live page's new meta). */
  function load(meta) {
    const t = meta.stacks || { strings: [], frames: [], sites: [] };
    const str = (i) => (i == null ? null : t.strings[i]);
    const frames = t.frames.map(([fn, file, line, module, at, flags]) => ({
      function: str(fn), file: str(file), line, module: str(module),
      offset: flags & NO_MODULE ? null : at, addr: flags & NO_MODULE ? at : null,
      system: !!(flags & SYSTEM), inlined: !!(flags & INLINED),
    }));
    byId = new Map(t.sites.map(([id, truncated, fs]) => [id, { id, truncated, frames: fs.map((i) => frames[i]) }]));
  }

  const base = (path) => (path ? path.split("/").pop() : path);

  /** A frame's function, or where it is when not symbolized: `libfoo.so+0x1a2b`, `0x7f3a…`. */
  function name(f) {
    if (f.function) return f.function;
    if (f.module) return base(f.module) + (f.offset != null ? "+" + M.hex(f.offset) : "");
    return f.addr != null ? M.hex(f.addr) : "?";
  }

  /** `file.c:40`, or null without a source location. */
  function where(f) {
    if (!f.file) return null;
    return base(f.file) + (f.line != null ? ":" + f.line : "");
  }

  /** The frame standing for a site: the innermost user frame, else the outermost one. */
  function userFrame(site) {
    const i = site.frames.findIndex((f) => !f.system);
    return i >= 0 ? i : site.frames.length - 1;
  }

  /** Where the flame graph files a site's bytes: `[{name, frame}]` from the outermost frame in
   * (user frames only unless `system`; the outermost frame when all are the system's), under a
   * node saying why when the stack stops short of its root (replay --by-site's top-down). */
  function path(id, system) {
    if (id === 0) return [{ name: "(no stack)", frame: null }];
    const site = byId.get(id);
    if (!site) return [{ name: "(site " + id + ": no site line)", frame: null }];
    if (!site.frames.length) return [{ name: "(site " + id + ": no frames)", frame: null }];
    const out = [];
    if (site.truncated === "depth") out.push({ name: "(stack cut at --stack-depth)", frame: null });
    if (site.truncated === "unwind") out.push({ name: "(stack cut: could not unwind further)", frame: null });
    let frames = site.frames.slice().reverse();
    if (!system) {
      const user = frames.filter((f) => !f.system);
      frames = user.length ? user : [frames[0]];
    }
    for (const f of frames) out.push({ name: name(f), frame: f });
    return out;
  }

  /** Lines for a person about site `id`: its user frame and file:line, module, and the next
   * `callers` frames outward. */
  function describe(id, callers) {
    const site = byId.get(id);
    if (!site || !site.frames.length) return ["site " + id + (site ? " (no frames)" : " (no site line)")];
    const u = userFrame(site);
    const f = site.frames[u];
    const lines = [name(f) + (where(f) ? " (" + where(f) + ")" : "") + (f.module ? " in " + base(f.module) : "")];
    const up = site.frames.slice(u + 1, u + 1 + callers).map((c) => "← " + name(c) + (where(c) ? " (" + where(c) + ")" : ""));
    if (site.frames.length > u + 1 + callers) up.push("← …");
    else if (site.truncated) up.push("← (stack cut: " + (site.truncated === "depth" ? "--stack-depth" : "could not unwind further") + ")");
    return lines.concat(up);
  }

  M.sites = {
    load,
    name,
    where,
    path,
    describe,
    userFrame,
    get: (id) => byId.get(id) || null,
    /** Whether the trace has any stack at all. */
    any: () => byId.size > 0,
  };
})(MEVI);
