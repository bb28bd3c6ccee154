(() => {
  const PAGE = 50;
  let offset = 0;
  let lastOk = 0;
  const $ = (id) => document.getElementById(id);
  const ms = (n) =>
    n === undefined
      ? ''
      : n <= 0
        ? '0 s'
        : n < 60000
          ? (n / 1000).toFixed(1) + ' s'
          : Math.floor(n / 60000) + ' min ' + Math.floor((n % 60000) / 1000) + ' s';
  const time = (t) => new Date(t).toLocaleTimeString();
  function cell(text, className) {
    const td = document.createElement('td');
    td.textContent = text === undefined || text === null ? '' : String(text);
    if (className) td.className = className;
    return td;
  }
  function fill(tbody, rows, build) {
    tbody.replaceChildren(
      ...rows.map((row) => {
        const tr = document.createElement('tr');
        build(tr, row);
        return tr;
      }),
    );
  }
  const SVG = 'http://www.w3.org/2000/svg';
  const SERIES = [
    ['admitted', (p) => p.admitted],
    ['throttled', (p) => p.throttled],
    ['rejected', (p) => p.tokenInvalid + p.sessionExists],
    ['full', (p) => p.noCapacity],
    ['tokens', (p) => p.tokensThrottled],
  ];
  // Stacked bars, one per minute, and each series' total in the legend.
  function chart(points) {
    const max = Math.max(1, ...points.map((p) => SERIES.reduce((n, [, of]) => n + of(p), 0)));
    const w = 600 / points.length;
    const bars = [];
    points.forEach((p, i) => {
      let y = 120;
      for (const [cls, of] of SERIES) {
        const n = of(p);
        const h = (n / max) * 110;
        if (h <= 0) continue;
        y -= h;
        const rect = document.createElementNS(SVG, 'rect');
        rect.setAttribute('class', cls);
        rect.setAttribute('x', String(i * w + 2));
        rect.setAttribute('y', String(y));
        rect.setAttribute('width', String(Math.max(1, w - 4)));
        rect.setAttribute('height', String(h));
        const title = document.createElementNS(SVG, 'title');
        title.textContent = time(p.minute) + ': ' + n + ' ' + cls;
        rect.append(title);
        bars.push(rect);
      }
    });
    $('chart').replaceChildren(...bars);
    for (const [cls, of] of SERIES)
      $('legend').querySelector('[data-series="' + cls + '"] .n').textContent = String(
        points.reduce((n, p) => n + of(p), 0),
      );
  }
  function render(s) {
    $('live-count').textContent = s.live.total;
    $('worker-count').textContent = s.workers.length;
    $('slot-count').textContent =
      s.workers.reduce((n, w) => n + w.busy, 0) + ' / ' + s.workers.reduce((n, w) => n + w.slots, 0);
    $('free-slots').textContent = s.freeSlots;
    $('page').textContent =
      s.live.total === 0
        ? 'none'
        : s.live.offset + 1 + '–' + Math.min(s.live.total, s.live.offset + s.live.limit) + ' of ' + s.live.total;
    $('prev').disabled = s.live.offset === 0;
    $('next').disabled = s.live.offset + s.live.limit >= s.live.total;
    fill($('live').tBodies[0], s.live.rows, (tr, r) => {
      tr.dataset.user = r.userId;
      tr.append(
        cell(r.userId, 'user'),
        cell(r.ready ? r.state + ' · ready' + (r.endpoint ? ' at ' + r.endpoint : '') : r.state, 'state s-' + r.state),
        cell(r.fence, 'fence'),
        cell(r.workerId, 'worker'),
        cell(r.state === 'pending' ? 'waits ' + ms(r.pendingLeftMs) : ms(r.leaseLeftMs), 'lease'),
        cell(ms(r.lifetimeLeftMs), 'lifetime'),
        cell(r.sessionId, 'id'),
      );
    });
    fill($('workers').tBodies[0], s.workers, (tr, w) => {
      tr.dataset.worker = w.workerId;
      tr.append(
        cell(w.workerId, 'worker'),
        cell(w.state, 'state s-' + w.state),
        cell(w.containment, 'containment'),
        cell(ms(w.heartbeatAgeMs), 'age'),
        cell(w.busy + ' / ' + w.slots, 'slots'),
        cell(time(w.startedAt)),
      );
    });
    fill($('ended').tBodies[0], s.ended, (tr, e) => {
      tr.dataset.user = e.userId;
      tr.append(
        cell(e.userId, 'user'),
        cell(e.reason ? e.state + ' (' + e.reason + ')' : e.state, 'state s-' + e.state),
        cell(e.fence, 'fence'),
        cell(e.exitCode, 'exit'),
        cell(e.workerId, 'worker'),
        cell(time(e.endedAt)),
        cell(e.sessionId, 'id'),
      );
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
      $('banner').textContent =
        'Redis is unreachable or the API does not answer (' +
        err.message +
        ')' +
        (lastOk ? '; showing data from ' + time(lastOk) : '');
    }
  }
  $('filter').addEventListener('input', () => {
    offset = 0;
    refresh();
  });
  $('prev').addEventListener('click', () => {
    offset = Math.max(0, offset - PAGE);
    refresh();
  });
  $('next').addEventListener('click', () => {
    offset += PAGE;
    refresh();
  });
  // Session events: the newest 50 when the page opens (the server keeps them), then each as it
  // happens, newest first in their own table; each one a cue to read the state again (at most every
  // 250 ms). The poll stays, slower, for what has no event (hosts, chart).
  const EVENTS_SHOWN = 50;
  const events = [];
  let refreshSoon;
  let drawEvents;
  function showEvents() {
    drawEvents = undefined;
    fill($('events').tBodies[0], events, (tr, ev) => {
      tr.dataset.user = ev.userId;
      tr.dataset.type = ev.type;
      const detail = ev.endpoint || (ev.reason ? ev.reason : ev.exitCode !== undefined ? 'exit ' + ev.exitCode : '');
      tr.append(
        cell(time(ev.at)),
        cell(ev.userId, 'user'),
        cell(ev.type, 'state s-' + ev.type),
        cell(ev.fence, 'fence'),
        cell(ev.workerId, 'worker'),
        cell(detail, 'detail'),
      );
    });
  }
  function onEvent(message) {
    // A reconnection may send again what the page has (from another API process).
    if (message.lastEventId && events.some((e) => e.id === message.lastEventId)) return;
    const e = JSON.parse(message.data);
    e.id = message.lastEventId;
    events.unshift(e);
    events.length = Math.min(events.length, EVENTS_SHOWN);
    // The 50 of an opening arrive at once: one table for them all.
    if (drawEvents === undefined) drawEvents = requestAnimationFrame(showEvents);
    if (refreshSoon === undefined)
      refreshSoon = setTimeout(() => {
        refreshSoon = undefined;
        refresh();
      }, 250);
  }
  const source = new EventSource('/dashboard/api/events');
  const types = ['pending', 'running', 'ready', 'stopping', 'completed', 'failed', 'expired', 'stopped', 'lost'];
  for (const type of [...types, 'withdrawn']) source.addEventListener(type, onEvent);
  source.addEventListener('open', () => ($('events-state').textContent = 'live'));
  source.addEventListener('error', () => ($('events-state').textContent = 'reconnecting…'));
  refresh();
  setInterval(refresh, 5000);
})();
