// dynapart status page: the throughput chart (items done per second over the samples kept).
// Each sample after the first has the rate since the one before; a gap in the samples (the server
// could not read the group) breaks the line instead of bridging it.
"use strict";
(function () {
  const NS = "http://www.w3.org/2000/svg";
  const H = 220, PAD = { l: 52, r: 14, t: 12, b: 26 };
  const TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200].map((s) => s * 1000);

  function el(name, attrs, textContent) {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (textContent !== undefined) e.textContent = textContent;
    return e;
  }

  // niceStep is a step of 1, 2 or 5 x 10^k that cuts max into about n parts.
  function niceStep(max, n) {
    const raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= raw) return m * p;
    return 10 * p;
  }

  function fmtRate(r, step) {
    const digits = step < 1 ? Math.min(2, Math.ceil(-Math.log10(step))) : 0;
    return r.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
  }

  // segments splits the rate points where samples are more than 2.5 intervals apart.
  function segments(samples, intervalMs) {
    const out = [];
    let cur = [];
    for (let i = 1; i < samples.length; i++) {
      if (samples[i].t - samples[i - 1].t > 2.5 * intervalMs && cur.length) {
        out.push(cur);
        cur = [];
      }
      cur.push(samples[i]);
    }
    if (cur.length) out.push(cur);
    return out;
  }

  function axes(svg, W, t0, t1, top, step, x, y) {
    for (let v = 0; v <= top + step / 2; v += step) {
      svg.append(el("line", { class: "grid", x1: PAD.l, x2: W - PAD.r, y1: y(v), y2: y(v) }),
        el("text", { class: "ytick", x: PAD.l - 6, y: y(v) + 4, "text-anchor": "end" }, fmtRate(v, step)));
    }
    const span = t1 - t0, tstep = TIME_STEPS.find((s) => span / s <= 6) || 7200000;
    const withSeconds = tstep < 60000;
    for (let t = Math.ceil(t0 / tstep) * tstep; t <= t1; t += tstep) {
      const label = new Date(t).toLocaleTimeString("en-GB", withSeconds ? {} : { hour: "2-digit", minute: "2-digit" });
      svg.append(el("line", { class: "xtick", x1: x(t), x2: x(t), y1: H - PAD.b, y2: H - PAD.b + 4 }),
        el("text", { class: "xtick", x: x(t), y: H - 8, "text-anchor": "middle" }, label));
    }
  }

  window.dynapartChart = function (svg, note, doc) {
    const tp = doc.throughput, samples = tp.samples, intervalMs = (tp.interval_seconds || 2) * 1000;
    const W = Math.max(320, Math.round(svg.getBoundingClientRect().width) || 800);
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.replaceChildren();
    svg.dataset.samples = samples.length;
    svg.dataset.firstT = samples.length ? samples[0].t : "";
    const kept = Math.round((tp.window_seconds || 0) / 60) + " min";
    if (samples.length < 2) {
      note.textContent = samples.length === 0 ? "No sample yet." :
        "1 sample, at " + new Date(samples[0].t).toLocaleTimeString("en-GB") + ": the rate needs the next one (every " + intervalMs / 1000 + " s).";
      return;
    }
    const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1);
    const maxRate = Math.max(...samples.slice(1).map((s) => s.rate));
    const step = niceStep(maxRate > 0 ? maxRate : 1, 4), top = Math.max(step, Math.ceil(maxRate / step) * step);
    const x = (t) => PAD.l + ((t - t0) / (t1 - t0)) * (W - PAD.l - PAD.r);
    const y = (r) => H - PAD.b - (r / top) * (H - PAD.t - PAD.b);
    axes(svg, W, t0, t1, top, step, x, y);
    const parts = segments(samples, intervalMs);
    for (const seg of parts) {
      const pts = seg.map((s) => x(s.t).toFixed(1) + "," + y(s.rate).toFixed(1));
      if (seg.length === 1) {
        svg.append(el("circle", { class: "dot", cx: x(seg[0].t), cy: y(seg[0].rate), r: 3 }));
        continue;
      }
      const base = y(0).toFixed(1);
      svg.append(el("polygon", { class: "area", points: x(seg[0].t).toFixed(1) + "," + base + " " + pts.join(" ") + " " + x(seg[seg.length - 1].t).toFixed(1) + "," + base }),
        el("polyline", { class: "line", points: pts.join(" ") }));
    }
    const minutes = (t1 - t0) / 60000;
    note.textContent = samples.length + " samples since " + new Date(t0).toLocaleTimeString("en-GB") +
      " (" + (minutes >= 1 ? minutes.toFixed(0) + " min" : Math.round((t1 - t0) / 1000) + " s") + ", one every " + intervalMs / 1000 +
      " s, taken whether or not anyone watches; the last " + kept + " kept)" + (parts.length > 1 ? "; gaps: the group could not be read" : "");
  };
})();
