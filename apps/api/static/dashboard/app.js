(() => {
  const PAGE = 50;
  // The live table walks the session list: a stack of the cursors of the pages before this one.
  let cursors = [];
  let cursor = '';
  let nextCursor;
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
  // Request URLs are built from the page's origin, which never carries credentials: a page opened as
  // http://user:key@host/dashboard has them in its own URL, and fetch() refuses a URL that does
  // (a relative one would resolve to it). The browser sends the Basic credentials it has for the origin.
  const api = (path) => new URL(path, location.origin).href;
  /**
   * The JSON of a dashboard route. Fails with `cause` saying whose failure it is: `browser` (the
   * request could not be made or got no answer), `redis` (the API answered 503 unavailable) or `api`
   * (any other answer that is not a success).
   */
  async function readJson(path) {
    let res;
    try {
      res = await fetch(api(path), { cache: 'no-store', credentials: 'same-origin' });
    } catch (err) {
      throw new Error('the browser could not reach the API (' + err.message + ')', { cause: 'browser' });
    }
    let body;
    try {
      body = await res.json();
    } catch {
      body = undefined;
    }
    if (res.ok && body !== undefined) return body;
    const error = body && body.error ? body.error : undefined;
    const said = (error ? error.message : 'no readable answer') + ' (HTTP ' + res.status + ')';
    if (res.status === 503 && error && error.code === 'unavailable')
      throw new Error('Redis is unreachable: the API says ' + said, { cause: 'redis' });
    throw new Error('the API answered with an error: ' + said, { cause: 'api' });
  }
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
  // Who signed in, and what the key may do: the page shows only those buttons (the API checks again).
  let me = { actions: {}, antiForgeryToken: '' };
  async function loadMe() {
    try {
      me = await readJson('/dashboard/api/me');
    } catch {
      return;
    }
    $('whoami').textContent = 'signed in as ' + me.name;
    document.body.classList.toggle(
      'can-act',
      me.actions.stop || me.actions.lifetime || me.actions.drain || me.actions.open || me.actions.terminal,
    );
    $('stop-matching').hidden = !me.actions.stopMatching;
  }
  function actionState(text, outcome) {
    $('action-state').hidden = false;
    $('action-state').dataset.outcome = outcome;
    $('action-state').textContent = text;
  }
  /**
   * One of the dashboard's actions: a POST from this page with its anti-forgery token (another site's
   * page has neither the token nor a way to send it). The API's answer, or an error with its message.
   */
  async function act(action, body) {
    let res;
    try {
      res = await fetch(api('/dashboard/api/actions/' + action), {
        method: 'POST',
        cache: 'no-store',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json', 'x-xsrf-token': me.antiForgeryToken },
        body: JSON.stringify(body),
      });
    } catch (err) {
      throw new Error('the browser could not reach the API (' + err.message + ')');
    }
    let answer;
    try {
      answer = await res.json();
    } catch {
      answer = undefined;
    }
    if (res.ok) return answer;
    throw new Error(
      (answer && answer.error ? answer.error.message : 'no readable answer') + ' (HTTP ' + res.status + ')',
    );
  }
  /** Runs an action after `confirmation` (when given), says how it went, and reads the state again. */
  async function runAction(confirmation, action, body, done) {
    if (confirmation !== undefined && !window.confirm(confirmation)) return;
    try {
      const answer = await act(action, body);
      actionState(done(answer), 'done');
    } catch (err) {
      actionState('Not done: ' + err.message, 'failed');
    }
    refresh();
  }
  function button(label, name, onClick) {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = label;
    b.dataset.action = name;
    b.addEventListener('click', (e) => {
      e.stopPropagation();
      onClick();
    });
    return b;
  }
  function sessionActions(r) {
    const td = cell('', 'act');
    if (r.state === 'stopping') return td;
    // A ready session that announced its port: open it in a new tab, on the session's own origin (the tab
    // is opened at the click, so no pop-up blocker stops it, and learns nothing of this page).
    if (me.actions.open && r.state === 'running' && r.ready && r.port !== undefined)
      td.append(
        button('Open', 'open', async () => {
          const tab = window.open('about:blank', '_blank');
          if (tab) tab.opener = null;
          try {
            const answer = await act('open', { sessionId: r.sessionId });
            if (tab) tab.location.href = answer.url;
            actionState('Opened port ' + answer.port + ' of the session of ' + r.userId + ' in a new tab.', 'done');
          } catch (err) {
            if (tab) tab.close();
            actionState('Not done: ' + err.message, 'failed');
          }
        }),
      );
    if (me.actions.terminal && r.state === 'running') td.append(button('Terminal', 'terminal', () => openTerminal(r)));
    if (me.actions.stop)
      td.append(
        button('Stop', 'stop', () =>
          runAction(
            'Stop the session of ' + r.userId + ' (' + r.sessionId + ')?',
            'stop',
            { userId: r.userId, sessionId: r.sessionId },
            (a) => 'Session of ' + r.userId + ': ' + a.state + '.',
          ),
        ),
      );
    if (me.actions.lifetime)
      td.append(
        button('Lifetime…', 'lifetime', () => {
          const asked = window.prompt(
            (r.state === 'pending' ? 'Lifetime once started' : 'End it this many minutes from now') +
              ', for ' +
              r.userId +
              ' (minutes):',
            '60',
          );
          if (asked === null) return;
          const minutes = Number(asked.trim());
          if (!Number.isFinite(minutes) || minutes <= 0) {
            actionState('Not done: "' + asked + '" is not a number of minutes above 0.', 'failed');
            return;
          }
          runAction(
            undefined,
            'lifetime',
            { userId: r.userId, sessionId: r.sessionId, lifetimeMs: Math.round(minutes * 60000) },
            (a) =>
              'Session of ' +
              r.userId +
              (a.deadline
                ? ': now ends at ' + time(a.deadline) + '.'
                : ': lifetime once started, ' + minutes + ' min.'),
          );
        }),
      );
    return td;
  }
  // A terminal on a running session: xterm.js (loaded once, when first wanted) over the exec WebSocket
  // of the dashboard (Kubernetes' framing: a channel byte, then the bytes), with the page's
  // anti-forgery token. Its status is shown when the shell ends; a close without it was a drop.
  let terminal;
  function loadScript(src) {
    return new Promise((resolve, reject) => {
      const script = document.createElement('script');
      script.src = src;
      script.onload = () => resolve();
      script.onerror = () => reject(new Error('the terminal could not be loaded'));
      document.head.append(script);
    });
  }
  async function loadXterm() {
    if (window.Terminal && window.FitAddon) return;
    const link = document.createElement('link');
    link.rel = 'stylesheet';
    link.href = '/dashboard/xterm.css';
    document.head.append(link);
    // xterm.js, then its fit addon (which sizes the terminal to its panel).
    await loadScript('/dashboard/xterm.js');
    await loadScript('/dashboard/xterm-addon-fit.js');
  }
  function closeTerminal() {
    if (!terminal) return;
    terminal.sizer.disconnect();
    terminal.ws.close();
    terminal.term.dispose();
    terminal = undefined;
    $('terminal').hidden = true;
  }
  async function openTerminal(r) {
    closeTerminal();
    $('terminal').hidden = false;
    $('terminal-who').textContent = r.userId;
    $('terminal-state').textContent = 'connecting…';
    try {
      await loadXterm();
    } catch (err) {
      $('terminal-state').textContent = err.message;
      return;
    }
    const term = new window.Terminal({ convertEol: false, scrollback: 2000 });
    const fit = new window.FitAddon.FitAddon();
    term.loadAddon(fit);
    const screen = $('terminal-screen');
    screen.replaceChildren();
    term.open(screen);
    // As many columns and rows as the panel holds, now and whenever it changes size (each change is
    // sent to the session as a resize, below).
    fit.fit();
    const sizer = new ResizeObserver(() => fit.fit());
    sizer.observe(screen);
    const url = new URL('/dashboard/api/terminal', location.href);
    url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
    url.searchParams.set('sessionId', r.sessionId);
    url.searchParams.set('token', me.antiForgeryToken);
    url.searchParams.set('cols', String(term.cols));
    url.searchParams.set('rows', String(term.rows));
    const ws = new WebSocket(url, ['v5.channel.k8s.io']);
    ws.binaryType = 'arraybuffer';
    terminal = { ws, term, sizer };
    const encoder = new TextEncoder();
    const send = (channel, bytes) => {
      if (ws.readyState !== WebSocket.OPEN) return;
      const message = new Uint8Array(bytes.length + 1);
      message[0] = channel;
      message.set(bytes, 1);
      ws.send(message);
    };
    let status;
    ws.onopen = () => {
      $('terminal-state').textContent = 'connected to the session of ' + r.userId;
      term.focus();
    };
    ws.onmessage = (e) => {
      const data = new Uint8Array(e.data);
      if (data[0] === 1 || data[0] === 2) term.write(data.subarray(1));
      else if (data[0] === 3) status = JSON.parse(new TextDecoder().decode(data.subarray(1)));
    };
    ws.onclose = (e) => {
      $('terminal-state').textContent = status
        ? 'ended: exit code ' + status.exitCode
        : 'the connection closed' + (e.reason ? ': ' + e.reason : '') + ' (code ' + e.code + ')';
    };
    term.onData((text) => send(0, encoder.encode(text)));
    term.onResize(({ cols, rows }) => send(4, encoder.encode(JSON.stringify({ Width: cols, Height: rows }))));
  }
  $('terminal-close').addEventListener('click', closeTerminal);

  // A host's isolation in words, as `cq hosts` words it: "network none · files private · 0.5 CPU", then
  // what it leaves open, "(not isolated: network, files)", where the network is the host's or the files
  // are shared; such a cell is marked (class not-isolated).
  function isolationCell(i) {
    if (!i) return cell('', 'isolation');
    const cap = i.cpus === null ? 'no CPU cap' : i.cpus + (i.cpus > 1 ? ' CPUs' : ' CPU');
    const words = 'network ' + i.network + ' · files ' + i.filesystem + ' · ' + cap;
    // What it leaves open: [its word, what the sessions do].
    const open = [
      ...(i.network === 'host' ? [['network', "use the host's network"]] : []),
      ...(i.filesystem === 'shared' ? [['files', "see the host's files"]] : []),
    ];
    if (open.length === 0) return cell(words, 'isolation');
    const td = cell(words + ' (not isolated: ' + open.map((o) => o[0]).join(', ') + ')', 'isolation not-isolated');
    td.title = "This host's sessions are not kept apart from it: they " + open.map((o) => o[1]).join(' and ') + '.';
    return td;
  }
  function hostActions(w) {
    const td = cell('', 'act');
    if (me.actions.drain && w.state === 'active')
      td.append(
        button('Drain', 'drain', () =>
          runAction(
            'Drain ' + w.workerId + '? It takes no new sessions, lets its ' + w.busy + ' running end, then exits.',
            'drain',
            { workerId: w.workerId },
            () => w.workerId + ' is draining.',
          ),
        ),
      );
    return td;
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
    $('live-count').textContent = s.workers.reduce((n, w) => n + w.busy, 0);
    $('worker-count').textContent = s.workers.length;
    $('slot-count').textContent =
      s.workers.reduce((n, w) => n + w.busy, 0) + ' / ' + s.workers.reduce((n, w) => n + w.slots, 0);
    $('free-slots').textContent = s.freeSlots;
    nextCursor = s.live.next;
    $('page').textContent =
      s.live.rows.length === 0 && cursors.length === 0 && nextCursor === undefined
        ? 'none'
        : 'page ' + (cursors.length + 1) + ' · ' + s.live.rows.length + (nextCursor === undefined ? '' : ', more');
    $('prev').disabled = cursors.length === 0;
    $('next').disabled = nextCursor === undefined;
    fill($('live').tBodies[0], s.live.rows, (tr, r) => {
      tr.dataset.user = r.userId;
      selectable(tr, r.sessionId, r.state);
      tr.append(
        cell(r.userId, 'user'),
        cell(r.ready ? r.state + ' · ready' + (r.endpoint ? ' at ' + r.endpoint : '') : r.state, 'state s-' + r.state),
        cell(r.fence, 'fence'),
        cell(r.workerId, 'worker'),
        cell(r.pool, 'pool'),
        cell(
          Object.entries(r.labels || {})
            .map(([k, v]) => k + '=' + v)
            .join(' '),
          'labels',
        ),
        cell(r.state === 'pending' ? 'waits ' + ms(r.pendingLeftMs) : ms(r.leaseLeftMs), 'lease'),
        cell(ms(r.lifetimeLeftMs), 'lifetime'),
        cell(r.sessionId, 'id'),
        sessionActions(r),
      );
    });
    fill($('pools').tBodies[0], s.pools, (tr, p) => {
      tr.dataset.pool = p.pool;
      tr.append(
        cell(p.pool, 'pool'),
        cell(p.hosts, 'hosts'),
        cell(p.slots, 'slots'),
        cell(p.busy, 'busy'),
        cell(p.free, 'free'),
        cell(p.pending, 'pending'),
      );
    });
    fill($('workers').tBodies[0], s.workers, (tr, w) => {
      tr.dataset.worker = w.workerId;
      tr.append(
        cell(w.workerId, 'worker'),
        cell(w.pool, 'pool'),
        cell(w.state, 'state s-' + w.state),
        cell(w.containment, 'containment'),
        isolationCell(w.isolation),
        cell(ms(w.heartbeatAgeMs), 'age'),
        cell(w.busy + ' / ' + w.slots, 'slots'),
        cell(time(w.startedAt)),
        hostActions(w),
      );
    });
    fill($('ended').tBodies[0], s.ended, (tr, e) => {
      tr.dataset.user = e.userId;
      selectable(tr, e.sessionId, e.state);
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
    if (selected !== undefined) {
      const live = s.live.rows.find((r) => r.sessionId === selected.sessionId);
      const ended = s.ended.find((e) => e.sessionId === selected.sessionId);
      if (live) sessionIs(live.state, true);
      else if (ended) sessionIs(ended.state, false);
    }
  }
  // Webhooks, each with the newest attempt of its delivery log: the receiver's status, or why the
  // attempt failed, when, and when the next attempt is due. Read with the state, from their own route,
  // so a failure here never hides the sessions.
  function lastOutcome(last) {
    if (last === undefined) return 'no attempt yet';
    const what = last.status !== undefined ? 'HTTP ' + last.status : last.error || 'failed';
    const ok = last.status !== undefined && last.status >= 200 && last.status < 300;
    const state = ok ? 'delivered' : last.nextAttemptAt !== undefined ? 'retrying' : 'gave up';
    return state + ' · ' + what + ' · ' + last.type + ' (attempt ' + last.attempt + ')';
  }
  function outcomeClass(last) {
    if (last === undefined) return 'outcome';
    if (last.status !== undefined && last.status >= 200 && last.status < 300) return 'outcome s-completed';
    return last.nextAttemptAt !== undefined ? 'outcome s-expired' : 'outcome s-failed';
  }
  async function refreshWebhooks() {
    try {
      const body = await readJson('/dashboard/api/webhooks');
      fill($('webhooks').tBodies[0], body.webhooks, (tr, w) => {
        tr.dataset.webhook = w.id;
        const next = w.last && w.last.nextAttemptAt;
        tr.append(
          cell(w.id, 'id'),
          cell(w.url, 'url'),
          cell(w.events.length === 0 ? 'all' : w.events.join(', '), 'events'),
          cell(time(w.createdAt)),
          cell(lastOutcome(w.last), outcomeClass(w.last)),
          cell(w.last ? time(w.last.at) : ''),
          cell(next === undefined ? '' : time(next) + ' (in ' + ms(next - body.now) + ')', 'next'),
        );
      });
      $('webhooks-state').textContent = body.webhooks.length === 0 ? 'none' : '';
    } catch (err) {
      $('webhooks-state').textContent = 'not updated: ' + err.message;
    }
  }
  function filters() {
    return {
      userId: $('filter').value.trim(),
      state: $('f-state').value,
      workerId: $('f-host').value.trim(),
      pool: $('f-pool').value.trim(),
      label: $('f-label').value.trim(),
    };
  }
  async function refresh() {
    refreshWebhooks();
    const q = new URLSearchParams({ ...filters(), cursor, limit: String(PAGE) });
    try {
      const body = await readJson('/dashboard/api/state?' + q);
      render(body);
      lastOk = Date.now();
      $('banner').hidden = true;
      delete $('banner').dataset.cause;
      $('updated').textContent = 'updated ' + time(lastOk);
    } catch (err) {
      showProblem(err);
    }
  }
  // Whose failure it is, in words and in data-cause: browser, api or redis.
  function showProblem(err) {
    $('banner').hidden = false;
    $('banner').dataset.cause = err.cause || 'browser';
    $('banner').textContent = err.message + (lastOk ? '; showing data from ' + time(lastOk) : '');
  }
  // Redis's state, asked every second (/readyz: one PING on the API's side, nothing read): an outage
  // shows as soon as the API can tell it, not at the next refresh 5 s later, and its end as soon as
  // Redis answers again. The refresh alone says what else went wrong.
  let readyAsked = false;
  async function watchReady() {
    if (readyAsked) return;
    readyAsked = true;
    try {
      await readJson('/readyz');
      if ($('banner').dataset.cause === 'redis') refresh();
    } catch (err) {
      if (err.cause === 'redis') showProblem(err);
    } finally {
      readyAsked = false;
    }
  }
  // A filter changed: its walk starts again from the first page.
  for (const id of ['filter', 'f-host', 'f-pool', 'f-label'])
    $(id).addEventListener('input', () => {
      cursors = [];
      cursor = '';
      refresh();
    });
  $('f-state').addEventListener('change', () => {
    cursors = [];
    cursor = '';
    refresh();
  });
  // Stop every session the filters match, after a confirmation that says how many.
  $('stop-matching').addEventListener('click', async () => {
    const f = filters();
    const given = Object.entries(f).filter(([, v]) => v !== '');
    if (given.length === 0) {
      actionState('Set a filter first: stopping every session at once is not offered here.', 'failed');
      return;
    }
    let counted;
    try {
      counted = await readJson('/dashboard/api/matching?' + new URLSearchParams(f));
    } catch (err) {
      actionState('Not done: ' + err.message, 'failed');
      return;
    }
    const what = given.map(([k, v]) => k + ' ' + v).join(', ');
    if (counted.count === 0 && !counted.more) {
      actionState('No live session matches ' + what + '.', 'done');
      return;
    }
    // The count examines a bounded number of live sessions: when it stopped early (`more`), it says so.
    const early = counted.more
      ? ' The count stopped early, after the first ' + counted.examined + ' live sessions: more may match.'
      : '';
    runAction(
      (counted.count === 0
        ? 'Stop the sessions matching ' + what + '? None of those counted matches.'
        : 'Stop ' +
          (counted.more ? 'at least ' : '') +
          counted.count +
          ' session' +
          (counted.count === 1 ? '' : 's') +
          ' matching ' +
          what +
          '?') + early,
      'stop-matching',
      f,
      (a) =>
        'Stopped ' + a.stopping + ' of ' + a.matched + ' matching sessions' + (a.more ? '; more match: again.' : '.'),
    );
  });
  $('prev').addEventListener('click', () => {
    cursor = cursors.pop() ?? '';
    refresh();
  });
  $('next').addEventListener('click', () => {
    if (nextCursor === undefined) return;
    cursors.push(cursor);
    cursor = nextCursor;
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
    onSessionEvent(e);
    // The 50 of an opening arrive at once: one table for them all.
    if (drawEvents === undefined) drawEvents = requestAnimationFrame(showEvents);
    if (refreshSoon === undefined)
      refreshSoon = setTimeout(() => {
        refreshSoon = undefined;
        refresh();
      }, 250);
  }
  // The selected session's output: its newest lines, followed while it runs. The page asks
  // /dashboard/api/output (the logs route's JSON, read with the operator's key: the page holds none)
  // every second with the last line's id, as it polls its state; an EventSource could not carry the
  // key either. Session output is untrusted text: it is only ever set as textContent.
  const OUTPUT_SHOWN = 100;
  const FOLLOW_MS = 1000;
  const RETRY_MS = 5000;
  const finalTypes = ['completed', 'failed', 'expired', 'stopped', 'lost', 'withdrawn'];
  let selected;
  let outputRead = 0;
  let outputTimer;
  function selectable(tr, sessionId, state) {
    tr.dataset.session = sessionId;
    tr.dataset.state = state;
    tr.tabIndex = 0;
    const on = selected !== undefined && selected.sessionId === sessionId;
    tr.classList.toggle('selected', on);
    tr.setAttribute('aria-selected', String(on));
  }
  function markSelected() {
    for (const tr of document.querySelectorAll('#live tbody tr, #ended tbody tr')) {
      const on = selected !== undefined && tr.dataset.session === selected.sessionId;
      tr.classList.toggle('selected', on);
      tr.setAttribute('aria-selected', String(on));
    }
  }
  const clock = (iso) => {
    const d = new Date(iso);
    return isNaN(d)
      ? ''
      : d.toLocaleTimeString([], { hour12: false }) + '.' + String(d.getMilliseconds()).padStart(3, '0');
  };
  function span(className, text) {
    const el = document.createElement('span');
    el.className = className;
    el.textContent = text;
    return el;
  }
  function showOutputState() {
    if (selected === undefined) return;
    const o = selected.output;
    const parts = [selected.state || ''];
    if (o.gone) parts.push(o.count > 0 ? 'no output kept any more' : 'no output kept');
    else if (o.count === 0 && o.read) parts.push(selected.live ? 'no output yet' : 'no output');
    else if (o.read) {
      parts.push(selected.live ? 'following live' : 'ended: all its kept output');
      parts.push(
        o.count > OUTPUT_SHOWN
          ? 'the newest ' + OUTPUT_SHOWN + ' of ' + o.count + ' lines'
          : o.count + (o.count === 1 ? ' line' : ' lines'),
      );
    } else parts.push('reading…');
    if (o.droppedBytes > 0) parts.push(o.droppedBytes + ' bytes dropped');
    $('output-state').textContent = parts.filter((p) => p !== '').join(' · ');
    $('output-state').dataset.state = o.gone ? 'gone' : selected.live ? 'live' : 'ended';
  }
  function sessionIs(state, live) {
    if (selected === undefined) return;
    const wasLive = selected.live;
    selected.state = state;
    selected.live = live;
    // It ended: read once more for its last lines (the poll then stops). Until that read is in, the panel
    // says it is reading, not that it shows all the kept output.
    const lastRead = wasLive && !live && !selected.output.gone;
    if (lastRead) selected.output.read = false;
    showOutputState();
    if (lastRead) readOutputSoon(0);
  }
  function onSessionEvent(e) {
    if (selected === undefined || e.sessionId !== selected.sessionId) return;
    sessionIs(e.type, !finalTypes.includes(e.type));
  }
  function appendLines(lines) {
    const box = $('output-lines');
    const following = box.childElementCount === 0 || box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    for (const l of lines) {
      const row = document.createElement('div');
      row.className = 'line ' + (l.stream === 'stderr' ? 'stderr' : 'stdout');
      row.dataset.stream = l.stream === 'stderr' ? 'stderr' : 'stdout';
      const at = span('at', clock(l.at));
      at.title = String(l.at);
      row.append(at, span('stream', row.dataset.stream), span('text', String(l.line)));
      box.append(row);
    }
    while (box.childElementCount > OUTPUT_SHOWN) box.firstElementChild.remove();
    if (following) box.scrollTop = box.scrollHeight;
  }
  function readOutputSoon(ms) {
    clearTimeout(outputTimer);
    const read = outputRead;
    outputTimer = setTimeout(() => readOutput(read), ms);
  }
  async function readOutput(read) {
    const s = selected;
    const o = s.output;
    const q = new URLSearchParams({ userId: s.userId, sessionId: s.sessionId, tail: String(OUTPUT_SHOWN) });
    if (o.after !== undefined) q.set('after', o.after);
    let next = FOLLOW_MS;
    try {
      let res;
      try {
        res = await fetch(api('/dashboard/api/output?' + q), { cache: 'no-store', credentials: 'same-origin' });
      } catch (err) {
        throw new Error('the API does not answer (' + err.message + ')');
      }
      let body;
      try {
        body = await res.json();
      } catch {
        body = undefined;
      }
      if (read !== outputRead) return;
      if (res.status === 404) {
        // Never kept, or no longer: nothing to follow.
        $('output-error').hidden = true;
        o.gone = true;
        showOutputState();
        return;
      }
      if (!res.ok || body === undefined)
        throw new Error(
          (body && body.error ? body.error.message : 'no readable answer') + ' (HTTP ' + res.status + ')',
        );
      $('output-error').hidden = true;
      o.read = true;
      appendLines(body.lines);
      o.count += body.skipped + body.lines.length;
      o.droppedBytes = body.droppedBytes;
      if (body.next !== undefined) o.after = body.next;
      showOutputState();
      if (body.more) next = 0;
      else if (!s.live && body.lines.length === 0) return; // ended, and everything kept is shown
    } catch (err) {
      if (read !== outputRead) return;
      $('output-error').hidden = false;
      $('output-error').textContent = 'The output could not be read: ' + err.message;
      next = RETRY_MS;
    }
    readOutputSoon(next);
  }
  function select(tr) {
    const sessionId = tr.dataset.session;
    if (!sessionId || (selected !== undefined && selected.sessionId === sessionId)) return;
    const live = tr.closest('table').id === 'live';
    selected = {
      userId: tr.dataset.user,
      sessionId,
      state: tr.dataset.state,
      live: live && !finalTypes.includes(tr.dataset.state),
      output: { after: undefined, count: 0, droppedBytes: 0, read: false, gone: false },
    };
    outputRead++;
    clearTimeout(outputTimer);
    $('output').dataset.session = sessionId;
    $('output-who').textContent = '· ' + selected.userId + ' · ' + sessionId;
    $('output-error').hidden = true;
    $('output-lines').replaceChildren();
    markSelected();
    showOutputState();
    readOutput(outputRead);
  }
  for (const id of ['live', 'ended']) {
    const tbody = $(id).tBodies[0];
    tbody.addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      if (tr) select(tr);
    });
    tbody.addEventListener('keydown', (e) => {
      if (e.target.closest('button')) return;
      const tr = e.target.closest('tr');
      if (tr && (e.key === 'Enter' || e.key === ' ')) {
        e.preventDefault();
        select(tr);
      }
    });
  }

  const source = new EventSource(api('/dashboard/api/events'));
  const types = ['pending', 'running', 'ready', 'stopping', 'completed', 'failed', 'expired', 'stopped', 'lost'];
  for (const type of [...types, 'withdrawn']) source.addEventListener(type, onEvent);
  source.addEventListener('open', () => ($('events-state').textContent = 'live'));
  source.addEventListener('error', () => ($('events-state').textContent = 'reconnecting…'));
  loadMe().then(refresh);
  setInterval(refresh, 5000);
  setInterval(watchReady, 1000);
})();
