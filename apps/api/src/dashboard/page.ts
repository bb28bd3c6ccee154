// The coordinator view: one HTML page, its stylesheet and its script, served under /dashboard. No build
// step and no inline script, so the page runs under a strict Content-Security-Policy.

export const pageHtml = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>worker-coordinator · dashboard</title>
<link rel="stylesheet" href="/dashboard/app.css">
</head>
<body>
<header>
  <h1>worker-coordinator</h1>
  <nav><a href="/dashboard" class="current">Sessions</a><a href="/dashboard/queues">Queues (bull-board)</a></nav>
  <span id="updated" class="muted">connecting…</span>
</header>
<div id="banner" class="banner" hidden></div>
<main>
  <section class="cards">
    <div class="card"><div class="label">Live sessions</div><div id="live-count" class="big">–</div></div>
    <div class="card"><div class="label">Worker hosts</div><div id="worker-count" class="big">–</div></div>
    <div class="card"><div class="label">Slots in use</div><div id="slot-count" class="big">–</div></div>
    <div class="card wide"><div class="label">Admissions and throttled requests, last 15 minutes</div><svg id="chart" viewBox="0 0 600 120" preserveAspectRatio="none" role="img" aria-label="admissions chart"></svg>
      <div class="legend"><span class="sw admitted"></span>admitted <span class="sw throttled"></span>throttled (spawn) <span class="sw rejected"></span>refused (token, session) <span class="sw tokens"></span>throttled (tokens)</div></div>
  </section>
  <section>
    <h2>Live sessions</h2>
    <div class="toolbar"><input id="filter" type="search" placeholder="filter by user" autocomplete="off"><button id="prev">‹ prev</button><span id="page" class="muted"></span><button id="next">next ›</button></div>
    <table id="live"><thead><tr><th>User</th><th>State</th><th>Fence</th><th>Worker host</th><th>Lease left</th><th>Lifetime left</th><th>Session</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Worker hosts</h2>
    <table id="workers"><thead><tr><th>Host</th><th>Heartbeat age</th><th>Slots in use</th><th>Up since</th></tr></thead><tbody></tbody></table>
  </section>
  <section>
    <h2>Recently ended</h2>
    <table id="ended"><thead><tr><th>User</th><th>State</th><th>Fence</th><th>Exit code</th><th>Worker host</th><th>Ended</th><th>Session</th></tr></thead><tbody></tbody></table>
  </section>
</main>
<script src="/dashboard/app.js"></script>
</body>
</html>
`;

export const pageCss = `
:root { --bg: #0f1419; --panel: #171d24; --line: #27313c; --text: #d8dee6; --muted: #8a96a3; --ok: #3fb950; --warn: #d29922; --bad: #f85149; --info: #58a6ff; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; background: var(--bg); color: var(--text); }
header { display: flex; align-items: center; gap: 24px; padding: 12px 24px; border-bottom: 1px solid var(--line); background: var(--panel); }
h1 { font-size: 16px; margin: 0; } h2 { font-size: 15px; margin: 24px 0 8px; }
nav a { color: var(--muted); text-decoration: none; margin-right: 16px; } nav a.current { color: var(--text); font-weight: 600; }
#updated { margin-left: auto; }
.muted { color: var(--muted); }
main { padding: 8px 24px 40px; }
.banner { background: var(--bad); color: #fff; padding: 10px 24px; font-weight: 600; }
.cards { display: grid; grid-template-columns: repeat(3, 160px) 1fr; gap: 12px; margin-top: 16px; align-items: start; }
.card { background: var(--panel); border: 1px solid var(--line); border-radius: 6px; padding: 12px; }
.label { color: var(--muted); font-size: 12px; } .big { font-size: 28px; font-weight: 600; }
svg { width: 100%; height: 120px; display: block; margin-top: 6px; }
.legend { font-size: 12px; color: var(--muted); } .sw { display: inline-block; width: 10px; height: 10px; margin: 0 4px 0 10px; vertical-align: middle; }
.sw.admitted, rect.admitted { background: var(--ok); fill: var(--ok); } .sw.throttled, rect.throttled { background: var(--warn); fill: var(--warn); }
.sw.rejected, rect.rejected { background: var(--bad); fill: var(--bad); } .sw.tokens, rect.tokens { background: var(--info); fill: var(--info); }
table { width: 100%; border-collapse: collapse; background: var(--panel); border: 1px solid var(--line); }
th, td { text-align: left; padding: 6px 10px; border-bottom: 1px solid var(--line); font-variant-numeric: tabular-nums; }
th { color: var(--muted); font-weight: 500; font-size: 12px; }
td.id { font-family: ui-monospace, monospace; font-size: 12px; color: var(--muted); }
.state { font-weight: 600; } .s-running, .s-completed { color: var(--ok); } .s-pending, .s-stopping { color: var(--info); }
.s-failed, .s-lost { color: var(--bad); } .s-expired, .s-stopped { color: var(--warn); }
.toolbar { display: flex; gap: 8px; align-items: center; margin-bottom: 8px; }
input, button { background: var(--panel); color: var(--text); border: 1px solid var(--line); border-radius: 4px; padding: 5px 8px; }
button:disabled { opacity: .4; }
`;

export const pageJs = `
(() => {
  const PAGE = 50;
  let offset = 0;
  let lastOk = 0;
  const $ = (id) => document.getElementById(id);
  const ms = (n) => n === undefined ? '' : n <= 0 ? '0 s' : n < 60000 ? (n / 1000).toFixed(1) + ' s' : Math.floor(n / 60000) + ' min ' + Math.floor((n % 60000) / 1000) + ' s';
  const time = (t) => new Date(t).toLocaleTimeString();
  function cell(text, className) {
    const td = document.createElement('td');
    td.textContent = text === undefined || text === null ? '' : String(text);
    if (className) td.className = className;
    return td;
  }
  function fill(tbody, rows, build) {
    tbody.replaceChildren(...rows.map((row) => { const tr = document.createElement('tr'); build(tr, row); return tr; }));
  }
  function chart(points) {
    const svg = $('chart');
    const max = Math.max(1, ...points.map((p) => p.admitted + p.throttled + p.tokenInvalid + p.sessionExists + p.tokensThrottled));
    const w = 600 / points.length;
    const parts = [];
    points.forEach((p, i) => {
      let y = 120;
      for (const [cls, n] of [['admitted', p.admitted], ['throttled', p.throttled], ['rejected', p.tokenInvalid + p.sessionExists], ['tokens', p.tokensThrottled]]) {
        const h = (n / max) * 110;
        if (h > 0) { y -= h; parts.push('<rect class="' + cls + '" x="' + (i * w + 2) + '" y="' + y + '" width="' + (w - 4) + '" height="' + h + '"><title>' + time(p.minute) + ': ' + n + ' ' + cls + '</title></rect>'); }
      }
    });
    svg.innerHTML = parts.join('');
  }
  function render(s) {
    $('live-count').textContent = s.live.total;
    $('worker-count').textContent = s.workers.length;
    $('slot-count').textContent = s.workers.reduce((n, w) => n + w.busy, 0) + ' / ' + s.workers.reduce((n, w) => n + w.slots, 0);
    $('page').textContent = s.live.total === 0 ? 'none' : (s.live.offset + 1) + '–' + Math.min(s.live.total, s.live.offset + s.live.limit) + ' of ' + s.live.total;
    $('prev').disabled = s.live.offset === 0;
    $('next').disabled = s.live.offset + s.live.limit >= s.live.total;
    fill($('live').tBodies[0], s.live.rows, (tr, r) => {
      tr.dataset.user = r.userId;
      tr.append(cell(r.userId, 'user'), cell(r.state, 'state s-' + r.state), cell(r.fence, 'fence'), cell(r.workerId, 'worker'),
        cell(r.state === 'pending' ? 'waits ' + ms(r.pendingLeftMs) : ms(r.leaseLeftMs), 'lease'), cell(ms(r.lifetimeLeftMs), 'lifetime'), cell(r.sessionId, 'id'));
    });
    fill($('workers').tBodies[0], s.workers, (tr, w) => {
      tr.dataset.worker = w.workerId;
      tr.append(cell(w.workerId, 'worker'), cell(ms(w.heartbeatAgeMs), 'age'), cell(w.busy + ' / ' + w.slots, 'slots'), cell(time(w.startedAt)));
    });
    fill($('ended').tBodies[0], s.ended, (tr, e) => {
      tr.dataset.user = e.userId;
      tr.append(cell(e.userId, 'user'), cell(e.state, 'state s-' + e.state), cell(e.fence, 'fence'), cell(e.exitCode, 'exit'), cell(e.workerId, 'worker'), cell(time(e.endedAt)), cell(e.sessionId, 'id'));
    });
    chart(s.chart);
  }
  async function refresh() {
    const q = new URLSearchParams({ filter: $('filter').value.trim(), offset: String(offset), limit: String(PAGE) });
    try {
      const res = await fetch('/dashboard/api/state?' + q, { cache: 'no-store', credentials: 'same-origin' });
      const body = await res.json();
      if (!res.ok) throw new Error(body && body.error ? body.error.message : 'HTTP ' + res.status);
      render(body);
      lastOk = Date.now();
      $('banner').hidden = true;
      $('updated').textContent = 'updated ' + time(lastOk);
    } catch (err) {
      $('banner').hidden = false;
      $('banner').textContent = 'Redis is unreachable or the API does not answer (' + err.message + ')' + (lastOk ? '; showing data from ' + time(lastOk) : '');
    }
  }
  $('filter').addEventListener('input', () => { offset = 0; refresh(); });
  $('prev').addEventListener('click', () => { offset = Math.max(0, offset - PAGE); refresh(); });
  $('next').addEventListener('click', () => { offset += PAGE; refresh(); });
  refresh();
  setInterval(refresh, 1000);
})();
`;
