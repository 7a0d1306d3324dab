// dynapart status page: polls api/status and renders it. No dependencies.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const $ = (id) => document.getElementById(id);
  const fmtInt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));

  function text(el, v) { el.textContent = v; }

  function td(v, cls) {
    const c = document.createElement("td");
    if (cls) c.className = cls;
    c.textContent = v;
    return c;
  }

  function fmtDuration(s) {
    if (s === null || s === undefined) return "–";
    if (s < 1) return "done";
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + sec + "s";
    return sec + "s";
  }

  function fmtTime(iso) {
    if (!iso || iso.startsWith("0001-")) return "–";
    return new Date(iso).toLocaleTimeString("en-GB");
  }

  function bar(fraction, label) {
    const b = document.createElement("div");
    b.className = "bar" + (fraction === null || fraction === undefined ? " unknown" : "");
    const f = document.createElement("div");
    f.className = "fill";
    f.style.width = fraction ? Math.min(100, fraction * 100).toFixed(1) + "%" : "0%";
    const t = document.createElement("div");
    t.className = "txt";
    t.textContent = label;
    b.append(f, t);
    return b;
  }

  function renderSlots(doc) {
    const body = $("slots").querySelector("tbody");
    body.replaceChildren();
    for (const s of doc.slots) {
      const tr = document.createElement("tr");
      tr.dataset.slot = s.slot;
      tr.append(td(s.slot, "slot"), td(s.owner || "–", "owner"), td(s.token, "token"));
      const st = td("", "state");
      const pill = document.createElement("span");
      pill.className = "pill " + s.state;
      pill.textContent = s.state;
      st.append(pill);
      tr.append(st, td(s.held ? fmtTime(s.expires_at) : "–", "expires"));
      let label = s.state;
      if (s.progress) {
        const p = s.progress;
        label = fmtInt(p.done) + " done · " + fmtInt(p.scanned) +
          (p.share_estimate !== null ? " of ~" + fmtInt(p.share_estimate) : "") + " scanned · " + fmtInt(p.failed) + " failed";
        if (!s.finished && p.rate > 0) label += " · " + p.rate.toFixed(0) + "/s · ETA " + fmtDuration(p.eta_seconds);
        if (doc.paused && s.state === "working") label += " · paused";
      }
      else if (s.fraction === 1) label = "finished";
      if (s.retired) label += " · retired by a scale-down";
      else if (s.segments) label += " · units " + s.segments;
      const p = td("", "progress");
      p.append(bar(s.fraction, label));
      tr.append(p);
      body.append(tr);
    }
    text($("slot-count"), doc.slots.length + " of " + doc.workers + (doc.epoch ? " · plan epoch " + doc.epoch : ""));
  }

  function renderCounts(doc) {
    const it = doc.items;
    text($("items-done"), it ? fmtInt(it.done) : (doc.throughput.done !== null ? fmtInt(doc.throughput.done) : "–"));
    const est = doc.progress && doc.progress.items_estimate !== null ? "~" + fmtInt(doc.progress.items_estimate) : "?";
    text($("items-total"), it ? fmtInt(it.total) : est);
    text($("items-pending"), it ? fmtInt(it.pending) : "–");
    text($("items-claimed"), it ? fmtInt(it.claimed) : "–");
    text($("items-failed"), it ? fmtInt(it.failed) : "–");
    const pct = (n) => (it && it.total > 0 ? ((n / it.total) * 100).toFixed(1) + "%" : "0%");
    $("group-bar").style.width = it ? pct(it.done) : "0%";
    $("group-bar-failed").style.width = it ? pct(it.failed) : "0%";
    text($("rate"), doc.throughput.done === null ? "–" : doc.throughput.rate.toFixed(1));
    text($("eta"), fmtDuration(doc.throughput.eta_seconds));
    text($("paused"), doc.paused ? "paused" : "no");
    const working = doc.slots.some((s) => s.state === "working");
    let state = doc.workers === 0 ? "never run" : doc.finished ? "finished" : working ? "running" : "idle";
    if (doc.paused) state = "paused";
    text($("group-state"), state);
  }

  function renderChart(doc) {
    const svg = $("chart");
    const W = 800, H = 200, pad = 28;
    const ns = "http://www.w3.org/2000/svg";
    svg.replaceChildren();
    const samples = doc.throughput.samples.slice(1); // the first sample has no rate
    if (samples.length < 1) {
      text($("chart-note"), doc.throughput.done === null
        ? "No item counts: give --table (and the ledger flags) to chart throughput."
        : "Waiting for a second sample…");
      return;
    }
    text($("chart-note"), samples.length + " samples");
    const maxRate = Math.max(1, ...samples.map((s) => s.rate));
    const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1);
    const x = (t) => pad + ((t - t0) / (t1 - t0)) * (W - 2 * pad);
    const y = (r) => H - pad - (r / maxRate) * (H - 2 * pad);
    for (const frac of [0, 0.5, 1]) {
      const l = document.createElementNS(ns, "line");
      l.setAttribute("class", "grid");
      l.setAttribute("x1", pad); l.setAttribute("x2", W - pad);
      l.setAttribute("y1", y(maxRate * frac)); l.setAttribute("y2", y(maxRate * frac));
      const lab = document.createElementNS(ns, "text");
      lab.setAttribute("x", 2); lab.setAttribute("y", y(maxRate * frac) + 4);
      lab.textContent = Math.round(maxRate * frac);
      svg.append(l, lab);
    }
    for (const [t, anchor] of [[t0, "start"], [t1, "end"]]) {
      const lab = document.createElementNS(ns, "text");
      lab.setAttribute("x", x(t)); lab.setAttribute("y", H - 8);
      lab.setAttribute("text-anchor", anchor);
      lab.textContent = new Date(t).toLocaleTimeString("en-GB");
      svg.append(lab);
    }
    const pts = samples.map((s) => x(s.t).toFixed(1) + "," + y(s.rate).toFixed(1));
    if (pts.length === 1) pts.unshift(pad + "," + y(samples[0].rate).toFixed(1));
    const area = document.createElementNS(ns, "polygon");
    area.setAttribute("class", "area");
    area.setAttribute("points", pts.join(" ") + " " + x(t1).toFixed(1) + "," + y(0) + " " + pts[0].split(",")[0] + "," + y(0));
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("class", "line");
    line.setAttribute("points", pts.join(" "));
    svg.append(area, line);
  }

  function renderDeadLetters(doc) {
    const body = $("dead-letters").querySelector("tbody");
    body.replaceChildren();
    const dl = doc.dead_letters;
    if (!dl) {
      text($("dl-total"), "");
      text($("dl-note"), "Give --table (and the ledger flags) to list dead letters.");
      return;
    }
    text($("dl-total"), dl.total + " items");
    text($("dl-note"), dl.total > dl.items.length ? "showing the first " + dl.items.length : (dl.total === 0 ? "none" : ""));
    for (const d of dl.items) {
      const tr = document.createElement("tr");
      tr.append(td(JSON.stringify(d.key), "key"), td(d.attempts, "attempts"), td(fmtTime(d.at), "at"), td(d.error, "err"));
      body.append(tr);
    }
  }

  function renderWorker(doc) {
    const w = doc.worker;
    $("worker-section").hidden = !w;
    if (!w) return;
    text($("worker-owner"), w.owner);
    const body = $("worker").querySelector("tbody");
    body.replaceChildren();
    const rows = [["slot", w.slot], ["token", w.token], ["state", w.state], ["completed", w.completed],
      ["scanned", w.scanned], ["retried", w.retried], ["dead lettered", w.dead_lettered],
      ["takeovers", w.takeovers], ["RCU", w.rcu.toFixed(1)], ["WCU", w.wcu.toFixed(1)]];
    for (const [k, v] of rows) {
      const tr = document.createElement("tr");
      tr.dataset.stat = k;
      tr.append(td(k), td(v, "mono"));
      body.append(tr);
    }
  }

  function render(doc) {
    text($("group"), doc.group);
    document.title = "dynapart · " + doc.group;
    renderCounts(doc);
    renderSlots(doc);
    renderChart(doc);
    renderWorker(doc);
    renderDeadLetters(doc);
    text($("updated"), "updated " + fmtTime(doc.generated_at));
    document.body.dataset.generatedAt = doc.generated_at;
    document.body.dataset.loaded = "1";
  }

  async function refresh() {
    try {
      const r = await fetch("api/status", { cache: "no-store" });
      const doc = await r.json();
      if (!r.ok) throw new Error(doc.error || r.statusText);
      $("error").hidden = true;
      render(doc);
    } catch (e) {
      $("error").hidden = false;
      text($("error"), String(e.message || e));
    } finally {
      setTimeout(refresh, REFRESH_MS);
    }
  }
  refresh();
})();
