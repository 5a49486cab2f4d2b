// SPDX-License-Identifier: MIT
// app.js — the dashboard: fetches the JSON API, draws timelines and the
// load/throughput scatter on <canvas>, lists episodes and capture health, and
// follows /api/stream for live windows, episodes and health when something is
// live. Operators drive it: a server picker, a time range chosen by dragging
// over a timeline (a brush) or by clicking an episode, hover values, and the
// whole selection in the URL (?tier=&server=&width=&from=&to=&live=), so a
// reload or a shared link shows the same view.
'use strict';

const $ = (id) => document.getElementById(id);
const MAX_LIVE_WINDOWS = 20000; // points kept per series while following the stream

const state = {
  tier: null,
  server: '*',    // '*' = the tier as a whole, else 'ADDR:PORT'
  tiers: [],      // /api/tiers
  view: null,     // {from, to} in ns: the time range shown; null = everything
  width: '50ms',
  widthNs: 50e6,
  win: null,      // {start_ns: [], load: [], throughput: [], norm_throughput: [], ...}
  scatter: null,  // {load: [], norm_throughput: [], congested: [], freeze: [], n_star, ...}
  analysis: null,
  episodes: [],
  health: null,
  diag: null,     // /api/diagnose: verdict, tiers, servers, pools, episodes with roots
  t0: 0,          // first window start, ns (axis origin)
};

// ---- helpers -------------------------------------------------------------------

async function getJSON(path) {
  const r = await fetch(path, { cache: 'no-store' });
  let body = null;
  try { body = await r.json(); } catch (e) { body = null; }
  if (!r.ok) throw new Error((body && body.error) || `${path}: HTTP ${r.status}`);
  return body;
}

function fmt(v, digits = 2) {
  if (v === null || v === undefined || Number.isNaN(v)) return '—';
  if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + 'M';
  if (Math.abs(v) >= 1e4) return (v / 1e3).toFixed(1) + 'k';
  return Number(v).toFixed(digits);
}

function fmtDur(ns) {
  if (ns === null || ns === undefined) return '—';
  if (ns >= 1e9) return (ns / 1e9).toFixed(2) + ' s';
  if (ns >= 1e6) return (ns / 1e6).toFixed(ns >= 1e8 ? 0 : 1) + ' ms';
  return (ns / 1e3).toFixed(0) + ' µs';
}

function fmtClock(ns) {
  const d = new Date(ns / 1e6);
  return d.toISOString().substring(11, 23);
}

function showError(msg) {
  const e = $('error');
  e.textContent = msg;
  e.hidden = !msg;
}

// A canvas sized to its CSS box in device pixels; returns [ctx, w, h] in CSS px.
function prepCanvas(c) {
  const dpr = window.devicePixelRatio || 1;
  const w = c.clientWidth, h = c.clientHeight;
  if (c.width !== Math.round(w * dpr) || c.height !== Math.round(h * dpr)) {
    c.width = Math.round(w * dpr);
    c.height = Math.round(h * dpr);
  }
  const ctx = c.getContext('2d');
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  ctx.clearRect(0, 0, w, h);
  ctx.font = '11px system-ui, sans-serif';
  return [ctx, w, h];
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function axes(ctx, L, T, W, H, xmin, xmax, ymax, xlabel, ylabel, xfmt) {
  ctx.strokeStyle = '#d9dde5';
  ctx.fillStyle = '#667085';
  ctx.lineWidth = 1;
  ctx.textAlign = 'right';
  ctx.textBaseline = 'middle';
  for (let i = 0; i <= 4; i++) {
    const y = T + H - (i / 4) * H;
    ctx.beginPath(); ctx.moveTo(L, y + 0.5); ctx.lineTo(L + W, y + 0.5); ctx.stroke();
    ctx.fillText(fmt(ymax * i / 4, ymax >= 10 ? 0 : 1), L - 4, y);
  }
  ctx.textAlign = 'center';
  ctx.textBaseline = 'top';
  for (let i = 0; i <= 5; i++) {
    const x = L + (i / 5) * W;
    ctx.fillText(xfmt(xmin + (xmax - xmin) * i / 5), x, T + H + 4);
  }
  ctx.save();
  ctx.translate(10, T + H / 2);
  ctx.rotate(-Math.PI / 2);
  ctx.fillText(ylabel, 0, -6);
  ctx.restore();
  if (xlabel) {
    ctx.textAlign = 'right';
    ctx.fillText(xlabel, L + W, T + H + 18);
  }
}

// ---- timelines -------------------------------------------------------------------

// Draws one series against time; many windows per pixel become a min/max bar,
// so a 20 ms spike among 100 000 windows still shows.
function drawTimeline(canvas, starts, values, opts) {
  const [ctx, w, h] = prepCanvas(canvas);
  const all = starts ? starts.length : 0;
  const L = 52, T = 8, W = w - L - 10, H = h - T - 34;
  // The windows in the view: [i0, i1).
  let i0 = 0, i1 = all;
  if (opts.view && all) {
    i0 = lowerBound(starts, opts.view.from - state.widthNs + 1);
    i1 = lowerBound(starts, opts.view.to);
  }
  const n = Math.max(0, i1 - i0);
  canvas.dataset.points = String(n);
  canvas._geo = null;
  if (!n) {
    ctx.fillStyle = '#667085';
    ctx.fillText(all ? 'no windows in the selected range' : 'no windows yet', L + 10, T + 20);
    snapshot(canvas, ctx);
    return;
  }
  const x0 = opts.view ? opts.view.from : starts[0];
  const x1 = opts.view ? opts.view.to : starts[all - 1] + state.widthNs;
  canvas._geo = { L, T, W, H, x0, x1, starts, i0, i1 };
  canvas.dataset.from = String(x0);
  canvas.dataset.to = String(x1);
  let vmax = 0;
  for (let i = i0; i < i1; i++) if (values[i] > vmax) vmax = values[i];
  if (opts.values2) for (let i = i0; i < i1; i++) if (opts.values2[i] > vmax) vmax = opts.values2[i];
  if (opts.hline > vmax) vmax = opts.hline;
  const ymax = niceMax(vmax * 1.05);
  const span = (x1 - x0) / 1e9;
  axes(ctx, L, T, W, H, 0, span, ymax, 'seconds from ' + fmtClock(x0) + ' UTC',
       opts.ylabel, (s) => s.toFixed(span >= 100 ? 0 : span >= 2 ? 1 : 3));
  const px = (t) => L + ((t - x0) / (x1 - x0)) * W;
  const py = (v) => T + H - (v / ymax) * H;
  ctx.save();
  ctx.beginPath();
  ctx.rect(L, T - 1, W, H + 2);
  ctx.clip();
  // Congested windows shaded behind the series.
  if (opts.congested) {
    ctx.fillStyle = 'rgba(220, 38, 38, 0.13)';
    for (let i = i0; i < i1; i++) {
      if (!opts.congested[i]) continue;
      const a = px(starts[i]), b = Math.max(px(starts[i] + state.widthNs), a + 1);
      ctx.fillRect(a, T, b - a, H);
    }
  }
  const series = (vals, color, width) => {
    const cols = Math.max(1, Math.floor(W));
    const lo = new Float64Array(cols).fill(Infinity), hi = new Float64Array(cols).fill(-Infinity);
    for (let i = i0; i < i1; i++) {
      const c = Math.min(cols - 1, Math.max(0, Math.floor(px(starts[i]) - L)));
      if (vals[i] < lo[c]) lo[c] = vals[i];
      if (vals[i] > hi[c]) hi[c] = vals[i];
    }
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.beginPath();
    let started = false;
    for (let c = 0; c < cols; c++) {
      if (hi[c] === -Infinity) continue;
      const x = L + c + 0.5;
      if (!started) { ctx.moveTo(x, py(lo[c])); started = true; } else ctx.lineTo(x, py(lo[c]));
      if (hi[c] !== lo[c]) ctx.lineTo(x, py(hi[c]));
    }
    ctx.stroke();
  };
  if (opts.values2) series(opts.values2, opts.color2, 1);
  series(values, opts.color, 1.2);
  ctx.restore();
  if (opts.hline > 0) {
    ctx.setLineDash([6, 4]);
    ctx.strokeStyle = '#111';
    ctx.beginPath();
    ctx.moveTo(L, py(opts.hline)); ctx.lineTo(L + W, py(opts.hline));
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = '#111';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'bottom';
    ctx.fillText(opts.hlabel + ' ' + fmt(opts.hline), L + 4, py(opts.hline) - 2);
  }
  if (opts.legend) {
    ctx.textAlign = 'right';
    ctx.textBaseline = 'top';
    let x = L + W - 4;
    for (const [label, color] of opts.legend.slice().reverse()) {
      ctx.fillStyle = color;
      ctx.fillText(label, x, T + 2);
      x -= ctx.measureText(label).width + 14;
    }
  }
  snapshot(canvas, ctx);
}

// The first index whose value is >= v in a sorted array.
function lowerBound(a, v) {
  let lo = 0, hi = a.length;
  while (lo < hi) {
    const m = (lo + hi) >> 1;
    if (a[m] < v) lo = m + 1; else hi = m;
  }
  return lo;
}

// The drawn picture is kept so that the hover line and the brush are drawn
// over it without redrawing the series.
function snapshot(canvas, ctx) {
  // A hidden canvas has no pixels to keep.
  canvas._img = canvas.width && canvas.height
    ? ctx.getImageData(0, 0, canvas.width, canvas.height) : null;
}

// The congestion threshold the episodes were cut with: the intervention N*,
// else the least-squares knee.
function threshold(a) {
  if (!a) return null;
  if (a.n_star !== null && a.n_star !== undefined) return a.n_star;
  if (a.n_star_fit !== null && a.n_star_fit !== undefined) return a.n_star_fit;
  return null;
}

function thresholdLabel(a) {
  return a && (a.n_star === null || a.n_star === undefined) ? 'N* (fit)' : 'N*';
}

function congestedFlags() {
  const a = state.analysis, win = state.win, thr = threshold(a);
  if (thr === null || !win) return null;
  return win.load.map((v) => v >= thr);
}

function drawTimelines() {
  const win = state.win || { start_ns: [], load: [], norm_throughput: [], rt_mean_ns: [] };
  const a = state.analysis || {};
  const cong = congestedFlags();
  const view = state.view;
  drawTimeline($('load'), win.start_ns, win.load, {
    color: '#2563eb', ylabel: 'load', hline: threshold(a) || 0, hlabel: thresholdLabel(a),
    congested: cong, view,
  });
  drawTimeline($('tput'), win.start_ns, win.norm_throughput, {
    color: '#16a34a', ylabel: 'units/s', hline: a.tp_max || 0, hlabel: 'TPmax', congested: cong,
    view,
  });
  // Response times in ms: the mean and, lighter, the 95th percentile.
  const ms = (arr) => (arr || []).map((v) => v / 1e6);
  drawTimeline($('rt'), win.start_ns, ms(win.rt_mean_ns), {
    color: '#7c3aed', ylabel: 'ms', hline: 0, hlabel: '', congested: cong, view,
    values2: win.rt_p95_ns ? ms(win.rt_p95_ns) : null, color2: 'rgba(234, 88, 12, 0.6)',
    legend: [['mean', '#7c3aed'], ['p95', '#ea580c']],
  });
  renderRange();
}

// ---- scatter ---------------------------------------------------------------------

function drawScatter() {
  const c = $('scatter');
  const [ctx, w, h] = prepCanvas(c);
  const s = state.scatter;
  const all = s ? s.load.length : 0;
  // Only the windows of the selected range (all of them while not zoomed).
  const inView = (i) => !state.view ||
    (s.start_ns[i] + state.widthNs > state.view.from && s.start_ns[i] < state.view.to);
  let n = 0;
  for (let i = 0; i < all; i++) if (inView(i)) n++;
  c.dataset.points = String(n);
  const L = 52, T = 10, W = w - L - 14, H = h - T - 36;
  if (!n) {
    ctx.fillStyle = '#667085';
    ctx.fillText('no windows yet', L + 10, T + 20);
    return;
  }
  let xm = 0, ym = 0;
  for (let i = 0; i < all; i++) {
    if (!inView(i)) continue;
    if (s.load[i] > xm) xm = s.load[i];
    if (s.norm_throughput[i] > ym) ym = s.norm_throughput[i];
  }
  const xmax = niceMax(xm * 1.05), ymax = niceMax(Math.max(ym, s.tp_max || 0) * 1.05);
  axes(ctx, L, T, W, H, 0, xmax, ymax, 'load (requests in the tier)', 'units/s',
       (v) => fmt(v, xmax >= 10 ? 0 : 1));
  const px = (v) => L + (v / xmax) * W, py = (v) => T + H - (v / ymax) * H;
  // Normal points first, then congested and freeze on top so they stay visible.
  const passes = [
    [(i) => !s.congested[i] && !s.freeze[i] && inView(i), 'rgba(37, 99, 235, 0.45)'],
    [(i) => s.congested[i] && !s.freeze[i] && inView(i), 'rgba(220, 38, 38, 0.75)'],
    [(i) => s.freeze[i] && inView(i), 'rgba(124, 58, 237, 0.9)'],
  ];
  for (const [pick, color] of passes) {
    ctx.fillStyle = color;
    for (let i = 0; i < all; i++) {
      if (!pick(i)) continue;
      ctx.beginPath();
      ctx.arc(px(s.load[i]), py(s.norm_throughput[i]), 2.5, 0, 2 * Math.PI);
      ctx.fill();
    }
  }
  // The fitted main-sequence curve min(a·load, TPmax).
  if (s.slope > 0 && s.tp_max > 0) {
    ctx.strokeStyle = '#16a34a';
    ctx.lineWidth = 2;
    ctx.beginPath();
    const knee = s.tp_max / s.slope;
    ctx.moveTo(px(0), py(0));
    ctx.lineTo(px(Math.min(knee, xmax)), py(Math.min(s.tp_max, s.slope * xmax)));
    if (knee < xmax) ctx.lineTo(px(xmax), py(s.tp_max));
    ctx.stroke();
  }
  const thr = threshold(s);
  if (thr !== null) {
    ctx.setLineDash([6, 4]);
    ctx.strokeStyle = '#111';
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    ctx.moveTo(px(thr), T); ctx.lineTo(px(thr), T + H);
    ctx.stroke();
    ctx.setLineDash([]);
    ctx.fillStyle = '#111';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'top';
    ctx.fillText(thresholdLabel(s) + ' = ' + fmt(thr), px(thr) + 4, T + 2);
  }
}

// ---- tables ----------------------------------------------------------------------

function episodeRow(e, i) {
  const tr = document.createElement('tr');
  tr.className = 'zoomable' + (e.ongoing ? ' ongoing' : '');
  tr.title = 'show this episode (zoom to it)';
  // Exact nanoseconds as the API gave them, for scripts and tests.
  tr.dataset.start = String(e.start_ns);
  tr.dataset.end = String(e.end_ns);
  tr.dataset.kind = e.kind;
  tr.addEventListener('click', () => zoomToEpisode(e));
  const cells = [
    String(i + 1),
    '+' + ((e.start_ns - state.t0) / 1e9).toFixed(2) + ' s',
    fmtDur(e.end_ns - e.start_ns) + (e.ongoing ? ' …' : ''),
    fmt(e.peak_load), fmt(e.mean_load), fmt(e.throughput, 1), e.kind, episodeRoot(e),
  ];
  cells.forEach((t, k) => {
    const td = document.createElement('td');
    td.textContent = t;
    if (k === 1) td.title = fmtClock(e.start_ns) + ' UTC';
    if (k === 6) td.className = e.kind;
    tr.appendChild(td);
  });
  return tr;
}

function renderEpisodes() {
  const tb = $('episodes').querySelector('tbody');
  tb.textContent = '';
  const v = state.view;
  let shown = 0;
  state.episodes.forEach((e, i) => {
    if (v && (e.end_ns <= v.from || e.start_ns >= v.to)) return;
    tb.appendChild(episodeRow(e, i));
    shown++;
  });
  const freezes = state.episodes.filter((e) => e.kind === 'freeze').length;
  $('episodes-note').textContent = (v ? `${shown} of ` : '') +
    `${state.episodes.length} episodes (${freezes} freeze) of ` +
    (state.server === '*' ? `tier ${state.tier} as a whole` : `server ${state.server}`) +
    (v ? ' in the selected range' : '') + '; click one to zoom to it';
  if (!shown) {
    const tr = document.createElement('tr');
    const td = document.createElement('td');
    td.colSpan = 8;
    td.textContent = state.episodes.length ? 'no episodes in the selected range' : 'no episodes';
    tr.appendChild(td);
    tb.appendChild(tr);
  }
}

// The root diagnose found for a tier-level episode of the shown tier.
function episodeRoot(e) {
  const d = state.diag;
  if (!d) return '…';
  const x = d.episodes.find((y) => y.tier === state.tier && y.server === state.server &&
                                   y.start_ns === e.start_ns);
  if (!x) return 'not a bottleneck';
  return x.cause === 'none' ? 'none' : `${x.root_tier} ${x.root_server}: ${x.cause}`;
}

function renderVerdict() {
  const p = $('verdict');
  const d = state.diag;
  p.textContent = '';
  if (!d) { p.textContent = 'not available'; return; }
  const v = d.verdict;
  p.className = 'verdict' + (v.cause === 'none' ? ' none' : '');
  if (v.cause !== 'none') {
    const c = document.createElement('span');
    c.className = 'cause';
    c.textContent = `${v.cause} at ${v.tier} ${v.server}: `;
    p.appendChild(c);
  }
  p.appendChild(document.createTextNode(v.evidence));
  drawGraph();
}

// The wait-for graph: tiers as columns from the front, servers in them,
// calls as arrows (wider when more is waited on), the root filled.
function drawGraph() {
  const svg = $('graph');
  const NS = 'http://www.w3.org/2000/svg';
  svg.textContent = '';
  const d = state.diag;
  if (!d || !d.tiers.length) return;
  const el = (name, attrs, text) => {
    const e = document.createElementNS(NS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  const W = svg.clientWidth || 900, colW = W / d.tiers.length, boxW = Math.min(200, colW - 60);
  const pos = {};
  const v = d.verdict;
  d.tiers.forEach((t, i) => {
    const srv = d.servers.filter((s) => s.tier === t.tier);
    const x = i * colW + (colW - boxW) / 2, h = 34 + srv.length * 46;
    el('rect', { x: x - 8, y: 6, width: boxW + 16, height: h, rx: 8,
                 class: 'tier' + (t.state === 'root' ? ' root' : '') });
    el('text', { x: x, y: 22 }, `${t.tier} (${t.state})`);
    srv.forEach((s, j) => {
      const y = 30 + j * 46;
      const root = v.cause !== 'none' && v.tier === s.tier && (v.server === '*' || v.server === s.server);
      el('rect', { x: x, y: y, width: boxW, height: 38, rx: 5, class: 'srv' + (root ? ' root' : '') });
      el('text', { x: x + 6, y: y + 15, class: root ? 'root' : '' }, s.server);
      el('text', { x: x + 6, y: y + 31, class: root ? 'root' : '' },
         `self ${fmt(s.self_load_mean)} wait ${fmt(s.wait_load_mean)}` + (root ? ` ${v.cause}` : ''));
      pos[s.server] = { x: x, y: y + 19, w: boxW };
    });
    pos['tier:' + t.tier] = { x: x - 8, y: 6 + h / 2 };
  });
  for (const p of d.pools) {
    const a = pos[p.from_server], b = pos['tier:' + p.to_tier];
    if (!a || !b) continue;
    const w = 1 + 2.5 * Math.log10(1 + p.calls_mean);
    const isRoot = v.cause === 'pool' && v.tier === p.from_tier &&
                   (v.server === '*' || v.server === p.from_server);
    const cls = 'edge' + (isRoot ? ' root' : p.pooled && p.full_fraction >= 0.2 ? ' full' : '');
    const x1 = a.x + a.w, x2 = b.x;
    el('path', { d: `M${x1},${a.y} C${(x1 + x2) / 2},${a.y} ${(x1 + x2) / 2},${b.y} ${x2},${b.y}`,
                 class: cls, 'stroke-width': w.toFixed(1) });
    el('text', { x: (x1 + x2) / 2 - 40, y: (a.y + b.y) / 2 - 4 },
       p.pooled ? `${p.connections} conns, full ${(100 * p.full_fraction).toFixed(0)}%`
                : `${fmt(p.calls_mean)} waiting`);
  }
}

function card(k, v) {
  const d = document.createElement('div');
  d.className = 'card';
  const a = document.createElement('div'); a.className = 'k'; a.textContent = k;
  const b = document.createElement('div'); b.className = 'v'; b.textContent = v;
  d.append(a, b);
  return d;
}

function renderSummary() {
  const a = state.analysis;
  const s = $('summary');
  s.textContent = '';
  if (!a) return;
  s.append(
    ...(a.window_reason ? [Object.assign(card('window (auto)', fmtDur(a.width_ns)),
                                         { title: a.window_reason })] : []),
    card('requests', fmt(a.requests, 0)),
    card('N* (intervention)', fmt(a.n_star)),
    card('N* (fit)', fmt(a.n_star_fit)),
    card('TPmax (units/s)', fmt(a.tp_max, 1)),
    card('work unit', a.work_unit_ns ? fmtDur(a.work_unit_ns) : '—'),
    card('congested', a.congested_fraction === null ? '—' : (100 * a.congested_fraction).toFixed(1) + ' %'),
    card('episodes', String(state.episodes.length)),
    card('episodes / min', fmt(a.episodes_per_min, 1)),
  );
  const warn = $('warn');
  // Without a knee there is no congestion: say why (the report's n_star_reason).
  const noKnee = a.n_star_status && a.n_star_status !== 'knee';
  warn.hidden = !a.disagree && !noKnee;
  warn.textContent = a.disagree
    ? 'The two N* estimates disagree by more than 20 %: read the scatter before trusting either.'
    : noKnee ? a.n_star_reason : '';
}

function renderHealth() {
  const h = state.health;
  const tb = $('captures').querySelector('tbody');
  tb.textContent = '';
  if (!h) return;
  for (const c of h.captures) {
    const tr = document.createElement('tr');
    // A capture that lost requests (a full disk) says so where it is listed.
    const src = c.state === 'partial'
      ? `${c.source} (partial data: ${fmt(c.requests_lost, 0)} requests lost)` : c.source;
    for (const t of [c.id, src, fmt(c.packets, 0), fmt(c.requests, 0), fmt(c.kernel_drops, 0),
                     fmt(c.if_drops, 0), fmt(c.gaps, 0), fmt(c.parse_errors, 0)]) {
      const td = document.createElement('td');
      td.textContent = String(t);
      tr.appendChild(td);
    }
    tb.appendChild(tr);
  }
  const sec = h.seconds || [];
  const c = $('health');
  c.hidden = !sec.length;
  $('health-note').hidden = !!sec.length;
  if (!sec.length) {
    c.dataset.points = '0';
    return;
  }
  // The newest cumulative counters: what a running capture has seen so far.
  const last = sec[sec.length - 1];
  const now = $('health-now');
  now.hidden = false;
  now.textContent = `latest (${fmtClock(last.ts_ns)} UTC): ${fmt(last.packets, 0)} packets, ` +
    `${fmt(last.kernel_drops, 0)} kernel drops, ${fmt(last.if_drops, 0)} interface drops; ` +
    'seconds with drops are shaded';
  const starts = sec.map((r) => r.ts_ns);
  const saved = state.widthNs;
  state.widthNs = 1e9;
  drawTimeline(c, starts, sec.map((r) => r.d_packets), {
    color: '#2563eb', ylabel: 'pkts/s', hline: 0, hlabel: '',
    congested: sec.map((r) => r.d_kernel_drops + r.d_if_drops > 0),
  });
  state.widthNs = saved;
}

// ---- loading -------------------------------------------------------------------

function q() {
  let s = `tier=${encodeURIComponent(state.tier)}&width=${encodeURIComponent(state.width)}`;
  if (state.server !== '*') s += `&server=${encodeURIComponent(state.server)}`;
  return s;
}

// Answers to an older selection are dropped: the newest choice wins.
let lastFullLoad = 0, loadSeq = 0;
async function loadTier() {
  if (!state.tier) return;
  const seq = ++loadSeq, query = q();
  lastFullLoad = Date.now();
  showError('');
  try {
    const [an, win, sc, ep] = await Promise.all([
      getJSON('/api/analysis?' + query), getJSON('/api/windows?' + query),
      getJSON('/api/scatter?' + query), getJSON('/api/episodes?' + query),
    ]);
    if (seq !== loadSeq) return;
    state.analysis = an;
    // width=auto: the server chose the width (the report's --window auto).
    if (state.width === 'auto' && an.width_ns !== state.widthNs) {
      state.widthNs = an.width_ns;
      loadDiagnose();
    }
    state.win = win;
    state.scatter = sc;
    state.episodes = ep.episodes;
    state.t0 = win.start_ns.length ? win.start_ns[0] : 0;
  } catch (e) {
    if (seq !== loadSeq) return;
    showError(String(e.message || e));
  }
  renderAll();
  // What is on screen, for scripts and tests: the API query it came from.
  document.body.dataset.shown = query;
}

async function loadDiagnose() {
  try {
    // diagnose reads every tier at one width: with auto, the one chosen for this tier.
    const width = state.width === 'auto' ? state.widthNs / 1e6 + 'ms' : state.width;
    state.diag = await getJSON('/api/diagnose?width=' + encodeURIComponent(width));
  } catch (e) {
    state.diag = null;
  }
  renderVerdict();
  renderEpisodes();
}

async function loadHealth() {
  try {
    state.health = await getJSON('/api/health');
  } catch (e) {
    state.health = null;
  }
  renderHealth();
}

function renderAll() {
  renderSummary();
  drawTimelines();
  drawScatter();
  renderEpisodes();
}

async function loadTiers() {
  let tiers = [];
  try {
    tiers = (await getJSON('/api/tiers')).tiers;
  } catch (e) {
    showError(String(e.message || e));
    return;
  }
  const sel = $('tier');
  const keep = state.tier;
  sel.textContent = '';
  // The busiest tier first is the likeliest one to look at.
  tiers.sort((a, b) => b.requests - a.requests);
  for (const t of tiers) {
    const o = document.createElement('option');
    o.value = t.name;
    o.textContent = `${t.name} (${t.proto}, ${fmt(t.requests, 0)} req)`;
    sel.appendChild(o);
  }
  if (!tiers.length) {
    showError('The database has no tiers yet.');
    return;
  }
  state.tiers = tiers;
  const params = new URLSearchParams(location.search);
  const want = keep || params.get('tier');
  state.tier = tiers.some((t) => t.name === want) ? want : tiers[0].name;
  sel.value = state.tier;
  fillServers(keep ? state.server : params.get('server') || '*');
}

// The server picker: the tier as a whole, then each of its servers (the
// per-server view is where one frozen server of several shows).
function fillServers(want) {
  const sel = $('server');
  const t = state.tiers.find((x) => x.name === state.tier);
  const servers = t ? t.servers : [];
  sel.textContent = '';
  const all = document.createElement('option');
  all.value = '*';
  all.textContent = servers.length > 1 ? `all ${servers.length} (the tier)` : 'the tier';
  sel.appendChild(all);
  for (const a of servers) {
    const o = document.createElement('option');
    o.value = o.textContent = a;
    sel.appendChild(o);
  }
  state.server = servers.includes(want) ? want : '*';
  sel.value = state.server;
}

// ---- the selection in the URL, the range, zoom -----------------------------------

// ns <-> the URL's seconds since the epoch (as the API's from/to take them).
const nsToSec = (ns) => (ns / 1e9).toFixed(3);
const secToNs = (s) => Math.round(parseFloat(s) * 1e3) * 1e6;

function syncURL(push) {
  const p = new URLSearchParams();
  if (state.tier) p.set('tier', state.tier);
  if (state.server !== '*') p.set('server', state.server);
  p.set('width', state.width);
  if (state.view) {
    p.set('from', nsToSec(state.view.from));
    p.set('to', nsToSec(state.view.to));
  }
  const live = new URLSearchParams(location.search).get('live');
  if (live !== null) p.set('live', live);
  const url = location.pathname + '?' + p.toString();
  if (url === location.pathname + location.search) return;
  if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
}

function renderRange() {
  const r = $('range');
  const win = state.win;
  const n = win ? win.start_ns.length : 0;
  $('zoomout').disabled = !state.view;
  if (!n) { r.textContent = ''; return; }
  const from = state.view ? state.view.from : win.start_ns[0];
  const to = state.view ? state.view.to : win.start_ns[n - 1] + state.widthNs;
  r.textContent = `${fmtClock(from)} – ${fmtClock(to)} UTC (${fmtDur(to - from)}` +
    (state.view ? ', zoomed)' : ', everything)');
  r.dataset.from = String(from);
  r.dataset.to = String(to);
}

// Zooms to [from, to) (ns), aligned outward to whole windows; null shows all.
function setView(v, push = true) {
  if (v) {
    const w = state.widthNs;
    v = { from: Math.floor(v.from / w) * w, to: Math.ceil(v.to / w) * w };
    if (v.to - v.from < 2 * w) v.to = v.from + 2 * w;
  }
  state.view = v;
  syncURL(push);
  renderAll();
}

function zoomToEpisode(e) {
  // The episode with as much again on each side (at least 20 windows).
  const pad = Math.max(e.end_ns - e.start_ns, 20 * state.widthNs);
  setView({ from: e.start_ns - pad, to: e.end_ns + pad });
}

// Reads tier, server, width and range from the URL (at start and on back/forward).
function readURL() {
  const p = new URLSearchParams(location.search);
  if (p.get('width')) {
    state.width = p.get('width');
    const sel = $('width');
    if (![...sel.options].some((o) => o.value === state.width)) {
      const o = document.createElement('option');
      o.value = o.textContent = state.width;
      sel.appendChild(o);
    }
    sel.value = state.width;
  }
  state.widthNs = widthToNs(state.width);
  state.server = p.get('server') || '*';
  const f = p.get('from'), t = p.get('to');
  state.view = f && t && Number.isFinite(parseFloat(f)) && parseFloat(t) > parseFloat(f)
    ? { from: secToNs(f), to: secToNs(t) } : null;
}

// ---- hover values and the brush ---------------------------------------------------

const TIMELINES = ['load', 'tput', 'rt'];
let brush = null; // {canvas, x0, x1} while dragging

// Redraws every timeline's kept picture with the hover line at time t (ns)
// and the brush's band, if any.
function overlay(t) {
  for (const id of TIMELINES) {
    const c = $(id), g = c._geo;
    if (!c._img) continue;
    const ctx = c.getContext('2d');
    ctx.putImageData(c._img, 0, 0);
    if (!g) continue;
    const px = (v) => g.L + ((v - g.x0) / (g.x1 - g.x0)) * g.W;
    if (brush) {
      const a = Math.min(brush.t0, brush.t1), b = Math.max(brush.t0, brush.t1);
      ctx.fillStyle = 'rgba(37, 99, 235, 0.15)';
      ctx.fillRect(px(a), g.T, Math.max(1, px(b) - px(a)), g.H);
    }
    if (t !== null) {
      ctx.strokeStyle = 'rgba(17, 17, 17, 0.55)';
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(Math.round(px(t)) + 0.5, g.T);
      ctx.lineTo(Math.round(px(t)) + 0.5, g.T + g.H);
      ctx.stroke();
    }
  }
}

// Time (ns) under the mouse on a timeline, clamped to its plot.
function timeAt(c, ev) {
  const g = c._geo;
  if (!g) return null;
  const r = c.getBoundingClientRect();
  const x = Math.min(Math.max(ev.clientX - r.left, g.L), g.L + g.W);
  return g.x0 + ((x - g.L) / g.W) * (g.x1 - g.x0);
}

function showTip(c, ev, t) {
  const tip = $('tip'), g = c._geo, win = state.win;
  const i = lowerBound(g.starts, t + 1) - 1;
  if (i < g.i0 || i >= g.i1) { tip.hidden = true; return; }
  const a = state.analysis || {}, thr = threshold(a);
  const ms = (v) => (v / 1e6).toFixed(v >= 1e7 ? 1 : 3) + ' ms';
  const lines = [
    `${fmtClock(win.start_ns[i])} UTC (+${((win.start_ns[i] - state.t0) / 1e9).toFixed(3)} s)`,
    `load ${win.load[i].toFixed(3)}` + (thr !== null && win.load[i] >= thr ? ' (congested)' : ''),
    `throughput ${fmt(win.throughput[i], 1)}/s, ${fmt(win.completions[i], 0)} done`,
    `normalized ${fmt(win.norm_throughput[i], 1)} units/s`,
    win.completions[i] ? `response time mean ${ms(win.rt_mean_ns[i])}` +
      (win.rt_p95_ns ? `, p95 ${ms(win.rt_p95_ns[i])}` : '') : 'no completion',
  ];
  tip.textContent = '';
  for (const l of lines) {
    const d = document.createElement('div');
    d.textContent = l;
    tip.appendChild(d);
  }
  tip.dataset.start = String(win.start_ns[i]);
  tip.dataset.load = String(win.load[i]);
  tip.hidden = false;
  // Beside the pointer, kept inside the window.
  const w = tip.offsetWidth, h = tip.offsetHeight;
  let x = ev.clientX + 14, y = ev.clientY + 14;
  if (x + w > window.innerWidth - 4) x = ev.clientX - w - 14;
  if (y + h > window.innerHeight - 4) y = ev.clientY - h - 14;
  tip.style.left = x + 'px';
  tip.style.top = y + 'px';
}

function attachTimeline(c) {
  c.addEventListener('mousedown', (ev) => {
    const t = timeAt(c, ev);
    if (t === null || ev.button !== 0) return;
    brush = { t0: t, t1: t, x0: ev.clientX };
    ev.preventDefault();
  });
  c.addEventListener('mousemove', (ev) => {
    const t = timeAt(c, ev);
    if (t === null) return;
    if (brush) brush.t1 = t;
    overlay(t);
    if (brush) $('tip').hidden = true; else showTip(c, ev, t);
  });
  c.addEventListener('mouseleave', () => {
    $('tip').hidden = true;
    if (!brush) overlay(null);
  });
  c.addEventListener('dblclick', () => setView(null));
}

// The brush ends wherever the button is released: a drag of a few pixels or
// more selects that range; a click does nothing.
window.addEventListener('mouseup', (ev) => {
  if (!brush) return;
  const b = brush;
  brush = null;
  if (Math.abs(ev.clientX - b.x0) < 4) { overlay(null); return; }
  $('tip').hidden = true;
  setView({ from: Math.min(b.t0, b.t1), to: Math.max(b.t0, b.t1) });
});

// ---- live stream ---------------------------------------------------------------

let redrawPending = false;
function scheduleRedraw() {
  if (redrawPending) return;
  redrawPending = true;
  requestAnimationFrame(() => { redrawPending = false; renderAll(); });
}

function trim(obj, keys) {
  const n = obj[keys[0]].length;
  if (n <= MAX_LIVE_WINDOWS) return;
  for (const k of keys) obj[k].splice(0, n - MAX_LIVE_WINDOWS);
}

// A live capture discovers tiers as traffic arrives: a window of a tier the
// picker does not list yet reloads the list (at most every 5 s).
let tiersReloadAt = 0;
function maybeNewTier(name) {
  const sel = $('tier');
  if ([...sel.options].some((o) => o.value === name)) return;
  const now = Date.now();
  if (now < tiersReloadAt) return;
  tiersReloadAt = now + 5000;
  const first = !state.tier;
  loadTiers().then(() => {
    showError('');
    if (first && state.tier) loadTier();
  });
}

function onWindow(w) {
  maybeNewTier(w.tier);
  // The stream carries the tiers' windows; a server's view follows on reloads.
  if (w.tier !== state.tier || w.width_ns !== state.widthNs || w.server !== 0 ||
      state.server !== '*') return;
  if (!state.win) return;
  const win = state.win, n = win.start_ns.length;
  if (n && w.start_ns <= win.start_ns[n - 1]) return;
  win.start_ns.push(w.start_ns);
  win.load.push(w.load);
  win.throughput.push(w.throughput);
  win.norm_throughput.push(w.norm_throughput);
  win.completions.push(w.completions);
  win.rt_mean_ns.push(w.rt_mean_ns);
  if (win.rt_p95_ns) win.rt_p95_ns.push(NaN); // not on the stream: a gap until the next reload
  trim(win, ['start_ns', 'load', 'throughput', 'norm_throughput', 'completions', 'rt_mean_ns']
    .concat(win.rt_p95_ns ? ['rt_p95_ns'] : []));
  if (!state.t0) state.t0 = w.start_ns;
  const s = state.scatter;
  if (s) {
    s.load.push(w.load);
    s.norm_throughput.push(w.norm_throughput);
    s.throughput.push(w.throughput);
    s.congested.push(w.congested ? 1 : 0);
    s.freeze.push(0);
    s.start_ns.push(w.start_ns);
    trim(s, ['load', 'norm_throughput', 'throughput', 'congested', 'freeze', 'start_ns']);
  }
  scheduleRedraw();
}

function onEpisode(e) {
  if (e.tier !== state.tier || state.server !== '*') return;
  const i = state.episodes.findIndex((x) => x.start_ns === e.start_ns);
  if (i >= 0) state.episodes[i] = e; else state.episodes.push(e);
  scheduleRedraw();
}

// Live windows are normalized with the capture's running service-time
// estimate; the API recomputes everything from the stored requests as the
// report does. Reloading from the API every 30 s while live keeps the page
// consistent with `tbneck report` (the analysis runs off the capture's loop).
const LIVE_RELOAD_MS = 30000;

function onAnalysis(a) {
  if (a.tier !== state.tier || a.width_ns !== state.widthNs) return;
  if (Date.now() - lastFullLoad > LIVE_RELOAD_MS) {
    loadTier();
    return;
  }
  if (state.analysis) Object.assign(state.analysis, a);
  if (state.scatter) {
    Object.assign(state.scatter, a);
    const thr = threshold(a);
    state.scatter.threshold = thr;
  }
  scheduleRedraw();
}

let healthTimer = null;
function onHealth() {
  // Rows arrive every second; refetching the totals at most every 5 s is plenty.
  if (healthTimer) return;
  healthTimer = setTimeout(() => { healthTimer = null; loadHealth(); }, 5000);
}

// The stream is opened after the page is drawn, and only when something can
// stream (a live capture: /api/health's "live"), or when ?live=1 asks; ?live=0
// never opens it. A finished database thus leaves no request pending, and a
// headless browser (chromium --headless --screenshot --virtual-time-budget)
// can finish the page.
function connectStream() {
  const live = $('live');
  const want = new URLSearchParams(location.search).get('live');
  const isLive = state.health ? !!state.health.live : false;
  if (want === '0' || (want !== '1' && !isLive) || !window.EventSource) {
    live.textContent = want === '0' ? 'stream: off (live=0)' : 'stream: off (nothing live)';
    live.className = 'live off';
    live.dataset.state = 'off';
    return;
  }
  live.dataset.state = 'connecting';
  const es = new EventSource('/api/stream');
  es.onopen = () => {
    live.textContent = 'stream: live'; live.className = 'live on'; live.dataset.state = 'on';
  };
  es.onerror = () => { live.textContent = 'stream: reconnecting'; live.className = 'live off'; };
  const on = (name, fn) => es.addEventListener(name, (ev) => {
    try { fn(JSON.parse(ev.data)); } catch (e) { /* one bad event must not stop the page */ }
  });
  on('window', onWindow);
  on('episode', onEpisode);
  on('analysis', onAnalysis);
  on('health', onHealth);
}

// ---- start -----------------------------------------------------------------------

function widthToNs(s) {
  const m = /^([0-9.]+)(ms|s)$/.exec(s);
  return m ? parseFloat(m[1]) * (m[2] === 's' ? 1e9 : 1e6) : 50e6;
}

async function main() {
  readURL();
  $('tier').addEventListener('change', (e) => {
    state.tier = e.target.value;
    fillServers('*');
    state.view = null;
    syncURL(true);
    loadTier();
  });
  $('server').addEventListener('change', (e) => {
    state.server = e.target.value;
    syncURL(true);
    loadTier();
  });
  $('width').addEventListener('change', (e) => {
    state.width = e.target.value;
    state.widthNs = widthToNs(state.width);
    syncURL(true);
    loadTier();
    loadDiagnose();
  });
  $('zoomout').addEventListener('click', () => setView(null));
  for (const id of TIMELINES) attachTimeline($(id));
  // Back and forward walk through the selections made.
  window.addEventListener('popstate', async () => {
    const tier = new URLSearchParams(location.search).get('tier');
    readURL();
    if (tier && tier !== state.tier) state.tier = tier;
    $('tier').value = state.tier;
    fillServers(state.server);
    await loadTier();
  });
  $('reload').addEventListener('click', async () => {
    await loadTiers();
    loadTier();
    loadHealth();
    loadDiagnose();
  });
  window.addEventListener('resize', scheduleRedraw);
  await loadTiers();
  syncURL(false);
  await Promise.all([loadTier(), loadHealth(), loadDiagnose()]);
  document.body.dataset.ready = '1';
  // After the load event: the page is complete before anything long-lived.
  if (document.readyState === 'complete') connectStream();
  else window.addEventListener('load', connectStream, { once: true });
}

main();
