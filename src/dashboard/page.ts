// The dashboard page: one self-contained HTML document (inline CSS, vanilla JS, inline SVG), so it works with
// no network beyond the region itself. It subscribes to `<its own path>/events` and redraws on every snapshot.
// The content security policy allows exactly the inline script and style below (by hash) and same-origin
// connections, so data from the stream can never become markup: the script only sets textContent.
import { createHash } from 'node:crypto';

const STYLE = `
:root { color-scheme: dark; --bg:#0f172a; --panel:#111c33; --line:#24324f; --text:#e2e8f0; --muted:#94a3b8;
  --up:#22c55e; --down:#ef4444; --warn:#f59e0b; --own:#38bdf8; --global:#c084fc; --limit:#cbd5e1; --shade:rgba(245,158,11,.22); }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif; background:var(--bg);
  color:var(--text); }
header { display:flex; align-items:center; gap:14px; padding:12px 20px; border-bottom:1px solid var(--line); flex-wrap:wrap; }
header h1 { font-size:18px; margin:0; font-weight:600; }
.badge { border:1px solid var(--line); border-radius:999px; padding:2px 10px; font-size:12px; color:var(--muted); }
.badge.live { color:var(--up); border-color:var(--up); } .badge.off { color:var(--down); border-color:var(--down); }
.badge.scenario { color:var(--warn); border-color:var(--warn); } .badge.open { color:var(--down); border-color:var(--down); }
.badge.closed { color:var(--up); border-color:var(--up); }
main { display:grid; grid-template-columns: 430px 1fr; gap:14px; padding:14px 20px; }
section { background:var(--panel); border:1px solid var(--line); border-radius:10px; padding:12px 14px; min-width:0; }
section h2 { font-size:13px; text-transform:uppercase; letter-spacing:.06em; color:var(--muted); margin:0 0 8px; font-weight:600; }
.wide { grid-column: 1 / -1; }
table { border-collapse:collapse; width:100%; font-variant-numeric: tabular-nums; }
th, td { text-align:left; padding:4px 8px; border-bottom:1px solid var(--line); white-space:nowrap; }
th { color:var(--muted); font-weight:500; font-size:12px; }
td.numeric, th.numeric { text-align:right; }
td.detail { white-space:normal; font-size:11px; color:var(--muted); max-width:240px; }
.state-up { color:var(--up); } .state-down { color:var(--down); font-weight:600; } .state-unknown { color:var(--muted); }
.meter { position:relative; height:22px; background:#0b1222; border:1px solid var(--line); border-radius:6px;
  overflow:hidden; margin:6px 0; }
.meter .fill { position:absolute; left:0; top:0; bottom:0; background:var(--up); }
.meter .fill.over { background:var(--down); }
.meter .mark { position:absolute; top:0; bottom:0; width:2px; background:var(--limit); }
.muted { color:var(--muted); } .small { font-size:12px; }
.charts { display:grid; grid-template-columns: 1fr 1fr; gap:14px; }
svg text { fill:var(--text); font-family:inherit; }
.legend { display:flex; gap:12px; flex-wrap:wrap; font-size:12px; color:var(--muted); margin-top:4px; }
.legend i { display:inline-block; width:12px; height:3px; vertical-align:middle; margin-right:4px; }
.bar { height:8px; background:#0b1222; border-radius:4px; position:relative; min-width:120px; }
.bar span { position:absolute; top:0; bottom:0; left:0; border-radius:4px; }
`;

const SCRIPT = `
(function () {
  'use strict';
  var WINDOW_MS = 120000, MIN_SPAN_MS = 20000, MAX_POINTS = 300, SVGNS = 'http://www.w3.org/2000/svg';
  var history = [], partitions = [], downSince = null, downSpans = [];
  var COLORS = ['#38bdf8', '#f472b6', '#a3e635', '#fb923c', '#c084fc', '#facc15'];

  function byId(id) { return document.getElementById(id); }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function el(tag, attrs, text, parent) {
    var node = document.createElement(tag);
    for (var k in attrs) node.setAttribute(k, String(attrs[k]));
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (parent) parent.appendChild(node);
    return node;
  }
  function sv(tag, attrs, parent, text) {
    var node = document.createElementNS(SVGNS, tag);
    for (var k in attrs) node.setAttribute(k, String(attrs[k]));
    if (text !== undefined) node.textContent = String(text);
    if (parent) parent.appendChild(node);
    return node;
  }
  function ms(v) { if (v === null || v === undefined) return '\\u2013'; if (v < 1000) return Math.round(v) + ' ms';
    return (v / 1000).toFixed(1) + ' s'; }
  function formatNumber(v) { if (v === null || v === undefined) return '\\u2013'; if (Math.abs(v) >= 100) return String(Math.round(v));
    return String(Math.round(v * 10) / 10); }
  function ago(at, now) { var s = Math.max(0, Math.round((now - at) / 1000));
    return s < 60 ? s + ' s' : Math.floor(s / 60) + ' min ' + (s % 60) + ' s'; }

  // ---- partitions: what the chaos lab announced, plus spans where this region saw a link down ----
  function partitionLabel(p) {
    if (p.region) return 'region ' + p.region + ' cut off';
    return (p.links || []).map(function (l) { return l.from + (l.oneWay ? ' \\u2192 ' : ' \\u2194 ') + l.to; }).join(', ') + ' cut';
  }
  function trackPartitions(s) {
    var current = s.annotations && s.annotations.partition;
    for (var i = 0; i < partitions.length; i++) {
      var p = partitions[i];
      if (p.until === null && !(current && current.since === p.since)) p.until = s.at;
    }
    if (current) {
      var found = null;
      for (var j = 0; j < partitions.length; j++) if (partitions[j].since === current.since) found = partitions[j];
      if (!found) { found = { since: current.since, until: null, label: '' }; partitions.push(found); }
      found.until = current.until === undefined ? null : current.until;
      found.label = partitionLabel(current);
    }
    var anyDown = s.links.some(function (l) { return l.state === 'down'; });
    if (anyDown && downSince === null) { downSince = s.at; downSpans.push({ since: s.at, until: null }); }
    if (anyDown) downSpans[downSpans.length - 1].until = null;
    if (!anyDown && downSince !== null) { downSpans[downSpans.length - 1].until = s.at; downSince = null; }
    var horizon = s.at - WINDOW_MS;
    partitions = partitions.filter(function (p) { return p.until === null || p.until > horizon; });
    downSpans = downSpans.filter(function (p) { return p.until === null || p.until > horizon; });
  }
  function cutLinks(s) {
    var cut = {}, p = s.annotations && s.annotations.partition;
    if (!p || (p.until !== undefined && p.until <= s.at)) return cut;
    s.regions.forEach(function (a) { s.regions.forEach(function (b) {
      if (a.name === b.name) return;
      if (p.region && (a.name === p.region || b.name === p.region)) cut[a.name + '|' + b.name] = true;
    }); });
    (p.links || []).forEach(function (l) { cut[l.from + '|' + l.to] = true; if (!l.oneWay) cut[l.to + '|' + l.from] = true; });
    return cut;
  }

  // ---- topology ----
  function drawTopology(s) {
    var root = byId('topology'); clear(root);
    var W = 400, H = 300, cx = W / 2, cy = H / 2 + 6, R = 105, n = s.regions.length;
    var pos = {};
    s.regions.forEach(function (r, i) {
      var a = -Math.PI / 2 + (2 * Math.PI * i) / n;
      pos[r.name] = { x: cx + R * Math.cos(a), y: cy + R * Math.sin(a) };
    });
    var linkFrom = {};
    s.links.forEach(function (l) { linkFrom[l.from + '|' + l.to] = l; });
    var cut = cutLinks(s);
    var key = s.keys[0];
    for (var i = 0; i < n; i++) for (var j = i + 1; j < n; j++) {
      var a = s.regions[i].name, b = s.regions[j].name;
      var link = linkFrom[a + '|' + b] || linkFrom[b + '|' + a];
      var state = link ? link.state : 'unobserved';
      var isCut = cut[a + '|' + b] || cut[b + '|' + a];
      var color = state === 'up' ? 'var(--up)' : state === 'down' ? 'var(--down)' : '#475569';
      var attrs = { x1: pos[a].x, y1: pos[a].y, x2: pos[b].x, y2: pos[b].y, stroke: color, 'stroke-width': state === 'unobserved' ? 2 : 4,
        'data-testid': 'topology-link-' + a + '-' + b, 'data-state': state, 'data-cut': isCut ? 'yes' : 'no' };
      if (state === 'down' || state === 'unobserved') attrs['stroke-dasharray'] = state === 'down' ? '10 6' : '4 6';
      sv('line', attrs, root);
      if (isCut) sv('line', { x1: pos[a].x, y1: pos[a].y, x2: pos[b].x, y2: pos[b].y, stroke: 'var(--warn)', 'stroke-width': 12,
        'stroke-opacity': 0.25 }, root);
      var mx = (pos[a].x + pos[b].x) / 2, my = (pos[a].y + pos[b].y) / 2;
      var label = state === 'up' ? (link.syncLagMs !== null ? 'lag ' + ms(link.syncLagMs) : 'up') : state === 'down' ? 'DOWN' :
        (isCut ? 'cut' : '');
      if (label) {
        sv('rect', { x: mx - 34, y: my - 10, width: 68, height: 18, rx: 4, fill: '#0b1222', stroke: color }, root);
        sv('text', { x: mx, y: my + 4, 'text-anchor': 'middle', 'font-size': 11, fill: color }, root, label);
      }
    }
    s.regions.forEach(function (r) {
      var p = pos[r.name];
      var link = linkFrom[s.region + '|' + r.name];
      var down = link && link.state === 'down';
      var g = sv('g', { 'data-testid': 'region-' + r.name, 'data-state': r.self ? 'self' : (link ? link.state : 'unknown') }, root);
      sv('circle', { cx: p.x, cy: p.y, r: 38, fill: down ? '#3b1219' : '#13233f',
        stroke: r.self ? 'var(--own)' : (down ? 'var(--down)' : '#64748b'), 'stroke-width': r.self ? 4 : 2 }, g);
      sv('text', { x: p.x, y: p.y - 8, 'text-anchor': 'middle', 'font-size': 13, 'font-weight': 600 }, g, r.name);
      var sub = r.self ? 'this region' : (down ? 'unreachable' : 'weight ' + Math.round(r.weight * 100) + '%');
      sv('text', { x: p.x, y: p.y + 7, 'text-anchor': 'middle', 'font-size': 10, fill: down ? 'var(--down)' : 'var(--muted)' }, g, sub);
      if (key) {
        var v = key.views.filter(function (x) { return x.region === r.name; })[0];
        if (v) sv('text', { x: p.x, y: p.y + 21, 'text-anchor': 'middle', 'font-size': 10, fill: 'var(--muted)' }, g,
          'admitted ' + formatNumber(v.consumed));
      }
    });
  }

  // ---- time series ----
  function drawChart(root, series, opts) {
    clear(root);
    var W = 560, H = 210, L = 44, Rr = 10, T = 10, B = 24, now = opts.now;
    // The x axis spans the history the page has, between MIN_SPAN_MS and WINDOW_MS.
    var first = history.length ? history[0].at : now;
    var span = Math.min(WINDOW_MS, Math.max(MIN_SPAN_MS, now - first)), t0 = now - span;
    var yMax = opts.yMax > 0 ? opts.yMax : 1;
    series.forEach(function (sr) { sr.points.forEach(function (pt) { if (pt[1] > yMax) yMax = pt[1]; }); });
    yMax = yMax * 1.1;
    function X(t) { return L + ((t - t0) / span) * (W - L - Rr); }
    function Y(v) { return T + (1 - v / yMax) * (H - T - B); }
    partitions.forEach(function (p) {
      var a = Math.max(p.since, t0), b = p.until === null ? now : Math.min(p.until, now);
      if (b <= t0 || a >= now) return;
      sv('rect', { x: X(a), y: T, width: Math.max(2, X(b) - X(a)), height: H - T - B, fill: 'var(--shade)',
        'data-testid': 'partition-shade' }, root);
      var right = X(a) > (W - Rr) * 0.55;
      sv('text', { x: right ? X(a) - 4 : X(a) + 4, y: T + 12, 'text-anchor': right ? 'end' : 'start', 'font-size': 10,
        fill: 'var(--warn)' }, root, p.label);
    });
    downSpans.forEach(function (p) {
      var a = Math.max(p.since, t0), b = p.until === null ? now : Math.min(p.until, now);
      if (b <= t0 || a >= now) return;
      sv('rect', { x: X(a), y: H - B - 5, width: Math.max(2, X(b) - X(a)), height: 5, fill: 'var(--down)',
        'data-testid': 'link-down-shade' }, root);
    });
    [0, 0.5, 1].forEach(function (f) {
      var v = (yMax / 1.1) * f;
      sv('line', { x1: L, x2: W - Rr, y1: Y(v), y2: Y(v), stroke: '#1e293b' }, root);
      sv('text', { x: L - 6, y: Y(v) + 4, 'text-anchor': 'end', 'font-size': 10, fill: 'var(--muted)' }, root, formatNumber(v));
    });
    var ticks = [[t0, '-' + Math.round(span / 1000) + ' s'], [now - span / 2, '-' + Math.round(span / 2000) + ' s'], [now, 'now']];
    ticks.forEach(function (tick) {
      sv('text', { x: X(tick[0]), y: H - 6, 'text-anchor': tick[1] === 'now' ? 'end' : 'middle', 'font-size': 10,
        fill: 'var(--muted)' }, root, tick[1]);
    });
    series.forEach(function (sr) {
      var pts = sr.points.filter(function (pt) { return pt[0] >= t0; });
      if (pts.length === 0) return;
      var d = pts.map(function (pt, i) { return (i === 0 ? 'M' : 'L') + X(pt[0]).toFixed(1) + ' ' + Y(pt[1]).toFixed(1); }).join(' ');
      var attrs = { d: d, fill: 'none', stroke: sr.color, 'stroke-width': sr.width || 2 };
      if (sr.dash) attrs['stroke-dasharray'] = sr.dash;
      sv('path', attrs, root);
    });
    var legend = opts.legend; clear(legend);
    series.forEach(function (sr) {
      var item = el('span', {}, null, legend);
      el('i', { style: 'background:' + sr.color }, null, item);
      item.appendChild(document.createTextNode(sr.name));
    });
  }

  function drawCharts(s) {
    var key = s.keys[0];
    var title = byId('key-chart-title');
    if (key) {
      title.textContent = 'Key "' + key.label + '" \\u2014 admitted this window';
      var own = [], glob = [], lim = [], lb = [], allow = [];
      history.forEach(function (h) {
        if (!h.key) return;
        own.push([h.at, h.key.own]); glob.push([h.at, h.key.global]); lim.push([h.at, h.key.limit]);
        if (h.key.budget !== null) lb.push([h.at, h.key.limit + h.key.budget]);
        if (h.key.allowance !== null) allow.push([h.at, h.key.allowance]);
      });
      var series = [
        { name: 'global view', color: 'var(--global)', points: glob, width: 4 },
        { name: 'own (' + s.region + ')', color: 'var(--own)', points: own },
        { name: 'escrow allowance', color: '#a3e635', points: allow, dash: '2 4' },
        { name: 'limit', color: 'var(--limit)', points: lim, dash: '6 4', width: 1 }
      ];
      if (lb.length) series.push({ name: 'limit + budget', color: 'var(--down)', points: lb, dash: '6 4', width: 1 });
      drawChart(byId('key-chart'), series, { now: s.at, yMax: key.limit, legend: byId('key-legend') });
    } else {
      title.textContent = 'No watched key';
      drawChart(byId('key-chart'), [], { now: s.at, yMax: 1, legend: byId('key-legend') });
    }
    var names = {};
    history.forEach(function (h) { for (var k in h.rej) names[k] = true; });
    var rejSeries = Object.keys(names).sort().map(function (name, i) {
      return { name: name, color: COLORS[i % COLORS.length], points: history.map(function (h) { return [h.at, h.rej[name] || 0]; }) };
    });
    drawChart(byId('rej-chart'), rejSeries, { now: s.at, yMax: 1, legend: byId('rej-legend') });
  }

  // ---- panels ----
  function drawStatus(s) {
    var b = byId('breaker');
    b.textContent = 'breaker ' + s.breaker.state;
    b.className = 'badge ' + s.breaker.state;
    b.setAttribute('data-state', s.breaker.state);
    var a = s.annotations;
    var sc = byId('scenario');
    sc.textContent = a && a.scenario ? 'scenario: ' + a.scenario : 'no chaos run';
    sc.className = 'badge' + (a && a.scenario ? ' scenario' : '');
    byId('region-name').textContent = s.region;
    byId('clock').textContent = new Date(s.at).toISOString().replace('T', ' ').slice(0, 19) + ' UTC';
    var part = byId('partition');
    var p = a && a.partition;
    if (p && (p.until === undefined || p.until > s.at)) {
      part.textContent = partitionLabel(p) + ' for ' + ago(p.since, s.at);
      part.className = 'state-down'; part.setAttribute('data-active', 'yes');
    } else if (s.links.some(function (l) { return l.state === 'down'; })) {
      part.textContent = 'link down (no partition announced)';
      part.className = 'state-down'; part.setAttribute('data-active', 'observed');
    } else {
      part.textContent = 'none'; part.className = 'state-up'; part.setAttribute('data-active', 'no');
    }
    var m = byId('leakage-meter'), fill = byId('leakage-fill'), mark = byId('leakage-mark'), text = byId('leakage-text');
    var lk = a && a.leakage;
    if (!lk) {
      fill.style.width = '0%'; mark.style.left = '66.6%'; text.textContent = 'no leakage reading (posted by a chaos run)';
      m.setAttribute('data-state', 'none'); return;
    }
    if (lk.budget === null) {
      fill.style.width = '100%'; fill.className = 'fill over'; mark.style.display = 'none';
      text.textContent = 'leakage ' + formatNumber(lk.leakage) + ' \\u2014 budget unbounded (plain gossip)';
      m.setAttribute('data-state', 'unbounded'); return;
    }
    var scale = Math.max(lk.budget * 1.5, lk.leakage, 1);
    fill.style.width = (100 * lk.leakage / scale).toFixed(1) + '%';
    mark.style.display = ''; mark.style.left = (100 * lk.budget / scale).toFixed(1) + '%';
    var over = lk.leakage > lk.budget;
    fill.className = over ? 'fill over' : 'fill';
    var pct = lk.budget > 0 ? ' (' + Math.round(100 * lk.leakage / lk.budget) + '% of budget)' : '';
    text.textContent = 'leakage ' + formatNumber(lk.leakage) + ' of budget ' + formatNumber(lk.budget) + pct +
      (lk.admitted !== undefined ? ', admitted ' + formatNumber(lk.admitted) : '') + (lk.limit ? ' / limit ' + formatNumber(lk.limit) : '') +
      (lk.key ? ' \\u2014 ' + lk.key : '');
    m.setAttribute('data-state', over ? 'over' : 'within');
  }

  function drawLinks(s) {
    var body = byId('links-body'); clear(body);
    s.links.forEach(function (l) {
      var tr = el('tr', { 'data-testid': 'link-' + l.from + '-' + l.to, 'data-state': l.state }, null, body);
      el('td', {}, l.from + ' \\u2192 ' + l.to, tr);
      el('td', { 'class': 'state-' + l.state }, l.state.toUpperCase(), tr);
      el('td', { 'class': 'numeric' }, ms(l.syncLagMs), tr);
      el('td', { 'class': 'numeric' }, l.backlog === null ? '\\u2013' : l.backlog, tr);
      el('td', { 'class': 'numeric' }, ms(l.lastHeardAgoMs), tr);
      el('td', { 'class': 'detail' }, l.detail || '', tr);
    });
  }

  function drawKeys(s) {
    var head = byId('keys-head'), body = byId('keys-body'); clear(head); clear(body);
    var viewCols = s.regions.map(function (r) { return 'view ' + r.name; });
    var cols = ['key', 'rule', 'own'].concat(viewCols, ['global', 'allowance', 'acked', 'limit', 'budget', '']);
    cols.forEach(function (c, i) { el('th', { 'class': i >= 2 && i < cols.length - 1 ? 'numeric' : '' }, c, head); });
    if (s.keys.length === 0) { var tr0 = el('tr', {}, null, body);
      el('td', { colspan: cols.length, 'class': 'muted' }, 'no keys watched', tr0); return; }
    s.keys.forEach(function (k) {
      var tr = el('tr', { 'data-testid': 'key-' + k.label }, null, body);
      el('td', {}, k.label, tr); el('td', { 'class': 'muted' }, k.rule + ' (' + k.algorithm + ')', tr);
      el('td', { 'class': 'numeric' }, formatNumber(k.own), tr);
      s.regions.forEach(function (r) {
        var v = k.views.filter(function (x) { return x.region === r.name; })[0];
        el('td', { 'class': 'numeric' }, v ? formatNumber(v.consumed) : '\\u2013', tr);
      });
      el('td', { 'class': 'numeric' }, formatNumber(k.global), tr);
      el('td', { 'class': 'numeric' }, formatNumber(k.allowance), tr);
      el('td', { 'class': 'numeric' }, formatNumber(k.acknowledged), tr);
      el('td', { 'class': 'numeric' }, formatNumber(k.limit), tr);
      el('td', { 'class': 'numeric' }, k.budget === null ? 'unbounded' : formatNumber(k.budget), tr);
      var cell = el('td', {}, null, tr), bar = el('div', { 'class': 'bar', title: 'own / global / limit' }, null, cell);
      var top = Math.max(k.limit + (k.budget || 0), k.global, 1);
      el('span', { style: 'width:' + (100 * k.global / top).toFixed(1) + '%;background:var(--global)' }, null, bar);
      el('span', { style: 'width:' + (100 * k.own / top).toFixed(1) + '%;background:var(--own)' }, null, bar);
    });
  }

  function drawTopLimited(s) {
    var body = byId('top-limited-body'); clear(body);
    var rows = s.topLimited || [];
    if (rows.length === 0) { var tr0 = el('tr', {}, null, body);
      el('td', { colspan: 5, 'class': 'muted' }, 'no denials in the current windows', tr0); return; }
    rows.forEach(function (k) {
      var tr = el('tr', { 'data-testid': 'top-limited-' + k.rule }, null, body);
      el('td', {}, k.rule, tr); el('td', {}, k.key, tr);
      el('td', { 'class': 'numeric' }, formatNumber(k.denials) + (k.error > 0 ? ' (\u2265 ' + formatNumber(k.denials - k.error) + ')' : ''), tr);
      el('td', { 'class': 'numeric' }, k.ruleDenials > 0 ? (100 * k.denials / k.ruleDenials).toFixed(1) + '%' : '\u2013', tr);
      el('td', { 'class': 'numeric' }, Math.max(0, Math.ceil((k.windowEndMs - s.at) / 1000)) + ' s', tr);
    });
  }

  function drawRules(s) {
    var body = byId('rules-body'); clear(body);
    (s.rules || []).forEach(function (r) {
      var tr = el('tr', { 'data-testid': 'rule-' + r.name }, null, body);
      el('td', {}, r.name + (r.shadow ? ' (shadow)' : ''), tr);
      el('td', { 'class': 'muted' }, r.algorithm, tr);
      el('td', { 'class': 'numeric' }, formatNumber(r.limit) + ' / ' + (r.periodMs >= 1000 ? (r.periodMs / 1000) + ' s' : r.periodMs + ' ms'), tr);
      el('td', {}, r.endpoints ? r.endpoints.join(' ') : 'all paths', tr);
      el('td', { 'class': 'muted' }, r.by.join(', '), tr);
      el('td', {}, r.failMode, tr);
      el('td', { 'class': 'numeric', 'data-testid': 'false-denials-' + r.name }, formatNumber(r.falseDenials || 0), tr);
      el('td', { 'class': 'numeric', 'data-testid': 'stranded-' + r.name }, formatNumber(r.stranded || 0), tr);
    });
  }

  function drawEndpoints(s) {
    var body = byId('endpoints-body'); clear(body);
    if (s.endpoints.length === 0) { var tr0 = el('tr', {}, null, body);
      el('td', { colspan: 4, 'class': 'muted' }, 'no decisions yet', tr0); return; }
    s.endpoints.forEach(function (e) {
      var tr = el('tr', { 'data-testid': 'endpoint-' + e.endpoint }, null, body);
      el('td', {}, e.endpoint, tr);
      el('td', { 'class': 'numeric' + (e.rejectedPerSec > 0 ? ' state-down' : '') }, formatNumber(e.rejectedPerSec), tr);
      el('td', { 'class': 'numeric' }, formatNumber(e.decisionsPerSec), tr);
      el('td', { 'class': 'numeric' }, formatNumber(e.rejectedTotal), tr);
    });
  }

  function onSnapshot(s) {
    if (s.error) { byId('conn').textContent = 'snapshot failed: ' + s.error; byId('conn').className = 'badge off'; return; }
    var key = s.keys[0], rej = {};
    s.endpoints.forEach(function (e) { rej[e.endpoint] = e.rejectedPerSec; });
    history.push({ at: s.at, key: key ? { own: key.own, global: key.global, limit: key.limit, budget: key.budget,
      allowance: key.allowance } : null, rej: rej });
    while (history.length > MAX_POINTS || (history.length && history[0].at < s.at - WINDOW_MS)) history.shift();
    trackPartitions(s);
    drawStatus(s); drawTopology(s); drawLinks(s); drawKeys(s); drawTopLimited(s); drawRules(s); drawEndpoints(s); drawCharts(s);
    document.body.setAttribute('data-updated', String(s.at));
    document.body.setAttribute('data-regions', String(s.regions.length));
  }

  function connect() {
    var url = location.pathname.replace(/\\/+$/, '') + '/events';
    var source = new EventSource(url);
    var conn = byId('conn');
    source.addEventListener('snapshot', function (e) {
      conn.textContent = 'live'; conn.className = 'badge live';
      try { onSnapshot(JSON.parse(e.data)); } catch (err) { conn.textContent = 'render error: ' + err.message;
        conn.className = 'badge off'; }
    });
    source.onerror = function () { conn.textContent = 'reconnecting\\u2026'; conn.className = 'badge off'; };
  }
  connect();
})();
`;

const BODY = `
<header>
  <h1>quotafed &middot; <span id="region-name">&hellip;</span></h1>
  <span id="conn" class="badge">connecting&hellip;</span>
  <span id="breaker" class="badge" data-testid="breaker-state">breaker ?</span>
  <span id="scenario" class="badge">no chaos run</span>
  <span id="clock" class="badge"></span>
</header>
<main>
  <section>
    <h2>Regions and links</h2>
    <svg id="topology" viewBox="0 0 400 300" width="400" height="300" role="img" aria-label="regions and links"></svg>
  </section>
  <section>
    <h2>Chaos</h2>
    <div>Partition: <span id="partition" data-testid="partition-status">none</span></div>
    <div class="meter" id="leakage-meter" data-testid="leakage-meter"><div class="fill" id="leakage-fill"></div>
    <div class="mark" id="leakage-mark"></div></div>
    <div id="leakage-text" class="small muted" data-testid="leakage-text"></div>
    <h2 style="margin-top:14px">Links from this region</h2>
    <table><thead><tr><th>link</th><th>state</th><th class="numeric">sync lag</th><th class="numeric">backlog</th><th class="numeric">last heard</th>
    <th></th></tr></thead>
      <tbody id="links-body"></tbody></table>
    <h2 style="margin-top:14px">429 rate per endpoint</h2>
    <table><thead><tr><th>endpoint</th><th class="numeric">429/s</th><th class="numeric">decisions/s</th><th class="numeric">429 total</th></tr></thead>
      <tbody id="endpoints-body"></tbody></table>
  </section>
  <section class="wide charts">
    <div><h2 id="key-chart-title">Key</h2>
    <svg id="key-chart" viewBox="0 0 560 210" width="100%" role="img" aria-label="key admissions over time"></svg>
    <div class="legend" id="key-legend"></div></div>
    <div><h2>429/s per endpoint</h2><svg id="rej-chart" viewBox="0 0 560 210" width="100%" role="img" aria-label="429 rate over time"></svg>
    <div class="legend" id="rej-legend"></div></div>
  </section>
  <section class="wide">
    <h2>Per-key views (current window)</h2>
    <table><thead><tr id="keys-head"></tr></thead><tbody id="keys-body"></tbody></table>
  </section>
  <section class="wide">
    <h2>Most limited keys (current window, this process)</h2>
    <table><thead><tr><th>rule</th><th>key</th><th class="numeric" title="an upper bound; at least the number in brackets">denials</th>
    <th class="numeric">share of the rule's denials</th><th class="numeric">window ends in</th></tr></thead>
    <tbody id="top-limited-body" data-testid="top-limited"></tbody></table>
  </section>
  <section class="wide">
    <h2>Rules in force</h2>
    <table><thead><tr><th>rule</th><th>algorithm</th><th class="numeric">limit</th><th>endpoints</th><th>by</th><th>fail mode</th>
    <th class="numeric" title="denied by this region's share while its view had federation headroom">false denials</th>
    <th class="numeric" title="allowance this region still held unused when a window ended while a peer was hungry">stranded at window end</th></tr></thead>
    <tbody id="rules-body" data-testid="rules"></tbody></table>
  </section>
</main>
`;

function sha256(text: string): string {
  return `'sha256-${createHash('sha256').update(text, 'utf8').digest('base64')}'`;
}

export interface DashboardPage {
  html: string;
  /** Allows exactly this page's inline script and style, and connections to its own origin. */
  csp: string;
}

export function dashboardPage(): DashboardPage {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>quotafed dashboard</title><link rel="icon" href="data:,"><style>${STYLE}</style></head>
<body>${BODY}<script>${SCRIPT}</script></body></html>`;
  const csp = [
    "default-src 'none'",
    `script-src ${sha256(SCRIPT)}`,
    // Inline style attributes set by the script (bar widths) need 'unsafe-inline' for styles only.
    "style-src 'unsafe-inline'",
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
  return { html, csp };
}
