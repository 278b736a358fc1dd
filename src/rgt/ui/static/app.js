/* rgt ui: live refresh (server-sent events), curves (uPlot), log tail, cancel.
 *
 * The pages are complete without this file: the server renders every table. This script keeps
 * them current (one EventSource on /api/events; on `update` it re-fetches only the fragments
 * the event names and swaps them in), draws every [data-testid=curve] with uPlot, follows the
 * log tail of a running job and asks before a cancel. Plain ES2017, no framework, no CDN.
 */
(function () {
  "use strict";

  var TOKEN_KEY = "rgt_ui_token";
  var MAX_BACKOFF_MS = 15000;  // retries at ~1, 1.5, 2.3, 3.4 … s, then every 15 s

  // ---- token and fetch ---------------------------------------------------------------------
  // The server sets an HttpOnly cookie when the page is opened with ?token=; the token is kept
  // for this tab only (sessionStorage) to send as X-RGT-Token on the one write (cancel), and
  // taken out of the address bar so a screenshot or a copied link does not carry it.
  function token() {
    var meta = document.querySelector('meta[name="rgt-token"]');
    if (meta && meta.content) return meta.content;
    try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
  }

  function keepToken() {
    var url = new URL(window.location.href);
    var t = url.searchParams.get("token");
    if (!t) return;
    try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* private mode: cookie only */ }
    url.searchParams.delete("token");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }

  function headers(extra) {
    var h = Object.assign({ Accept: "application/json" }, extra || {});
    var t = token();
    if (t) h["X-RGT-Token"] = t;
    return h;
  }

  async function getJSON(path) {
    var resp = await fetch(path, { headers: headers(), credentials: "same-origin" });
    if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
    return resp.json();
  }

  async function getHTML(path) {
    var resp = await fetch(path, { headers: headers({ Accept: "text/html" }), credentials: "same-origin" });
    if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
    return resp.text();
  }

  function page() { return document.body.getAttribute("data-page") || ""; }

  function pageJobId() {
    var m = window.location.pathname.match(/^\/jobs\/([^/]+)\/?$/);
    return m ? decodeURIComponent(m[1]) : null;
  }

  // ---- live status indicator ---------------------------------------------------------------
  function statusEl() {
    var el = document.querySelector('[data-testid="live-status"]');
    if (el) return el;
    el = document.createElement("p");
    el.setAttribute("data-testid", "live-status");
    el.setAttribute("role", "status");
    el.setAttribute("aria-live", "polite");
    el.className = "live-status";
    var host = document.querySelector("header") || document.body;
    host.appendChild(el);
    return el;
  }

  function setLive(state, text) {
    var el = statusEl();
    el.setAttribute("data-live", state);
    el.textContent = text;
  }

  // ---- times -------------------------------------------------------------------------------
  // The server writes UTC ISO stamps; show them in local time, short (the time alone when it is
  // today), with the full stamp kept in datetime= and as a tooltip.
  var ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})$/;

  function pad(n) { return n < 10 ? "0" + n : String(n); }

  function shortTime(d) {
    var now = new Date();
    var hms = pad(d.getHours()) + ":" + pad(d.getMinutes()) + ":" + pad(d.getSeconds());
    if (d.toDateString() === now.toDateString()) return hms;
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + hms.slice(0, 5);
  }

  function formatTimes(root) {
    Array.prototype.forEach.call(root.querySelectorAll("time"), function (el) {
      var iso = el.getAttribute("datetime") || el.textContent.trim();
      if (!ISO.test(iso)) return;
      var d = new Date(iso);
      if (isNaN(d.getTime())) return;
      el.setAttribute("datetime", iso);
      el.title = iso;
      el.textContent = shortTime(d);
    });
  }

  // ---- fragments ---------------------------------------------------------------------------
  // Swap one server-rendered section for a fresh copy, keeping the scroll position and the
  // element that had focus (by its id) so a refresh under the reader's eyes does not jump.
  // ``inner`` narrows the swap to one element inside the section (the machine page shows one
  // card of the machines fragment).
  async function swap(selector, path, inner) {
    var old = document.querySelector(selector);
    if (old && inner) old = old.querySelector(inner);
    if (!old) return false;
    var html = await getHTML(path);
    var tpl = document.createElement("template");
    tpl.innerHTML = html.trim();
    var fresh = tpl.content.querySelector(selector) || tpl.content.firstElementChild;
    if (fresh && inner) fresh = fresh.querySelector(inner);
    if (!fresh) return false;
    var x = window.scrollX, y = window.scrollY;
    var focusId = document.activeElement && document.activeElement.id;
    formatTimes(fresh);
    old.replaceWith(fresh);
    window.scrollTo(x, y);
    if (focusId) {
      var again = document.getElementById(focusId);
      if (again) again.focus({ preventScroll: true });
    }
    document.dispatchEvent(new CustomEvent("rgt:swapped", { detail: { selector: selector } }));
    return true;
  }

  function pageMachine() {
    var m = window.location.pathname.match(/^\/machines\/([^/]+)\/?$/);
    return m ? decodeURIComponent(m[1]) : null;
  }

  function jobsQuery() {
    var here = new URLSearchParams(window.location.search);
    var q = new URLSearchParams();
    ["page", "per_page", "machine", "state"].forEach(function (k) {
      if (here.get(k)) q.set(k, here.get(k));
    });
    if (pageMachine()) q.set("machine", pageMachine());
    var s = q.toString();
    return "/fragments/jobs" + (s ? "?" + s : "");
  }

  // Updates can come faster than a loaded browser swaps; while one is applied, the next ones
  // are merged into a single pending change.
  var pending = null;
  var applying = false;

  function merge(a, b) {
    if (!a) return b;
    var jobs = (a.jobs || []).concat((b.jobs || []).filter(function (j) { return (a.jobs || []).indexOf(j) < 0; }));
    return { machines: !!(a.machines || b.machines), jobs: jobs, all: !!(a.all || b.all) };
  }

  async function onUpdate(change) {
    pending = merge(pending, change);
    if (applying) return;
    applying = true;
    try {
      while (pending) {
        var next = pending;
        pending = null;
        await apply(next);
      }
    } finally {
      applying = false;
    }
  }

  async function apply(change) {
    var jobs = Array.isArray(change.jobs) ? change.jobs : [];
    var all = change.all === true;
    var tasks = [];
    var one = pageMachine();
    var card = one ? '[data-testid="machine-card"][data-machine="' + CSS.escape(one) + '"]' : null;
    if (change.machines || all) tasks.push(swap("#machines", "/fragments/machines", card));
    if (jobs.length || all) tasks.push(swap("#jobs", jobsQuery()));
    var id = pageJobId();
    if (id && (all || jobs.indexOf(id) >= 0)) {
      tasks.push(swap("#job", "/fragments/job/" + encodeURIComponent(id)));
      tasks.push(refreshLog());
      tasks.push(renderCurves(document, true));
    }
    if (page() === "sweep" && (jobs.length || all)) tasks.push(renderCurves(document, true));
    await Promise.all(tasks.map(function (t) {
      return t.catch(function (e) { console.warn("rgt ui:", e); });
    }));
  }

  // ---- server-sent events with backoff -----------------------------------------------------
  var source = null;
  var failures = 0;
  var retryTimer = null;

  function connect() {
    if (!window.EventSource) return;
    setLive("connecting", "Connecting…");
    var es = new EventSource("/api/events");
    source = es;
    es.addEventListener("open", function () {
      if (es !== source) return;
      failures = 0;
      setLive("live", "Live");
      // Updates sent before the stream opened (between the page's render and now, or while it
      // was down) are gone: refresh everything once. A job page's log and curves are fetched
      // from the machine only once the page asked for them, often before this moment.
      onUpdate({ all: true });
    });
    es.addEventListener("update", function (ev) {
      if (es !== source) return;
      var change = {};
      try { change = JSON.parse(ev.data); } catch (e) { change = { all: true }; }
      onUpdate(change);
    });
    es.addEventListener("error", function () {
      es.close();
      if (es !== source) return;
      source = null;
      failures += 1;
      var delay = Math.min(MAX_BACKOFF_MS, 1000 * Math.pow(1.5, failures - 1));
      delay = Math.round(delay * (0.8 + Math.random() * 0.4));
      setLive("down", "Disconnected; retrying in " + Math.ceil(delay / 1000) + " s");
      clearTimeout(retryTimer);
      retryTimer = setTimeout(connect, delay);
    });
  }

  // A browser keeps at most 6 HTTP/1.1 connections per host, and every open page holds one for
  // its stream: pages in the back/forward cache and tabs in the background would starve the
  // next page load. Close the stream when the page is hidden; reopen (and refresh everything,
  // since updates were missed) when it is shown again.
  function disconnect() {
    clearTimeout(retryTimer);
    if (source) { source.close(); source = null; }
  }

  function reconnect() {
    if (source) return;
    connect();
  }

  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", function (ev) { if (ev.persisted) reconnect(); });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") disconnect();
    else reconnect();
  });

  // ---- log tail ----------------------------------------------------------------------------
  function nearBottom(el) { return el.scrollHeight - el.scrollTop - el.clientHeight < 24; }

  async function refreshLog() {
    var pre = document.querySelector('[data-testid="log-tail"]');
    var id = pageJobId();
    if (!pre || !id) return;
    var follow = document.getElementById("log-follow");
    var stick = (follow ? follow.checked : true) && nearBottom(pre);
    var doc = await getJSON("/api/jobs/" + encodeURIComponent(id) + "/log?lines=200");
    pre.textContent = (doc.lines || []).join("\n");
    pre.setAttribute("data-attempt", String(doc.attempt));
    if (doc.truncated) pre.setAttribute("data-truncated", "true");
    if (stick) pre.scrollTop = pre.scrollHeight;
  }

  function addLogControls() {
    var pre = document.querySelector('[data-testid="log-tail"]');
    if (!pre || document.getElementById("log-follow")) return;
    var label = document.createElement("label");
    label.className = "control";
    var box = document.createElement("input");
    box.type = "checkbox";
    box.id = "log-follow";
    box.checked = true;
    label.appendChild(box);
    label.appendChild(document.createTextNode(" Follow the log"));
    pre.parentNode.insertBefore(label, pre);
    pre.scrollTop = pre.scrollHeight;
  }

  // ---- cancel ------------------------------------------------------------------------------
  function cancelTarget(form) {
    var btn = form.querySelector('[data-testid="cancel-button"]');
    if (!btn && !form.matches('[data-testid="cancel-button"]')) return null;
    var id = (btn && btn.getAttribute("data-job-id")) || form.getAttribute("data-job-id");
    if (!id) {
      var m = (form.getAttribute("action") || "").match(/\/jobs\/([^/]+)\/cancel/);
      id = m ? decodeURIComponent(m[1]) : pageJobId();
    }
    return id;
  }

  async function cancel(id, form) {
    var ask = "Cancel job " + id + "?\n\nThe job is stopped on its machine; this cannot be undone.";
    if (!window.confirm(ask)) return;
    var out = form.querySelector(".cancel-result") || document.createElement("p");
    out.className = "cancel-result";
    out.setAttribute("role", "status");
    form.appendChild(out);
    var resp = await fetch("/api/jobs/" + encodeURIComponent(id) + "/cancel", {
      method: "POST",
      credentials: "same-origin",
      headers: headers({ "Content-Type": "application/json" }),
      body: JSON.stringify({ confirm: id }),
    });
    var doc = {};
    try { doc = await resp.json(); } catch (e) { doc = {}; }
    out.textContent = resp.ok ? "Cancel requested." : (doc.error || "Cancel failed") + (doc.fix ? " — " + doc.fix : "");
    out.setAttribute("data-ok", resp.ok ? "true" : "false");
    if (resp.ok) onUpdate({ jobs: [id] });
  }

  document.addEventListener("submit", function (ev) {
    var id = cancelTarget(ev.target);
    if (id === null) return;
    ev.preventDefault();
    cancel(id, ev.target).catch(function (e) { console.warn("rgt ui:", e); });
  });

  // ---- curves ------------------------------------------------------------------------------
  // Each [data-testid=curve] container names one job (data-job-id) or several (data-jobs="A,B",
  // the sweep page's overlay) and a metric (data-metric). Once uPlot has drawn, the container
  // carries data-points (raw points drawn, all runs together) and data-rendered-ms (build + first
  // draw, timed in the browser). Smoothing is an exponential moving average with the same
  // debiasing as TensorBoard's slider; the log scale drops values <= 0 (a log axis has none).
  var PALETTE = ["#1d4ed8", "#c2410c", "#047857", "#7e22ce", "#b91c1c", "#0e7490", "#a16207", "#be185d"];
  var HEIGHT = 260;
  var charts = new Map();
  var curveSeq = 0;

  function ema(y, alpha) {
    if (!(alpha > 0)) return y;
    var out = new Array(y.length), acc = 0, n = 0;
    for (var i = 0; i < y.length; i++) {
      var v = y[i];
      if (v === null || !isFinite(v)) { out[i] = null; continue; }
      acc = acc * alpha + (1 - alpha) * v;
      n += 1;
      out[i] = acc / (1 - Math.pow(alpha, n));
    }
    return out;
  }

  function sortedRun(label, x, y) {
    var sorted = true;
    for (var i = 1; i < x.length; i++) if (x[i] < x[i - 1]) { sorted = false; break; }
    if (sorted) return { label: label, x: x, y: y };
    var idx = x.map(function (_, k) { return k; }).sort(function (a, b) { return x[a] - x[b]; });
    return { label: label, x: idx.map(function (k) { return x[k]; }), y: idx.map(function (k) { return y[k]; }) };
  }

  async function loadRuns(el, cache) {
    var metric = el.getAttribute("data-metric") || "";
    var id = el.getAttribute("data-job-id") || "";
    var jobs = el.getAttribute("data-jobs") || (id.indexOf(",") >= 0 ? id : "");
    if (jobs) {
      var q = "jobs=" + encodeURIComponent(jobs) + "&metric=" + encodeURIComponent(metric);
      var doc = await getJSON("/api/curves?" + q);
      var runs = (doc.runs || []).filter(function (r) { return r.x && r.x.length; });
      return { runs: runs.map(function (r) { return sortedRun(r.job, r.x, r.y || []); }) };
    }
    var path = "/api/jobs/" + encodeURIComponent(id) + "/metrics";
    if (!cache.has(path)) cache.set(path, getJSON(path));
    var m = await cache.get(path);
    var names = Object.keys(m.series || {});
    var s = (m.series || {})[metric || names[0]];
    var label = metric || names[0] || "value";
    return { runs: s ? [sortedRun(label, s.x || [], s.y || [])] : [], skipped: m.skipped || 0, notes: m.notes || [] };
  }

  function positive(y) { return y.map(function (v) { return v !== null && v > 0 ? v : null; }); }

  function plotData(runs, alpha, logScale) {
    var fix = logScale ? positive : function (y) { return y; };
    if (runs.length === 1) {
      var r = runs[0];
      if (alpha > 0) return [r.x, fix(r.y), fix(ema(r.y, alpha))];
      return [r.x, fix(r.y)];
    }
    var tables = runs.map(function (r) { return [r.x, fix(alpha > 0 ? ema(r.y, alpha) : r.y)]; });
    return window.uPlot.join(tables);
  }

  function plotSeries(runs, alpha) {
    var series = [{ label: "step" }];
    if (runs.length === 1 && alpha > 0) {
      series.push({ label: runs[0].label + " (raw)", stroke: "rgba(29,78,216,0.3)", width: 1, points: { show: false } });
      series.push({ label: runs[0].label + " (smoothed)", stroke: PALETTE[0], width: 2, points: { show: false } });
      return series;
    }
    runs.forEach(function (r, i) {
      series.push({ label: r.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, points: { show: false }, spanGaps: true });
    });
    return series;
  }

  function plotOptions(el, st, width) {
    var metric = el.getAttribute("data-metric") || "value";
    var axis = { stroke: "#374151", grid: { stroke: "#e5e7eb", width: 1 }, ticks: { stroke: "#d1d5db" } };
    return {
      width: width,
      height: HEIGHT,
      scales: { x: { time: false }, y: st.logScale ? { distr: 3, log: 10 } : { distr: 1 } },
      axes: [Object.assign({ label: "step" }, axis), Object.assign({ label: metric, size: 60 }, axis)],
      series: plotSeries(st.runs, st.alpha),
      legend: { show: true, live: true },
      cursor: { drag: { x: true, y: false } },
      hooks: { draw: [function () { drawn(el, st); }] },
    };
  }

  function drawn(el, st) {
    if (st.t0 === null) return;
    el.setAttribute("data-rendered-ms", (performance.now() - st.t0).toFixed(1));
    el.setAttribute("data-points", String(st.points));
    st.t0 = null;
  }

  function draw(el, st) {
    var holder = el.querySelector(".curve-plot");
    if (st.plot) { st.plot.destroy(); st.plot = null; }
    holder.textContent = "";
    st.points = st.runs.reduce(function (n, r) { return n + r.x.length; }, 0);
    if (!st.points || !window.uPlot) {
      holder.textContent = window.uPlot ? "No points yet." : "Charts need /static/vendor/uPlot.iife.min.js.";
      el.setAttribute("data-points", "0");
      return;
    }
    var width = Math.max(240, holder.clientWidth || el.clientWidth || 600);
    st.t0 = performance.now();
    st.plot = new window.uPlot(plotOptions(el, st, width), plotData(st.runs, st.alpha, st.logScale), holder);
  }

  function control(el, kind, build) {
    var id = "curve-" + kind + "-" + el.getAttribute("data-curve-seq");
    var label = document.createElement("label");
    label.className = "control";
    label.setAttribute("for", id);
    var input = document.createElement("input");
    input.id = id;
    build(input, label);
    return label;
  }

  function addControls(el, st) {
    el.setAttribute("data-curve-seq", String(++curveSeq));
    var bar = document.createElement("div");
    bar.className = "curve-controls";
    var out = document.createElement("output");
    bar.appendChild(control(el, "log", function (input, label) {
      input.type = "checkbox";
      input.setAttribute("data-testid", "curve-log");
      input.addEventListener("change", function () { st.logScale = input.checked; draw(el, st); });
      label.appendChild(input);
      label.appendChild(document.createTextNode(" Log scale"));
    }));
    bar.appendChild(control(el, "smooth", function (input, label) {
      input.type = "range";
      input.min = "0";
      input.max = "0.99";
      input.step = "0.01";
      input.value = String(st.alpha);
      input.setAttribute("data-testid", "curve-smooth");
      out.setAttribute("for", input.id);
      out.textContent = st.alpha.toFixed(2);
      input.addEventListener("input", function () {
        st.alpha = Number(input.value);
        out.textContent = st.alpha.toFixed(2);
        draw(el, st);
      });
      label.appendChild(document.createTextNode("Smoothing "));
      label.appendChild(input);
    }));
    bar.appendChild(out);
    var holder = document.createElement("div");
    holder.className = "curve-plot";
    el.querySelectorAll(".curve-fallback").forEach(function (n) { n.remove(); });
    el.appendChild(bar);
    el.appendChild(holder);
  }

  function noteSkipped(el, loaded) {
    if (!loaded.skipped) return;
    var scope = el.closest("section") || el;
    if (scope.querySelector('[data-testid="curve-note"]')) return;
    var p = document.createElement("p");
    p.className = "note";
    p.setAttribute("data-testid", "curve-note");
    p.textContent = loaded.skipped + " lines skipped: " + (loaded.notes.join("; ") || "NaN/inf/not JSON");
    el.appendChild(p);
  }

  async function renderOne(el, cache, again) {
    var st = charts.get(el);
    if (st && !again) return;
    if (!st) {
      st = { runs: [], alpha: 0, logScale: false, plot: null, t0: null, points: 0 };
      charts.set(el, st);
      addControls(el, st);
    }
    try {
      var loaded = await loadRuns(el, cache);
      st.runs = loaded.runs;
      noteSkipped(el, loaded);
      draw(el, st);
    } catch (e) {
      el.querySelector(".curve-plot").textContent = "Could not load the curve: " + e.message;
      el.setAttribute("data-error", "true");
    }
  }

  // The job page lists one curve per metric the server knew of when it rendered; a metric the
  // patrol fetched later gets its container here.
  async function addNewCurves(cache) {
    var id = pageJobId();
    var section = document.getElementById("curves");
    if (!id || !section) return;
    var path = "/api/jobs/" + encodeURIComponent(id) + "/metrics";
    if (!cache.has(path)) cache.set(path, getJSON(path));
    var m = await cache.get(path);
    Object.keys(m.series || {}).forEach(function (name) {
      var known = Array.prototype.some.call(section.querySelectorAll('[data-testid="curve"]'), function (c) {
        return c.getAttribute("data-metric") === name;
      });
      if (known) return;
      section.querySelectorAll("p.empty, p:not([data-testid])").forEach(function (p) { p.remove(); });
      var fig = document.createElement("figure");
      var cap = document.createElement("figcaption");
      cap.textContent = name;
      var div = document.createElement("div");
      div.setAttribute("data-testid", "curve");
      div.setAttribute("data-job-id", id);
      div.setAttribute("data-metric", name);
      fig.appendChild(cap);
      fig.appendChild(div);
      section.appendChild(fig);
    });
  }

  async function renderCurves(root, again) {
    charts.forEach(function (st, el) { if (!el.isConnected) { if (st.plot) st.plot.destroy(); charts.delete(el); } });
    var cache = new Map();
    if (page() === "job") {
      try { await addNewCurves(cache); } catch (e) { console.warn("rgt ui:", e); }
    }
    var els = Array.prototype.slice.call(root.querySelectorAll('[data-testid="curve"]'));
    return Promise.all(els.map(function (el) { return renderOne(el, cache, again); }));
  }

  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () {
      charts.forEach(function (st, el) {
        var holder = el.querySelector(".curve-plot");
        if (st.plot && holder) st.plot.setSize({ width: Math.max(240, holder.clientWidth), height: HEIGHT });
      });
    }, 150);
  });

  // ---- boot --------------------------------------------------------------------------------
  function boot() {
    keepToken();
    formatTimes(document);
    addLogControls();
    renderCurves(document, false);
    connect();
  }

  window.RgtUI = { onUpdate: onUpdate, renderCurves: renderCurves };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot);
  else boot();
})();
