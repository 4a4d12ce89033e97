// SPDX-License-Identifier: GPL-2.0
// The live page in a real Chromium, driven by puppeteer-core (tests/page_test.sh
// installs it): the flame graph draws, a search marks a kernel function and
// says how much matched, a click zooms, and both survive the in-place updates
// (no navigation); the icicle, the table of functions, a filter by comm, the
// last minute, its differential view against all since start (red/blue) and
// the counters tab work. Screenshots go to ARTIFACTS.
//   node page_test.js URL ARTIFACTS_DIR   (NODE_PATH: where puppeteer-core is)
'use strict';
const puppeteer = require('puppeteer-core');
const path = require('path');

const [url, art] = process.argv.slice(2);
let failures = 0;
function check(what, ok) {
  console.log((ok ? 'ok   ' : 'FAIL ') + what);
  if (!ok) failures += 1;
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--hide-scrollbars'],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    let navigations = 0;
    page.on('framenavigated', (f) => { if (f === page.mainFrame()) navigations += 1; });
    const shots = [];
    const shot = async (name) => {
      const file = path.join(art, name);
      await page.screenshot({ path: file, fullPage: true });
      shots.push(file);
    };

    await page.goto(url + '/?refresh=2', { waitUntil: 'load' });
    await page.waitForFunction(() => document.querySelectorAll('#graph .frame').length > 3, { timeout: 20000 });
    check('the flame graph is drawn: ' + await page.$$eval('#graph .frame', (f) => f.length) + ' frames', true);
    navigations = 0;
    await page.evaluate(() => { window.__sameDocument = true; });

    // Search a kernel function the workload runs.
    const fn = await page.$$eval('#graph .frame', (fs) =>
      (fs.map((f) => f.dataset.name).find((n) => n.startsWith('kmem_cache_alloc')) || ''));
    check('a frame of the workload is drawn: ' + fn, fn !== '');
    await page.type('#search', 'kmem_cache_alloc');
    const matches = await page.$$eval('#graph .frame.match', (f) => f.length);
    const matched = await page.$eval('#matched', (e) => e.textContent);
    check('the search marks ' + matches + ' frame(s) and says "' + matched + '"',
      matches > 0 && /^matched (\d+\.\d+)%$/.test(matched) && parseFloat(matched.slice(8)) > 0);

    // Zoom on the widest frame above the root that is not the whole graph: under
    // 90% of it when the workload has such a frame, else any narrower than the
    // root (a workload can run one path nearly always, its other paths < 3 px).
    // One evaluation, query and click: $$eval's handles may be frames an update replaced meanwhile.
    const target = await page.evaluate(() => {
      const fs = [...document.querySelectorAll('#graph .frame')];
      const graphWidth = document.getElementById('graph').clientWidth;
      const width = (f) => f.getBoundingClientRect().width;
      const narrower = (limit) => fs.filter((f) => f.dataset.name !== 'all' && width(f) < limit && width(f) > 3)
        .sort((a, b) => width(b) - width(a));
      const c = narrower(graphWidth * 0.9).concat(narrower(graphWidth - 2));
      if (!c.length) return null;
      c[0].click();
      return c[0].dataset.name;
    });
    check('a frame to zoom on: ' + target, target !== null);
    let zoom = await page.$eval('#graph', (g) => g.dataset.zoom);
    const zoomedWidth = await page.$$eval('#graph .frame:not(.dim)', (fs, t) =>
      fs.filter((f) => f.dataset.name === t).reduce((w, f) => Math.max(w, parseFloat(f.style.width)), 0), target);
    const graphWidth = await page.$eval('#graph', (g) => g.clientWidth);
    check('the click zooms on ' + zoom + ' (now ' + Math.round(zoomedWidth) + ' of ' + graphWidth + ' px)',
      zoom === target && zoomedWidth > graphWidth * 0.95);
    await shot('page_zoom_search.png');

    // In-place updates: the data changes, the state stays.
    const before = await page.$eval('#graph', (g) => Number(g.dataset.updates));
    await page.waitForFunction((n) => Number(document.getElementById('graph').dataset.updates) >= n + 2,
      { timeout: 20000 }, before);
    const after = await page.evaluate(() => ({
      zoom: document.getElementById('graph').dataset.zoom,
      search: document.getElementById('search').value,
      matches: document.querySelectorAll('#graph .frame.match').length,
      matched: document.getElementById('matched').textContent,
      same: window.__sameDocument === true,
      updates: document.getElementById('graph').dataset.updates,
    }));
    check('after ' + (after.updates - before) + ' updates the zoom (' + after.zoom + ') and the search (' +
      after.matched + ', ' + after.matches + ' frames) hold, in the same document, no navigation (' +
      navigations + ')', after.zoom === target && after.search === 'kmem_cache_alloc' && after.matches > 0 &&
      after.matched.startsWith('matched ') && after.same && navigations === 0);

    // Icicle: the root on top.
    await page.click('#reset');
    await page.click('#layout');
    const rootTop = await page.$$eval('#graph .frame', (fs) => fs.find((f) => f.dataset.name === 'all').style.top);
    check('the icicle puts the root on top (' + rootTop + ')', rootTop === '0px');
    await page.click('#layout');

    // The table of functions, sorted by total, then by self.
    await page.click('#functions th[data-sort="total"]');
    const totals = await page.$$eval('#functions tbody tr td:nth-child(3)', (t) => t.map((c) => parseInt(c.textContent)));
    check('the functions sort by total (' + totals.slice(0, 3).join(', ') + ', ...)',
      totals.length > 3 && totals.every((v, i) => i === 0 || totals[i - 1] >= v));
    await page.click('#functions th[data-sort="self"]');
    const selfs = await page.$$eval('#functions tbody tr td:nth-child(2)', (t) => t.map((c) => parseInt(c.textContent)));
    check('and by self (' + selfs.slice(0, 3).join(', ') + ', ...)', selfs.every((v, i) => i === 0 || selfs[i - 1] >= v));

    // A filter by comm: only its events.
    await page.select('#key', 'comm');
    const comm = await page.$eval('#value', (s) => (s.options.length ? s.options[0].value : ''));
    const u = await page.$eval('#graph', (g) => Number(g.dataset.updates));
    await page.select('#value', comm);
    await page.waitForFunction((n) => Number(document.getElementById('graph').dataset.updates) > n &&
      document.getElementById('graph').dataset.query.includes('key=comm&value='), { timeout: 20000 }, u);
    const filtered = await page.$eval('#status', (s) => s.textContent);
    const all = await page.evaluate(async () => (await (await fetch('/flame.json')).json()).total);
    const part = Number(filtered.split(' ')[0]);
    check('filtered to comm ' + comm + ': ' + filtered + ' (of ' + all + ' in all)', comm !== '' &&
      !filtered.startsWith('update failed') && part > 0 && part < all);
    await shot('page_filter.png');
    await page.select('#key', '');

    // The last minute.
    await page.select('#window', '1m');
    // Once the history holds a snapshot (every 10 s) the window has a start of its own.
    await page.waitForFunction(() => document.getElementById('graph').dataset.query === 'window=1m' &&
      /last minute \(\d/.test(document.getElementById('status').textContent), { timeout: 30000 });
    const windowed = await page.$eval('#status', (s) => s.textContent);
    const since = await page.evaluate(async () => (await (await fetch('/flame.json')).json()).total);
    check('the last minute: ' + windowed + ' (since start ' + since + ')',
      Number(windowed.split(' ')[0]) > 0 && Number(windowed.split(' ')[0]) < since &&
      (await page.$$eval('#graph .frame', (f) => f.length)) > 1);
    await shot('page_last_minute.png');

    // The differential view: the last minute against all since start, red
    // where a frame's share grew, blue where it shrank, each frame's colour
    // agreeing with the change its tooltip says; a zoom holds across updates.
    await page.$eval('#search', (s) => {
      s.value = '';
      s.dispatchEvent(new Event('input'));
    });
    await page.select('#base', 'all');
    await page.waitForFunction(() => document.getElementById('graph').dataset.query === 'window=1m&base=all',
      { timeout: 20000 });
    const frameColours = () => page.$$eval('#graph .frame:not(.match)', (fs) => fs.map((f) => {
      const [r, g, b] = f.style.background.match(/\d+/g).map(Number);
      const kind = r === 255 && g === b && g < 255 ? 'red' : b === 255 && r === g && r < 255 ? 'blue' :
        r === 255 && g === 255 && b === 255 ? 'white' : 'other';
      const m = f.title.match(/ \((\d+) \u2192 (\d+) \S+, (\d+\.\d+)% \u2192 (\d+\.\d+)%, ([+-]\d+\.\d+)%\)$/);
      return { name: f.dataset.name, kind, title: f.title, change: m ? parseFloat(m[5]) : null,
        before: m ? Number(m[1]) : null, after: m ? Number(m[2]) : null };
    }));
    let diffFrames = await frameColours();
    const count = (k) => diffFrames.filter((f) => f.kind === k).length;
    check('the differential view has red (' + count('red') + ') and blue (' + count('blue') + ') frames, no other colour (' +
      count('other') + ')', count('red') > 0 && count('blue') > 0 && count('other') === 0);
    const titled = diffFrames.filter((f) => f.change !== null);
    const sample = titled.find((f) => f.kind === 'red' && f.before > 0) || titled[0] || { title: '(none)' };
    check('every tooltip says both values, both shares and the change (' + titled.length + ' of ' +
      diffFrames.length + ', e.g. "' + sample.title + '")', titled.length === diffFrames.length);
    const wrong = titled.filter((f) => (f.kind === 'red' && f.change < 0) || (f.kind === 'blue' && f.change > 0));
    check('red frames grew, blue ones shrank (' + wrong.length + ' disagree' +
      (wrong.length ? ': ' + wrong[0].title + ' ' + wrong[0].kind : '') + ')', wrong.length === 0);
    const legend = await page.$eval('#legend', (l) => !l.hidden && l.getBoundingClientRect().height > 0);
    const status = await page.$eval('#status', (s) => s.textContent);
    check('the legend shows, the status names the base: ' + status, legend && / against since start \(\d+\)/.test(status));
    const diffTarget = await page.evaluate(() => {
      const fs = [...document.querySelectorAll('#graph .frame')];
      const graphWidth = document.getElementById('graph').clientWidth;
      const c = fs.filter((f) => f.dataset.name !== 'all' && f.getBoundingClientRect().width < graphWidth - 2 &&
        f.getBoundingClientRect().width > 3).sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width);
      if (!c.length) return null;
      c[0].click();
      return c[0].dataset.name;
    });
    const u2 = await page.$eval('#graph', (g) => Number(g.dataset.updates));
    await page.waitForFunction((n) => Number(document.getElementById('graph').dataset.updates) >= n + 2,
      { timeout: 20000 }, u2);
    diffFrames = await frameColours();
    zoom = await page.$eval('#graph', (g) => g.dataset.zoom);
    check('zoomed on ' + diffTarget + ', after 2 updates still there (' + zoom + ') and still coloured (' +
      count('red') + ' red, ' + count('blue') + ' blue, ' + count('white') + ' white)',
      diffTarget !== null && zoom === diffTarget && count('other') === 0 && count('red') + count('blue') + count('white') > 0);
    const changeColumn = await page.$eval('#change', (c) => !c.hidden);
    check('the functions table has the base and change column', changeColumn);
    await shot('page_diff.png');
    await page.click('#reset');
    await page.select('#base', '');

    // The counters tab.
    await page.click('#tabs a[data-tab="counters"]');
    const tabs = await page.evaluate(() => ({
      counters: getComputedStyle(document.getElementById('counters')).display,
      flame: getComputedStyle(document.getElementById('flame')).display,
      entries: [...document.querySelectorAll('#counters-table th')].some((t) => t.textContent === 'entries'),
    }));
    check('the counters tab shows the counters and hides the graph', tabs.counters === 'block' &&
      tabs.flame === 'none' && tabs.entries);
    await shot('page_counters.png');
    check('no script error on the page' + (errors.length ? ': ' + errors.join('; ') : ''), errors.length === 0);
    // (A tab is a #hash: a navigation within the document, which keeps its state.)
    check('still the same document after all that', await page.evaluate(() => window.__sameDocument === true));
    for (const s of shots) console.log('screenshot: ' + s);
  } finally {
    await browser.close();
  }
}

main().then(() => {
  console.log(failures + ' failure(s)');
  process.exit(failures ? 1 : 0);
}, (e) => {
  console.log('FAIL ' + e.stack);
  process.exit(1);
});
