// SPDX-License-Identifier: GPL-2.0
// The live page in a real Chromium, driven by puppeteer-core (tests/page_test.sh
// installs it): the flame graph draws, a search marks a kernel function and
// says how much matched, a click zooms, and both survive the in-place updates
// (no navigation); the icicle, the table of functions, a filter by comm, the
// last minute, its differential view against all since start (red/blue) and
// the counters tab work; the tooltip follows the mouse; no request gets 404.
// The view is in the URL: a reload, or a link opened in a new page, shows it
// again, and a link's values the page does not know are ignored; a pid is
// labelled with its comm and can be excluded; a function's sandwich (its
// callers above it, its callees below) opens from the table and is in the URL
// too. Screenshots go to ARTIFACTS.
//   node page_test.js URL ARTIFACTS_DIR WORKLOAD_PID   (NODE_PATH: where puppeteer-core is)
'use strict';
const puppeteer = require('puppeteer-core');
const path = require('path');

const [url, art, workload] = process.argv.slice(2);
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
    const errors = [];
    const missing = []; // responses 404, of any page
    const open = async () => {
      const p = await browser.newPage();
      await p.setViewport({ width: 1400, height: 1000 });
      p.on('pageerror', (e) => errors.push(e.message));
      p.on('response', (r) => { if (r.status() === 404) missing.push(r.url()); });
      return p;
    };
    const page = await open();
    // Loads of the document: the view kept in the URL (history.replaceState) is none.
    let navigations = 0;
    page.on('load', () => { navigations += 1; });
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

    // The tooltip: a box at the mouse at once, saying what the frame's data-tip says.
    const box = await page.evaluate((t) => {
      const f = [...document.querySelectorAll('#graph .frame:not(.dim)')].find((e) => e.dataset.name === t);
      const r = f.getBoundingClientRect();
      return { x: r.left + Math.min(r.width / 2, 40), y: r.top + r.height / 2 };
    }, target);
    await page.mouse.move(box.x, box.y);
    const hovered = await page.evaluate(() => {
      const tip = document.getElementById('tip');
      const r = tip.getBoundingClientRect();
      const f = document.querySelector('.frame:hover');
      return { shown: !tip.hidden && r.width > 0, text: tip.textContent, want: f ? f.dataset.tip : null,
        left: r.left, top: r.top, titles: document.querySelectorAll('#graph [title]').length };
    });
    check('hovering a frame shows the tooltip at once, near the mouse: "' + hovered.text + '" at ' +
      Math.round(hovered.left) + ',' + Math.round(hovered.top) + ' (mouse ' + Math.round(box.x) + ',' +
      Math.round(box.y) + '), no title tooltips (' + hovered.titles + ')', hovered.shown &&
      hovered.text === hovered.want && /^\S.* \(\d+ events, \d+\.\d+%\)$/.test(hovered.text) &&
      Math.abs(hovered.left - box.x) < 40 && Math.abs(hovered.top - box.y) < 40 && hovered.titles === 0);
    await shot('page_tooltip.png');
    await page.mouse.move(2, 2);
    check('and hides it when the mouse leaves the graph',
      await page.$eval('#tip', (t) => t.hidden && t.getBoundingClientRect().width === 0));

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
    // The download: the same window and filter as a pprof profile.
    const download = await page.$eval('#download', (a) => a.getAttribute('href'));
    const viewQuery = await page.$eval('#graph', (g) => g.dataset.query);
    check('the pprof link downloads this view (' + download + ')', download === '/flame.pprof?' + viewQuery);
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
      const m = f.dataset.tip.match(/ \((\d+) \u2192 (\d+) \S+, (\d+\.\d+)% \u2192 (\d+\.\d+)%, ([+-]\d+\.\d+)%\)$/);
      return { name: f.dataset.name, kind, title: f.dataset.tip, change: m ? parseFloat(m[5]) : null,
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
    // An absolute scale: a frame's colour by its change alone, full at 10 points.
    await page.select('#scale', '10');
    const scaled = await page.$$eval('#graph .frame:not(.match)', (fs) => fs.map((f) => {
      const [r, g, b] = f.style.background.match(/\d+/g).map(Number);
      const m = f.dataset.tip.match(/, ([+-]\d+\.\d+)%\)$/);
      return { fade: r === 255 ? g : b === 255 ? r : -1, change: m ? Math.abs(parseFloat(m[1])) : null,
        colour: f.style.background, tip: f.dataset.tip };
    }));
    // diff_color's rule at 10 points, floored; the tooltip's change is rounded
    // to 0.01 point, 0.105 of a colour step.
    const off = scaled.filter((f) => f.change === null || (f.change === 0 && f.fade === 255 ? false :
      Math.abs(f.fade - (210 * (10 - Math.min(f.change, 10))) / 10) > 1.11));
    const scaleHash = await page.evaluate(() => location.hash);
    check('coloured on an absolute scale (' + scaled.length + ' frames, ' + off.length + ' off the rule' +
      (off.length ? ', e.g. ' + off[0].colour + ' for ' + off[0].tip : '') + ', ' + scaleHash + ')', scaled.length > 0 && off.length === 0 && /(^#|&)scale=10(&|$)/.test(scaleHash));
    await page.select('#scale', '');
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
    check('still the same document after all that, the tab in the URL (' + await page.evaluate(() => location.hash) + ')',
      await page.evaluate(() => window.__sameDocument === true &&
        new URLSearchParams(location.hash.slice(1)).get('tab') === 'counters'));
    await page.click('#tabs a[data-tab="flame"]');

    // A pid is labelled with its comm: the workload's with the name it gave itself.
    await page.select('#key', 'pid');
    const labels = await page.$$eval('#value option', (os) => os.map((o) => [o.value, o.textContent]));
    const mine = labels.find(([v]) => v === 'pid ' + workload) || ['', '(none)'];
    check('the workload\'s pid reads "' + mine[1] + '", every pid with a comm (' + labels.slice(0, 3).map((l) => l[1]).join(', ') + ')',
      mine[1].startsWith('pid ' + workload + ' (\\xff<b>&) \u2014 ') && labels.length > 1 &&
      labels.every(([, l]) => /^pid \d+ \(.*\) \u2014 \d+$/.test(l)));

    // Excluded: all but the workload's events, fewer than all.
    await page.select('#value', 'pid ' + workload);
    await page.select('#exclude', '1');
    await page.waitForFunction((w) => document.getElementById('graph').dataset.query.endsWith(
      'key=pid&value=pid+' + w + '&exclude=1'), { timeout: 20000 }, workload);
    const excluded = Number((await page.$eval('#status', (s) => s.textContent)).split(' ')[0]);
    const only = await page.evaluate(async (w) => (await (await fetch('/flame.json?window=1m&key=pid&value=pid+' + w)).json()).total, workload);
    const whole = await page.evaluate(async () => (await (await fetch('/flame.json?window=1m')).json()).total);
    check('all but pid ' + workload + ': ' + excluded + ' events, its own ' + only + ', all ' + whole,
      excluded > 0 && only > 0 && excluded < whole && excluded + only <= whole * 1.2 + 100);

    // The view in the URL: the window, the filter, a search, a zoom and the
    // icicle; a reload shows each again.
    await page.type('#search', 'kmem_cache_alloc');
    const zoomOn = await page.evaluate(() => {
      const f = [...document.querySelectorAll('#graph .frame')].filter((e) => e.dataset.name !== 'all')
        .sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width)[0];
      f.click();
      return f.dataset.name;
    });
    await page.click('#layout');
    const hash = await page.evaluate(() => location.hash);
    const view = new URLSearchParams(hash.slice(1));
    check('the URL holds the view: ' + hash, view.get('window') === '1m' && view.get('key') === 'pid' &&
      view.get('value') === 'pid ' + workload && view.get('exclude') === '1' &&
      view.get('search') === 'kmem_cache_alloc' && view.getAll('zoom').pop() === zoomOn && view.get('icicle') === '1');
    const shown = (p) => p.evaluate(() => {
      const g = document.getElementById('graph');
      const root = [...g.querySelectorAll('.frame')].find((f) => f.dataset.name === 'all');
      return { window: document.getElementById('window').value, key: document.getElementById('key').value,
        value: document.getElementById('value').value, exclude: document.getElementById('exclude').value,
        search: document.getElementById('search').value, zoom: g.dataset.zoom, query: g.dataset.query,
        matches: g.querySelectorAll('.frame.match').length, rootTop: root ? root.style.top : null,
        tab: document.body.dataset.tab, status: document.getElementById('status').textContent };
    });
    const restored = (v) => v.window === '1m' && v.key === 'pid' && v.value === 'pid ' + workload &&
      v.exclude === '1' && v.search === 'kmem_cache_alloc' && v.zoom === zoomOn && v.matches > 0 &&
      v.rootTop === '0px' && v.query === 'window=1m&key=pid&value=pid+' + workload + '&exclude=1';
    // Drawn, or said why not (the checks after it then fail, not time out).
    const drawn = (p) => p.waitForFunction(() => Number(document.getElementById('graph').dataset.updates) > 0 ||
      document.getElementById('status').classList.contains('error'), { timeout: 20000 });
    await page.reload({ waitUntil: 'load' });
    await drawn(page);
    let v = await shown(page);
    check('after a reload: ' + JSON.stringify(v), restored(v) && v.tab === 'flame');
    await shot('page_reloaded.png');

    // The link in a new page, on the counters tab: the same view behind it.
    const other = await open();
    const visit = async (link) => {
      await other.goto('about:blank');
      await other.goto(url + '/' + link, { waitUntil: 'load' });
      await drawn(other);
      return shown(other);
    };
    v = await visit(hash + '&tab=counters');
    check('a new page on the link shows the counters tab and the view behind it: ' + JSON.stringify(v),
      restored(v) && v.tab === 'counters');
    // An older link to the tab.
    v = await visit('#counters');
    check('#counters still opens the counters tab (' + v.tab + ')', v.tab === 'counters' && v.query === 'window=all');
    // Values the page does not know are ignored, the page works.
    v = await visit('#window=2h&base=yesterday&exclude=2&icicle=x&tab=x');
    const left = await other.evaluate(() => location.hash);
    check('a link of unknown values shows everything since start: ' + JSON.stringify(v) + ', its URL now "' + left + '"',
      v.query === 'window=all' && v.window === 'all' && v.rootTop !== '0px' && v.tab === 'flame' &&
      !v.status.startsWith('update failed') && left === '');
    v = await visit('#key=colour&value=x&zoom=nowhere');
    check('a link of an unknown key and a zoom path not in the data shows all of it: ' + JSON.stringify(v),
      v.query === 'window=all' && v.key === '' && v.zoom === 'all' && !v.status.startsWith('update failed'));
    // A key the daemon does not count by, from a link: dropped too.
    v = await visit('#key=cgroup&value=%2F&window=1m');
    check('a link filtering by a key not counted (cgroup) shows the window unfiltered: ' + v.query,
      v.query === 'window=1m' && v.key === '');
    // A link pasted into the page's address bar: no load, the view changes.
    await other.evaluate(() => { location.hash = '#window=10m&search=kmem_cache_alloc&tab=counters'; });
    const pasted = await other.waitForFunction(() => document.getElementById('graph').dataset.query === 'window=10m',
      { timeout: 20000 }).then(() => shown(other), () => null);
    check('a link pasted into the open page shows its view: ' + JSON.stringify(pasted), pasted !== null &&
      pasted.search === 'kmem_cache_alloc' && pasted.matches > 0 && pasted.tab === 'counters');
    await other.close();

    // The sandwich of do_syscall_64 (every syscall's stack holds it), from the table.
    const swFn = 'do_syscall_64';
    await page.$eval('#search', (s) => {
      s.value = '';
      s.dispatchEvent(new Event('input'));
    });
    const sandwichOf = () => page.evaluate((f) => {
      const frames = (id) => [...document.getElementById(id).querySelectorAll('.frame')].map((e) => ({
        name: e.dataset.name, top: parseFloat(e.style.top), width: parseFloat(e.style.width),
        events: Number((e.dataset.tip.match(/ \((\d+) /) || [])[1]) }));
      const row = [...document.querySelectorAll('#functions tbody tr')].find((r) => r.firstChild.lastChild.textContent === f);
      return { shown: !document.getElementById('sandwich').hidden, name: document.getElementById('sandwich-name').textContent,
        width: document.getElementById('callers').clientWidth, callers: frames('callers'), callees: frames('callees'),
        total: row ? parseInt(row.children[2].textContent) : null, hash: location.hash };
    }, swFn);
    const opened = await page.evaluate((f) => {
      const row = [...document.querySelectorAll('#functions tbody tr')].find((r) => r.firstChild.lastChild.textContent === f);
      if (!row) return false;
      row.querySelector('button.open-sandwich').click();
      return true;
    }, swFn);
    let sw = await sandwichOf();
    const own = (fs) => fs.find((f) => f.name === swFn) || { top: -1, width: 0, events: -1 };
    const callersOwn = own(sw.callers), calleesOwn = own(sw.callees);
    check('the table opens ' + swFn + '\'s sandwich: "' + sw.name + '", its callers\' graph ending in it at the bottom (' +
      sw.callers.length + ' frames), its callees\' starting with it on top (' + sw.callees.length + ' frames)',
      opened && sw.shown && sw.name === swFn && callersOwn.width > sw.width * 0.95 &&
      callersOwn.top === Math.max(...sw.callers.map((f) => f.top)) && sw.callers.some((f) => f.top < callersOwn.top) &&
      calleesOwn.top === 0 && calleesOwn.width > sw.width * 0.95 && sw.callees.some((f) => f.top > 0));
    check('both halves count its total in the table once per stack (' + callersOwn.events + ', ' + calleesOwn.events +
      ', table ' + sw.total + '); no caller or callee wider than it',
      callersOwn.events === sw.total && calleesOwn.events === sw.total &&
      sw.callers.concat(sw.callees).every((f) => f.events <= sw.total));
    check('the sandwich is in the URL: ' + sw.hash, new URLSearchParams(sw.hash.slice(1)).get('sandwich') === swFn);
    await shot('page_sandwich.png');
    await page.reload({ waitUntil: 'load' });
    await drawn(page);
    sw = await sandwichOf();
    check('after a reload the sandwich of ' + sw.name + ' shows again', sw.shown && sw.name === swFn && sw.callers.length > 1);
    const caller = (sw.callers.filter((f) => f.name !== swFn).sort((a, b) => b.top - a.top)[0] || { name: '' }).name;
    await page.evaluate((c) => {
      const f = [...document.querySelectorAll('#callers .frame')].find((e) => e.dataset.name === c);
      if (f) f.click();
    }, caller);
    sw = await sandwichOf();
    check('a click on its caller ' + caller + ' opens that one\'s (' + sw.name + ')', sw.name === caller && sw.shown);
    await page.$eval('#sandwich-close', (b) => b.click());
    sw = await sandwichOf();
    check('close hides it, and the URL forgets it (' + sw.hash + ')', !sw.shown &&
      !new URLSearchParams(sw.hash.slice(1)).has('sandwich'));

    check('the page links an icon of its own', await page.evaluate(() => {
      const l = document.querySelector('link[rel="icon"]');
      return l !== null && l.href === 'data:,';
    }));
    check('no request got 404' + (missing.length ? ': ' + missing.join(', ') : ''), missing.length === 0);
    check('no script error on any page' + (errors.length ? ': ' + errors.join('; ') : ''), errors.length === 0);
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
