// The taskgraph dashboard's page: plain DOM and two canvases, no library. It receives a
// snapshot and then updates from /events (server-sent events; taskgraph/dashboard/model.py
// says what they hold) and keeps only the window the server keeps: what falls out of it is
// dropped, so its memory stays bounded however long it runs. Every task name and message is
// put into the page as text (textContent), never as markup.
"use strict";
(function () {
  const token = new URLSearchParams(location.search).get("token");
  const withToken = (u) => token ? u + (u.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(token) : u;
  const $ = (id) => document.getElementById(id);
  const ROW = 26;
  const S = { names: [], lanes: [], items: [], buckets: new Map(), memory: [], now: 0, window: 1e7,
              bucket: 1e4, progress: [], traces: [], queued: 0, updates: 0, taken: [], shownTraces: new Set() };

  function colour(name) { // a stable colour per task name (FNV-1a hash of its text)
    if (name === undefined || name < 0) return "#ddd";
    const text = S.names[name] || "";
    let h = 2166136261;
    for (let i = 0; i < text.length; i++) { h ^= text.charCodeAt(i); h = Math.imul(h, 16777619) >>> 0; }
    return "hsl(" + (h % 360) + ",55%," + (48 + (h >> 9) % 16) + "%)";
  }
  function fmtBytes(b) { return b == null ? "" : (b / 1048576).toFixed(1) + " MiB"; }
  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function apply(msg) {
    if (msg.type === "snapshot") { S.items = []; S.buckets = new Map(); S.memory = []; }
    S.names = msg.names; S.lanes = msg.lanes; S.now = msg.now; S.window = msg.window; S.bucket = msg.bucket;
    S.progress = msg.progress; S.queued = msg.queued; S.traces = msg.traces; S.rss = msg.rss; S.held = msg.held;
    for (const it of msg.items) S.items.push(it);
    for (const b of msg.buckets) { // a bucket may come in two parts (two drains): summed
      const key = b[0] + ":" + b[1], old = S.buckets.get(key);
      if (old) { old[2] += b[2]; old[3] += b[3]; old[5] += b[5]; old[6] += b[6]; if (b[2] > old[2] - b[2]) old[4] = b[4]; }
      else S.buckets.set(key, b.slice());
    }
    for (const m of msg.memory) S.memory.push(m);
    const horizon = S.now - S.window;
    S.items = S.items.filter((it) => it[2] >= horizon);
    for (const [k, b] of S.buckets) if ((b[1] + 1) * S.bucket < horizon) S.buckets.delete(k);
    if (S.memory.length > 600) S.memory.splice(0, S.memory.length - 600);
    S.taken.push([S.now, msg.finished]);
    if (S.taken.length > 8) S.taken.shift();
    S.updates++;
    document.body.dataset.updates = S.updates;
    render();
  }

  function render() {
    renderStream(); renderProgress(); renderWorkers(); renderMemory(); renderTraces();
    if (S.taken.length > 1) {
      const a = S.taken[0], b = S.taken[S.taken.length - 1];
      const rate = b[0] > a[0] ? (b[1] - a[1]) / ((b[0] - a[0]) / 1e6) : 0;
      $("rate").textContent = Math.round(rate).toLocaleString("en") + " tasks/s";
    }
    $("rss").textContent = S.rss ? "RSS " + fmtBytes(S.rss) : "";
    $("held").textContent = S.held == null ? "" : "; " + S.held.toLocaleString("en") + " results held";
  }

  function renderStream() {
    const lanes = $("lanes");
    lanes.replaceChildren(...S.lanes.map((l) => {
      const d = el("div", "lane" + (l.idle ? " idle" : ""), l.name);
      d.dataset.lane = l.name;
      d.appendChild(el("span", "state", l.closed ? "closed" : l.idle ? "idle" : "busy"));
      return d;
    }));
    const c = $("stream-canvas"), w = Math.max(200, c.clientWidth), h = Math.max(ROW, S.lanes.length * ROW);
    if (c.width !== w) c.width = w;
    if (c.height !== h) c.height = h;
    const g = c.getContext("2d");
    g.clearRect(0, 0, w, h);
    const t0 = S.now - S.window, sx = w / S.window;
    const row = new Map(S.lanes.map((l, i) => [l.lane, i]));
    for (let i = 0; i < S.lanes.length; i++) { g.fillStyle = i % 2 ? "#f7f7f7" : "#fdfdfd"; g.fillRect(0, i * ROW, w, ROW); }
    for (const b of S.buckets.values()) { // many short tasks: one mark per bucket, as busy as they were
      const y = row.get(b[0]);
      if (y === undefined) continue;
      g.globalAlpha = Math.max(0.2, Math.min(1, b[3] / S.bucket));
      g.fillStyle = colour(b[4]);
      g.fillRect((b[1] * S.bucket - t0) * sx, y * ROW + 2, Math.max(1, S.bucket * sx), ROW - 4);
      if (b[5] > 0) { g.globalAlpha = 1; g.fillStyle = "#222"; g.fillRect((b[1] * S.bucket - t0) * sx, y * ROW + 1, Math.max(1, S.bucket * sx), 2); }
    }
    g.globalAlpha = 1;
    const items = S.items.slice().sort((a, b) => (a[3] < 0) - (b[3] < 0) || a[6] - b[6]);
    for (const it of items) { // long tasks one by one; nested ones inset; idle inside a join blank
      const y = row.get(it[0]);
      if (y === undefined) continue;
      const x = (it[1] - t0) * sx, width = Math.max(1, (it[2] - it[1]) * sx), inset = Math.min(6, it[6] * 2);
      if (it[3] === -1) { g.fillStyle = "rgba(255,255,255,0.9)"; g.fillRect(x, y * ROW + 2, width, ROW - 4); continue; }
      if (it[3] < 0) { g.fillStyle = "#999"; g.fillRect(x, y * ROW + 6, width, ROW - 12); continue; } // records dropped
      g.fillStyle = colour(it[3]);
      g.fillRect(x, y * ROW + 2 + inset, width, ROW - 4 - 2 * inset);
      if (it[4] === 5) { g.strokeStyle = "#c00"; g.strokeRect(x + 0.5, y * ROW + 2.5 + inset, width - 1, ROW - 5 - 2 * inset); }
      if (it[5]) { g.fillStyle = "#222"; g.beginPath(); g.moveTo(x, y * ROW + 2); g.lineTo(x + 6, y * ROW + 2); g.lineTo(x, y * ROW + 8); g.fill(); }
    }
    S.lanes.forEach((l, i) => { // what runs now: from its start to now, outlined
      l.running.forEach(([name, start], depth) => {
        const x = Math.max(0, (start - t0) * sx), inset = Math.min(6, depth * 2);
        g.fillStyle = colour(name); g.globalAlpha = 0.7;
        g.fillRect(x, i * ROW + 2 + inset, Math.max(2, w - x), ROW - 4 - 2 * inset);
        g.globalAlpha = 1;
      });
    });
    $("axis").textContent = "last " + (S.window / 1e6).toFixed(0) + " s; one mark per " + (S.bucket / 1000).toFixed(0) +
      " ms for tasks shorter than that; a dark corner: stolen; red outline: failed; blank: idle; " +
      "grey band: busy, but its records were dropped (the dashboard fell behind)";
    const used = new Set();
    for (const it of S.items) if (it[3] >= 0) used.add(it[3]);
    for (const b of S.buckets.values()) used.add(b[4]);
    for (const l of S.lanes) for (const r of l.running) used.add(r[0]);
    $("legend").replaceChildren(...[...used].sort((a, b) => a - b).slice(0, 40).map((n) => {
      const s = el("span", "name"), sw = el("span", "swatch");
      sw.style.background = colour(n);
      s.appendChild(sw); s.appendChild(document.createTextNode(S.names[n] || "?"));
      return s;
    }));
  }

  function renderProgress() {
    $("queued").textContent = S.queued + " tasks queued (ready, all functions)";
    const rows = S.progress.slice(0, 50).map(([name, done, running, failed, cancelled, waiting]) => {
      const tr = el("tr");
      tr.dataset.name = S.names[name] || "?";
      const nameCell = el("td", "name");
      const sw = el("span", "swatch"); sw.style.background = colour(name);
      nameCell.appendChild(document.createTextNode(S.names[name] || "?"));
      tr.appendChild(nameCell);
      tr.appendChild(el("td", "done", done));
      tr.appendChild(el("td", "running", running));
      tr.appendChild(el("td", "waiting", waiting));
      tr.appendChild(el("td", "failed", failed));
      tr.appendChild(el("td", "cancelled", cancelled));
      const total = Math.max(1, done + running + waiting + failed + cancelled), bar = el("td", "bar"), outer = el("div", "bar-outer");
      for (const [cls, v] of [["bar-done", done], ["bar-running", running], ["bar-failed", failed], ["bar-cancelled", cancelled]]) {
        const s = el("span", cls); s.style.width = (250 * v / total).toFixed(1) + "px"; outer.appendChild(s);
      }
      bar.appendChild(outer); tr.appendChild(bar);
      return tr;
    });
    $("progress-rows").replaceChildren(...rows);
  }

  function renderWorkers() {
    $("worker-rows").replaceChildren(...S.lanes.map((l) => {
      const tr = el("tr");
      tr.dataset.lane = l.name;
      for (const [cls, v] of [["name", l.name], ["state", l.closed ? "closed" : l.idle ? "idle" : "busy"],
        ["busy", Math.round(l.busy * 100) + "%"], ["tasks", l.tasks], ["stolen", l.stolen],
        ["steals", l.steal_attempts], ["queue", l.queued], ["parks", l.parks], ["dropped", l.dropped]]) tr.appendChild(el("td", cls, v));
      return tr;
    }));
  }

  function renderMemory() {
    const c = $("memory-canvas"), w = Math.max(200, c.clientWidth), h = c.height;
    if (c.width !== w) c.width = w;
    const g = c.getContext("2d");
    g.clearRect(0, 0, w, h);
    if (S.memory.length < 1) return;
    const t0 = S.memory[0][0], t1 = Math.max(t0 + 1, S.memory[S.memory.length - 1][0]);
    const top = Math.max(...S.memory.map((m) => m[1])) * 1.1;
    g.strokeStyle = "#48c"; g.lineWidth = 2; g.beginPath();
    S.memory.forEach(([t, v], i) => {
      const x = (t - t0) / (t1 - t0) * (w - 4) + 2, y = h - 4 - v / top * (h - 12);
      i ? g.lineTo(x, y) : g.moveTo(x, y);
    });
    g.stroke();
    $("memory-note").textContent = "now " + fmtBytes(S.memory[S.memory.length - 1][1]) + ", peak " +
      fmtBytes(top / 1.1) + " over the last " + ((t1 - t0) / 1e6).toFixed(0) + " s";
  }

  function renderTraces() {
    const list = $("trace-list");
    for (const t of S.traces) {
      if (S.shownTraces.has(t.id)) continue;
      S.shownTraces.add(t.id);
      const box = el("div", "trace");
      box.id = "trace-" + t.id;
      box.appendChild(el("h3", null, "Trace " + t.id + ": " + t.tasks + " tasks"));
      list.prepend(box);
      fetch(withToken("api/trace/" + t.id)).then((r) => r.ok ? r.json() : null).then((info) => {
        if (!info) return;
        const tb = el("table", "trace-summary");
        for (const [k, v] of [["tasks", info.tasks], ["workers", info.workers], ["wall", info.wall_ms.toFixed(3) + " ms"],
          ["work T1", info.work_ms.toFixed(3) + " ms"], ["span T\u221e", info.span_ms.toFixed(3) + " ms"],
          ["parallelism T1/T\u221e", info.parallelism.toFixed(2)], ["speed-up bound", info.bound.toFixed(2)],
          ["achieved T1/wall", info.achieved.toFixed(2)]]) {
          const tr = el("tr"); tr.appendChild(el("th", null, k)); tr.appendChild(el("td", null, v)); tb.appendChild(tr);
        }
        box.appendChild(tb);
        const a = el("a", "download", "download the trace file (taskgraph-" + t.id + ".tgtrace)");
        a.href = withToken("trace/" + t.id + ".tgtrace");
        box.appendChild(a);
        box.appendChild(el("pre", null, info.summary));
        const img = el("img");
        img.alt = "executed graph (needs Graphviz)";
        img.src = withToken("trace/" + t.id + ".svg");
        img.onerror = () => img.replaceWith(el("p", "note", "no picture: Graphviz's dot is not installed"));
        box.appendChild(img);
      });
    }
    for (const box of [...list.children]) if (!S.traces.some((t) => "trace-" + t.id === box.id)) box.remove();
  }

  let source = null;
  function connect() {
    source = new EventSource(withToken("events"));
    source.onopen = () => { $("status").textContent = "live"; $("status").className = "status live"; };
    source.onmessage = (e) => apply(JSON.parse(e.data));
    source.onerror = () => { $("status").textContent = "disconnected"; $("status").className = "status lost"; };
  }
  window.addEventListener("resize", render);
  connect();
})();
