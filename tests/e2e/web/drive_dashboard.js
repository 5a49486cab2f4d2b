// SPDX-License-Identifier: MIT
// drive_dashboard.js — drives the tbneck dashboard as an operator would, in
// headless Chromium (Debian's, via playwright-core), and checks each answer
// against the API and the simulator's truth:
//   - the server picker: choosing the frozen server lists exactly the
//     simulator's freezes of that server as freeze episodes (one episode per
//     freeze, overlapping it), where the tier as a whole shows fewer;
//   - zoom by dragging over the load timeline: the range and the URL change,
//     the timeline and the scatter show exactly the API's windows in range;
//   - hover: the tooltip names the window under the pointer with the API's load;
//   - reload of the URL restores server, range and what is drawn;
//   - a click on an episode zooms to it; "Show all" zooms out;
//   - no page error and no Content-Security-Policy violation.
// Usage: node drive_dashboard.js BASE_URL TIER FREEZES.json SHOT.png
//   FREEZES.json: {"server": "ADDR:PORT", "freezes": [[start_ns, end_ns], ...]}
//   (ns as strings: they exceed JavaScript's exact integers).
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const [base, tier, freezesFile, shot] = process.argv.slice(2);
if (!base || !tier || !freezesFile || !shot) {
  console.error('usage: node drive_dashboard.js BASE_URL TIER FREEZES.json SHOT.png');
  process.exit(2);
}
const truth = JSON.parse(fs.readFileSync(freezesFile, 'utf8'));

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok: ' + what);
}

async function api(p) {
  const r = await fetch(base + p);
  if (!r.ok) throw new Error(p + ': HTTP ' + r.status);
  return r.json();
}

// Overlap of [a0, a1) and [b0, b1) with ns as BigInt.
const overlaps = (a0, a1, b0, b1) => a0 < b1 && b0 < a1;

(async () => {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'tbneck-chromium-'));
  let ctx;
  try {
    ctx = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      viewport: { width: 1400, height: 1300 },
      timeout: 60000,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
             '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    });
    const page = ctx.pages()[0] || await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
    const shown = (q) => page.waitForSelector(`body[data-shown="${q}"]`, { timeout: 60000 });
    const q = (srv) => `tier=${encodeURIComponent(tier)}&width=50ms` +
      (srv ? `&server=${encodeURIComponent(srv)}` : '');

    // --- the tier as a whole, then the frozen server --------------------------------
    await page.goto(`${base}/?tier=${encodeURIComponent(tier)}`, { waitUntil: 'load', timeout: 30000 });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    await shown(q(null));
    const rows = () => page.evaluate(() => [...document.querySelectorAll('#episodes tbody tr')]
      .filter((tr) => tr.dataset.start)
      .map((tr) => ({ start: tr.dataset.start, end: tr.dataset.end, kind: tr.dataset.kind })));
    const tierRows = await rows();
    const tierFreezes = tierRows.filter((r) => r.kind === 'freeze').length;
    const opts = await page.evaluate(() => [...document.getElementById('server').options]
      .map((o) => o.value));
    check(opts[0] === '*' && opts.includes(truth.server),
      `server picker lists the tier and its servers (${opts.join(', ')})`);
    await page.selectOption('#server', truth.server);
    await shown(q(truth.server));
    const srvRows = await rows();
    const fz = srvRows.filter((r) => r.kind === 'freeze')
      .map((r) => [BigInt(r.start), BigInt(r.end)]);
    const tf = truth.freezes.map(([a, b]) => [BigInt(a), BigInt(b)]);
    const covered = tf.filter(([a, b]) => fz.filter(([s, e]) => overlaps(a, b, s, e)).length === 1);
    const matched = fz.filter(([s, e]) => tf.some(([a, b]) => overlaps(a, b, s, e)));
    check(fz.length === tf.length && covered.length === tf.length && matched.length === fz.length,
      `server ${truth.server}: ${fz.length} freeze episodes shown for the simulator's ` +
      `${tf.length} freezes, each freeze in exactly one (${covered.length}), each episode on ` +
      `a freeze (${matched.length}); the tier as a whole shows ${tierFreezes}`);
    check(tierFreezes < fz.length, 'the per-server view shows freezes the tier view merges away');
    const apiEp = (await api('/api/episodes?' + q(truth.server))).episodes;
    check(srvRows.length === apiEp.length, `episode rows = /api/episodes (${apiEp.length})`);
    check(page.url().includes('server=' + encodeURIComponent(truth.server)),
      'the server is in the URL (' + page.url() + ')');

    // --- zoom by brushing over the load timeline --------------------------------------
    const win = await api('/api/windows?' + q(truth.server));
    const box = await page.locator('#load').boundingBox();
    const before = await page.evaluate(() => ({ ...document.getElementById('range').dataset }));
    const y = box.y + box.height / 2;
    await page.mouse.move(box.x + box.width * 0.35, y);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * 0.45, y, { steps: 5 });
    await page.mouse.move(box.x + box.width * 0.55, y, { steps: 5 });
    await page.mouse.up();
    await page.waitForFunction(() => new URLSearchParams(location.search).has('from'), null,
      { timeout: 10000 });
    const z = await page.evaluate(() => ({
      range: { ...document.getElementById('range').dataset },
      url: location.search,
      load: +document.getElementById('load').dataset.points,
      rt: +document.getElementById('rt').dataset.points,
      scatter: +document.getElementById('scatter').dataset.points,
    }));
    const from = Number(z.range.from), to = Number(z.range.to);
    const p = new URLSearchParams(z.url);
    check(from > Number(before.from) && to < Number(before.to) && to - from > 0,
      `a drag zooms in: ${(Number(before.to) - Number(before.from)) / 1e9} s -> ` +
      `${(to - from) / 1e9} s`);
    check(Math.abs(Number(p.get('from')) * 1e9 - from) < 2e6 &&
      Math.abs(Number(p.get('to')) * 1e9 - to) < 2e6,
      `the range is in the URL (from=${p.get('from')} to=${p.get('to')})`);
    const inRange = win.start_ns.filter((s) => s + 50e6 > from && s < to).length;
    check(z.load === inRange && z.rt === inRange && z.scatter === inRange,
      `timelines and scatter show the API's ${inRange} windows of the range (load ${z.load}, ` +
      `response time ${z.rt}, scatter ${z.scatter})`);

    // --- hover values --------------------------------------------------------------------
    const hx = box.x + box.width * 0.5;
    await page.mouse.move(hx, y);
    await page.waitForSelector('#tip:not([hidden])', { timeout: 5000 });
    const tip1 = await page.evaluate(() => ({ ...document.getElementById('tip').dataset,
      text: document.getElementById('tip').textContent }));
    const i1 = win.start_ns.indexOf(Number(tip1.start));
    check(i1 >= 0 && Number(tip1.start) >= from - 50e6 && Number(tip1.start) < to &&
      tip1.text.includes('load ' + win.load[i1].toFixed(3)),
      `hover names a window of the range with the API's load (${tip1.text.slice(0, 80)})`);
    await page.mouse.move(hx + 150, y);
    const tip2 = await page.evaluate(() => document.getElementById('tip').dataset.start);
    check(Number(tip2) > Number(tip1.start), 'moving right hovers a later window');
    await page.mouse.move(box.x + box.width / 2, box.y - 40);
    await page.screenshot({ path: shot, fullPage: true });
    console.log('screenshot: ' + shot);

    // --- reload restores the view --------------------------------------------------------
    const url = page.url();
    await page.reload({ waitUntil: 'load' });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    await shown(q(truth.server));
    const r = await page.evaluate(() => ({
      url: location.href,
      server: document.getElementById('server').value,
      range: { ...document.getElementById('range').dataset },
      load: +document.getElementById('load').dataset.points,
      scatter: +document.getElementById('scatter').dataset.points,
    }));
    check(r.url === url && r.server === truth.server && r.range.from === z.range.from &&
      r.range.to === z.range.to && r.load === z.load && r.scatter === z.scatter,
      `reloading ${url.slice(url.indexOf('?'))} restores server, range and ${r.load} windows`);

    // --- an episode click zooms to it; Show all zooms out ---------------------------------
    await page.click('#zoomout');
    await page.waitForFunction(() => !new URLSearchParams(location.search).has('from'), null,
      { timeout: 10000 });
    const all = await page.evaluate(() => +document.getElementById('load').dataset.points);
    check(all === win.start_ns.length, `Show all shows every window (${all})`);
    const target = (await rows()).find((x) => x.kind === 'freeze');
    await page.click(`#episodes tbody tr[data-start="${target.start}"]`);
    await page.waitForFunction(() => new URLSearchParams(location.search).has('from'), null,
      { timeout: 10000 });
    const e = await page.evaluate(() => ({ ...document.getElementById('range').dataset }));
    const es = Number(target.start), ee = Number(target.end);
    check(Number(e.from) <= es && Number(e.to) >= ee && Number(e.to) - Number(e.from) <=
      3 * Math.max(ee - es, 20 * 50e6) + 2 * 50e6,
      `clicking a freeze episode zooms to it (${(ee - es) / 1e6} ms shown in ` +
      `${(Number(e.to) - Number(e.from)) / 1e6} ms)`);
    const listed = (await rows()).map((x) => x.start);
    check(listed.includes(target.start), 'the zoomed table lists that episode');

    check(errors.length === 0, 'no page errors or CSP violations (' + errors.join(' | ') + ')');
  } finally {
    if (ctx) await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
})().catch((e) => {
  console.error('FAIL: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
