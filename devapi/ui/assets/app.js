'use strict';
// The adk UI: plain DOM, no toolchain. Every server string reaches the page
// through text nodes or setAttribute (never as markup), links are built
// only to this page's own #/ routes, and the token lives in sessionStorage.
(() => {
  const TOKEN_KEY = 'adk.devtoken';
  const API = '/dev/v1';
  const TERMINAL = new Set(['completed', 'failed', 'timed_out', 'cancelled']);
  const main = document.getElementById('main');
  const statusLine = document.getElementById('status');
  const results = new Map(); // job id -> result document (this tab only)
  let view = new AbortController();

  // ---- DOM helpers: text only ------------------------------------------
  function setAttrs(el, attrs) {
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'on') {
        for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
        continue;
      }
      if (/^on/i.test(k) || k === 'style' || k === 'srcdoc') throw new Error('attribute not allowed: ' + k);
      if ((k === 'href' || k === 'src' || k === 'action') && !String(v).startsWith('#')) throw new Error('links stay in the app');
      el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  function add(el, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === null || k === undefined || k === false) continue;
      el.append(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return el;
  }
  // fill replaces an element's children (arrays flattened, null skipped).
  function fill(el, ...kids) {
    while (el.firstChild) el.firstChild.remove();
    return add(el, kids);
  }
  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    setAttrs(el, attrs);
    return add(el, kids);
  }
  function svg(tag, attrs, ...kids) {
    const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
    setAttrs(el, attrs);
    return add(el, kids);
  }
  function route(...parts) {
    return '#/' + parts.map((p) => encodeURIComponent(String(p))).join('/');
  }
  function withQuery(hash, q) {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
    const s = p.toString();
    return s ? hash + '?' + s : hash;
  }
  function f4(x) { return typeof x === 'number' ? x.toFixed(4) : '–'; }
  function pct(x) { return typeof x === 'number' ? (x * 100).toFixed(1) + '%' : '–'; }
  function when(ms) { return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '–'; }
  function dur(ms) {
    if (typeof ms !== 'number' || ms < 0) return '–';
    if (ms < 1000) return ms + ' ms';
    if (ms < 120000) return (ms / 1000).toFixed(1) + ' s';
    return Math.round(ms / 60000) + ' min';
  }
  function badge(text, kind) {
    return h('span', { class: 'badge b-' + kind }, text);
  }
  function statusBadge(s) {
    const kind = { passed: 'pass', completed: 'pass', PASS: 'pass', failed: 'fail', FAIL: 'fail', error: 'warn',
      partial: 'warn', REGRESSION: 'fail', timed_out: 'fail', cancelled: 'warn', not_evaluated: 'warn', missing: 'warn' }[s] || 'info';
    return badge(String(s), kind);
  }
  function kv(pairs) {
    return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', null, k), h('dd', null, v)]));
  }
  function table(label, head, rows) {
    return h('table', { 'aria-label': label },
      h('thead', null, h('tr', null, head.map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows));
  }
  function say(msg) { statusLine.textContent = msg; }

  // ---- API ---------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status; this.code = code; this.details = details;
    }
  }
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
  function authHeaders(extra) {
    const hd = Object.assign({}, extra);
    if (token()) hd.Authorization = 'Bearer ' + token();
    return hd;
  }
  async function errorFrom(res) {
    const text = await res.text();
    let e = {};
    try { e = (JSON.parse(text) || {}).error || {}; } catch (_) { /* not JSON */ }
    return new ApiError(res.status, e.code || 'http_' + res.status, e.message || text.slice(0, 300), e.details);
  }
  async function call(path, opts = {}) {
    const init = { method: opts.method || 'GET', headers: authHeaders(opts.headers), cache: 'no-store',
      credentials: 'omit', signal: opts.signal };
    if (opts.body !== undefined || opts.json !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = opts.json !== undefined ? opts.json : JSON.stringify(opts.body); // json: already encoded
    }
    const res = await fetch(path, init);
    if (res.status === 401 && !opts.noRedirect) {
      sessionStorage.removeItem(TOKEN_KEY);
      location.hash = '#/login';
    }
    if (!res.ok) throw await errorFrom(res);
    return res;
  }
  async function api(path, opts) {
    const res = await call(path, opts);
    const text = await res.text();
    return text ? JSON.parse(text) : null;
  }
  function errorBox(e) {
    if (e && e.name === 'AbortError') return null;
    const box = h('div', { class: 'error', role: 'alert' },
      h('strong', null, e instanceof ApiError ? e.code : 'error'), ': ', e && e.message ? e.message : String(e));
    if (e && e.details) box.append(h('pre', null, JSON.stringify(e.details, null, 2)));
    return box;
  }

  // readSSE reads a text/event-stream with fetch (EventSource cannot send
  // the bearer token) and calls onEvent(name, data, id) per event.
  async function readSSE(path, signal, onEvent) {
    const res = await call(path, { signal, headers: { Accept: 'text/event-stream' } });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value.replace(/\r\n?/g, '\n');
      let i;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i);
        buf = buf.slice(i + 2);
        let name = 'message', id = '';
        const data = [];
        for (const line of block.split('\n')) {
          if (line === '' || line.startsWith(':')) continue;
          const c = line.indexOf(':');
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? '' : line.slice(c + 1);
          if (v.startsWith(' ')) v = v.slice(1);
          if (field === 'event') name = v;
          else if (field === 'data') data.push(v);
          else if (field === 'id') id = v;
        }
        if (data.length) onEvent(name, data.join('\n'), id);
      }
    }
  }

  // watchJob follows a job's events until it is terminal or the view
  // changes; a dropped stream reconnects after a second, visibly.
  async function watchJob(id, signal, onJob, onTrouble) {
    for (;;) {
      let ended = false;
      try {
        await readSSE(API + '/evaluation/jobs/' + encodeURIComponent(id) + '/events', signal, (name, data) => {
          if (name === 'status') onJob(JSON.parse(data));
          else if (name === 'end') ended = true;
          else if (name === 'error') onTrouble(JSON.parse(data).error || {});
        });
      } catch (e) {
        if (signal.aborted) return;
        onTrouble({ code: e.code || 'stream_error', message: e.message });
        if (e instanceof ApiError && e.status < 500 && e.status !== 429) return;
      }
      if (ended || signal.aborted) return;
      await pause(1000, signal);
    }
  }
  function pause(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  async function jobResult(id, signal) {
    if (results.has(id)) return results.get(id);
    let r;
    try {
      r = await api(API + '/evaluation/jobs/' + encodeURIComponent(id) + '/result', { signal });
    } catch (e) {
      // Over the 1 MiB generic bound: the report route carries the same
      // document up to 16 MiB.
      if (!(e instanceof ApiError) || e.status !== 413) throw e;
      r = await api(API + '/evaluation/jobs/' + encodeURIComponent(id) + '/report?format=json', { signal });
    }
    results.set(id, r);
    return r;
  }
  async function listJobs(signal, limit) {
    return api(API + '/evaluation/jobs?limit=' + (limit || 100), { signal });
  }

  // ---- statistics shown beside the numbers -------------------------------
  function intervalText(iv) {
    if (!iv) return '–';
    return Math.round(iv.confidence_level * 100) + '% Wilson ' + f4(iv.lower) + '–' + f4(iv.upper);
  }
  // stats runs `adk eval stats` on the server over stored jobs (oldest
  // first): intervals per result and the gate of the last run against the
  // earlier ones pooled, on the pass rate and on every metric.
  async function stats(jobIDs, signal) {
    return api(API + '/evaluation/stats', { method: 'POST', body: { job_ids: jobIDs }, signal });
  }

  // ---- word diff (the HTML report's evalengine.DiffWords, for the page) --
  function diffWords(a, b) {
    if (a === b) return a ? [['=', a]] : [];
    const ta = a.match(/\s+|\S+/g) || [], tb = b.match(/\s+|\S+/g) || [];
    const out = [];
    const push = (op, s) => {
      if (!s) return;
      if (out.length && out[out.length - 1][0] === op) out[out.length - 1][1] += s;
      else out.push([op, s]);
    };
    if (ta.length * tb.length > (1 << 20)) { push('-', a); push('+', b); return out; }
    const w = tb.length + 1;
    const lcs = new Int32Array((ta.length + 1) * w);
    for (let i = ta.length - 1; i >= 0; i--) {
      for (let j = tb.length - 1; j >= 0; j--) {
        lcs[i * w + j] = ta[i] === tb[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
      }
    }
    let i = 0, j = 0;
    while (i < ta.length && j < tb.length) {
      if (ta[i] === tb[j]) { push('=', ta[i]); i++; j++; }
      else if (lcs[(i + 1) * w + j] >= lcs[i * w + j + 1]) { push('-', ta[i]); i++; }
      else { push('+', tb[j]); j++; }
    }
    for (; i < ta.length; i++) push('-', ta[i]);
    for (; j < tb.length; j++) push('+', tb[j]);
    return out;
  }
  function text(v) {
    if (v === null || v === undefined) return '';
    if (typeof v === 'string') return v;
    if (typeof v === 'object' && !Array.isArray(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && (keys[0] === 'response' || keys[0] === 'text') && typeof v[keys[0]] === 'string') return v[keys[0]];
    }
    return JSON.stringify(v);
  }
  function expectedResponse(exp) {
    if (exp === null || exp === undefined) return null;
    if (typeof exp === 'object' && !Array.isArray(exp)) {
      for (const k of ['response', 'final_response', 'expected_response']) if (exp[k] !== undefined && exp[k] !== null) return text(exp[k]);
      return null;
    }
    return text(exp);
  }
  function metricReason(m) {
    const md = m.metadata || {};
    for (const k of ['reason', 'rationale', 'explanation']) if (typeof md[k] === 'string' && md[k]) return md[k];
    return '';
  }

  // ---- pages -------------------------------------------------------------
  function pageLogin() {
    // No name attribute: were the form ever submitted natively, the token
    // would not be part of it (and the CSP's form-action 'none' blocks it).
    const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
    const err = h('div');
    const form = h('form', { class: 'stack', 'aria-labelledby': 'login-h', on: { submit: async (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      try {
        await api(API + '/evaluation/jobs?limit=1', { noRedirect: true });
      } catch (x) {
        // 403 is a valid token without eval scopes: traces and the cluster
        // view still work.
        if (!(x instanceof ApiError) || x.status === 401) {
          sessionStorage.removeItem(TOKEN_KEY);
          fill(err, errorBox(x) || '');
          return;
        }
      }
      location.hash = '#/jobs';
    } } },
    h('label', { for: 'token' }, 'Developer token'), input,
    h('button', { type: 'submit' }, 'Log in'), err);
    return [h('h1', { id: 'login-h' }, 'Log in'),
      h('p', { class: 'muted' }, 'The token is kept in this tab’s session storage only; it is sent as a bearer header and never put in a URL.'),
      form];
  }

  function jobRow(j, cells) {
    fill(cells.phase, statusBadge(j.phase));
    const p = j.progress || {};
    const total = p.tasks_total || 0, done = p.tasks_done || 0;
    fill(cells.progress, h('div', { class: 'bar', role: 'progressbar', 'aria-label': 'tasks done',
      'aria-valuemin': 0, 'aria-valuemax': total, 'aria-valuenow': done },
    h('span', { 'data-w': total ? Math.round(100 * done / total) : 0 })), ' ', done + '/' + total + (p.tasks_error ? ' (' + p.tasks_error + ' errors)' : ''));
    const bar = cells.progress.querySelector('.bar > span');
    bar.style.width = bar.getAttribute('data-w') + '%';
    cells.duration.textContent = j.started_at ? dur((j.finished_at || Date.now()) - j.started_at) : '–';
  }

  // ---- writes: submitting and cancelling a job ---------------------------
  // A write carries an Idempotency-Key (devapi/DESIGN.md): one key per
  // submission or per press of Cancel job, sent again on every retry of it
  // (automatic after a network error, a timeout, a 408 or a 5xx; the Retry
  // button; Submit pressed again on the unchanged form), so a retry whose
  // first attempt did reach the server answers as that attempt did instead
  // of starting a second job, or of a 409 for a job it already cancelled.
  // Changed content is another submission and draws another key. Only the
  // last submission not known to have made a job is kept, in this tab's
  // memory.
  const WRITE_RETRY_DELAYS_MS = [1000, 2000];
  const WRITE_TIMEOUT_MS = 60000;
  let pendingSubmit = null; // { json, key }
  // idempotencyKey: 32 hex digits from the browser's CSPRNG (the Go
  // client's request id form; evalrecord.ValidRequestID takes 16..64
  // bytes of [A-Za-z0-9_-]).
  function idempotencyKey() {
    return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
  }
  // writeOnce sends one attempt of a write with its key; a timeout is
  // thrown as a TimeoutError, the view's end as an AbortError.
  async function writeOnce(path, opts, key, signal) {
    const ac = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; ac.abort(); }, WRITE_TIMEOUT_MS);
    const stop = () => ac.abort();
    signal.addEventListener('abort', stop, { once: true });
    try {
      return await api(path, Object.assign({}, opts, { headers: { 'Idempotency-Key': key }, signal: ac.signal }));
    } catch (e) {
      if (timedOut && !signal.aborted) {
        const t = new Error('no answer within ' + WRITE_TIMEOUT_MS / 1000 + ' s');
        t.name = 'TimeoutError';
        throw t;
      }
      throw e;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', stop);
    }
  }
  // writeUnsure: the attempt may or may not have taken effect (the
  // network failed, no answer in time, a 408 or a 5xx), so it is retried
  // with its key.
  function writeUnsure(e) {
    if (e instanceof ApiError) return e.status >= 500 || e.status === 408;
    return !!e && e.name !== 'AbortError';
  }
  // writeFailure is the box saying why a write's last attempt failed.
  function writeFailure(x) {
    return x instanceof ApiError ? errorBox(x)
      : h('div', { class: 'error', role: 'alert' }, h('strong', null, x.name === 'TimeoutError' ? 'timeout' : 'network error'), ': ', x.message || String(x));
  }

  async function pageJobs(sig) {
    const agent = h('input', { id: 'agent', name: 'agent', required: true });
    const set = h('textarea', { id: 'set', name: 'set', required: true, spellcheck: 'false' });
    const metrics = h('textarea', { id: 'metrics', name: 'metrics', spellcheck: 'false', placeholder: '[{"id":"response","metric":"exact_response","threshold":1}]' });
    const submitErr = h('div', { id: 'submit-status' });
    const submitBtn = h('button', { type: 'submit' }, 'Submit job');
    let submitting = false;
    // send runs submission p to a definite answer: at most
    // 1 + WRITE_RETRY_DELAYS_MS.length attempts, the form refusing to
    // submit throughout and, once a job is made, until the page leaves
    // (the old page stays on screen while the job's page loads).
    const send = async (p) => {
      if (submitting || sig.signal.aborted) return;
      submitting = true;
      submitBtn.disabled = true;
      form.setAttribute('aria-busy', 'true');
      let done = false;
      try {
        for (let attempt = 0; ; attempt++) {
          fill(submitErr, h('p', { class: 'muted', role: 'status' }, attempt ? 'Submitting again with the same Idempotency-Key (attempt ' + (attempt + 1) + ')…' : 'Submitting…'));
          let job;
          try {
            job = await writeOnce(API + '/evaluation/jobs', { method: 'POST', json: p.json }, p.key, sig.signal);
          } catch (x) {
            if (sig.signal.aborted) return;
            if (x instanceof ApiError && x.code === 'idempotency_key_reused') {
              // The key made a job of other content: this one was not
              // made. Forget the key; the next submit draws a new one.
              if (pendingSubmit === p) pendingSubmit = null;
              fill(submitErr, h('div', { class: 'error', role: 'alert' },
                h('strong', null, 'idempotency_key_reused'), ': no job was created. This submission’s Idempotency-Key was already used in the last hour for a submission with other content. ',
                'Submitting as a new job draws a new key.', h('br'),
                h('button', { type: 'button', id: 'submit-new', on: { click: () => {
                  if (pendingSubmit === null || pendingSubmit.json !== p.json) pendingSubmit = { json: p.json, key: idempotencyKey() };
                  send(pendingSubmit);
                } } }, 'Submit as a new job'),
                x.message ? h('p', { class: 'muted' }, 'Server: ' + x.message) : null));
              return;
            }
            const unsure = writeUnsure(x);
            if (unsure && attempt < WRITE_RETRY_DELAYS_MS.length) {
              await pause(WRITE_RETRY_DELAYS_MS[attempt], sig.signal);
              if (sig.signal.aborted) return;
              continue;
            }
            const box = writeFailure(x);
            if (unsure || (x instanceof ApiError && x.status === 429)) {
              box.append(h('p', null, unsure
                ? 'The job may or may not have been created. Retrying sends the same Idempotency-Key: it answers the job if the server made one, and makes it otherwise.'
                : 'No job was created: the cluster is at capacity.'),
              h('button', { type: 'button', id: 'submit-retry', on: { click: () => send(p) } }, 'Retry this submission'));
            }
            fill(submitErr, box);
            return;
          }
          if (pendingSubmit === p) pendingSubmit = null;
          done = true;
          location.hash = route('jobs', job.job_id);
          return;
        }
      } finally {
        if (!done) {
          submitting = false;
          submitBtn.disabled = false;
          form.removeAttribute('aria-busy');
        }
      }
    };
    const form = h('form', { class: 'stack', on: { submit: (e) => {
      e.preventDefault();
      if (submitting) return;
      let json;
      try {
        const body = { agent_name: agent.value.trim(), set: JSON.parse(set.value) };
        if (metrics.value.trim()) body.metrics = JSON.parse(metrics.value);
        json = JSON.stringify(body);
      } catch (x) {
        fill(submitErr, h('div', { class: 'error', role: 'alert' }, 'The eval set and metrics must be JSON: ' + x.message));
        return;
      }
      // The same content again is a retry of the same submission (its
      // first attempt may have made the job); other content is a new one.
      if (pendingSubmit === null || pendingSubmit.json !== json) pendingSubmit = { json, key: idempotencyKey() };
      send(pendingSubmit);
    } } },
    h('label', { for: 'agent' }, 'Agent name'), agent,
    h('label', { for: 'set' }, 'Eval set (JSON)'), set,
    h('label', { for: 'metrics' }, 'Metrics (JSON, optional)'), metrics,
    submitBtn, submitErr);
    const tbody = h('tbody');
    const out = [h('h1', null, 'Jobs'),
      h('details', null, h('summary', null, 'Submit a job'), form),
      h('table', { 'aria-label': 'Jobs' }, h('thead', null, h('tr', null,
        ['Job', 'Agent', 'Eval set', 'Owner (scope)', 'Status', 'Progress', 'Pass rate', 'Interval', 'Duration', 'Created'].map((c) => h('th', { scope: 'col' }, c)))), tbody)];
    let page;
    try { page = await listJobs(sig.signal); } catch (e) { return out.concat(errorBox(e)); }
    const items = page.items || [];
    if (!items.length) tbody.append(h('tr', null, h('td', { colspan: 10 }, 'No jobs yet.')));
    let streams = 0, fetched = 0;
    for (const j of items) {
      const cells = { phase: h('td'), progress: h('td'), duration: h('td', { class: 'num' }), rate: h('td', { class: 'num' }, '–'), iv: h('td') };
      tbody.append(h('tr', { 'data-job': j.job_id },
        h('td', null, h('a', { href: route('jobs', j.job_id) }, j.job_id)),
        h('td', null, j.agent_name || '–'),
        h('td', null, (j.eval_set_id || '') + ' ' + (j.eval_set_version || '')),
        h('td', null, j.scope || ''), cells.phase, cells.progress, cells.rate, cells.iv, cells.duration, h('td', null, when(j.created_at))));
      jobRow(j, cells);
      const showResult = (job) => {
        if (job.phase !== 'completed' || fetched >= 25) return;
        fetched++;
        jobResult(job.job_id, sig.signal).then((r) => {
          fill(cells.rate, statusBadge(r.passed ? 'PASS' : 'FAIL'), ' ', f4(r.pass_rate));
          cells.iv.textContent = intervalText(r.pass_rate_interval);
        }).catch((e) => fill(cells.rate, errorBox(e) || ''));
      };
      showResult(j);
      if (!TERMINAL.has(j.phase) && streams < 8) {
        streams++;
        watchJob(j.job_id, sig.signal, (job) => { jobRow(job, cells); showResult(job); },
          (e) => say('Job ' + j.job_id + ' stream: ' + (e.code || '') + ' ' + (e.message || '')));
      }
    }
    return out;
  }

  function caseTable(jobID, r) {
    const ids = (r.metrics || []).map((m) => m.metric_id);
    const rows = (r.cases || []).map((c, i) => {
      const by = new Map((c.criteria || []).map((m) => [m.metric_id, m]));
      return h('tr', null,
        h('td', null, h('a', { href: route('jobs', jobID, 'cases', i) }, c.case_id)),
        h('td', null, statusBadge(c.status)),
        h('td', { class: 'num' }, c.passed_sample_count + '/' + c.sample_count),
        ids.map((id) => {
          const m = by.get(id);
          return h('td', { class: 'num' }, m ? [f4(m.score) + ' / ' + f4(m.threshold), m.passed ? '' : ' ✗'] : '–');
        }));
    });
    return table('Cases', ['Case', 'Status', 'Samples passed'].concat(ids), rows);
  }
  function resultSummary(r) {
    return [kv([
      ['Verdict', statusBadge(r.passed ? 'PASS' : 'FAIL')],
      ['Eval set', r.eval_set_id + ' (version ' + r.eval_set_version + ')'],
      ['Pass rate', f4(r.pass_rate) + ' (' + r.passed_case_count + '/' + r.case_count + ' cases; threshold ' + f4(r.pass_rate_threshold) + ')'],
      ['Interval', intervalText(r.pass_rate_interval)],
      ['Samples per case', String(r.sample_count)],
      ['Duration', dur(r.duration_ms)],
      r.metadata && r.metadata.agent_name ? ['Agent', String(r.metadata.agent_name)] : null,
    ]),
    h('h2', null, 'Metrics'),
    table('Metrics', ['Metric', 'Kind', 'Scope', 'Average', 'Threshold', 'Evaluated', 'Errors', 'Status'],
      (r.metrics || []).map((m) => h('tr', null, h('td', null, m.metric_id), h('td', null, m.kind), h('td', null, m.scope),
        h('td', { class: 'num' }, f4(m.average_score)), h('td', { class: 'num' }, f4(m.threshold)),
        h('td', { class: 'num' }, m.evaluated_count), h('td', { class: 'num' }, m.error_count),
        h('td', null, statusBadge(m.passed ? 'PASS' : 'FAIL')))))];
  }

  async function pageJob(sig, id) {
    const head = h('div');
    const actions = h('div');
    const body = h('div');
    const trouble = h('div', { role: 'status' });
    const htmlBtn = h('button', { type: 'button', on: { click: () => downloadReport(id, trouble) } }, 'Download HTML report');
    // Cancelling: each press of the button is one cancel with its own key,
    // sent again by the automatic retries and by Retry (see writeOnce).
    // The button is disabled while it is in flight and, once the server
    // took it, until the job ends (then the report button replaces it).
    const cancelStatus = h('div', { id: 'cancel-status' });
    let cancelling = false, cancelAsked = false, phase = '';
    // cancelOutcome says where a cancel the server took stands: asked,
    // or the job's end as the live status reports it.
    const cancelOutcome = () => {
      if (!cancelAsked) return;
      fill(cancelStatus, h('p', { role: 'status' }, !TERMINAL.has(phase) ? 'Cancellation requested: the job is stopping.'
        : phase === 'cancelled' ? 'The job was cancelled.' : 'The job ended as ' + phase + ' before the cancellation reached it.'));
    };
    const sendCancel = async (key) => {
      if (cancelling || sig.signal.aborted) return;
      cancelling = true;
      cancel.disabled = true;
      let done = false;
      try {
        for (let attempt = 0; ; attempt++) {
          fill(cancelStatus, h('p', { class: 'muted', role: 'status' }, attempt ? 'Cancelling again with the same Idempotency-Key (attempt ' + (attempt + 1) + ')…' : 'Cancelling…'));
          try {
            await writeOnce(API + '/evaluation/jobs/' + encodeURIComponent(id), { method: 'DELETE' }, key, sig.signal);
          } catch (x) {
            if (sig.signal.aborted) return;
            const unsure = writeUnsure(x);
            if (unsure && attempt < WRITE_RETRY_DELAYS_MS.length) {
              await pause(WRITE_RETRY_DELAYS_MS[attempt], sig.signal);
              if (sig.signal.aborted) return;
              continue;
            }
            if (x instanceof ApiError && x.code === 'evaluation_state_conflict') {
              // The job ended before the cancel reached it.
              done = true;
              fill(cancelStatus, h('p', { class: 'notice', role: 'status' }, 'Not cancelled: the job had already ended' +
                (x.details && x.details.phase ? ' (' + x.details.phase + ')' : '') + '.'));
              return;
            }
            const box = writeFailure(x);
            if (unsure) {
              box.append(h('p', null, 'The job may or may not have been cancelled. Retrying sends the same Idempotency-Key: it answers as the first attempt did if that one reached the server.'),
                h('button', { type: 'button', id: 'cancel-retry', on: { click: () => sendCancel(key) } }, 'Retry cancelling'));
            }
            fill(cancelStatus, box);
            return;
          }
          done = true;
          cancelAsked = true;
          cancelOutcome();
          return;
        }
      } finally {
        if (!done) {
          cancelling = false;
          cancel.disabled = false;
        }
      }
    };
    const cancel = h('button', { type: 'button', id: 'cancel-job', on: { click: () => sendCancel(idempotencyKey()) } }, 'Cancel job');
    let shown = false;
    const render = async (j) => {
      phase = j.phase;
      cancelOutcome();
      const cells = { phase: h('span'), progress: h('span'), duration: h('span') };
      jobRow(j, cells);
      fill(head, kv([
        ['Status', cells.phase], ['Progress', cells.progress], ['Agent', j.agent_name || '–'], ['Eval set', (j.eval_set_id || '') + ' ' + (j.eval_set_version || '')],
        ['Owner (scope)', j.scope || ''], ['Created', when(j.created_at)], ['Duration', cells.duration],
        j.reason ? ['Reason', h('code', null, j.reason)] : null]),
      h('p', null, h('a', { href: withQuery('#/traces', { job_id: id }) }, 'Traces of this job'), ' · ',
        h('a', { href: withQuery('#/compare', { current: id }) }, 'Compare with another result'), ' · ',
        j.eval_set_id ? h('a', { href: withQuery('#/trend', { set: j.eval_set_id }) }, 'Trend of this eval set') : null));
      // The button stays in the page while the job runs (a status event
      // must not take it, and its focus, away from the user).
      const action = TERMINAL.has(j.phase) ? htmlBtn : cancel;
      if (actions.firstChild !== action) fill(actions, action);
      if (j.phase === 'completed' && !shown) {
        shown = true;
        try {
          const r = await jobResult(id, sig.signal);
          fill(body, h('h2', null, 'Result'), resultSummary(r), h('h2', null, 'Cases'), caseTable(id, r));
        } catch (e) {
          if (!tooLargeToShow(e)) { fill(body, errorBox(e) || ''); return; }
          fill(body, await bigResultView(id, sig.signal));
        }
      }
    };
    let j;
    try { j = await api(API + '/evaluation/jobs/' + encodeURIComponent(id), { signal: sig.signal }); } catch (e) { return [h('h1', null, 'Job ', id), errorBox(e)]; }
    await render(j);
    if (!TERMINAL.has(j.phase)) {
      watchJob(id, sig.signal, (x) => { render(x); }, (e) => fill(trouble, h('div', { class: 'notice' },
        'Live updates interrupted (' + (e.code || '') + '): ' + (e.message || '') + ' — reconnecting.')));
    }
    return [h('h1', null, 'Job ', h('code', null, id)), head, actions, cancelStatus, trouble, body];
  }

  // The report formats a download offers: the file's extension and type.
  const DOWNLOADS = {
    html: { ext: 'html', type: 'text/html', label: 'HTML report' },
    markdown: { ext: 'md', type: 'text/markdown', label: 'Markdown report' },
    jsonl: { ext: 'jsonl', type: 'application/jsonl', label: 'Result as JSON Lines' },
  };

  // downloadReport saves a job's report in one of DOWNLOADS' formats (the
  // bearer token rules out a plain link) and says in where what it saved.
  async function downloadReport(id, where, format) {
    const f = DOWNLOADS[format || 'html'];
    if (format) fill(where, h('p', { class: 'muted' }, 'Preparing the ' + f.label + '…'));
    try {
      const res = await call(API + '/evaluation/jobs/' + encodeURIComponent(id) + '/report?format=' + (format || 'html'));
      const blob = new Blob([await res.arrayBuffer()], { type: f.type });
      const a = document.createElement('a');
      a.href = URL.createObjectURL(blob); // a blob: URL of the server's own escaped report
      a.download = (format === 'jsonl' ? 'adk-result-' : 'adk-report-') + id.replace(/[^A-Za-z0-9_.-]/g, '_') + '.' + f.ext;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(a.href), 10000);
      if (format) fill(where, h('p', { class: 'notice', role: 'status' }, 'Downloaded ' + a.download + ' (' + (blob.size / 1048576).toFixed(1) + ' MiB).'));
    } catch (e) { fill(where, errorBox(e) || ''); }
  }

  // tooLargeToShow: the job's result is past what one document holds
  // (16 MiB of samples); its report route streams it instead.
  function tooLargeToShow(e) {
    return e instanceof ApiError && e.status === 413 && !!e.details && e.details.reason === 'eval_report_too_large';
  }

  // bigResult stands for a result too large to load into the page: what
  // happened, and the downloads the report route streams.
  function bigResult(id) {
    const status = h('div', { id: 'big-result-status' });
    const button = (format) => h('button', { type: 'button', id: 'download-' + format,
      on: { click: () => downloadReport(id, status, format) } }, 'Download ' + DOWNLOADS[format].label);
    return h('div', { id: 'big-result' },
      h('p', null, 'This result’s samples pass the 16 MiB one result document holds, so the page shows its summary and its cases ',
        CASE_ROWS_PAGE + ' at a time, read from its stream. Its samples are in the downloads.'),
      h('p', null, button('jsonl'), ' ', button('markdown'), ' ', button('html')),
      status);
  }

  // casesPage reads a page of a job's case rows with its summary: the
  // cases route reads a stored result of any size without its samples.
  async function casesPage(id, offset, signal) {
    return api(API + '/evaluation/jobs/' + encodeURIComponent(id) + '/cases?limit=' + CASE_ROWS_PAGE + '&offset=' + offset, { signal });
  }

  // bigResultView shows a result past one document: its summary, its case
  // rows a page at a time (failures first, Previous/Next, as the compare
  // page), and its downloads. A row opens its case's page, which reads the
  // case from the case route (its samples from the stream).
  async function bigResultView(id, signal) {
    let first;
    try { first = await casesPage(id, 0, signal); } catch (e) { return [h('h2', null, 'Result'), bigResult(id), errorBox(e) || '']; }
    const ids = (first.summary.metrics || []).map((m) => m.metric_id);
    const rowsBox = h('div', { id: 'case-rows' });
    const starts = []; // offsets of the pages before the one shown
    const show = async (page) => {
      const to = page.offset + page.cases.length;
      const nav = page.case_count > page.cases.length ? h('p', { class: 'pager' },
        h('button', { type: 'button', id: 'rows-prev', disabled: !starts.length, on: { click: () => go(starts.pop(), false) } }, 'Previous'),
        ' Rows ' + (page.cases.length ? page.offset + 1 : 0) + '–' + to + ' of ' + page.case_count + ' (' + page.failed_case_count + ' not passed) ',
        h('button', { type: 'button', id: 'rows-next', disabled: page.next_offset === null, on: { click: () => { starts.push(page.offset); go(page.next_offset, true); } } }, 'Next')) : null;
      fill(rowsBox, nav, table('Cases, not passed first', ['Case', 'Status', 'Samples passed'].concat(ids), page.cases.map((c) => {
        const by = new Map((c.criteria || []).map((m) => [m.metric_id, m]));
        return h('tr', null, h('td', null, h('a', { href: route('jobs', id, 'cases', c.case_index) }, c.case_id)), h('td', null, statusBadge(c.status)),
          h('td', { class: 'num' }, c.passed_sample_count + '/' + c.sample_count),
          ids.map((mid) => {
            const m = by.get(mid);
            return h('td', { class: 'num' }, m ? [f4(m.score) + ' / ' + f4(m.threshold), m.passed ? '' : ' ✗'] : '–');
          }));
      })));
    };
    const go = async (offset, forward) => {
      try {
        await show(await casesPage(id, offset, signal));
      } catch (e) {
        if (forward) starts.pop();
        rowsBox.prepend(errorBox(e) || '');
      }
    };
    await show(first);
    return [h('h2', null, 'Result'), bigResult(id), resultSummary(first.summary), h('h2', null, 'Cases'), rowsBox];
  }

  function mismatchOf(sample) {
    for (const m of sample.criteria || []) {
      const mm = (m.metadata || {}).first_mismatch;
      if (!m.passed && mm && mm.expected_index !== undefined) return mm;
    }
    return null;
  }
  function expectedTools(turns) {
    let has = false;
    const names = [];
    for (const t of turns || []) {
      const e = t.expected;
      if (!e || typeof e !== 'object' || Array.isArray(e)) continue;
      const l = e.trajectory || e.tool_uses;
      if (!Array.isArray(l)) continue;
      has = true;
      for (const x of l) names.push(typeof x === 'string' ? x : (x && (x.tool || x.name)) || '');
    }
    return { has, names };
  }
  function traceLink(jobID, c, s) {
    if (s.trace_id) return withQuery('#/traces', { trace_id: s.trace_id });
    if (s.run_id) return withQuery('#/traces', { run_id: s.run_id });
    return withQuery('#/traces', { job_id: jobID, case_id: c.case_id, sample_id: s.sample_id });
  }

  function sampleView(jobID, c, s) {
    const parts = [h('h3', null, 'Sample ' + s.sample_index + ' ', statusBadge(s.status), ' ',
      h('a', { href: traceLink(jobID, c, s) }, 'Trace of this sample'))];
    if (s.error) parts.push(h('p', { class: 'error' }, 'Error: ', h('code', null, s.error)));
    const metrics = [];
    for (const m of s.criteria || []) metrics.push(['case', m]);
    for (const t of s.turns || []) for (const m of t.metrics || []) metrics.push([t.turn_id, m]);
    if (metrics.length) {
      parts.push(table('Metric scores of sample ' + s.sample_index, ['Metric', 'Where', 'Score', 'Threshold', 'Status', 'Reason, rationale or typed error'],
        metrics.map(([where, m]) => h('tr', null, h('td', null, m.metric_id), h('td', null, where),
          h('td', { class: 'num' }, f4(m.score)), h('td', { class: 'num' }, f4(m.threshold)),
          h('td', null, statusBadge(m.passed ? 'PASS' : 'FAIL'), ' ', m.status), h('td', null, metricReason(m))))));
    }
    for (const t of s.turns || []) {
      parts.push(h('h4', null, 'Turn ' + t.turn_id), h('p', { class: 'muted' }, 'Input'), h('pre', null, text(t.input)));
      const exp = expectedResponse(t.expected);
      const act = text(t.actual);
      if (exp === null) {
        parts.push(h('p', { class: 'muted' }, 'Actual (no expected response)'), h('pre', null, act));
      } else {
        parts.push(h('div', { class: 'sbs' },
          h('div', null, h('p', { class: 'muted' }, 'Expected'), h('pre', null, exp)),
          h('div', null, h('p', { class: 'muted' }, 'Actual'), h('pre', null, act))),
        h('p', { class: 'muted' }, 'Difference (', h('del', null, 'expected only'), ', ', h('ins', null, 'actual only'), ')'),
        h('pre', { class: 'diff', 'aria-label': 'difference' }, diffWords(exp, act).map(([op, x]) => (op === '-' ? h('del', null, x) : op === '+' ? h('ins', null, x) : x))));
      }
    }
    const exp = expectedTools(s.turns);
    const act = (s.trajectory || []).filter((x) => !x.kind || x.kind === 'tool_call').map((x) => x.tool);
    const mm = mismatchOf(s);
    const ei = mm ? mm.expected_index : -1, ai = mm ? mm.actual_index : -1;
    const n = Math.max(exp.names.length, act.length, ei + 1, ai + 1);
    if (n > 0) {
      const rows = [];
      for (let i = 0; i < n; i++) {
        const e = i < exp.names.length ? exp.names[i] : i === ei ? (mm.expected || '') : '';
        const mark = [i === ei ? '✗ first unmatched expected call' : '', i === ai ? '✗ actual call in its place' : ''].filter(Boolean).join('; ');
        rows.push(h('tr', { class: mark ? 'mismatch' : null }, h('td', { class: 'num' }, i + 1), h('td', null, e), h('td', null, i < act.length ? act[i] : ''), h('td', null, mark)));
      }
      parts.push(table('Tool trajectory of sample ' + s.sample_index + ', expected and actual side by side', ['#', 'Expected tool', 'Actual tool', 'Match'], rows));
      if (!exp.has) parts.push(h('p', { class: 'muted' }, 'The expected trajectory is the case’s (not in the result); only a mismatch its criterion recorded is shown.'));
    }
    return h('section', { class: 'sample', 'aria-label': 'Sample ' + s.sample_index }, parts);
  }

  // casePage reads one case of a job and a page of its samples (in sample
  // order; the default page is the whole case unless its samples pass
  // the route's byte bound): the case route reads a stored result of any
  // size, up to the page's samples, so small and big results alike.
  async function casePage(jobID, index, offset, signal) {
    return api(API + '/evaluation/jobs/' + encodeURIComponent(jobID) + '/cases/' + encodeURIComponent(index) + '?offset=' + offset, { signal });
  }

  // pageCase shows a case and its samples, the failed ones first on each
  // page, with Previous/Next when the case's samples take more than one.
  async function pageCase(sig, jobID, index) {
    let first;
    try {
      first = await casePage(jobID, index, 0, sig.signal);
    } catch (e) {
      if (e instanceof ApiError && e.status === 404 && e.details && e.details.parameter === 'case_index') return [h('p', { class: 'error' }, 'No such case.')];
      return [h('p', null, h('a', { href: route('jobs', jobID) }, '← Job ' + jobID)), errorBox(e)];
    }
    const c = first.case;
    const box = h('div', { id: 'case-samples' });
    const starts = []; // offsets of the pages before the one shown
    const show = (page) => {
      const samples = page.samples.slice().sort((a, b) => (a.passed === b.passed ? a.sample_index - b.sample_index : a.passed ? 1 : -1));
      const nav = page.sample_count > page.samples.length ? h('p', { class: 'pager' },
        h('button', { type: 'button', id: 'samples-prev', disabled: !starts.length, on: { click: () => go(starts.pop(), false) } }, 'Previous'),
        ' Samples ' + (page.samples.length ? page.offset + 1 : 0) + '–' + (page.offset + page.samples.length) + ' of ' + page.sample_count + ' (not passed first) ',
        h('button', { type: 'button', id: 'samples-next', disabled: page.next_offset === null, on: { click: () => { starts.push(page.offset); go(page.next_offset, true); } } }, 'Next')) : null;
      fill(box, nav, samples.map((s) => sampleView(jobID, c, s)));
    };
    const go = async (offset, forward) => {
      try {
        show(await casePage(jobID, index, offset, sig.signal));
      } catch (e) {
        if (forward) starts.pop();
        box.prepend(errorBox(e) || '');
      }
    };
    show(first);
    return [h('p', null, h('a', { href: route('jobs', jobID) }, '← Job ' + jobID)),
      h('h1', null, 'Case ', h('code', null, c.case_id)),
      kv([['Status', statusBadge(c.status)], ['Samples passed', c.passed_sample_count + '/' + c.sample_count],
        ['Sample pass rate', f4(c.sample_pass_rate) + ' (threshold ' + f4(c.sample_pass_rate_threshold) + ')']]),
      box];
  }

  async function completedJobs(signal) {
    const page = await listJobs(signal, 100);
    return (page.items || []).filter((j) => j.phase === 'completed');
  }
  function jobSelect(id, label, jobs, chosen) {
    return [h('label', { for: id }, label, h('select', { id, name: id },
      h('option', { value: '' }, '(choose)'),
      jobs.map((j) => h('option', { value: j.job_id, selected: j.job_id === chosen }, j.job_id + ' · ' + (j.eval_set_id || '') + ' ' + (j.eval_set_version || '') + ' · ' + when(j.created_at)))))];
  }

  async function pageCompare(sig, q) {
    let jobs = [];
    const out = [h('h1', null, 'Compare two results')];
    try { jobs = await completedJobs(sig.signal); } catch (e) { out.push(errorBox(e)); }
    const baselineName = h('input', { id: 'baseline_name', name: 'baseline_name', value: q.get('baseline_name') || '' });
    const drop = h('input', { id: 'drop', name: 'drop', type: 'number', min: 0, max: 1, step: 'any', value: q.get('max_pass_rate_drop') || '0' });
    const tol = h('input', { id: 'tol', name: 'tol', placeholder: '{"response":0.05}', value: q.get('metric_tolerances') || '' });
    const res = h('div');
    const form = h('form', { class: 'inline', on: { submit: (e) => {
      e.preventDefault();
      const fd = new FormData(form);
      location.hash = withQuery('#/compare', { baseline: fd.get('baseline'), baseline_name: baselineName.value, current: fd.get('current'),
        max_pass_rate_drop: drop.value, metric_tolerances: tol.value, go: '1' });
    } } },
    jobSelect('baseline', 'Baseline job', jobs, q.get('baseline')),
    h('label', { for: 'baseline_name' }, 'or named baseline', baselineName),
    jobSelect('current', 'Current job', jobs, q.get('current')),
    h('label', { for: 'drop' }, 'Allowed pass-rate drop', drop),
    h('label', { for: 'tol' }, 'Metric tolerances (JSON)', tol),
    h('button', { type: 'submit' }, 'Compare'));
    out.push(form, res);
    if (q.get('go') && q.get('current') && (q.get('baseline') || q.get('baseline_name'))) {
      try {
        // Both sides by reference: the server reads the stored results,
        // so results over the 64 KiB request body compare too.
        const body = { current_job_id: q.get('current'), options: { max_pass_rate_drop: Number(q.get('max_pass_rate_drop') || 0) } };
        if (q.get('baseline')) body.baseline_job_id = q.get('baseline');
        else body.baseline_name = q.get('baseline_name');
        if (q.get('metric_tolerances')) body.options.metric_tolerances = JSON.parse(q.get('metric_tolerances'));
        const cmp = await api(API + '/evaluation/compare', { method: 'POST', body, signal: sig.signal });
        // Both Wilson intervals, from the same statistics `adk eval stats` prints.
        let baseIv = null, curIv = null, ivErr = null;
        try {
          let baseJob = q.get('baseline');
          if (!baseJob) baseJob = (await api(API + '/evaluation/baselines/' + encodeURIComponent(q.get('baseline_name')), { signal: sig.signal })).job_id;
          const st = await stats([baseJob, q.get('current')], sig.signal);
          baseIv = st.results[0].pass_rate_interval; curIv = st.results[1].pass_rate_interval;
        } catch (e) { ivErr = e; }
        fill(res, comparisonView(cmp, baseIv, curIv), ivErr ? errorBox(ivErr) : null);
      } catch (e) { fill(res, errorBox(e) || ''); }
    }
    return out;
  }
  // A comparison has a row per baseline case (100,000 for a large set):
  // the case table shows CASE_ROWS_PAGE rows at a time, regressions
  // first, with Previous/Next, so the page never builds every row.
  const CASE_ROWS_PAGE = 100;
  function comparisonView(c, baseIv, curIv) {
    const all = c.case_diffs || [];
    const regressed = all.filter((d) => d.regression);
    const cases = regressed.concat(all.filter((d) => !d.regression));
    const rowsBox = h('div', { id: 'case-rows' });
    const showRows = (from) => {
      const to = Math.min(cases.length, from + CASE_ROWS_PAGE);
      const nav = cases.length > CASE_ROWS_PAGE ? h('p', { class: 'pager' },
        h('button', { type: 'button', id: 'rows-prev', disabled: from === 0, on: { click: () => showRows(Math.max(0, from - CASE_ROWS_PAGE)) } }, 'Previous'),
        ' Rows ' + (cases.length ? from + 1 : 0) + '–' + to + ' of ' + cases.length + ' (' + regressed.length + ' regressions) ',
        h('button', { type: 'button', id: 'rows-next', disabled: to >= cases.length, on: { click: () => showRows(to) } }, 'Next')) : null;
      fill(rowsBox, nav, table('Case changes, newly failing first', ['Case', 'Baseline', 'Current', 'Trajectory changed', 'Status'],
        cases.slice(from, to).map((d) => h('tr', null, h('td', null, d.case_id), h('td', null, statusBadge(d.baseline_status)), h('td', null, statusBadge(d.current_status)),
          h('td', null, d.trajectory_changed ? 'yes' : 'no'), h('td', null, d.regression ? [statusBadge('REGRESSION'), ' ', d.reason] : 'ok')))));
    };
    showRows(0);
    return h('section', { 'aria-label': 'Comparison' },
      h('h2', null, 'Comparison ', statusBadge(c.passed ? 'PASS' : 'FAIL')),
      kv([['Eval set', c.eval_set_id + ' (baseline ' + c.baseline_version + ', current ' + c.current_version + ')'],
        ['Pass rate', f4(c.baseline_pass_rate) + ' → ' + f4(c.current_pass_rate) + ' (drop ' + f4(c.pass_rate_drop) + ', allowed ' + f4(c.max_pass_rate_drop) + ')'],
        ['Baseline interval', intervalText(baseIv)], ['Current interval', intervalText(curIv)]]),
      table('Metric changes', ['Metric', 'Baseline', 'Current', 'Delta', 'Tolerance', 'Status'],
        (c.metric_diffs || []).map((m) => h('tr', null, h('td', null, m.metric_id), h('td', { class: 'num' }, f4(m.baseline_score)),
          h('td', { class: 'num' }, f4(m.current_score)), h('td', { class: 'num' }, f4(m.current_score - m.baseline_score)),
          h('td', { class: 'num' }, f4(m.tolerance)), h('td', null, m.regression ? [statusBadge('REGRESSION'), ' ', m.reason] : 'ok')))),
      rowsBox);
  }

  async function pageTrend(sig, q) {
    const out = [h('h1', null, 'Pass-rate trend')];
    let jobs = [];
    try { jobs = await completedJobs(sig.signal); } catch (e) { return out.concat(errorBox(e)); }
    const sets = [...new Set(jobs.map((j) => j.eval_set_id).filter(Boolean))].sort();
    const chosen = q.get('set') || sets[0] || '';
    const sel = h('select', { id: 'set', name: 'set', on: { change: () => { location.hash = withQuery('#/trend', { set: sel.value }); } } },
      sets.map((s) => h('option', { value: s, selected: s === chosen }, s)));
    out.push(h('form', { class: 'inline', on: { submit: (e) => e.preventDefault() } }, h('label', { for: 'set' }, 'Eval set', sel)));
    if (!chosen) return out.concat(h('p', null, 'No completed jobs yet.'));
    const runs = jobs.filter((j) => j.eval_set_id === chosen).sort((a, b) => a.created_at - b.created_at).slice(-30);
    let doc;
    try { doc = await stats(runs.map((j) => j.job_id), sig.signal); } catch (e) { return out.concat(errorBox(e)); }
    const rs = doc.results || [];
    const gate = doc.gate;
    const prGate = gate && gate.pass_rate;
    out.push(trendChart('Pass rate per run with its Wilson interval as a band', runs,
      rs.map((r) => ({ v: r.pass_rate_interval.rate, lo: r.pass_rate_interval.lower, hi: r.pass_rate_interval.upper, text: intervalText(r.pass_rate_interval) })), prGate));
    out.push(h('h2', null, 'Regressions gate (adk eval stats)'));
    if (!gate) {
      out.push(h('p', { class: 'muted' }, 'The gate needs at least two runs.'));
    } else {
      const level = Math.round(doc.confidence_level * 100) + '%';
      out.push(kv([['Verdict', statusBadge(doc.passed ? 'PASS' : 'REGRESSION')],
        ['Last run against', gate.baseline_results + ' earlier run(s) pooled'],
        ['Policy', level + ', tolerated drop ' + f4(gate.options.max_mean_drop) + (gate.options.require_significance ? ', significance required' : '')]]));
      const rows = [['pass rate', prGate]].concat((gate.metrics || []).map((m) => ['metric ' + m.metric_id, m.gate]));
      out.push(table('Gates', ['Gate', 'Verdict', 'Earlier runs pooled', 'Last run', 'Drop', level + ' lower bound', 'Margin'],
        rows.map(([name, g]) => h('tr', { class: g && g.regression ? 'mismatch' : null }, h('td', null, name),
          h('td', null, g ? statusBadge(g.regression ? 'REGRESSION' : 'PASS') : 'not gated (no scores on one side)'),
          h('td', { class: 'num' }, g ? f4(g.baseline.mean) : '–'), h('td', { class: 'num' }, g ? f4(g.current.mean) : '–'),
          h('td', { class: 'num' }, g ? f4(g.mean_drop) : '–'), h('td', { class: 'num' }, g ? f4(g.mean_drop_lower_bound) : '–'),
          h('td', { class: 'num' }, g ? f4(g.mean_drop_margin) : '–')))));
      for (const m of gate.metrics || []) {
        if (!m.gate) continue;
        const pts = rs.map((r) => {
          const iv = ((r.metrics || []).find((x) => x.metric_id === m.metric_id) || {}).interval;
          return iv ? { v: iv.mean, lo: iv.lower, hi: iv.upper, text: f4(iv.mean) + ' (' + Math.round(iv.confidence_level * 100) + '% ' + f4(iv.lower) + '–' + f4(iv.upper) + ')' } : null;
        });
        out.push(h('h3', null, 'Metric ', h('code', null, m.metric_id), ' ', statusBadge(m.gate.regression ? 'REGRESSION' : 'PASS')),
          trendChart('Mean score of metric ' + m.metric_id + ' per run with its confidence interval as a band', runs, pts, m.gate));
      }
    }
    out.push(table('Runs of ' + chosen, ['Job', 'Version', 'Pass rate', 'Interval', 'Created'],
      runs.map((job, i) => h('tr', null, h('td', null, h('a', { href: route('jobs', job.job_id) }, job.job_id)), h('td', null, rs[i] ? rs[i].eval_set_version : ''),
        h('td', { class: 'num' }, rs[i] ? f4(rs[i].pass_rate_interval.rate) : '–'), h('td', null, rs[i] ? intervalText(rs[i].pass_rate_interval) : '–'), h('td', null, when(job.created_at))))));
    return out;
  }
  // trendChart draws one series per run (value with its interval as a
  // band; a run without a value leaves a gap) and, when gated, the pooled
  // mean of the earlier runs and the last point marked by the verdict.
  function trendChart(label, runs, pts, gate) {
    const W = 800, H = 220, L = 40, R = 10, T = 10, B = 30;
    const n = pts.length;
    const x = (i) => L + (n === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (n - 1));
    const y = (v) => T + (1 - Math.max(0, Math.min(1, v))) * (H - T - B);
    const idx = pts.map((p, i) => (p ? i : -1)).filter((i) => i >= 0);
    const kids = [svg('title', null, label)];
    for (const v of [0, 0.5, 1]) kids.push(svg('line', { class: 'axis', x1: L, x2: W - R, y1: y(v), y2: y(v) }), svg('text', { x: 4, y: y(v) + 4 }, v.toFixed(1)));
    if (idx.length) {
      const upper = idx.map((i) => x(i) + ',' + y(pts[i].hi));
      const lower = idx.map((i) => x(i) + ',' + y(pts[i].lo)).reverse();
      kids.push(svg('polygon', { class: 'band', points: upper.concat(lower).join(' ') }));
      kids.push(svg('polyline', { class: 'line', points: idx.map((i) => x(i) + ',' + y(pts[i].v)).join(' ') }));
    }
    pts.forEach((p, i) => {
      if (p) {
        const last = i === n - 1;
        kids.push(svg('circle', { class: last && gate && gate.regression ? 'reg' : 'pt', cx: x(i), cy: y(p.v), r: 4 },
          svg('title', null, runs[i].job_id + ': ' + p.text)));
      }
      kids.push(svg('text', { x: x(i) - 10, y: H - 10 }, '#' + (i + 1)));
    });
    if (gate) {
      const m = gate.baseline.mean;
      kids.push(svg('line', { class: 'axis', x1: L, x2: W - R, y1: y(m), y2: y(m), 'stroke-dasharray': '4 3' }),
        svg('text', { x: W - R - 170, y: y(m) + (m > 0.9 ? 14 : -4) }, 'pooled earlier runs ' + f4(m)));
    }
    return svg('svg', { class: 'trend', viewBox: '0 0 ' + W + ' ' + H, role: 'img', 'aria-label': label }, kids);
  }

  const SELECTORS = ['job_id', 'case_id', 'sample_id', 'run_id', 'trace_id', 'workflow_id', 'invocation_id'];
  async function pageTraces(sig, q) {
    const inputs = {};
    const form = h('form', { class: 'inline', on: { submit: (e) => {
      e.preventDefault();
      const sel = {};
      for (const k of SELECTORS) sel[k] = inputs[k].value.trim();
      location.hash = withQuery('#/traces', Object.assign(sel, { tail: tail.checked ? '1' : '' }));
    } } },
    SELECTORS.map((k) => {
      inputs[k] = h('input', { id: 'sel-' + k, name: k, value: q.get(k) || '', size: 14 });
      return h('label', { for: 'sel-' + k }, k, inputs[k]);
    }));
    const tail = h('input', { id: 'tail', type: 'checkbox', checked: q.get('tail') === '1' });
    form.append(h('label', { for: 'tail' }, 'Live tail', tail), h('button', { type: 'submit' }, 'Search'));
    const notice = h('div', { role: 'status' });
    const wf = h('div');
    const out = [h('h1', null, 'Traces'), form, notice, wf];
    const sel = new URLSearchParams();
    for (const k of SELECTORS) if (q.get(k)) sel.set(k, q.get(k));
    if (![...sel.keys()].length && q.get('tail') !== '1') {
      wf.append(h('p', { class: 'muted' }, 'Search by job, case, sample, run, trace, workflow or invocation id.'));
      return out;
    }
    const events = [];
    let cursor = 0;
    const fetchPage = async () => {
      const p = new URLSearchParams(sel);
      p.set('after_cursor', String(cursor));
      try {
        const page = await api(API + '/traces?' + p.toString(), { signal: sig.signal });
        for (const e of page.events || []) events.push(e);
        cursor = page.next_cursor || cursor;
        fill(notice, h('p', { class: 'muted' }, events.length + ' event(s); cursor ' + cursor + ' of ' + page.latest_cursor +
          (page.oldest_available_cursor != null ? '; oldest available ' + page.oldest_available_cursor : '') + (page.truncated ? '; page truncated, more follows' : '')));
        return page;
      } catch (e) {
        if (e instanceof ApiError && (e.code === 'trace_replay_gap' || e.code === 'replay_gap')) {
          // The events after our cursor were evicted: say so, and resume
          // from the oldest event still stored.
          const d = e.details || {};
          const lost = (d.oldest_available_cursor || 0) - cursor - 1;
          fill(notice, h('div', { class: 'notice', role: 'alert' }, 'Replay gap: events after cursor ' + cursor + ' up to ' +
            (d.evicted_through != null ? d.evicted_through : '?') + ' were evicted before they could be read' + (lost > 0 ? ' (' + lost + ' lost)' : '') +
            '; resuming at the oldest available event ' + (d.oldest_available_cursor != null ? d.oldest_available_cursor : '?') + '.'));
          cursor = Math.max(0, (d.oldest_available_cursor || 1) - 1);
          return { truncated: true, gap: true };
        }
        throw e;
      }
    };
    try {
      for (let i = 0; i < 20; i++) {
        const page = await fetchPage();
        if (!page.truncated) break;
      }
    } catch (e) { fill(wf, errorBox(e) || ''); return out; }
    fill(wf, waterfall(events));
    if (q.get('tail') === '1') {
      (async () => {
        while (!sig.signal.aborted) {
          await pause(1000, sig.signal);
          if (sig.signal.aborted) return;
          const before = events.length;
          try { await fetchPage(); } catch (e) { fill(notice, errorBox(e) || ''); continue; }
          if (events.length !== before) fill(wf, waterfall(events));
        }
      })();
    }
    return out;
  }
  const GENAI = ['gen_ai.operation.name', 'gen_ai.provider.name', 'gen_ai.request.model', 'gen_ai.response.model', 'gen_ai.tool.name',
    'gen_ai.tool.call.id', 'gen_ai.response.finish_reasons', 'gen_ai.usage.input_tokens', 'gen_ai.usage.output_tokens', 'error.type', 'status', 'outcome'];
  function nanos(ns) {
    if (ns < 1e6) return Math.round(ns / 1e3) + ' µs';
    return (ns / 1e6).toFixed(1) + ' ms';
  }
  function waterfall(events) {
    const spans = new Map();
    const others = [];
    for (const e of events) {
      const ev = e.event || {};
      if (ev.span_id) {
        const s = spans.get(ev.span_id) || { id: ev.span_id, attrs: {} };
        s.name = ev.name || s.name; s.kind = ev.kind || s.kind; s.parent = ev.parent_span_id || s.parent; s.trace = ev.trace_id || s.trace;
        if (ev.start_time_unix_nano) s.start = ev.start_time_unix_nano;
        if (ev.end_time_unix_nano) s.end = ev.end_time_unix_nano;
        if (ev.duration_nano != null && s.start) s.end = s.start + ev.duration_nano;
        if (ev.status) s.status = ev.status;
        Object.assign(s.attrs, ev.attributes || {});
        spans.set(ev.span_id, s);
      } else {
        others.push(e);
      }
    }
    const list = [...spans.values()].filter((s) => s.start).sort((a, b) => a.start - b.start);
    const out = [];
    if (list.length) {
      const t0 = list[0].start;
      const t1 = Math.max(...list.map((s) => s.end || s.start));
      const span = Math.max(1, t1 - t0);
      const depth = (s) => { let d = 0, p = s.parent; const seen = new Set(); while (p && spans.has(p) && !seen.has(p) && d < 20) { seen.add(p); d++; p = spans.get(p).parent; } return d; };
      out.push(h('h2', null, 'Waterfall'), table('Span waterfall', ['Span', 'Kind', 'Start', 'Duration', 'Timeline', 'Attributes'],
        list.map((s) => {
          const left = (100 * (s.start - t0)) / span, width = s.end ? (100 * (s.end - s.start)) / span : 0;
          const err = s.status === 'error' || s.attrs['error.type'];
          const bar = h('span', { class: err ? 'err' : null, title: s.name || '' });
          bar.style.left = left.toFixed(3) + '%';
          bar.style.width = Math.max(width, 0.2).toFixed(3) + '%';
          const attrs = GENAI.filter((k) => s.attrs[k] !== undefined).map((k) => k + '=' + (Array.isArray(s.attrs[k]) ? s.attrs[k].join(',') : s.attrs[k]));
          const name = h('td', null, s.name || s.id);
          name.style.paddingLeft = (0.5 + depth(s)) + 'rem';
          return h('tr', { class: err ? 'mismatch' : null }, name, h('td', null, s.kind || ''),
            h('td', { class: 'num' }, nanos(s.start - t0)), h('td', { class: 'num' }, s.end ? nanos(s.end - s.start) : 'open'),
            h('td', null, h('div', { class: 'wf', 'aria-hidden': 'true' }, bar)), h('td', null, attrs.join(' · '), err ? [' ', badge('error', 'fail')] : null));
        })));
    }
    if (others.length) {
      out.push(h('h2', null, 'Other events'), table('Events', ['Cursor', 'Kind', 'Time', 'Identity', 'Event'],
        others.slice(-200).map((e) => h('tr', null, h('td', { class: 'num' }, e.cursor), h('td', null, e.kind), h('td', null, when(e.timestamp_ms)),
          h('td', null, JSON.stringify(e.identity || {})), h('td', null, h('code', null, JSON.stringify(e.event).slice(0, 400)))))));
    }
    if (!out.length) out.push(h('p', null, 'No events match.'));
    return out;
  }

  async function pageCluster(sig) {
    const out = [h('h1', null, 'Cluster')];
    let c;
    try { c = await api(API + '/cluster', { signal: sig.signal }); } catch (e) { return out.concat(errorBox(e)); }
    const co = c.coordinator;
    out.push(h('h2', null, 'Coordinators'));
    if (c.coordinator_error) out.push(h('p', { class: 'error' }, c.coordinator_error));
    if (co) {
      const scalars = Object.entries(co).filter(([, v]) => v === null || typeof v !== 'object');
      out.push(kv(scalars.map(([k, v]) => [k, String(v)])));
      for (const [k, v] of Object.entries(co)) {
        if (Array.isArray(v) && v.length && typeof v[0] === 'object') out.push(h('h3', null, k), objTable(k, v));
        else if (v && typeof v === 'object' && !Array.isArray(v)) out.push(h('h3', null, k), kv(Object.entries(v).map(([a, b]) => [a, typeof b === 'object' ? JSON.stringify(b) : String(b)])));
        else if (Array.isArray(v)) out.push(h('h3', null, k), h('p', null, v.map(String).join(', ') || '(none)'));
      }
    }
    out.push(h('h2', null, 'Signal stream and store'));
    if (c.signals_error) out.push(h('p', { class: 'error' }, c.signals_error));
    const s = c.signals;
    if (s) {
      out.push(kv(Object.entries(s).filter(([, v]) => v === null || typeof v !== 'object').map(([k, v]) => [k, String(v)])));
      if (s.store_nodes) out.push(h('h3', null, 'Store nodes (consumer lag)'), objTable('Store nodes', s.store_nodes));
      if (s.limits) out.push(h('h3', null, 'Limits'), kv(Object.entries(s.limits).map(([k, v]) => [k, String(v)])));
    }
    return out;
  }
  function objTable(label, rows) {
    const cols = [...new Set(rows.flatMap((r) => Object.keys(r || {})))];
    return table(label, cols, rows.map((r) => h('tr', null, cols.map((k) => {
      const v = (r || {})[k];
      return h('td', null, v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v === undefined ? '' : v));
    }))));
  }

  // ---- router ------------------------------------------------------------
  async function show() {
    view.abort();
    view = new AbortController();
    const sig = view;
    say('');
    const raw = location.hash.replace(/^#\/?/, '');
    const [path, qs] = raw.split('?');
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    const q = new URLSearchParams(qs || '');
    const logout = document.getElementById('logout');
    logout.hidden = !token();
    let content;
    if (!token() || parts[0] === 'login') {
      content = pageLogin();
    } else {
      fill(main, h('p', { class: 'muted' }, 'Loading…'));
      try {
        switch (parts[0] || 'jobs') {
          case 'jobs':
            if (parts[1] && parts[2] === 'cases') content = await pageCase(sig, parts[1], parts[3]);
            else if (parts[1]) content = await pageJob(sig, parts[1]);
            else content = await pageJobs(sig);
            break;
          case 'compare': content = await pageCompare(sig, q); break;
          case 'trend': content = await pageTrend(sig, q); break;
          case 'traces': content = await pageTraces(sig, q); break;
          case 'cluster': content = await pageCluster(sig); break;
          default: content = [h('p', { class: 'error' }, 'No such page.')];
        }
      } catch (e) {
        content = [errorBox(e)];
      }
    }
    if (sig.signal.aborted) return;
    fill(main, content);
    document.title = 'adk · ' + (parts[0] || 'jobs');
    main.setAttribute('data-ready', raw);
    // After a navigation keyboard focus moves to the new content, so Tab
    // continues there rather than from a link that no longer exists.
    if (navigated) main.focus();
  }
  let navigated = false;
  document.getElementById('logout').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    results.clear();
    pendingSubmit = null;
    location.hash = '#/login';
  });
  window.addEventListener('hashchange', () => { navigated = true; show(); });
  show();
})();
