// SPDX-License-Identifier: GPL-2.0
// The live page's script: draws /flame.json as a flame graph (or icicle) and
// a table of functions, and fetches it again every few seconds, in place:
// the zoom (a path of names from the root), the search, the sort, the
// filter, the window and the base compared with are the page's state,
// applied to each new tree, and kept in the URL's hash (saveView()).
// Compared with a base, the frames are coloured as decode --diff colours
// them (daemon/export/flame_diff.h).
'use strict';
(function () {
  const $ = (id) => document.getElementById(id);
  const body = document.body;
  const refresh = Number(body.dataset.refresh) || 0;
  const rowHeight = 17;
  const state = { zoom: [], icicle: false, sort: 'self', desc: true, data: null, root: null, updates: 0,
    key: '', value: '', exclude: false, tab: 'flame', checked: false, sandwich: '' };
  body.classList.add('js');

  function showTab() {
    body.dataset.tab = state.tab;
    for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.tab === state.tab);
  }

  // The view in the URL's hash, so that a reload or a link shows it again:
  // #window=1m&base=all&scale=10&key=pid&value=pid+9&exclude=1&search=RE&zoom=A&zoom=B&icicle=1&sandwich=F&tab=counters
  // (the hash, not the query: it never reaches the server, so a deep zoom
  // cannot make the request too long). A value the page does not know is
  // ignored; a bare #counters, as older links have it, names the tab.
  function saveView() {
    const q = new URLSearchParams();
    if ($('window').value !== 'all') q.set('window', $('window').value);
    if ($('base').value) q.set('base', $('base').value);
    if ($('scale').value) q.set('scale', $('scale').value);
    if (state.key) q.set('key', state.key);
    if (state.key && state.value) q.set('value', state.value);
    if (state.key && state.value && state.exclude) q.set('exclude', '1');
    if ($('search').value) q.set('search', $('search').value);
    for (const name of state.zoom) q.append('zoom', name);
    if (state.icicle) q.set('icicle', '1');
    if (state.sandwich) q.set('sandwich', state.sandwich);
    if (state.tab !== 'flame') q.set('tab', state.tab);
    const hash = q.toString();
    history.replaceState(null, '', hash ? '#' + hash : location.pathname + location.search);
  }
  function loadView() {
    const h = location.hash.slice(1);
    const q = new URLSearchParams(h === 'counters' || h === 'flame' ? 'tab=' + h : h);
    const pick = (select, v) => {
      const known = [...select.options].some((o) => o.value === v && !o.disabled);
      select.value = known ? v : select.options[0].value;
    };
    pick($('window'), q.get('window'));
    allowPrev();
    pick($('base'), q.get('base'));
    pick($('scale'), q.get('scale'));
    state.key = q.get('key') || '';
    state.value = (state.key && q.get('value')) || '';
    state.exclude = Boolean(state.value) && q.get('exclude') === '1';
    state.checked = !state.value; // a filter from a link: checked by the daemon's first answer
    $('search').value = q.get('search') || '';
    state.zoom = q.getAll('zoom');
    state.icicle = q.get('icicle') === '1';
    $('layout').textContent = state.icicle ? 'flame graph' : 'icicle';
    state.sandwich = q.get('sandwich') || '';
    state.tab = q.get('tab') === 'counters' ? 'counters' : 'flame';
    showTab();
    saveView(); // what was ignored leaves the URL
  }
  // "The window before" since start is no window.
  function allowPrev() {
    const prev = $('base').querySelector('option[value="prev"]');
    prev.disabled = $('window').value === 'all';
    if (prev.disabled && $('base').value === 'prev') $('base').value = '';
  }

  // The tree as objects: [name, value, children] with absolute offsets.
  function build(data) {
    const names = data.names;
    function node(t, parent, x, depth) {
      const n = { name: names[t[0]], value: t[1], base: t[3] || 0, parent, x, depth, children: [] };
      let cx = x;
      for (const c of t[2]) {
        const child = node(c, n, cx, depth + 1);
        n.children.push(child);
        cx += child.value;
      }
      return n;
    }
    return node(data.tree, null, 0, 0);
  }

  function pathOf(n) {
    const p = [];
    for (; n && n.parent; n = n.parent) p.unshift(n.name);
    return p;
  }
  function find(root, path) {
    let n = root;
    for (const name of path) {
      n = n.children.find((c) => c.name === name);
      if (!n) return null;
    }
    return n;
  }

  function searchRegex() {
    const q = $('search').value;
    if (!q) return null;
    try {
      return new RegExp(q, 'i');
    } catch (e) {
      return new RegExp(q.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
    }
  }

  function hue(name) {
    let h = 0;
    for (let i = 0; i < name.length; ++i) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return h;
  }
  function color(name) {
    const h = hue(name);
    return 'rgb(' + (205 + (h % 50)) + ',' + (80 + ((h >> 8) % 130)) + ',' + (30 + ((h >> 16) % 50)) + ')';
  }

  function pct(part, whole) {
    return whole ? ((100 * part) / whole).toFixed(2) + '%' : '0%';
  }

  // The differential view: a frame's share of its profile, the base's and
  // the window's, and flamegraph.pl's red/blue scale of the change (the
  // rule of flame_diff.h's diff_color), deepest at the largest change or at
  // a fixed one (#scale, in points): relative, a -0.5 point change in a
  // quiet tree paints as deep as a -30 point one in another.
  const diff = () => Boolean(state.data && state.data.base);
  const share = (part, whole) => (whole ? part / whole : 0);
  function delta(n) {
    return share(n.value, state.root.value) - share(n.base, state.root.base);
  }
  function diffColor(d, max) {
    let r = 255, g = 255, b = 255;
    if (max > 0 && d !== 0) {
      const fade = Math.floor((210 * (max - Math.min(Math.abs(d), max))) / max);
      if (d > 0) g = b = fade;
      else r = g = fade;
    }
    return 'rgb(' + r + ',' + g + ',' + b + ')';
  }
  const diffScale = () => ($('scale').value ? Number($('scale').value) / 100 : state.data.max_delta);
  function points(d) {
    return (d >= 0 ? '+' : '') + (100 * d).toFixed(2) + '%';
  }
  // "name (A → B events, P% → Q%, +D%)" in a diff, "name (B events, Q%)" otherwise.
  function tip(n) {
    const root = state.root;
    const unit = ' ' + state.data.unit;
    if (!diff()) return n.name + ' (' + n.value + unit + ', ' + pct(n.value, root.value) + ')';
    return n.name + ' (' + n.base + ' \u2192 ' + n.value + unit + ', ' + pct(n.base, root.base) + ' \u2192 ' +
      pct(n.value, root.value) + ', ' + points(delta(n)) + ')';
  }

  // The frames of `top`'s subtree scaled to the width, each {n, left, w}.
  function layout(top, width, frames) {
    let maxDepth = 0;
    (function visit(n) {
      const w = top.value ? (n.value / top.value) * width : 0;
      if (w < 0.5 || frames.length > 8000) return;
      frames.push({ n, left: ((n.x - top.x) / top.value) * width, w });
      maxDepth = Math.max(maxDepth, n.depth - top.depth);
      for (const c of n.children) visit(c);
    })(top);
    return maxDepth;
  }

  // The frames as divs in `graph`, `top` at the bottom (flame) or on top (icicle).
  function paint(graph, frames, top, maxDepth, icicle, click) {
    const re = searchRegex();
    const out = document.createDocumentFragment();
    for (const f of frames) {
      const d = document.createElement('div');
      d.className = 'frame' + (f.dim ? ' dim' : '') + (re && re.test(f.n.name) ? ' match' : '');
      const depth = f.n.depth - top.depth;
      const row = icicle ? depth : maxDepth - depth;
      d.style.cssText = 'left:' + f.left.toFixed(1) + 'px;width:' + Math.max(f.w - 1, 0.5).toFixed(1) +
        'px;top:' + row * rowHeight + 'px';
      if (!d.classList.contains('match'))
        d.style.background = diff() ? diffColor(delta(f.n), diffScale()) : color(f.n.name);
      d.textContent = f.w > 30 ? f.n.name : '';
      d.dataset.tip = tip(f.n);
      d.dataset.name = f.n.name;
      d.onclick = () => click(f.n);
      out.appendChild(d);
    }
    graph.replaceChildren(out);
    graph.style.height = (maxDepth + 1) * rowHeight + 'px';
  }

  function draw() {
    const root = state.root;
    const graph = $('graph');
    if (!root) return;
    let zoom = find(root, state.zoom);
    if (!zoom) {
      state.zoom = [];
      zoom = root;
      saveView();
    }
    const re = searchRegex();
    const width = graph.clientWidth || 1000;
    const frames = [];
    // The zoomed frame's ancestors span the whole width, its subtree scales to it.
    for (let a = zoom.parent; a; a = a.parent) frames.push({ n: a, left: 0, w: width, dim: true });
    const maxDepth = zoom.depth + layout(zoom, width, frames);
    paint(graph, frames, root, maxDepth, state.icicle, (n) => {
      state.zoom = pathOf(n);
      draw();
      saveView();
    });
    graph.dataset.zoom = zoom.name;
    $('reset').disabled = zoom === root;
    // Matched: the frames that match, not counted again under a match.
    if (re) {
      let matched = 0;
      (function visit(n) {
        if (n.parent && re.test(n.name)) matched += n.value;
        else n.children.forEach(visit);
      })(root);
      $('matched').textContent = 'matched ' + pct(matched, root.value);
    } else {
      $('matched').textContent = '';
    }
    drawSandwich();
  }

  // The sandwich of a function, as speedscope and Pyroscope draw it: the
  // stacks through it merged at it, its callers above (the root's side
  // upwards) and its callees below. A stack counts once, at its outermost
  // call of the function, as "total" in the table does.
  function sandwich(root, fn) {
    const tnode = (name) => ({ name, value: 0, base: 0, kids: new Map() });
    const add = (t, n) => {
      t.value += n.value;
      t.base += n.base;
    };
    const kid = (t, name) => {
      let k = t.kids.get(name);
      if (!k) t.kids.set(name, (k = tnode(name)));
      return k;
    };
    const callers = tnode(fn);
    const callees = tnode(fn);
    function below(t, n) {
      for (const c of n.children) {
        const k = kid(t, c.name);
        add(k, c);
        below(k, c);
      }
    }
    (function visit(n) {
      if (!n.parent || n.name !== fn) return n.children.forEach(visit);
      add(callers, n);
      add(callees, n);
      let t = callers;
      for (let a = n.parent; a.parent; a = a.parent) add((t = kid(t, a.name)), n);
      below(callees, n);
    })(root);
    // As build()'s nodes: children by name, absolute offsets.
    function finish(t, parent, x, depth) {
      const n = { name: t.name, value: t.value, base: t.base, parent, x, depth, children: [] };
      let cx = x;
      for (const k of [...t.kids.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
        n.children.push(finish(k, n, cx, depth + 1));
        cx += k.value;
      }
      return n;
    }
    return [finish(callers, null, 0, 0), finish(callees, null, 0, 0)];
  }

  function openSandwich(name) {
    state.sandwich = name;
    draw();
    saveView();
  }

  // A function gone from the data (another window, a filter) closes it.
  function drawSandwich() {
    const box = $('sandwich');
    const [callers, callees] = state.sandwich ? sandwich(state.root, state.sandwich) : [];
    if (state.sandwich && !callers.value) {
      state.sandwich = '';
      saveView();
    }
    box.hidden = !state.sandwich;
    if (!state.sandwich) return;
    $('sandwich-name').textContent = state.sandwich;
    const width = $('callers').clientWidth || 1000;
    for (const [graph, top, icicle] of [[$('callers'), callers, false], [$('callees'), callees, true]]) {
      const frames = [];
      paint(graph, frames, top, layout(top, width, frames), icicle, (n) => openSandwich(n.name));
    }
  }

  // Self and total per function; total counts a function once per path.
  function functions(root) {
    const fns = new Map();
    const onPath = new Map();
    (function visit(n) {
      let f = fns.get(n.name);
      if (!f) fns.set(n.name, (f = { name: n.name, self: 0, total: 0, totalBase: 0 }));
      let self = n.value;
      for (const c of n.children) self -= c.value;
      f.self += self;
      const seen = onPath.get(n.name) || 0;
      if (!seen) {
        f.total += n.value;
        f.totalBase += n.base;
      }
      onPath.set(n.name, seen + 1);
      n.children.forEach(visit);
      onPath.set(n.name, seen);
    })(root);
    fns.delete('all');
    for (const f of fns.values()) f.change = share(f.total, root.value) - share(f.totalBase, root.base);
    return [...fns.values()];
  }

  function table() {
    const root = state.root;
    if (!root) return;
    const rows = functions(root);
    const k = state.sort;
    // Ties (many functions have no self time) by total, then by name.
    const by = (a, b) => (k === 'name' ? a.name.localeCompare(b.name) : a[k] - b[k]) * (state.desc ? -1 : 1);
    rows.sort((a, b) => by(a, b) || b.total - a.total || a.name.localeCompare(b.name));
    const tbody = document.querySelector('#functions tbody');
    const out = document.createDocumentFragment();
    const cols = (r) => [r.name, r.self + ' (' + pct(r.self, root.value) + ')', r.total + ' (' + pct(r.total, root.value) + ')']
      .concat(diff() ? [r.totalBase + ' (' + pct(r.totalBase, root.base) + ') \u2192 ' + points(r.change)] : []);
    for (const r of rows.slice(0, 200)) {
      const tr = document.createElement('tr');
      for (const v of cols(r)) {
        const td = document.createElement('td');
        td.textContent = v;
        tr.appendChild(td);
      }
      const open = document.createElement('button');
      open.type = 'button';
      open.className = 'open-sandwich';
      open.textContent = 'sandwich';
      open.onclick = (e) => {
        e.stopPropagation();
        openSandwich(r.name);
        $('sandwich').scrollIntoView();
      };
      tr.firstChild.prepend(open, ' ');
      tr.onclick = () => {
        $('search').value = '^' + r.name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$';
        draw();
        saveView();
      };
      out.appendChild(tr);
    }
    tbody.replaceChildren(out);
    $('change').hidden = !diff();
    for (const th of document.querySelectorAll('#functions th'))
      th.className = th.dataset.sort === k ? (state.desc ? 'desc' : 'asc') : '';
  }

  // The options, `cur` selected; kept as an option of its own when the data
  // has it no more (a process gone, a value from a link).
  function options(select, values, cur) {
    select.replaceChildren();
    for (const [value, label] of values) select.add(new Option(label, value));
    if (cur && ![...select.options].some((o) => o.value === cur)) select.add(new Option(cur, cur));
    select.value = cur;
  }

  // A value with its count; a pid or tid with its comm too: "pid 812 (nginx) - 90".
  function valueLabel([v, n, comm]) {
    return v + (comm === undefined ? '' : ' (' + comm + ')') + ' \u2014 ' + n;
  }

  function filters(data) {
    const keys = Object.keys(data.keys);
    $('filter').hidden = keys.length === 0;
    if (state.key && !keys.includes(state.key)) {
      state.key = state.value = '';
      state.exclude = false;
      saveView();
    }
    options($('key'), [['', 'everything']].concat(keys.map((k) => [k, k])), state.key);
    const values = state.key ? data.keys[state.key].map((e) => [e[0], valueLabel(e)]) : [];
    options($('value'), values, state.value);
    $('exclude').value = state.exclude ? '1' : '';
    $('value').hidden = $('exclude').hidden = !state.key;
  }

  function counters(data) {
    const tbody = $('counters-table').tBodies[0];
    const out = document.createDocumentFragment();
    for (const [name, value] of data.counters) {
      const tr = out.appendChild(document.createElement('tr'));
      tr.appendChild(document.createElement('th')).textContent = name;
      tr.appendChild(document.createElement('td')).textContent = value;
    }
    tbody.replaceChildren(out);
  }

  // What /flame.json is asked for; /flame.pprof, the download, without the base.
  function query(withBase = true) {
    const q = new URLSearchParams({ window: $('window').value });
    if (withBase && $('base').value) q.set('base', $('base').value);
    if (state.key && state.value) {
      q.set('key', state.key);
      q.set('value', state.value);
      if (state.exclude) q.set('exclude', '1');
    }
    return q.toString();
  }

  let timer = 0;
  let pending = false;
  let again = false; // asked for while one was in flight: its query may be stale
  async function update() {
    clearTimeout(timer);
    if (pending) {
      again = true;
      return;
    }
    pending = true;
    try {
      const q = query();
      const r = await fetch('/flame.json?' + q, { cache: 'no-store' });
      const text = await r.text();
      // A filter from a link that the daemon refuses (a key it does not count by): dropped.
      if (r.status === 400 && !state.checked) {
        state.key = state.value = '';
        state.exclude = false;
        state.checked = again = true;
        saveView();
        return;
      }
      if (!r.ok) throw new Error(text.trim());
      state.checked = true;
      const data = JSON.parse(text);
      state.data = data;
      state.root = build(data);
      filters(data);
      counters(data);
      draw();
      table();
      state.updates += 1;
      $('graph').dataset.updates = state.updates;
      $('graph').dataset.query = q; // what the graph shows, for a test to wait on
      $('download').href = '/flame.pprof?' + query(false);
      const span = (d) => (d.seconds ? ' (' + d.seconds + ' s)' : '');
      const base = data.base ? ' against ' + data.base.window + span(data.base) + ' (' + data.base.total + ')' : '';
      $('legend').hidden = !data.base;
      $('status').textContent = data.total + ' ' + data.unit + ', ' + data.window + span(data) + base +
        ', updated ' + new Date().toLocaleTimeString();
      $('status').classList.remove('error');
    } catch (e) {
      $('status').textContent = 'update failed: ' + e.message;
      $('status').classList.add('error');
    } finally {
      pending = false;
      if (again) timer = setTimeout(update, 0);
      else if (refresh > 0) timer = setTimeout(update, refresh * 1000);
      again = false;
    }
  }

  $('search').addEventListener('input', () => {
    draw();
    saveView();
  });
  $('window').addEventListener('change', () => {
    allowPrev();
    saveView();
    update();
  });
  const changed = () => {
    saveView();
    update();
  };
  $('base').addEventListener('change', changed);
  $('scale').addEventListener('change', () => {
    draw();
    saveView();
  });
  $('key').addEventListener('change', () => {
    state.key = $('key').value;
    state.value = '';
    state.exclude = false;
    if (state.data) filters(state.data);
    changed();
  });
  $('value').addEventListener('change', () => {
    state.value = $('value').value;
    changed();
  });
  $('exclude').addEventListener('change', () => {
    state.exclude = $('exclude').value === '1';
    changed();
  });
  $('reset').addEventListener('click', () => {
    state.zoom = [];
    draw();
    saveView();
  });
  $('layout').addEventListener('click', () => {
    state.icicle = !state.icicle;
    $('layout').textContent = state.icicle ? 'flame graph' : 'icicle';
    draw();
    saveView();
  });
  // Tabs switch in place, the rest of the view kept in the hash.
  for (const a of document.querySelectorAll('#tabs a'))
    a.addEventListener('click', (e) => {
      e.preventDefault();
      state.tab = a.dataset.tab;
      showTab();
      saveView();
    });
  // A link pasted into this page's address bar, or the hash edited: its view.
  window.addEventListener('hashchange', () => {
    loadView();
    draw();
    update();
  });
  // The tooltip: a box that follows the mouse and shows at once (a title waits).
  const tipBox = $('tip');
  function hover(e) {
    const f = e.target.closest('.frame');
    tipBox.hidden = !f;
    if (!f) return;
    tipBox.textContent = f.dataset.tip;
    const gap = 14;
    let x = e.clientX + gap, y = e.clientY + gap;
    if (x + tipBox.offsetWidth > innerWidth) x = Math.max(0, e.clientX - gap - tipBox.offsetWidth);
    if (y + tipBox.offsetHeight > innerHeight) y = Math.max(0, e.clientY - gap - tipBox.offsetHeight);
    tipBox.style.left = x + 'px';
    tipBox.style.top = y + 'px';
  }
  for (const g of [$('graph'), $('callers'), $('callees')]) {
    g.addEventListener('mousemove', hover);
    g.addEventListener('mouseleave', () => { tipBox.hidden = true; });
  }
  $('sandwich-close').addEventListener('click', () => openSandwich(''));
  for (const th of document.querySelectorAll('#functions th'))
    th.addEventListener('click', () => {
      state.desc = state.sort === th.dataset.sort ? !state.desc : th.dataset.sort !== 'name';
      state.sort = th.dataset.sort;
      table();
    });
  window.addEventListener('resize', draw);
  loadView();
  update();
})();
