// SPDX-License-Identifier: MIT
// check_dashboard.js — opens the tbneck dashboard in headless Chromium
// (Debian's, via playwright-core) and checks that it is drawn: scatter points,
// both timelines, episode rows, no event stream on a finished database, no
// page errors.
// Usage: node check_dashboard.js [--live] URL SCREENSHOT.png
// With --live (the page served by a running `capture -i --serve`), checks
// instead that windows arriving on the stream extend the timelines.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const argv = process.argv.slice(2);
const live = argv[0] === '--live';
if (live) argv.shift();
const [url, shot] = argv;
if (!url || !shot) {
  console.error('usage: node check_dashboard.js [--live] URL SCREENSHOT.png');
  process.exit(2);
}

function check(cond, what) {
  if (!cond) throw new Error('check failed: ' + what);
  console.log('ok: ' + what);
}

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
    await page.goto(url, { waitUntil: 'load', timeout: 30000 });
    await page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
    // The stream opens after the page is drawn, and only when something is
    // live (a capture running): on a finished database it stays off, so that
    // nothing holds the page open.
    if (live) {
      await page.waitForFunction(() => document.getElementById('live').classList.contains('on'),
        null, { timeout: 15000 });
    } else {
      await page.waitForFunction(() => document.getElementById('live').dataset.state === 'off',
        null, { timeout: 15000 });
      console.log('ok: no event stream on a finished database');
    }

    if (live) {
      const points = () => page.evaluate(() => +document.getElementById('load').dataset.points);
      const n0 = await points();
      await page.waitForTimeout(3000);
      const n1 = await points();
      await page.screenshot({ path: shot, fullPage: true });
      console.log('screenshot: ' + shot);
      // 3 s of 50 ms windows is 60 per tier; some slack for redraw timing.
      check(n1 >= n0 + 30, 'live windows extend the load timeline (' + n0 + ' -> ' + n1 + ')');
      check(errors.length === 0, 'no page errors (' + errors.join(' | ') + ')');
      return;
    }
    const r = await page.evaluate(() => {
      // Counts pixels of a colour family in a canvas (device pixels).
      function count(id, pred) {
        const c = document.getElementById(id);
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
          if (d[i + 3] > 100 && pred(d[i], d[i + 1], d[i + 2])) n++;
        return n;
      }
      const blue = (r, g, b) => b > 150 && r < 140 && g < 180;
      const red = (r, g, b) => r > 170 && g < 120 && b < 120;
      const green = (r, g, b) => g > 120 && r < 90 && b < 130;
      const rows = [...document.querySelectorAll('#episodes tbody tr')]
        .filter((tr) => tr.children.length === 8);
      return {
        tier: document.getElementById('tier').value,
        tiers: document.getElementById('tier').options.length,
        scatterPoints: +document.getElementById('scatter').dataset.points,
        scatterBlue: count('scatter', blue),
        scatterRed: count('scatter', red),
        loadPoints: +document.getElementById('load').dataset.points,
        loadBlue: count('load', blue),
        tputPoints: +document.getElementById('tput').dataset.points,
        tputGreen: count('tput', green),
        episodeRows: rows.length,
        episodeKinds: rows.map((tr) => tr.children[6].textContent),
        cards: document.querySelectorAll('#summary .card').length,
        captures: document.querySelectorAll('#captures tbody tr').length,
        verdict: document.getElementById('verdict').textContent,
        graphServers: document.querySelectorAll('#graph rect.srv').length,
        episodeRoots: rows.map((tr) => tr.children[7] ? tr.children[7].textContent : ''),
        error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent,
      };
    });
    console.log(JSON.stringify(r));
    await page.screenshot({ path: shot, fullPage: true });
    console.log('screenshot: ' + shot);
    check(!r.error, 'no error banner (' + r.error + ')');
    check(r.tiers >= 1, 'tier picker lists tiers');
    check(r.scatterPoints > 20, 'scatter has windows (' + r.scatterPoints + ')');
    check(r.scatterBlue + r.scatterRed > 60, 'scatter points are drawn (' +
      r.scatterBlue + ' blue, ' + r.scatterRed + ' red pixels)');
    check(r.scatterRed > 10, 'congested windows highlighted in the scatter (' + r.scatterRed +
      ' red pixels)');
    check(r.loadPoints > 20 && r.loadBlue > 100, 'load timeline drawn (' + r.loadBlue + ' px)');
    check(r.tputPoints > 20 && r.tputGreen > 100, 'throughput timeline drawn (' + r.tputGreen + ' px)');
    check(r.episodeRows >= 1, 'episode table has rows (' + r.episodeRows + ')');
    check(r.episodeKinds.every((k) => k === 'freeze' || k === 'saturated'), 'episode kinds');
    check(r.cards >= 6, 'summary cards');
    check(r.captures >= 1, 'capture health table');
    // The root cause: a verdict sentence, the wait-for graph, each episode's root.
    check(r.verdict.length > 20 && r.verdict !== 'not available', 'verdict shown (' + r.verdict + ')');
    check(r.graphServers >= 2, 'wait-for graph drawn (' + r.graphServers + ' servers)');
    check(r.episodeRoots.every((x) => x && x !== '…'), 'episode roots filled (' +
      r.episodeRoots.slice(0, 3).join(' | ') + ')');
    // Switching the window width reloads everything at that width.
    await page.selectOption('#width', '100ms');
    await page.waitForFunction((prev) => {
      const c = document.getElementById('load');
      return +c.dataset.points !== prev || !document.getElementById('error').hidden;
    }, r.loadPoints, { timeout: 20000 });
    const n100 = await page.evaluate(() => +document.getElementById('load').dataset.points);
    check(n100 > 0 && n100 < r.loadPoints, 'width 100ms halves the windows (' + n100 + ' vs ' +
      r.loadPoints + ')');
    // Width "auto": the server picks the width (report --window auto) and
    // the page says which and why; the diagnosis follows at that width.
    await page.selectOption('#width', 'auto');
    await page.waitForFunction(() => [...document.querySelectorAll('#summary .card .k')]
      .some((k) => k.textContent === 'window (auto)') || !document.getElementById('error').hidden,
    null, { timeout: 60000 });
    const au = await page.evaluate(() => {
      const k = [...document.querySelectorAll('#summary .card .k')]
        .find((x) => x.textContent === 'window (auto)');
      return { why: k ? k.parentElement.title : '', width: k ? k.nextSibling.textContent : '',
               points: +document.getElementById('load').dataset.points,
               error: document.getElementById('error').hidden ? '' : document.getElementById('error').textContent };
    });
    console.log('width auto: ' + JSON.stringify(au));
    check(!au.error && au.why.startsWith('window '), 'width auto: the chosen width and why shown (' +
      au.width + ': ' + au.why + ')');
    check(au.points > 0, 'width auto: timelines drawn (' + au.points + ' windows)');
    await page.waitForFunction(() => {
      const v = document.getElementById('verdict').textContent;
      return v.length > 20 && v !== 'not available';
    }, null, { timeout: 30000 });
    check(errors.length === 0, 'no page errors (' + errors.join(' | ') + ')');
  } finally {
    if (ctx) await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
})().catch((e) => {
  console.error('FAIL: ' + (e && e.message ? e.message : e));
  process.exit(1);
});
