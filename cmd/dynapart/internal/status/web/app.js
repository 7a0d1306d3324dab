// dynapart status page: polls api/status and renders it. No dependencies.
// The server samples the group on its own clock and reads the ledger at its own interval; a poll
// only fetches what it has, so polling costs no DynamoDB read.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const known = (v) => v !== null && v !== undefined;
  const fmtInt = (n) => (known(n) ? Number(n).toLocaleString("en-US") : "–");
  const fmtPct = (f) => (f * 100).toFixed(f > 0 && f < 0.001 ? 2 : 1) + "%";
  const fmtUnits = (u) => (u >= 100 ? Math.round(u).toLocaleString("en-US") : u.toFixed(1));
  let refreshMs = 2000;

  function text(el, v) { el.textContent = v; }

  function td(v, cls) {
    const c = document.createElement("td");
    if (cls) c.className = cls;
    c.textContent = v;
    return c;
  }

  function fmtDuration(s) {
    if (!known(s)) return "–";
    if (s < 1) return "done";
    s = Math.round(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    if (h > 0) return h + "h " + m + "m";
    if (m > 0) return m + "m " + sec + "s";
    return sec + "s";
  }

  function fmtAge(s) { return s < 1 ? "just now" : fmtDuration(s) + " ago"; }

  function fmtTime(iso) {
    if (!iso || iso.startsWith("0001-")) return "–";
    return new Date(iso).toLocaleTimeString("en-GB");
  }

  // bar is a progress bar with a short label inside; fraction null draws it striped (unknown).
  function bar(fraction, label) {
    const b = document.createElement("div");
    b.className = "bar" + (known(fraction) ? "" : " unknown");
    const f = document.createElement("div");
    f.className = "fill";
    f.style.width = fraction ? Math.min(100, fraction * 100).toFixed(1) + "%" : "0%";
    const t = document.createElement("div");
    t.className = "txt fits";
    t.textContent = label;
    b.append(f, t);
    return b;
  }

  // slotLabels are a slot's short label (inside its bar) and its details (the line below).
  function slotLabels(doc, s) {
    const p = s.progress;
    let short = s.state, details = [];
    if (p) {
      const handled = p.done + p.failed;
      short = known(p.share_estimate) && !s.finished
        ? fmtInt(handled) + " / ~" + fmtInt(p.share_estimate) + (known(s.fraction) ? " · " + fmtPct(s.fraction) : "")
        : fmtInt(p.done) + " done";
      details.push(s.following ? "pass " + (p.pass - 1) + " read" : "pass " + p.pass, fmtInt(p.scanned) + " scanned", fmtInt(p.failed) + " failed");
      if (!s.finished && p.rate > 0) details.push(p.rate.toFixed(0) + "/s", "ETA " + fmtDuration(p.eta_seconds));
    }
    if (s.finished) short = "finished" + (p ? " · " + fmtInt(p.done) + " done" : "");
    else if (s.following) short = "following the stream" + (p ? " · " + fmtInt(p.done) + " done" : "");
    else if (s.rescanning) short = "rescanning the table: the stream may have lost records";
    if (doc.paused && s.state === "working") details.push("paused");
    if (s.retired) details.push("retired by a scale-down");
    else if (s.segments) details.push("units " + s.segments);
    return [short, details.join(" · ")];
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
      const [short, details] = slotLabels(doc, s);
      const cell = td("", "progress");
      const more = document.createElement("div");
      more.className = "details fits";
      more.textContent = details;
      cell.append(bar(s.fraction, short), more);
      tr.append(cell);
      body.append(tr);
    }
    text($("slot-count"), doc.slots.length + " of " + doc.workers + (doc.epoch ? " · plan epoch " + doc.epoch : ""));
  }

  // groupState is the group's state word: a pause for the group's budget says so.
  function groupState(doc) {
    if (doc.paused && doc.paused_reason === "budget") return "paused (budget)";
    if (doc.paused) return "paused";
    if (doc.workers === 0) return "never run";
    if (doc.finished) return "finished";
    return doc.slots.some((s) => s.state === "working") ? "running" : "idle";
  }

  function etaText(doc) {
    const tp = doc.throughput;
    if (known(tp.eta_seconds)) return fmtDuration(tp.eta_seconds);
    if (doc.paused) return "paused";
    if (tp.left > 0 && doc.progress && doc.progress.free_slots > 0) return "no worker";
    return "–";
  }

  function etaNote(doc) {
    const tp = doc.throughput, free = doc.progress ? doc.progress.free_slots : 0;
    if (doc.paused && tp.left > 0) return "dynapart resume to go on";
    if (!known(tp.eta_seconds) || tp.eta_seconds === 0) return free > 0 && tp.left > 0 ? free + " slot" + (free > 1 ? "s" : "") + " free, no worker reading" : "";
    let note = fmtInt(tp.left) + " left at " + tp.rate.toFixed(1) + "/s";
    if (free > 0) note += "; " + free + " free slot" + (free > 1 ? "s" : "") + " counted at that rate";
    return note;
  }

  function renderCounts(doc) {
    const tp = doc.throughput, it = doc.items, est = tp.total_source === "table_estimate" ? "~" : "";
    text($("items-done"), fmtInt(tp.done));
    text($("items-total"), known(tp.total) ? est + fmtInt(tp.total) : "?");
    const width = (f) => (known(f) ? Math.min(100, f * 100).toFixed(1) + "%" : "0%");
    $("group-bar").style.width = width(tp.fraction);
    $("group-bar-failed").style.width = width(tp.failed_fraction);
    text($("group-bar-label"), known(tp.fraction)
      ? fmtPct(tp.fraction) + " done" + (tp.failed > 0 ? " · " + fmtPct(tp.failed_fraction) + " failed" : "") + " · " + fmtInt(tp.left) + " left"
      : "total unknown");
    text($("items-pending"), it ? fmtInt(it.pending) : "–");
    text($("items-claimed"), it ? fmtInt(it.claimed) : "–");
    text($("items-failed"), it ? fmtInt(it.failed) : "–");
    text($("items-note"), "pending · claimed · failed, " +
      (doc.ledger && known(doc.ledger.age_seconds) ? "read " + fmtAge(doc.ledger.age_seconds) : "not read yet"));
    text($("rate"), known(tp.done) ? tp.rate.toFixed(1) : "–");
    text($("rate-note"), tp.rate_source === "samples" ? "over the last " + Math.round(tp.rate_window_seconds) + " s" : tp.rate_source ? "slots' read rate" : "");
    text($("eta"), etaText(doc));
    text($("eta-note"), etaNote(doc));
    text($("paused"), doc.paused ? "paused" : "no");
    const state = groupState(doc);
    text($("group-state"), state);
    $("group-state").className = "value state-" + (doc.paused ? "paused" : state.replace(" ", "-"));
    $("paused-banner").hidden = !doc.paused;
    const budgetPause = doc.paused && doc.paused_reason === "budget";
    text($("paused-title"), budgetPause ? "Paused: the group reached its budget." : "Paused.");
    text($("resume-cmd"), "dynapart resume --group " + doc.group + (budgetPause ? " --max-wcu N" : ""));
    renderBudget(doc);
  }

  // renderBudget shows consumed units against the group's budget (hidden without one).
  function renderBudget(doc) {
    const b = doc.budget;
    $("budget-card").hidden = !b;
    if (!b) return;
    const part = (used, max, unit) => (known(max) ? fmtInt(Math.round(used)) + " / " + fmtInt(max) + " " + unit : fmtInt(Math.round(used)) + " " + unit);
    text($("budget"), part(b.used_wcu, b.max_wcu, "WCU") + " · " + part(b.used_rcu, b.max_rcu, "RCU"));
    const frac = Math.max(known(b.max_wcu) ? b.used_wcu / b.max_wcu : 0, known(b.max_rcu) ? b.used_rcu / b.max_rcu : 0);
    $("budget-bar").style.width = Math.min(100, frac * 100).toFixed(1) + "%";
    text($("budget-note"), b.reached ? "reached: the group paused itself" : fmtPct(frac) + " of the budget consumed");
  }

  // fmtLag is a stream's lag: "–" unknown, "caught up" at 0, else its age.
  function fmtLag(s) {
    if (!known(s)) return "–";
    if (s === 0) return "caught up";
    return s < 1 ? "<1s" : fmtDuration(s);
  }

  // renderStream shows the stream of a group that follows one (hidden otherwise): its lag in a
  // card, and its shards with their owner, position, finished flag and lag.
  function renderStream(doc) {
    const st = doc.stream;
    $("stream-card").hidden = !st;
    $("stream-section").hidden = !st;
    if (!st) return;
    const lag = fmtLag(st.lag_seconds);
    text($("stream-lag"), known(st.lag_seconds) && st.lag_seconds > 0 ? "lag " + lag : lag);
    const held = st.shards.filter((s) => s.owner).length, finished = st.shards.filter((s) => s.finished).length;
    const counts = st.shards.length + " shard" + (st.shards.length === 1 ? "" : "s") + ": " + held + " read, " +
      (st.shards.length - held - finished) + " free, " + finished + " finished";
    text($("stream-note"), counts + " · read at " + fmtTime(st.read_at) + (st.error ? " · the last read failed: " + st.error : ""));
    text($("stream-count"), counts);
    text($("stream-arn"), st.arn);
    const body = $("stream-shards").querySelector("tbody");
    body.replaceChildren();
    for (const s of st.shards) {
      const tr = document.createElement("tr");
      tr.dataset.shard = s.shard;
      const lagCell = td(s.finished ? "–" : s.error ? "?" : fmtLag(s.lag_seconds), "lag" + (s.lag_seconds > 0 ? " behind" : ""));
      if (s.error) lagCell.title = s.error;
      tr.append(td(s.shard, "shard fits"), td(s.parent || "–", "parent fits"), td(s.owner || "free", "owner"),
        td(s.finished ? "yes" : "no", "finished"), td(s.position || "–", "position fits"), lagCell);
      body.append(tr);
    }
  }

  function renderLedger(doc) {
    const l = doc.ledger;
    let note;
    if (!l) {
      note = doc.meta && doc.meta.table
        ? "The ledger is not read (--ledger-interval 0, or status --json without --table)."
        : "The group has not recorded its table yet (it has not run): no ledger to read.";
    } else if (!known(l.read_at)) {
      note = l.error ? "Reading the ledger failed: " + l.error : "Reading the ledger of " + l.table + "…";
    } else {
      note = "Ledger (" + l.kind + ", " + l.table + (l.kind === "table" ? ", job " + l.job : "") + ") read " +
        fmtAge(l.age_seconds) + " in " + l.duration_seconds.toFixed(1) + " s: " + fmtUnits(l.read_units) + " read units, " +
        l.requests + " requests" + (l.reading ? "; reading again now" : l.next_at ? "; next at " + fmtTime(l.next_at) : "") +
        (l.error ? ". Last read failed: " + l.error : "");
    }
    text($("ledger-note"), note);
    const r = doc.reads;
    text($("reads"), r ? "this page's reads since " + fmtTime(r.since) + ": " + fmtInt(r.group_reads) + " group reads (" +
      fmtUnits(r.lease_read_units) + " RCU), " + fmtInt(r.ledger_reads) + " ledger reads (" + fmtUnits(r.ledger_read_units) +
      " RCU)" + (r.stream_requests > 0 ? ", " + fmtInt(r.stream_requests) + " stream requests" : "") + "; " +
      fmtInt(r.views) + " views, which read nothing" : "");
  }

  function renderDeadLetters(doc) {
    const body = $("dead-letters").querySelector("tbody");
    body.replaceChildren();
    const dl = doc.dead_letters;
    if (!dl) {
      text($("dl-total"), "");
      text($("dl-note"), "Listed from the ledger once it has been read.");
      return;
    }
    text($("dl-total"), dl.total + " items");
    const age = doc.ledger && known(doc.ledger.age_seconds) ? " (as of " + fmtAge(doc.ledger.age_seconds) + ")" : "";
    const shown = dl.total > dl.items.length ? "showing the first " + dl.items.length : dl.total === 0 ? "none" : "";
    text($("dl-note"), shown + (shown && age ? " " : "") + age.trim());
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
    const f = w.follow;
    if (f) {
      rows.push(["stream records", f.records], ["versions handled", f.handled], ["versions superseded", f.superseded],
        ["versions unchanged", f.unchanged], ["deleted", f.deleted], ["rescans", f.rescans],
        ["stream lag", fmtLag(f.lag_ns / 1e9)], ["shards read", (f.shards || []).filter((s) => s.Owner).length]);
    }
    for (const [k, v] of rows) {
      const tr = document.createElement("tr");
      tr.dataset.stat = k;
      tr.append(td(k), td(v, "mono"));
      body.append(tr);
    }
  }

  // markCut gives every label that does not fit its box its full text as a tooltip, and marks it
  // (data-cut), so that a reader can still see it all and a test can tell.
  function markCut() {
    for (const el of document.querySelectorAll(".fits")) {
      const cut = el.scrollWidth > el.clientWidth + 1;
      el.dataset.cut = cut ? "1" : "0";
      el.title = cut ? el.textContent : "";
    }
  }

  function render(doc) {
    text($("group"), doc.group);
    document.title = "dynapart · " + doc.group;
    renderCounts(doc);
    renderSlots(doc);
    renderStream(doc);
    window.dynapartChart($("chart"), $("chart-note"), doc);
    renderWorker(doc);
    renderLedger(doc);
    renderDeadLetters(doc);
    markCut();
    text($("updated"), "sampled " + fmtTime(doc.generated_at));
    $("error").hidden = !doc.error;
    text($("error"), doc.error ? "the last sample failed: " + doc.error : "");
    document.body.dataset.generatedAt = doc.generated_at;
    document.body.dataset.loaded = "1";
    const every = doc.throughput.interval_seconds * 1000;
    refreshMs = Math.min(10000, Math.max(1000, every || 2000));
    text($("refresh"), "refreshes every " + refreshMs / 1000 + " s");
  }

  async function refresh() {
    try {
      const r = await fetch("api/status", { cache: "no-store" });
      const doc = await r.json();
      if (!r.ok) throw new Error(doc.error || r.statusText);
      render(doc);
    } catch (e) {
      $("error").hidden = false;
      text($("error"), String(e.message || e));
    } finally {
      setTimeout(refresh, refreshMs);
    }
  }
  refresh();
})();
