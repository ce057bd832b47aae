// delayq dashboard: plain JavaScript, no libraries. It polls the API (/v1,
// with the bearer token kept in sessionStorage) and draws small canvas
// charts from /v1/dashboard/series (live, this process) and
// /v1/dashboard/minutes (a topic's last 24 hours). Each page has its URL
// (a hash route: #/, #/topics/T, #/topics/T/jobs?state=..., a job, #/dead,
// #/workers, #/schedules, #/recovery), so back, forward and reload keep
// it. Errors are shown on the page, never thrown to the console.
'use strict';

(() => {
  const conf = document.body.dataset;
  const auth = conf.auth === 'true';
  const readOnly = conf.readOnly === 'true';
  const hasOrders = conf.orders === 'true';
  const hasWorkers = conf.workers === 'true';
  const staleAfterMs = Number(conf.staleAfterMs) || 60000;
  const TOKEN_KEY = 'delayq.token';
  const REFRESH_MS = 2000;
  const DEAD_PAGE = 50; // the dead-letters page shows each topic's newest DEAD_PAGE

  const $ = (sel) => document.querySelector(sel);
  const fmtInt = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));

  class Unauthorized extends Error {}

  // api calls the API and returns its JSON answer; it throws Unauthorized
  // on 401, and an Error with the API's message on any other failure.
  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = 'Bearer ' + token;
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const resp = await fetch(path, init);
    let data = null;
    try {
      data = await resp.json();
    } catch (_) {
      data = null;
    }
    if (resp.status === 401) throw new Unauthorized((data && data.error && data.error.message) || 'unauthorized');
    if (!resp.ok) {
      const e = new Error((data && data.error && data.error.message) || method + ' ' + path + ': HTTP ' + resp.status);
      e.status = resp.status;
      e.code = data && data.error && data.error.code;
      e.data = data;
      throw e;
    }
    return data;
  }

  // el builds an element: el('td', {class: 'num', dataset: {field: 'due'}}, 'text', child...).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'dataset') Object.assign(e.dataset, v);
      else if (k === 'text') e.textContent = v;
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children) e.append(c);
    return e;
  }

  function ago(ms) {
    const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
    if (s < 60) return s + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return (s / 3600).toFixed(1) + ' h ago';
    return (s / 86400).toFixed(1) + ' d ago';
  }

  function duration(ms) {
    if (ms == null) return '–';
    if (ms < 1) return ms.toFixed(2) + ' ms';
    if (ms < 1000) return ms.toFixed(ms < 10 ? 1 : 0) + ' ms';
    if (ms < 60000) return (ms / 1000).toFixed(1) + ' s';
    return (ms / 60000).toFixed(1) + ' min';
  }

  // spanText shows a configured span (ms) in its largest whole unit.
  function spanText(ms) {
    if (ms % 3600000 === 0) return ms / 3600000 + ' h';
    if (ms % 60000 === 0) return ms / 60000 + ' min';
    if (ms % 1000 === 0) return ms / 1000 + ' s';
    return ms + ' ms';
  }

  // Times are shown in UTC, one format everywhere, as the CLI prints them:
  // 2026-12-03 20:05:52Z (utc), 20:05:52Z (clock).
  const utc = (d) => d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  const clock = (d) => utc(d).slice(11);

  function setStatus(text) {
    $('#status').textContent = text;
  }

  function showError(msg) {
    const p = $('#error');
    p.textContent = msg || '';
    p.hidden = !msg;
  }

  // ---- charts ---------------------------------------------------------

  const COLORS = { done: '#16a34a', enq: '#2563eb', avg: '#7c3aed', max: '#ea580c', over: '#dc2626', flight: '#9ca3af' };

  // draw plots lines ({values, color}) on canvas over a window of points
  // slots, right-aligned, with the largest value written in a corner.
  function draw(canvas, lines, points, fmt, span) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || 220;
    const h = canvas.clientHeight || 44;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext('2d');
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    let top = 0;
    for (const l of lines) for (const v of l.values) if (v != null && v > top) top = v;
    const scale = top > 0 ? top * 1.15 : 1;
    const slots = Math.max(points, 2);
    const step = w / (slots - 1);
    ctx.lineWidth = 1.5;
    ctx.lineJoin = 'round';
    for (const l of lines) {
      const off = slots - l.values.length;
      ctx.strokeStyle = l.color;
      ctx.beginPath();
      let pen = false;
      const dots = [];
      l.values.forEach((v, i) => {
        if (v == null) {
          pen = false;
          return;
        }
        const x = (off + i) * step;
        const y = h - 2 - (v / scale) * (h - 12);
        if (pen) ctx.lineTo(x, y);
        else ctx.moveTo(x, y);
        if (!pen && l.values[i + 1] == null) dots.push([x, y]); // a lone point: no segment shows it
        pen = true;
      });
      ctx.stroke();
      ctx.fillStyle = l.color;
      for (const [x, y] of dots) ctx.fillRect(x - 1.5, y - 1.5, 3, 3);
    }
    ctx.strokeStyle = '#e3e6eb';
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(0, h - 1.5);
    ctx.lineTo(w, h - 1.5);
    ctx.stroke();
    ctx.fillStyle = '#6b7280';
    ctx.font = '10px system-ui, sans-serif';
    ctx.fillText(fmt(top), 2, 9);
    ctx.textAlign = 'right';
    ctx.fillText(span, w - 2, 9);
    ctx.textAlign = 'left';
  }

  const rate = (v) => (v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)) + '/s';

  // ---- topics ---------------------------------------------------------

  const rows = new Map(); // topic -> {tr, cells, charts}
  const FIELDS = ['due', 'due_now', 'in_flight', 'dead', 'oldest_overdue_ms'];

  function topicRow(topic) {
    let r = rows.get(topic);
    if (r) return r;
    const cells = {};
    const badge = el('span', { class: 'badge' });
    const relay = el('div', { class: 'relay-line', hidden: true });
    const target = el('div', { class: 'target-line', hidden: true });
    const tr = el('tr', { dataset: { topic } }, el('td', { class: 'mono' },
      el('a', { class: 'topic-link', href: topicHash(topic), title: 'open ' + topic + ': its jobs, charts and settings', text: topic }), badge, relay, target));
    for (const f of FIELDS) {
      cells[f] = el('td', { class: 'num', dataset: { field: f } });
      tr.append(cells[f]);
    }
    cells.sql_beyond = el('td', { class: 'num', dataset: { field: 'sql_beyond' } });
    tr.append(cells.sql_beyond);
    const charts = {};
    for (const c of ['throughput', 'backlog']) {
      charts[c] = el('canvas', { class: 'chart', width: 150, height: 40, dataset: { chart: c } });
      tr.append(el('td', {}, charts[c]));
    }
    r = { tr, cells, charts, badge, relay, target };
    rows.set(topic, r);
    return r;
  }

  function renderTopics(list, series) {
    const tbody = $('#topics tbody');
    const seen = new Set();
    const byTopic = new Map((series ? series.topics : []).map((s) => [s.topic, s]));
    const points = series ? Math.round(series.history_ms / series.every_ms) : 150;
    const span = 'last ' + duration(series ? series.history_ms : 300000);
    for (const t of list) {
      seen.add(t.topic);
      const r = topicRow(t.topic);
      for (const f of FIELDS) {
        const v = t[f] || 0;
        const c = r.cells[f];
        c.dataset.value = String(v);
        c.textContent = f === 'oldest_overdue_ms' ? (v > 0 ? duration(v) : '–') : fmtInt(v);
        c.classList.toggle('alert', (f === 'due_now' || f === 'dead' || f === 'oldest_overdue_ms') && v > 0);
      }
      const s = byTopic.get(t.topic);
      renderDurability(r, t, s);
      renderPause(r, t);
      renderTarget(r, s && s.target);
      renderRateLimit(r, t.rate_limit);
      if (s) {
        draw(r.charts.throughput, [{ values: s.enqueued, color: COLORS.enq }, { values: s.completed, color: COLORS.done }], points, rate, span);
        draw(r.charts.backlog, [{ values: s.in_flight, color: COLORS.flight }, { values: s.overdue, color: COLORS.over }], points, fmtInt, span);
      }
    }
    for (const [topic, r] of rows) {
      if (!seen.has(topic)) {
        r.tr.remove();
        rows.delete(topic);
      }
    }
    const sorted = [...rows.keys()].sort();
    sorted.forEach((topic) => tbody.append(rows.get(topic).tr)); // keeps order, moves only what moved
    $('#no-topics').hidden = list.length > 0;
  }

  // renderPause shows a paused topic's badge (who paused it and when in its
  // title) and, unless read-only, its Pause / Resume button, which the
  // confirmation dialog guards (ACTIONS.pause, ACTIONS.resume).
  function renderPause(r, t) {
    if (!r.pauseBadge) {
      r.pauseBadge = el('span', { class: 'badge paused', text: 'paused', hidden: true });
      r.badge.after(r.pauseBadge); // after the durability badge: tests find that one first
      if (!readOnly) {
        r.pauseButton = el('button', { type: 'button', class: 'pause-button', dataset: { topic: t.topic } });
        r.pauseBadge.after(r.pauseButton);
      }
    }
    r.tr.dataset.paused = String(!!t.paused);
    r.pauseBadge.hidden = !t.paused;
    // A topic with jobs due and no live worker handling it (GET /v1/topics'
    // unconsumed, from the workers' registry).
    if (!r.noWorkerBadge) {
      r.noWorkerBadge = el('span', { class: 'badge no-worker', text: 'no worker', hidden: true,
        title: 'jobs are due and no running worker handles this topic (delayq workers): they wait until one does' });
      r.pauseBadge.after(r.noWorkerBadge);
    }
    r.tr.dataset.unconsumed = String(!!t.unconsumed);
    r.noWorkerBadge.hidden = !t.unconsumed;
    r.pauseBadge.title = t.paused
      ? 'paused ' + (t.paused_at ? ago(t.paused_at) + ' ' : '') + 'by ' + (t.paused_by || 'unknown') + ': no worker claims its jobs until it is resumed'
      : '';
    if (r.pauseButton) {
      r.pauseButton.dataset.action = t.paused ? 'resume' : 'pause';
      r.pauseButton.textContent = t.paused ? 'Resume' : 'Pause';
    }
  }

  // renderTarget shows where an HTTP-target topic's jobs go (method and
  // URL without its query) and its latest failures, newest first: status or
  // why there was no answer, the job and when. The series never carries a
  // payload, an answer's body or the secret.
  function renderTarget(r, tg) {
    r.target.hidden = !tg;
    if (!tg) return;
    const failures = el('ul', { class: 'target-failures' });
    for (const f of tg.failures) {
      failures.append(el('li', { dataset: { status: String(f.status), class: f.class }, title: new Date(f.at).toISOString() },
        el('span', { class: 'alert', text: f.reason }),
        ' · ' + f.job_id + ' (attempt ' + f.attempt + ') · ' + ago(f.at)));
    }
    r.target.replaceChildren(
      '→ ', el('span', { dataset: { target: 'method' }, text: tg.method }), ' ',
      el('span', { dataset: { target: 'url' }, text: tg.url }),
      tg.failures.length ? failures : el('div', { class: 'note', text: 'no failures' }),
    );
  }

  // renderRateLimit shows a topic's rate limit (handler starts per second
  // across the cluster, and the burst) under its name; none, nothing. The
  // line is made on first use, so the row's layout is left alone.
  function renderRateLimit(r, limit) {
    if (!r.rate) {
      r.rate = el('div', { class: 'rate-line', hidden: true });
      r.tr.firstChild.append(r.rate);
    }
    r.rate.hidden = !limit;
    if (!limit) return;
    r.rate.replaceChildren(
      'rate limit: ', el('span', { dataset: { rate: 'per_second' }, text: fmtInt(limit.per_second) }), '/s · burst ',
      el('span', { dataset: { rate: 'burst' }, text: fmtInt(limit.burst) }),
    );
    r.rate.title = 'at most this many handler starts per second across every worker; held-back jobs stay due, in order';
  }

  // renderDurability shows a topic's durability badge and, for a durable
  // topic, its waiting jobs in SQL beyond the horizon (all of them in the
  // title) and the relay's pushes of its jobs.
  function renderDurability(r, t, s) {
    const durability = t.durability || 'redis';
    const durable = durability === 'durable';
    r.badge.textContent = durability;
    r.badge.className = 'badge dur-' + durability;
    r.badge.dataset.durability = durability;
    r.badge.title = durable
      ? 'durable: every job is committed to SQL before its enqueue answers; Redis holds the near future'
      : 'redis: waiting jobs are kept in Redis (and its persistence)';
    const c = r.cells.sql_beyond;
    if (durable && t.sql) {
      c.dataset.value = String(t.sql.beyond_horizon);
      c.dataset.waiting = String(t.sql.waiting);
      c.textContent = fmtInt(t.sql.beyond_horizon);
      c.title = fmtInt(t.sql.waiting) + ' waiting in SQL in all, counted ' + ago(t.sql.counted_at);
    } else {
      delete c.dataset.value;
      delete c.dataset.waiting;
      c.textContent = '–';
      c.title = durable ? 'not counted: this process runs no relay' : 'a redis topic: nothing waits in SQL';
    }
    r.relay.hidden = !durable;
    if (!durable) return;
    const n = { loaded: s ? s.loaded : 0, relayed: s ? s.relayed : 0, reloaded: s ? s.reloaded : 0 };
    r.relay.replaceChildren(
      'relay: ',
      el('span', { dataset: { relay: 'loaded' }, text: fmtInt(n.loaded) }), ' loaded · ',
      el('span', { dataset: { relay: 'relayed' }, class: n.relayed > 0 ? 'alert' : null, text: fmtInt(n.relayed),
        title: 'jobs whose push after their commit was lost (the enqueuer died, Redis was down or lost them)' }), ' relayed · ',
      el('span', { dataset: { relay: 'reloaded' }, text: fmtInt(n.reloaded) }), ' reloaded',
    );
  }

  function renderRelay(series) {
    const relay = series && series.relay;
    $('#relay').hidden = !relay;
    if (!relay) return;
    const last = $('#relay-last-ok');
    last.title = relay.last_pass ? 'last pass ' + new Date(relay.last_pass).toISOString() : '';
    if (relay.passes === 0) {
      // One process at a time holds the relay lock and passes.
      last.textContent = 'none by this process yet (another process may hold the relay lock)';
      last.classList.remove('alert');
    } else {
      last.textContent = ago(relay.last_ok);
      // The alert's threshold (deployments/prometheus/alerts.yml).
      last.classList.toggle('alert', Date.now() - relay.last_ok > Math.max(300 * relay.every_ms, 60000));
    }
    $('#relay-passes').textContent = fmtInt(relay.passes);
    $('#relay-failed').textContent = fmtInt(relay.failed);
    $('#relay-failed').classList.toggle('alert', relay.failed > 0);
  }

  // ---- dead letters ---------------------------------------------------
  //
  // #/dead: each topic's newest DEAD_PAGE dead jobs, with a checkbox each;
  // the selection (kept across refreshes, as topic + id) is requeued or
  // deleted one job at a time through the per-job routes.

  let deadKey = '';
  const selected = new Set(); // JSON [topic, id] of the checked dead jobs
  const selKey = (topic, id) => JSON.stringify([topic, id]);

  async function loadDead(topics) {
    const withDead = topics.filter((t) => t.dead > 0);
    const total = withDead.reduce((n, t) => n + t.dead, 0);
    $('#nav-dead').hidden = total === 0;
    $('#nav-dead').textContent = fmtInt(total);
    const pages = await Promise.all(
      withDead.map((t) => api('GET', '/v1/topics/' + encodeURIComponent(t.topic) + '/dead?limit=' + DEAD_PAGE)),
    );
    const key = JSON.stringify(pages.map((p) => [p.topic, p.total, p.jobs.map((j) => [j.id, j.died_at, j.last_error])]));
    if (key === deadKey) return;
    deadKey = key;
    const shown = new Set();
    const box = $('#dead');
    box.replaceChildren();
    for (const p of pages) {
      const h = el('h3', { dataset: { topic: p.topic } },
        el('a', { class: 'mono topic-link', href: jobsHash(p.topic, { state: 'dead' }), text: p.topic }), ' ' + fmtInt(p.total) + ' dead');
      if (!readOnly) {
        h.append(
          el('button', { type: 'button', dataset: { action: 'requeue-all', topic: p.topic }, text: 'Requeue all' }),
          el('button', { type: 'button', class: 'danger', dataset: { action: 'purge', topic: p.topic }, text: 'Purge all' }),
        );
      }
      const tbody = el('tbody');
      for (const j of p.jobs) {
        const k = selKey(p.topic, j.id);
        shown.add(k);
        const tr = el('tr', { dataset: { topic: p.topic, id: j.id } });
        if (!readOnly) {
          const check = el('input', { type: 'checkbox', class: 'dead-select', 'aria-label': 'select ' + j.id, dataset: { topic: p.topic, id: j.id } });
          check.checked = selected.has(k);
          tr.append(el('td', { class: 'check' }, check));
        }
        tr.append(
          el('td', { class: 'mono' }, el('a', { class: 'job-link', href: jobHash(p.topic, j.id), text: j.id })),
          el('td', { text: j.died_at ? ago(j.died_at) : '–', title: j.died_at ? utc(new Date(j.died_at)) : '' }),
          el('td', { class: 'num', text: j.attempt + '/' + j.max_attempts }),
          el('td', { class: 'err', text: j.last_error || '', title: j.last_error || '' }),
        );
        const actions = el('td', { class: 'row-actions' });
        if (!readOnly) {
          actions.append(
            el('button', { type: 'button', dataset: { action: 'requeue', topic: p.topic, id: j.id }, text: 'Requeue' }),
            el('button', { type: 'button', class: 'danger', dataset: { action: 'delete-dead', topic: p.topic, id: j.id }, text: 'Delete' }),
          );
        }
        tr.append(actions);
        tbody.append(tr);
      }
      const more = p.total > p.jobs.length
        ? el('p', { class: 'note' }, 'and ' + fmtInt(p.total - p.jobs.length) + ' more: ', el('a', { href: jobsHash(p.topic, { state: 'dead' }), text: 'page through them' }))
        : '';
      const head = el('tr');
      if (!readOnly) head.append(el('th', { class: 'check' }));
      head.append(el('th', { text: 'job' }), el('th', { text: 'died' }), el('th', { class: 'num', text: 'attempts' }), el('th', { text: 'last error' }), el('th'));
      box.append(el('div', { class: 'dead-topic', dataset: { topic: p.topic } }, h, el('table', {}, el('thead', {}, head), tbody), more));
    }
    for (const k of [...selected]) if (!shown.has(k)) selected.delete(k); // gone: requeued, deleted, purged
    $('#no-dead').hidden = pages.length > 0;
    renderSelection();
  }

  // renderSelection shows how many dead jobs are selected and enables the
  // bulk buttons.
  function renderSelection() {
    const all = $('#dead-select-all');
    if (!all) return; // read-only: no selection
    const boxes = [...document.querySelectorAll('#dead input.dead-select')];
    const n = selected.size;
    $('#dead-selected').textContent = fmtInt(n) + ' selected';
    all.checked = boxes.length > 0 && boxes.every((b) => b.checked);
    all.indeterminate = n > 0 && !all.checked;
    all.disabled = boxes.length === 0;
    for (const id of ['#dead-bulk-requeue', '#dead-bulk-delete']) {
      const b = $(id);
      if (b) b.disabled = n === 0;
    }
  }

  document.addEventListener('change', (ev) => {
    const t = ev.target;
    if (t.matches('input.dead-select')) {
      const k = selKey(t.dataset.topic, t.dataset.id);
      if (t.checked) selected.add(k);
      else selected.delete(k);
      renderSelection();
    } else if (t.id === 'dead-select-all') {
      for (const b of document.querySelectorAll('#dead input.dead-select')) {
        b.checked = t.checked;
        const k = selKey(b.dataset.topic, b.dataset.id);
        if (t.checked) selected.add(k);
        else selected.delete(k);
      }
      renderSelection();
    }
  });

  // bulk runs one call per selected dead job, one after another, and says
  // how many succeeded and why the others failed.
  async function bulk(verb, call) {
    const jobs = [...selected].map((k) => JSON.parse(k));
    let ok = 0;
    const failed = [];
    for (const [topic, id] of jobs) {
      try {
        await call(topic, id);
        ok++;
        selected.delete(selKey(topic, id));
      } catch (e) {
        if (e instanceof Unauthorized) throw e;
        failed.push(topic + '/' + id + ': ' + e.message);
      }
    }
    const msg = verb + ' ' + ok + ' of ' + jobs.length + ' selected dead jobs' + (failed.length ? '; failed: ' + failed.join('; ') : '');
    const p = $('#dead-result');
    p.textContent = msg;
    p.hidden = false;
    p.classList.toggle('error', failed.length > 0);
    return msg;
  }

  // ---- ledger and recovery --------------------------------------------

  async function loadLedger(series) {
    $('#ledger-rows').textContent = series && series.ledger ? fmtInt(series.ledger.rows) : '–';
    $('#ledger-stale').textContent = series && series.ledger ? fmtInt(series.ledger.stale) : '–';
    const page = await api('GET', '/v1/ledger/stale?limit=20&older_than=' + (Date.now() - staleAfterMs));
    const tbody = $('#stale tbody');
    tbody.replaceChildren(
      ...page.rows.map((r) =>
        el('tr', { dataset: { topic: r.topic, id: r.job_id } },
          el('td', { class: 'mono', text: r.topic }), el('td', { class: 'mono', text: r.job_id }),
          el('td', { class: 'num', text: String(r.attempt) }), el('td', { class: 'mono', text: r.worker }),
          el('td', { text: ago(r.lease_until) })),
      ),
    );
  }

  let recoveryAvailable = true;

  async function loadReports() {
    let data;
    try {
      data = await api('GET', '/v1/recovery/reports');
    } catch (e) {
      if (e.code === 'not_configured') {
        recoveryAvailable = false;
        const run = $('#run-recovery');
        if (run) run.hidden = true;
        $('#no-reports').textContent = 'This process runs no recoverer.';
        $('#no-reports').hidden = false;
        return;
      }
      throw e;
    }
    const reports = (data.reports || []).slice(0, 8);
    $('#reports tbody').replaceChildren(
      ...reports.map((r) => {
        const loss = (r.data_loss || []).map((l) => l.topic).join(', ');
        let trigger = r.trigger + (r.dry_run ? ' (dry run)' : '') + (r.skipped ? ' (skipped: lock held)' : '');
        return el('tr', {},
          el('td', { text: utc(new Date(r.start)), title: r.start }), el('td', { text: trigger }),
          el('td', { class: 'num', text: fmtInt(r.scanned) }), el('td', { class: 'num', text: fmtInt(r.reenqueued) }),
          el('td', { class: 'num' + (r.errors > 0 ? ' alert' : ''), text: fmtInt(r.errors), title: (r.error_messages || []).join('\n') }),
          el('td', { class: loss ? 'alert' : '', text: loss || '–' }));
      }),
    );
    $('#no-reports').hidden = reports.length > 0;
    const run = $('#run-recovery');
    if (run) run.hidden = readOnly || !recoveryAvailable;
  }

  // ---- orders ---------------------------------------------------------

  async function loadOrders() {
    const s = await api('GET', '/v1/orders/summary');
    $('#orders-created').textContent = fmtInt(s.orders.created);
    $('#orders-pending').textContent = fmtInt(s.orders.pending_payment);
    $('#orders-paid').textContent = fmtInt(s.orders.paid);
    $('#orders-closed').textContent = fmtInt(s.orders.closed);
    const rc = s.recent_closes;
    $('#orders-late').textContent = rc.closed > 0 ? duration(rc.avg_late_ms) + ' avg, ' + duration(rc.max_late_ms) + ' max' : 'no close';
    $('#stock tbody').replaceChildren(
      ...s.stock.map((k) => el('tr', { dataset: { sku: k.sku } }, el('td', { class: 'mono', text: k.sku }), el('td', { class: 'num', text: fmtInt(k.stock) }))),
    );
  }

  // ---- periodic schedules ---------------------------------------------

  // loadSchedules fills the schedules page from GET /v1/schedules; with
  // none configured it says so.
  async function loadSchedules() {
    const data = await api('GET', '/v1/schedules');
    const list = data.schedules || [];
    $('#no-schedules').hidden = list.length > 0;
    $('#schedule-list').hidden = list.length === 0;
    $('#schedule-list tbody').replaceChildren(
      ...list.map((s) => {
        const inMs = s.next_run - Date.now();
        const next = utc(new Date(s.next_run)) + (inMs > 0 ? ' (in ' + duration(inMs) + ')' : '');
        return el('tr', { dataset: { schedule: s.name } },
          el('td', { class: 'mono', text: s.name }),
          el('td', { class: 'mono', text: s.spec + (s.location && s.location !== 'UTC' ? ' (' + s.location + ')' : '') }),
          el('td', { class: 'mono', text: s.topic + (s.priority > 0 ? ' (priority ' + s.priority + ')' : '') }),
          el('td', { class: 'next-run', text: next, title: new Date(s.next_run).toISOString() }),
          el('td', { text: s.last_tick > 0 ? ago(s.last_tick) : 'never', title: s.last_job_id || '' }),
          el('td', { text: s.missed }));
      }),
    );
  }

  // ---- workers ----------------------------------------------------------

  // loadWorkers fills the workers page from GET /v1/workers: each process,
  // live or gone, with its topics' jobs held and concurrency.
  async function loadWorkers() {
    const data = await api('GET', '/v1/workers');
    const list = data.workers || [];
    $('#no-workers').hidden = list.length > 0;
    $('#workers').hidden = list.length === 0;
    $('#workers tbody').replaceChildren(...list.map((w) => el('tr', { dataset: { worker: w.id, state: w.state } },
      el('td', { class: 'mono', text: w.id }),
      el('td', { class: w.state === 'live' ? '' : 'alert', text: w.state }),
      el('td', { class: 'mono', text: w.host }),
      el('td', { class: 'num', text: String(w.pid) }),
      el('td', { text: w.version || '–' }),
      el('td', { text: when(w.started_at) }),
      el('td', { text: ago(w.heartbeat), title: utc(new Date(w.heartbeat)) }),
      el('td', { class: w.ledger_ok ? 'ledger-ok' : 'alert', text: w.ledger_ok ? 'ok' : 'unreachable',
        title: 'whether its SQL ledger answered its last ping' }),
      el('td', { class: 'mono' }, ...(w.topics || []).map((t, i) => el('span', { class: 'worker-topic' },
        (i ? ', ' : ''), el('a', { href: topicHash(t.topic), text: t.topic }), ' ' + t.in_flight + '/' + t.concurrency))),
      el('td', { class: 'mono' }, ...poolCells(w)),
    )));
  }

  // poolCells are a worker's shared pools of handlers (worker.pools): each
  // with the jobs its topics hold, its size, and its topics by weight; a
  // dash when it has none.
  function poolCells(w) {
    const pools = w.pools || [];
    if (!pools.length) return ['–'];
    return pools.map((p, i) => el('span', { class: 'worker-pool', dataset: { pool: p.name } },
      (i ? '; ' : '') + p.name + ' ' + p.in_flight + '/' + p.concurrency + ': ' +
      (w.topics || []).filter((t) => t.pool === p.name).map((t) => t.topic + ' ×' + t.weight).join(', ')));
  }

  // ---- one topic's page -------------------------------------------------
  //
  // #/topics/T: its settings (durability, pause, rate limit, target,
  // workers), its last 24 hours per minute (GET /v1/dashboard/minutes,
  // read again every minute) and, below, the job browser with its states
  // as tabs (finished: the history).

  let lastSeries = null; // the latest /v1/dashboard/series, for targets
  const minutesCache = new Map(); // topic -> {at, data}

  function renderTopicPage(topic, stats) {
    $('#topic-name').textContent = topic;
    $('#topic-paused').hidden = !stats.paused;
    $('#topic-no-worker').hidden = !stats.unconsumed;
    const f = $('#topic-settings');
    f.replaceChildren();
    const durability = stats.durability || 'redis';
    field(f, 'durability', durability === 'durable'
      ? 'durable: every job is committed to SQL first; Redis holds the next queue.horizon'
      : 'redis: waiting jobs are kept in Redis (and its persistence)');
    field(f, 'state', stats.paused
      ? 'paused' + (stats.paused_at ? ' at ' + utc(new Date(stats.paused_at)) : '') + ' by ' + (stats.paused_by || 'unknown')
      : 'running');
    const w = stats.unique_for_ms;
    field(f, 'uniqueness window', w
      ? spanText(w) + ': a finished job\'s id stays taken that long, and an enqueue of it is a duplicate'
      : 'none: a finished job\'s id is free at once');
    field(f, 'rate limit', stats.rate_limit ? fmtInt(stats.rate_limit.per_second) + ' starts/s across the cluster, burst ' + fmtInt(stats.rate_limit.burst) : 'none');
    const s = lastSeries && lastSeries.topics.find((x) => x.topic === topic);
    const tg = s && s.target;
    field(f, 'target', tg ? tg.method + ' ' + tg.url : 'none (handlers in code), or not delivered by this process');
    field(f, 'workers', fmtInt(stats.consumers) + ' live worker process' + (stats.consumers === 1 ? '' : 'es') + ' handle it', { class: stats.unconsumed ? 'err' : null });
    field(f, 'counts', fmtInt(stats.due) + ' waiting (' + fmtInt(stats.due_now) + ' overdue), ' + fmtInt(stats.in_flight) + ' in flight, ' + fmtInt(stats.dead) + ' dead');
    const acts = $('#topic-actions');
    acts.replaceChildren();
    if (!readOnly) {
      acts.append(el('button', { type: 'button', class: 'pause-button', dataset: { action: stats.paused ? 'resume' : 'pause', topic },
        text: stats.paused ? 'Resume' : 'Pause' }));
    }
  }

  // loadMinutes draws topic's 24-hour charts; the counts are read again
  // when older than a minute.
  async function loadMinutes(topic, seq) {
    let c = minutesCache.get(topic);
    if (!c || Date.now() - c.at > 60000) {
      let data;
      try {
        data = await api('GET', '/v1/dashboard/minutes?topic=' + encodeURIComponent(topic) + '&hours=24');
      } catch (e) {
        if (e instanceof Unauthorized) throw e;
        if (seq !== renderSeq) return;
        $('#charts-note').textContent = 'charts unavailable: ' + e.message;
        return;
      }
      c = { at: Date.now(), data };
      minutesCache.set(topic, c);
    }
    if (seq !== renderSeq) return;
    const d = c.data;
    const n = d.t.length;
    const perMin = (v) => fmtInt(Math.round(v)) + '/min';
    const span = utc(new Date(d.t[0])).slice(0, 16) + 'Z – now';
    $('#charts-note').textContent = fmtInt(d.done.reduce((a, b) => a + b, 0)) + ' done, ' + fmtInt(d.dead.reduce((a, b) => a + b, 0)) + ' dead in 24 h';
    draw($('#chart-throughput'), [{ values: d.enqueued, color: COLORS.enq }, { values: d.done, color: COLORS.done }], n, perMin, span);
    draw($('#chart-failures'), [{ values: d.retried, color: COLORS.max }, { values: d.dead, color: COLORS.over }], n, perMin, span);
    draw($('#chart-backlog'), [{ values: d.backlog, color: COLORS.over }], n, fmtInt, span);
    $('#chart-throughput').dataset.points = String(n);
  }

  // ---- job browser ------------------------------------------------------
  //
  // #/topics/T/jobs?state=waiting[&offset=|&after=|&prefix=] lists a
  // topic's jobs in one state (each a page of one index: the API never
  // scans), #/topics/T/jobs/ID shows one job. Every value from the API goes
  // into the page as text (el), never as HTML.

  const JOB_PAGE = 50;
  const PAYLOAD_CAP = 64 * 1024; // shown of a payload; the rest is cut with a note
  const STATES = [
    { key: 'waiting', label: 'waiting', count: (t) => t.due, time: 'due' },
    { key: 'in_flight', label: 'in flight', count: (t) => t.in_flight, time: 'lease until' },
    { key: 'retrying', label: 'retrying', count: () => null, time: 'next attempt' },
    { key: 'dead', label: 'dead', count: (t) => t.dead, time: 'died' },
    { key: 'waiting_sql', label: 'waiting in SQL', count: (t) => (t.sql ? t.sql.waiting : null), time: 'due', durable: true },
    // The job history (GET .../history): jobs that left Redis and the
    // ledger, newest first, each row with its outcome.
    { key: 'finished', label: 'finished', count: () => null, time: 'finished' },
  ];

  const topicHash = (topic) => '#/topics/' + encodeURIComponent(topic);
  const jobsHash = (topic, params) => '#/topics/' + encodeURIComponent(topic) + '/jobs?' + new URLSearchParams(params);
  const jobHash = (topic, id) => '#/topics/' + encodeURIComponent(topic) + '/jobs/' + encodeURIComponent(id);
  const jobPath = (topic, id) => topicPath(topic) + '/jobs/' + encodeURIComponent(id);

  // when is a time for a person: its UTC date and time, and how far from now.
  function when(ms) {
    if (!ms) return '–';
    const d = new Date(ms);
    const s = Math.round((ms - Date.now()) / 1000);
    const a = Math.abs(s);
    const span = a < 60 ? a + ' s' : a < 3600 ? Math.round(a / 60) + ' min' : a < 86400 ? (a / 3600).toFixed(1) + ' h' : (a / 86400).toFixed(1) + ' d';
    return utc(d) + ' (' + (s >= 0 ? 'in ' + span : span + ' ago') + ')';
  }

  // route reads the hash: {view: 'overview'} (#/, the topics), {view:
  // 'jobs', topic, params} (#/topics/T, #/topics/T/jobs?...: the topic's
  // page), {view: 'job', topic, id}, or {view: 'dead' | 'workers' |
  // 'schedules' | 'recovery'}. Anything else is the topics.
  function route() {
    const h = location.hash.replace(/^#/, '');
    const page = /^\/(dead|workers|schedules|recovery)\/?$/.exec(h);
    if (page) return { view: page[1] };
    const m = /^\/topics\/([^/?]+)(?:\/jobs(?:\/([^?]+))?)?(?:\?(.*))?$/.exec(h);
    if (!m) return { view: 'overview' };
    let topic, id;
    try {
      topic = decodeURIComponent(m[1]);
      id = m[2] === undefined ? undefined : decodeURIComponent(m[2]);
    } catch (_) {
      return { view: 'overview' };
    }
    if (id !== undefined) return { view: 'job', topic, id };
    return { view: 'jobs', topic, params: new URLSearchParams(m[3] || '') };
  }

  // keyset pages have no offset to go back to: the afters of the pages
  // seen, per listing, give "prev".
  const afterTrail = new Map();

  let renderSeq = 0;

  async function render() {
    const r = route();
    const seq = ++renderSeq;
    const pages = { overview: '#page-topics', jobs: '#page-topic', job: '#job-view', dead: '#page-dead',
      workers: '#page-workers', schedules: '#schedules', recovery: '#page-recovery' };
    for (const [view, sel] of Object.entries(pages)) $(sel).hidden = r.view !== view;
    const navPage = { overview: 'topics', jobs: 'topics', job: 'topics' }[r.view] || r.view;
    for (const a of document.querySelectorAll('#nav a')) a.classList.toggle('active', a.dataset.page === navPage);
    document.title = 'delayq · ' + (r.topic ? r.topic + (r.id ? ' / ' + r.id : '') : navPage);
    document.body.dataset.view = r.view;
    try {
      if (r.view === 'jobs') await renderJobs(r, seq);
      else if (r.view === 'job') await renderJob(r, seq);
      else document.body.dataset.viewState = 'ready';
    } catch (e) {
      if (seq !== renderSeq) return;
      if (e instanceof Unauthorized) {
        sessionStorage.removeItem(TOKEN_KEY);
        showLogin('The token was refused: ' + e.message);
        return;
      }
      showError('Loading the ' + r.view + ' view failed: ' + e.message);
      document.body.dataset.viewState = 'error';
    }
  }

  async function renderJobs(r, seq) {
    document.body.dataset.viewState = 'loading';
    const p = r.params;
    const prefix = p.get('prefix');
    // The older names of two listings, from links made before they were
    // renamed (the API still reads them too).
    const renamed = { scheduled: 'waiting', scheduled_sql: 'waiting_sql' };
    const asked = p.get('state') || 'waiting';
    const state = prefix ? '' : renamed[asked] || asked;
    const stats = await api('GET', topicPath(r.topic));
    const durable = stats.durability === 'durable';
    const q = new URLSearchParams({ limit: String(JOB_PAGE) });
    if (prefix) q.set('prefix', prefix);
    else if (state !== 'finished') q.set('state', state);
    for (const k of ['offset', 'after']) if (p.get(k)) q.set(k, p.get(k));
    const page = state === 'finished' ? historyPage(await api('GET', topicPath(r.topic) + '/history?' + q))
      : await api('GET', topicPath(r.topic) + '/jobs?' + q);
    if (seq !== renderSeq) return;

    renderTopicPage(r.topic, stats);
    await loadMinutes(r.topic, seq);
    if (seq !== renderSeq) return;
    $('#jobs-topic').textContent = r.topic;
    const badge = $('#jobs-durability');
    badge.textContent = stats.durability || 'redis';
    badge.className = 'badge dur-' + (stats.durability || 'redis');
    $('#job-search-input').placeholder = durable ? 'job id, or the start of one (e.g. an order number)' : 'exact job id (e.g. order_close:12345)';
    $('#job-search-hint').textContent = durable ? 'exact id, else id prefix (SQL ledger)' : 'exact id (a redis topic has no id index for prefixes)';
    if (document.activeElement !== $('#job-search-input')) $('#job-search-input').value = prefix || '';

    const tabs = $('#jobs-tabs');
    tabs.replaceChildren();
    for (const s of STATES) {
      if (s.durable && !durable) continue;
      const n = s.count(stats);
      const b = el('button', { type: 'button', class: s.key === state ? 'active' : null, dataset: { tab: s.key } },
        s.label + (n == null ? '' : ' (' + fmtInt(n) + ')'));
      b.addEventListener('click', () => { location.hash = jobsHash(r.topic, { state: s.key }); });
      tabs.append(b);
    }
    const st = STATES.find((s) => s.key === state);
    $('#jobs-time-head').textContent = st ? st.time : 'due';
    const note = $('#jobs-note');
    note.hidden = !prefix && !page.ledger_error && state !== 'retrying' && state !== 'waiting_sql' && state !== 'finished';
    note.textContent = prefix
      ? 'Jobs whose id starts with "' + prefix + '": the ledger rows of this durable topic (waiting, retrying, in flight), by id.'
      : page.ledger_error || (state === 'retrying' ? 'From the SQL ledger (rows waiting for their next attempt), by due time.'
        : state === 'waiting_sql' ? 'From the SQL ledger: every job waiting for its first run, those beyond the horizon too, by due time.'
        : state === 'finished' ? 'From the job history: jobs that finished (succeeded, dead, cancelled, purged), newest first, kept for recovery.history_retention.' : '');

    const tbody = $('#jobs-table tbody');
    tbody.replaceChildren(...page.jobs.map((j) => jobRow(r.topic, j, state)));
    $('#jobs-empty').hidden = page.jobs.length > 0;

    // Pager: offsets for Redis's sets, keyset (after) for the ledger's.
    const key = r.topic + '|' + state + '|' + (prefix || '');
    const after = p.get('after') || '';
    let trail = afterTrail.get(key) || [];
    if (!after) trail = [];
    else if (trail[trail.length - 1] !== after) {
      const i = trail.indexOf(after);
      trail = i >= 0 ? trail.slice(0, i + 1) : [...trail, after];
    }
    afterTrail.set(key, trail);
    const base = prefix ? { prefix } : { state };
    const offset = page.offset || 0;
    const prev = $('#jobs-prev');
    const next = $('#jobs-next');
    let prevHash = null;
    let nextHash = null;
    if (page.total >= 0) {
      if (offset > 0) prevHash = jobsHash(r.topic, { ...base, offset: String(Math.max(0, offset - JOB_PAGE)) });
      if (page.next_offset) nextHash = jobsHash(r.topic, { ...base, offset: String(page.next_offset) });
      $('#jobs-range').textContent = page.jobs.length
        ? fmtInt(offset + 1) + '–' + fmtInt(offset + page.jobs.length) + ' of ' + fmtInt(page.total) : fmtInt(page.total) + ' jobs';
    } else {
      if (after) {
        const before = trail.length >= 2 ? trail[trail.length - 2] : '';
        prevHash = jobsHash(r.topic, before ? { ...base, after: before } : base);
      }
      if (page.next_after) nextHash = jobsHash(r.topic, { ...base, after: page.next_after });
      $('#jobs-range').textContent = 'page ' + (trail.length + 1) + ' · ' + fmtInt(page.jobs.length) + ' jobs' + (page.next_after ? ', more follow' : '');
    }
    prev.disabled = !prevHash;
    next.disabled = !nextHash;
    prev.onclick = () => { if (prevHash) location.hash = prevHash; };
    next.onclick = () => { if (nextHash) location.hash = nextHash; };
    showError('');
    document.body.dataset.viewState = 'ready';
  }

  // historyPage shows a page of the job history as a listing of the job
  // browser: each finished job with its outcome as its state, its finish
  // time, the last worker; total -1 (keyset pages, as the ledger's).
  function historyPage(h) {
    return {
      total: -1, next_after: h.next_after,
      jobs: h.history.map((x) => ({ id: x.id, state: x.outcome, finished_at: x.finished_at, attempt: x.attempts,
        max_attempts: x.max_attempts, last_error: x.last_error, ledger: { worker: x.worker } })),
    };
  }

  function jobRow(topic, j, state) {
    const marks = [];
    if (j.sql_only) marks.push(el('span', { class: 'mark sql', text: 'SQL only' }));
    if (j.ordering_key) {
      marks.push(el('span', { class: 'mark key', dataset: { field: 'ordering_key' }, text: (j.parked ? 'parked · ' : '') + 'key ' + j.ordering_key,
        title: j.parked ? 'waits behind an earlier job of its ordering key' : 'jobs of this ordering key run one at a time, in due order' }));
    }
    let t = j.run_at;
    if (j.state === 'in_flight') t = j.lease_until;
    if (j.state === 'dead') t = j.died_at;
    if (j.finished_at) t = j.finished_at;
    const worker = j.ledger && j.ledger.worker ? j.ledger.worker : '';
    return el('tr', { dataset: { id: j.id, state: j.state } },
      el('td', { class: 'mono' }, el('a', { class: 'job-link', href: jobHash(topic, j.id), text: j.id,
        title: j.partition ? 'partition ' + j.partition : '' })),
      el('td', {}, j.state, ...marks),
      el('td', { text: when(t), title: t ? new Date(t).toISOString() : '' }),
      el('td', { class: 'num', text: j.attempt + '/' + j.max_attempts }),
      // The history's rows (the finished tab) have no priority.
      el('td', { class: j.priority > 0 ? 'num prio' : 'num', dataset: { field: 'priority' }, text: j.priority == null ? '–' : String(j.priority) }),
      el('td', { class: 'mono', text: worker }),
      el('td', { class: 'err', text: j.last_error || '', title: j.last_error || '' }),
      el('td', { class: 'num', text: j.payload_size == null ? '–' : fmtInt(j.payload_size) + ' B' }));
  }

  // go shows hash; the same hash again is rendered again (a search for
  // the same text reloads).
  function go(hash) {
    if (location.hash === hash) render();
    else location.hash = hash;
  }

  // search: the exact id first (GET the job: Redis, then a durable topic's
  // row); on a durable topic an unknown id is then taken as a prefix of ids.
  async function search(topic, text) {
    text = text.trim();
    $('#job-search-msg').hidden = true;
    if (!text) {
      go(jobsHash(topic, { state: 'waiting' }));
      return;
    }
    try {
      await api('GET', jobPath(topic, text));
      go(jobHash(topic, text));
      return;
    } catch (e) {
      if (e.status !== 404 && e.status !== 400) throw e;
    }
    const stats = await api('GET', topicPath(topic));
    if (stats.durability === 'durable') {
      go(jobsHash(topic, { prefix: text }));
      return;
    }
    const msg = $('#job-search-msg');
    msg.textContent = 'No job "' + text + '" in ' + topic + ' (a redis topic is searched by exact id only).';
    msg.hidden = false;
  }

  function field(dl, name, value, attrs) {
    dl.append(el('dt', { text: name }), el('dd', Object.assign({ dataset: { field: name.replace(/ /g, '_') } }, attrs || {}), value));
  }

  async function renderJob(r, seq) {
    document.body.dataset.viewState = 'loading';
    $('#job-id').textContent = r.id;
    $('#job-topic').textContent = r.topic;
    $('#job-back').href = topicHash(r.topic);
    let j;
    try {
      j = await api('GET', jobPath(r.topic, r.id));
    } catch (e) {
      if (e.status !== 404) throw e;
      if (seq !== renderSeq) return;
      $('#job-body').hidden = true;
      $('#job-missing').hidden = false;
      // The server's message says how it finished, from its history.
      $('#job-missing').textContent = e.message || 'No job "' + r.id + '" in ' + r.topic + '.';
      await renderJobHistory(r, seq);
      if (seq !== renderSeq) return; // another view took over while the history came
      document.body.dataset.jobState = 'gone';
      document.body.dataset.jobId = r.id;
      document.body.dataset.viewState = 'ready';
      return;
    }
    if (seq !== renderSeq) return;
    $('#job-missing').hidden = true;
    $('#job-body').hidden = false;
    document.body.dataset.jobState = j.state;

    const f = $('#job-fields');
    f.replaceChildren();
    field(f, 'state', j.state + (j.sql_only ? ' (in SQL only)' : ''));
    if (j.partition) field(f, 'partition', j.partition, { class: 'mono' });
    field(f, 'attempts', j.attempt + ' of ' + j.max_attempts);
    if (j.priority != null) {
      field(f, 'priority', j.priority ? String(j.priority) : '0 (the default)',
        { title: 'of the topic\'s due jobs, those of a higher priority are claimed first; one claim in worker.topics.<t>.oldest_every takes the one due longest' });
    }
    if (j.ordering_key) {
      field(f, 'ordering key', j.ordering_key + (j.parked ? ' (parked: an earlier job of the key runs or waits first)' : ''),
        { class: 'mono', title: 'jobs of the topic with this key run one at a time, in due order; a retrying job holds the key' });
    }
    field(f, 'due', when(j.run_at), { title: j.run_at ? new Date(j.run_at).toISOString() : '' });
    field(f, 'enqueued', when(j.enqueued_at));
    if (j.lease_until) field(f, 'lease until', when(j.lease_until));
    if (j.trace_parent) field(f, 'trace', 'trace ' + (j.trace_parent.split('-')[1] || j.trace_parent) + ' (its enqueue\'s; each run is a span of it)');
    if (j.cancel_requested_at) field(f, 'cancel requested', when(j.cancel_requested_at) + ' (its handler\'s context is cancelled; it ends when the handler returns)', { class: 'err' });
    if (j.died_at) field(f, 'died', when(j.died_at));
    field(f, 'last error', j.last_error || '–', { class: j.last_error ? 'err' : null });

    const l = $('#job-ledger');
    l.replaceChildren();
    if (j.ledger) {
      const row = j.ledger;
      field(l, 'row state', row.state);
      field(l, 'worker', row.worker || '–', { class: 'mono' });
      field(l, 'row attempt', row.attempt + ' of ' + row.max_attempts);
      field(l, 'row due', when(row.run_at));
      field(l, 'claimed', when(row.claimed_at));
      field(l, 'lease', row.lease_until >= 9e18 ? 'none (waiting: the relay\'s)' : when(row.lease_until));
      field(l, 'row last error', row.last_error || '–', { class: row.last_error ? 'err' : null });
      field(l, 'updated', when(row.updated_at));
    } else {
      field(l, 'row', j.ledger_error || 'none (a job gets a row when a worker claims it; a durable topic\'s from its enqueue)');
    }

    // The payload, pretty when it is JSON, cut at PAYLOAD_CAP characters.
    let text = '';
    let kind = 'JSON';
    if (j.payload !== undefined) text = JSON.stringify(j.payload, null, 2);
    else if (j.payload_base64) {
      text = j.payload_base64;
      kind = 'binary, shown in base64';
    }
    const cut = text.length > PAYLOAD_CAP;
    $('#job-payload').textContent = cut ? text.slice(0, PAYLOAD_CAP) + '\n…' : text || '(empty)';
    $('#job-payload-note').textContent = fmtInt(j.payload_size) + ' bytes' + (text ? ' (' + kind + ')' : '') + (cut ? ', first 64 KiB shown' : '');
    $('#job-payload').dataset.cut = String(cut);

    const acts = $('#job-actions');
    acts.replaceChildren();
    if (!readOnly) {
      const d = { topic: r.topic, id: r.id };
      if ((j.state === 'waiting' || j.state === 'retrying') && j.ledger && j.ledger.state === 'in_flight') {
        // Its lease ran out and Redis put it back; the row still names the
        // last claim until the next one takes it over (design §4.1).
        acts.append(el('span', { class: 'note', text: 'Its last claim\'s lease ran out: the next claim takes it over. It cannot be cancelled or moved until then.' }));
      } else if (j.state === 'waiting' || j.state === 'retrying') {
        acts.append(
          el('button', { type: 'button', class: 'danger', dataset: { action: 'cancel', ...d }, text: 'Cancel job' }),
          el('button', { type: 'button', dataset: { action: 'run-now', ...d }, text: 'Run now' }),
          el('span', { class: 'note', text: 'reschedule to' }),
          el('input', { id: 'resched-at', type: 'text', size: '20', placeholder: 'YYYY-MM-DD HH:MM:SS', title: 'a time in UTC, as the page shows times' }),
          el('span', { class: 'note', text: 'UTC' }),
          el('span', { class: 'note', text: 'or in' }),
          el('input', { id: 'resched-min', type: 'number', min: '0', step: '1', placeholder: 'minutes' }),
          el('button', { type: 'button', dataset: { action: 'reschedule', ...d }, text: 'Reschedule' }),
        );
      } else if (j.state === 'dead') {
        acts.append(el('button', { type: 'button', dataset: { action: 'requeue', ...d }, text: 'Requeue' }));
      } else if (j.cancel_requested_at) {
        acts.append(el('span', { class: 'note', text: 'A worker holds this job and its cancel was requested: it ends cancelled when its handler returns an error (a handler that ignores its context runs on).' }));
      } else {
        acts.append(
          el('button', { type: 'button', class: 'danger', dataset: { action: 'cancel-run', ...d }, text: 'Cancel run' }),
          el('span', { class: 'note', text: 'A worker holds this job: cancelling cancels its handler\'s context; it cannot be moved.' }),
        );
      }
    }
    await renderJobHistory(r, seq);
    if (seq !== renderSeq) return; // another view took over while the history came
    showError('');
    document.body.dataset.jobId = r.id;
    document.body.dataset.viewState = 'ready';
  }

  // renderJobHistory shows the job id's history rows (GET .../history?id=),
  // newest first: each time a job of this id finished.
  async function renderJobHistory(r, seq) {
    const t = $('#job-history');
    let p;
    try {
      p = await api('GET', topicPath(r.topic) + '/history?id=' + encodeURIComponent(r.id) + '&limit=20');
    } catch (e) {
      if (seq !== renderSeq) return;
      $('#job-history-note').textContent = 'history unavailable: ' + e.message;
      t.hidden = true;
      return;
    }
    if (seq !== renderSeq) return;
    const rows = p.history || [];
    $('#job-history-note').textContent = rows.length ? '' : 'none: it has not finished (or finished longer ago than the history keeps)';
    t.hidden = rows.length === 0;
    t.tBodies[0].replaceChildren(...rows.map((h) => el('tr', { dataset: { outcome: h.outcome } },
      el('td', { text: h.outcome, class: h.outcome === 'succeeded' ? '' : 'err' }),
      el('td', { class: 'num', text: h.attempts + ' of ' + h.max_attempts }),
      el('td', { text: when(h.due_at) }),
      el('td', { text: when(h.first_claimed_at) }),
      el('td', { text: when(h.finished_at) }),
      el('td', { class: 'num', text: h.claimed_at ? duration(h.finished_at - h.claimed_at) : '–' }),
      el('td', { class: 'mono', text: h.worker || '–' }),
      el('td', { class: 'mono result', dataset: { field: 'result' }, text: resultText(h.result), title: resultText(h.result, true) }),
      el('td', { class: h.last_error ? 'err' : '', text: h.last_error || '–' }),
    )));
  }

  // resultText is a history row's result (what its handler recorded, any
  // JSON value) as text: cut at 80 characters unless whole, '–' for none.
  function resultText(r, whole) {
    if (r === undefined || r === null) return '–';
    const s = JSON.stringify(r);
    return whole || s.length <= 80 ? s : s.slice(0, 79) + '…';
  }

  // rescheduleBody reads the reschedule inputs: minutes from now, or a
  // local date and time; null (with the reason shown) when neither is good.
  function rescheduleBody() {
    const min = $('#resched-min');
    const at = $('#resched-at');
    if (min && min.value !== '') {
      const n = Number(min.value);
      if (Number.isFinite(n) && n >= 0) return { delay_ms: Math.round(n * 60000) };
    }
    if (at && at.value) {
      const ms = parseUTC(at.value);
      if (ms !== null) return { run_at: ms };
    }
    return null;
  }

  // parseUTC reads "YYYY-MM-DD HH:MM[:SS]" (or with a T) as a UTC time, the
  // format the page shows; null for anything else.
  function parseUTC(s) {
    const m = /^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d)(?::(\d\d))?Z?$/.exec(s.trim());
    if (!m) return null;
    const ms = Date.UTC(+m[1], +m[2] - 1, +m[3], +m[4], +m[5], +(m[6] || 0));
    return Number.isFinite(ms) && new Date(ms).getUTCDate() === +m[3] ? ms : null;
  }

  $('#job-search').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const r = route();
    if (r.view !== 'jobs') return;
    search(r.topic, $('#job-search-input').value).catch((e) => {
      $('#job-search-msg').textContent = 'Search failed: ' + e.message;
      $('#job-search-msg').hidden = false;
    });
  });
  $('#jobs-reload').addEventListener('click', () => render());
  window.addEventListener('hashchange', () => render());

  // ---- the refresh loop -------------------------------------------------

  let timer = null;
  let running = false;
  let cycle = 0;

  async function refresh() {
    if (running) return;
    running = true;
    clearTimeout(timer);
    try {
      const [topics, series] = await Promise.all([api('GET', '/v1/topics'), api('GET', '/v1/dashboard/series')]);
      lastSeries = series;
      renderTopics(topics.topics, series);
      renderRelay(series);
      // A topic's page follows too: its settings, and its 24-hour charts
      // once their counts are a minute old.
      const r = route();
      const shown = r.view === 'jobs' && document.body.dataset.viewState === 'ready' && topics.topics.find((t) => t.topic === r.topic);
      if (shown) {
        renderTopicPage(r.topic, shown);
        await loadMinutes(r.topic, renderSeq);
      }
      const jobs = [loadDead(topics.topics), loadLedger(series)];
      if (cycle % 2 === 0) jobs.push(loadReports());
      if (hasOrders) jobs.push(loadOrders());
      jobs.push(loadSchedules(), loadWorkers());
      await Promise.all(jobs);
      cycle++;
      showError('');
      setStatus('updated ' + clock(new Date()));
      document.body.dataset.state = 'ready';
      document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
    } catch (e) {
      if (e instanceof Unauthorized) {
        running = false;
        sessionStorage.removeItem(TOKEN_KEY);
        showLogin('The token was refused: ' + e.message);
        return;
      }
      showError('Refresh failed: ' + e.message);
      setStatus('refresh failed ' + clock(new Date()));
    }
    running = false;
    timer = setTimeout(refresh, REFRESH_MS);
  }

  // ---- actions ----------------------------------------------------------

  function confirmAction(text) {
    const d = $('#confirm');
    $('#confirm-text').textContent = text;
    d.returnValue = '';
    return new Promise((resolve) => {
      d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
      d.showModal();
    });
  }

  const topicPath = (t) => '/v1/topics/' + encodeURIComponent(t);

  const ACTIONS = {
    requeue: {
      ask: (b) => 'Requeue dead job ' + b.dataset.id + ' of ' + b.dataset.topic + '? It runs again now, with its attempts reset.',
      run: (b) => api('POST', topicPath(b.dataset.topic) + '/dead/requeue', { id: b.dataset.id }),
      done: (r, b) => 'requeued ' + b.dataset.id,
    },
    'requeue-all': {
      ask: (b) => 'Requeue every dead job of ' + b.dataset.topic + '? They all run again now.',
      run: (b) => api('POST', topicPath(b.dataset.topic) + '/dead/requeue', { all: true }),
      done: (r, b) => 'requeued ' + r.requeued + ' dead jobs of ' + b.dataset.topic,
    },
    'delete-dead': {
      ask: (b) => 'Delete dead job ' + b.dataset.id + ' of ' + b.dataset.topic + ' for good? This cannot be undone.',
      run: (b) => api('DELETE', topicPath(b.dataset.topic) + '/dead/jobs/' + encodeURIComponent(b.dataset.id)),
      done: (r, b) => 'deleted dead job ' + b.dataset.id,
    },
    'bulk-requeue': {
      check: () => selected.size > 0 || 'Select dead jobs first.',
      ask: () => 'Requeue the ' + selected.size + ' selected dead jobs? They run again now, with their attempts reset.',
      run: () => bulk('requeued', (topic, id) => api('POST', topicPath(topic) + '/dead/requeue', { id })),
      done: (msg) => msg,
    },
    'bulk-delete': {
      check: () => selected.size > 0 || 'Select dead jobs first.',
      ask: () => 'Delete the ' + selected.size + ' selected dead jobs for good? This cannot be undone.',
      run: () => bulk('deleted', (topic, id) => api('DELETE', topicPath(topic) + '/dead/jobs/' + encodeURIComponent(id))),
      done: (msg) => msg,
    },
    purge: {
      ask: (b) => 'Delete every dead job of ' + b.dataset.topic + ' for good? This cannot be undone.',
      run: (b) => api('POST', topicPath(b.dataset.topic) + '/dead/purge', {}),
      done: (r, b) => 'purged ' + r.purged + ' dead jobs of ' + b.dataset.topic,
    },
    cancel: {
      ask: (b) => 'Cancel job ' + b.dataset.id + ' of ' + b.dataset.topic + '? It is removed and never runs.',
      run: (b) => api('DELETE', jobPath(b.dataset.topic, b.dataset.id)),
      // The server's warning says what the cancel does not do (an order's
      // close job comes back from the orders sweeper).
      done: (r, b) => 'cancelled ' + b.dataset.id + (r.warning ? '. Warning: ' + r.warning : ''),
    },
    'cancel-run': {
      ask: (b) => 'Cancel the run of job ' + b.dataset.id + ' of ' + b.dataset.topic + '? Its handler\'s context is cancelled wherever it runs; it ends cancelled, never retried.',
      run: (b) => api('DELETE', jobPath(b.dataset.topic, b.dataset.id)),
      done: (r, b) => (r.cancel_requested_at ? 'cancel requested for ' : 'cancelled ') + b.dataset.id + (r.warning ? '. Warning: ' + r.warning : ''),
    },
    'run-now': {
      ask: (b) => 'Run job ' + b.dataset.id + ' of ' + b.dataset.topic + ' now? It becomes due at once.',
      run: (b) => api('PATCH', jobPath(b.dataset.topic, b.dataset.id), { delay_ms: 0 }),
      done: (r, b) => 'job ' + b.dataset.id + (r.parked ? ' is due now, parked behind an earlier job of its ordering key ' + r.ordering_key : ' is due now'),
    },
    reschedule: {
      check: () => rescheduleBody() !== null || 'Give a time in UTC (YYYY-MM-DD HH:MM:SS) or a number of minutes to reschedule to.',
      ask: (b) => {
        const body = rescheduleBody();
        const at = body.run_at !== undefined ? new Date(body.run_at) : new Date(Date.now() + body.delay_ms);
        return 'Reschedule job ' + b.dataset.id + ' of ' + b.dataset.topic + ' to ' + utc(at) + '?';
      },
      run: (b) => api('PATCH', jobPath(b.dataset.topic, b.dataset.id), rescheduleBody()),
      done: (r, b) => 'rescheduled ' + b.dataset.id + (r.parked ? ', parked behind an earlier job of its ordering key ' + r.ordering_key : ''),
    },
    'run-recovery': {
      ask: () => 'Run recovery now? Jobs the ledger holds and Redis lost are put back.',
      run: () => api('POST', '/v1/recovery/run'),
      done: (r) => {
        const msg = 'recovery ran: ' + r.scanned + ' stale rows scanned, ' + r.reenqueued + ' re-enqueued, ' + r.errors + ' errors' +
          (r.skipped ? ' (skipped: another recoverer holds the lock)' : '');
        const p = $('#recovery-result');
        p.textContent = msg;
        p.hidden = false;
        return msg;
      },
    },
  };

  // Pause and resume a topic (POST /v1/topics/{topic}/pause, /resume).
  ACTIONS.pause = {
    ask: (b) => 'Pause ' + b.dataset.topic + '? No worker claims its jobs until it is resumed; running jobs finish, due jobs wait.',
    run: (b) => api('POST', topicPath(b.dataset.topic) + '/pause'),
    done: (r) => (r.changed ? 'paused ' : 'already paused: ') + r.topic,
  };
  ACTIONS.resume = {
    ask: (b) => 'Resume ' + b.dataset.topic + '? Workers claim its waiting jobs at once, up to their concurrency.',
    run: (b) => api('POST', topicPath(b.dataset.topic) + '/resume'),
    done: (r) => (r.changed ? 'resumed ' : 'already running: ') + r.topic,
  };

  document.addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b || readOnly) return;
    const a = ACTIONS[b.dataset.action];
    if (!a) return;
    const bad = a.check ? a.check(b) : true;
    if (bad !== true) {
      showError(bad);
      return;
    }
    if (!(await confirmAction(a.ask(b)))) return;
    b.disabled = true;
    try {
      const r = await a.run(b);
      setStatus(a.done(r, b));
    } catch (e) {
      if (e instanceof Unauthorized) {
        showLogin('The token was refused: ' + e.message);
        return;
      }
      showError(b.dataset.action + ' failed: ' + e.message);
    } finally {
      b.disabled = false;
    }
    deadKey = '';
    refresh();
    const v = route().view;
    if (v === 'jobs' || v === 'job') await render();
    // Counts the actions done and drawn: tests wait on it.
    document.body.dataset.actions = String(Number(document.body.dataset.actions || 0) + 1);
  });

  // ---- login --------------------------------------------------------------

  function showLogin(msg) {
    clearTimeout(timer);
    $('#main').hidden = true;
    $('#login').hidden = false;
    const p = $('#login-error');
    p.textContent = msg || '';
    p.hidden = !msg;
    setStatus('token needed');
    $('#token-input').focus();
  }

  function start() {
    if (auth && !sessionStorage.getItem(TOKEN_KEY)) {
      showLogin('');
      return;
    }
    $('#login').hidden = true;
    $('#main').hidden = false;
    $('#sign-out').hidden = !auth;
    refresh();
    render();
  }

  $('#token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('#token-input').value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $('#token-input').value = '';
    start();
  });

  $('#sign-out').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    window.location.reload();
  });

  $('#mode').hidden = !readOnly;
  $('#orders').hidden = !hasOrders;
  $('#workers-note').hidden = hasWorkers;
  $('#stale-after').textContent = duration(staleAfterMs);
  $('#dead-per-topic').textContent = String(DEAD_PAGE);
  if (readOnly) {
    document.querySelectorAll('[data-action]').forEach((b) => b.remove());
    $('#dead-bulk').remove();
  }
  start();
})();
