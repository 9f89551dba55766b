// The page's one namespace and the helpers every view uses: number formats, DOM building, the
// shared tooltip, and canvases sized for the screen's pixel ratio.
"use strict";
const MEVI = {};

(function (M) {
  // Counted from the first script on, so the tests see every error and blocked request.
  M.errors = 0;
  M.cspViolations = 0;
  const mark = () => {
    if (!document.body) return;
    document.body.setAttribute("data-errors", String(M.errors));
    document.body.setAttribute("data-csp-violations", String(M.cspViolations));
  };
  window.addEventListener("error", () => { M.errors += 1; mark(); });
  window.addEventListener("unhandledrejection", () => { M.errors += 1; mark(); });
  document.addEventListener("securitypolicyviolation", () => { M.cspViolations += 1; mark(); });
  M.markErrors = mark;

  const UNITS = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

  /** Bytes for a person: 2.26 MiB. Exact figures go in titles and tooltips beside it. */
  M.size = function (bytes) {
    if (bytes == null) return "-";
    let v = bytes, u = 0;
    while (Math.abs(v) >= 1024 && u < UNITS.length - 1) { v /= 1024; u += 1; }
    return (u === 0 ? String(v) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + " " + UNITS[u];
  };

  /** An exact integer with thin separators: 2 371 584. */
  M.exact = function (n) {
    if (n == null) return "-";
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, "\u2009");
  };

  /** An address in hex. Addresses are Numbers (doubles): past 2^53 not every integer is one,
   * but page-aligned values are exact up to 2^64 (a multiple of 2^12 below 2^64 needs 52 bits
   * of mantissa), such as [vsyscall]'s 0xffffffffff600000; data attributes print them exactly
   * with BigInt (`M.dec`). */
  M.hex = function (n) {
    return n == null ? "-" : "0x" + n.toString(16);
  };

  /** A time in ms from ns, with as many decimals as the span shown needs. */
  M.ms = function (ns, span) {
    if (ns == null) return "-";
    const ms = ns / 1e6;
    const d = span == null ? 3 : span > 1e10 ? 0 : span > 1e9 ? 1 : span > 1e8 ? 2 : 3;
    return ms.toFixed(d) + " ms";
  };

  /** `el("div", {class: "x", title: "y"}, child, "text")`. */
  M.el = function (tag, attrs, ...children) {
    const e = document.createElement(tag);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (v == null || v === false) continue;
        if (k === "class") e.className = v;
        else if (k === "text") e.textContent = v;
        else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
        else e.setAttribute(k, v === true ? "" : String(v));
      }
    }
    for (const c of children) {
      if (c == null) continue;
      e.append(c instanceof Node ? c : String(c));
    }
    return e;
  };

  /** Replaces `parent`'s children by `nodes`, an array of any length (a call spread, as in
   * `replaceChildren(...nodes)`, throws a RangeError past about 100,000 arguments). */
  M.fill = function (parent, nodes) {
    const f = document.createDocumentFragment();
    for (const n of nodes) f.append(n);
    parent.replaceChildren(f);
  };

  /** Sizes a canvas to its CSS box at the device's pixel ratio; the context draws in CSS px. */
  M.fitCanvas = function (canvas, cssHeight, cssWidth) {
    const ratio = window.devicePixelRatio || 1;
    const w = Math.max(1, cssWidth || canvas.clientWidth || canvas.parentElement.clientWidth);
    canvas.style.height = cssHeight + "px";
    canvas.width = Math.round(w * ratio);
    canvas.height = Math.round(cssHeight * ratio);
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, w, cssHeight);
    return { g, w, h: cssHeight };
  };

  /** The one tooltip: `show(event, lines)` near the pointer, `hide()`. */
  M.tip = (function () {
    let box = null;
    return {
      show(ev, lines) {
        if (!box) {
          box = M.el("div", { id: "tip", role: "tooltip" });
          document.body.append(box);
        }
        box.replaceChildren(...lines.map((l, i) => M.el("div", { class: i === 0 ? "tip-head" : null }, l)));
        box.style.display = "block";
        const pad = 14, r = box.getBoundingClientRect();
        let x = ev.clientX + pad, y = ev.clientY + pad;
        if (x + r.width > window.innerWidth - 4) x = ev.clientX - pad - r.width;
        if (y + r.height > window.innerHeight - 4) y = ev.clientY - pad - r.height;
        box.style.left = Math.max(2, x) + "px";
        box.style.top = Math.max(2, y) + "px";
      },
      hide() {
        if (box) box.style.display = "none";
      },
    };
  })();

  /** First index in sorted `arr` for which `pred` is true (`arr.length` if none). */
  M.lowerBound = function (arr, pred) {
    let lo = 0, hi = arr.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (pred(arr[mid])) hi = mid; else lo = mid + 1;
    }
    return lo;
  };

  /** Colours shared by the views (the legend reads them too). */
  M.colour = {
    written: "#2f6fd6",
    zero: "#9ac1f5",
    untouched: "#e9edf3",
    untracked: "#c9ccd1",
    gap: "#b9bfc8",
    cursor: "#d23c3c",
    window: "rgba(47, 111, 214, 0.12)",
    exit0: "#4c9a5b",
    exitN: "#d9902f",
    signal: "#c8423d",
    unknown: "#9aa3ad",
    total: "#1d2530",
    // The kernel's count (rss.js): anon as the stream's pages, the rest apart from it.
    rss: { anon: "#8fb3e8", file: "#7dbb78", shmem: "#f0a04b", swap: "#c8423d" },
  };

  /** A colour for space `i`, stable by index and distinct for any count: hues a golden angle
   * apart (each new one falls in the widest gap left), lightness in three steps, so that
   * neighbours in a stack differ in both. */
  M.paletteColour = (i) => {
    const hue = (210 + i * 137.50776) % 360;
    return "hsl(" + hue.toFixed(2) + ", " + [62, 55, 70][i % 3] + "%, " + [52, 40, 64][i % 3] + "%)";
  };
})(MEVI);
