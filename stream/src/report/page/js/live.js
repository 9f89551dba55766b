// Live mode (`run --serve`): the page came with the meta so far and no records; the server's
// event stream (`events`, same origin) sends `records` (base64 bytes to append; the event id is
// the offset after them, so a reconnection resumes), `meta` (the whole meta anew) and `end`.
// What arrives together is applied once, so a burst redraws the views once.
(function (M) {
  let source = null, pending = [], meta = null, timer = 0;

  function flush() {
    timer = 0;
    const parts = pending;
    pending = [];
    let n = 0;
    for (const p of parts) n += p.length;
    const bytes = new Uint8Array(n);
    let at = 0;
    for (const p of parts) { bytes.set(p, at); at += p.length; }
    const m = meta;
    meta = null;
    M.data.update(bytes, m);
    document.body.setAttribute("data-records-bytes", String(M.data.timeline.bytes.length));
  }

  function later() {
    if (!timer) timer = setTimeout(flush, 0);
  }

  M.live = {
    /** Follows the server's stream; a page opened from a file never calls this. */
    start() {
      document.body.setAttribute("data-live", "running");
      document.body.setAttribute("data-records-bytes", "0");
      source = new EventSource("events");
      source.addEventListener("records", (ev) => {
        pending.push(M.fromBase64(ev.data));
        later();
      });
      source.addEventListener("meta", (ev) => {
        meta = JSON.parse(ev.data);
        later();
      });
      source.addEventListener("end", () => {
        source.close();
        if (timer) { clearTimeout(timer); flush(); }
        document.body.setAttribute("data-live", "ended");
      });
    },
  };
})(MEVI);
