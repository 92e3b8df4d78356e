// The playground page: plain JavaScript, no framework. The server does every
// protocol computation (env, ARGOCD_APP_PARAMETERS, runs); the page holds the
// form and mirrors Argo CD's UI rules for plugin parameters:
//  - the parameters shown are the announced ones (the first entry of each name)
//    plus those the Application sets without an announcement;
//  - a field shows the Application's value if it sets one, else the default;
//  - changing a field makes it an Application parameter (appended in the order
//    of first change), holding the whole value: every map entry, every item;
//  - Reset removes it again; a parameter nobody announced can be deleted.
'use strict';
(() => {
  const $ = (sel, root = document) => root.querySelector(sel);
  const session = (crypto.randomUUID && crypto.randomUUID()) || String(Math.random()).slice(2);

  const state = {
    announcements: [],   // merged announcement, as the server returned it
    annKey: '',          // its JSON, to skip re-rendering an identical one
    overrides: [],       // spec.source.plugin.parameters
    env: null,           // build env
    plugin: null,
    runs: {generate: 0, announce: 0, discover: 0, environ: 0},
  };
  // For tests and curious authors: when manifests last reached the page.
  window.playground = {rendered: 0, renderedAt: 0, state};

  // ---- helpers -------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('data-') || k.startsWith('aria-') || k === 'role' || k === 'for') e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined && c !== false) e.append(c);
    return e;
  }

  async function api(path, body) {
    const init = body === undefined ? {} :
      {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)};
    const r = await fetch(path, init);
    let data;
    try { data = await r.json(); } catch (e) { data = {error: `${r.status} ${r.statusText}`}; }
    if (!r.ok) throw new Error(data.error || `${r.status} ${r.statusText}`);
    return data;
  }

  const input = () => ({parameters: state.overrides, env: state.env, session});

  function debounce(fn, ms) {
    let t = 0;
    return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
  }

  let busy = 0;
  function setStatus(text, cls) {
    const s = $('#status');
    s.textContent = text;
    s.className = 'status ' + (cls || (busy > 0 ? 'busy' : ''));
  }

  function showBanner(sel, text) {
    const b = $(sel);
    b.textContent = text || '';
    b.hidden = !text;
  }

  const fmtMs = ms => ms >= 1000 ? (ms / 1000).toFixed(2) + ' s' : Math.round(ms) + ' ms';

  // ---- item types (the server checks defaults the same way: lint.go) ---------

  const jsonNumber = /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$/;
  function misfit(itemType, v) {
    if (v === '' || v === undefined) return '';
    if (itemType === 'number' && !jsonNumber.test(v.trim())) return `"${v}" is not a number`;
    if (itemType === 'boolean' && v !== 'true' && v !== 'false') return `"${v}" is not true or false`;
    return '';
  }

  // ---- parameters ----------------------------------------------------------

  function firstAnnouncement(name) { return state.announcements.find(a => a.name === name); }
  function override(name) { return state.overrides.find(o => o.name === name); }

  function collectionOf(ann, ov) {
    const ct = ann && ann.collectionType;
    if (ct === 'map' || ct === 'array') return ct;
    if (ann && ct) return 'string';
    // Argo CD: with no collectionType, the Application's value decides.
    if (ov && ov.map) return 'map';
    if (ov && ov.array) return 'array';
    return 'string';
  }

  function currentValue(name, collection) {
    const ov = override(name);
    const ann = firstAnnouncement(name);
    if (collection === 'map') return ov ? (ov.map || {}) : ((ann && ann.map) || {});
    if (collection === 'array') return ov ? (ov.array || []) : ((ann && ann.array) || []);
    return ov ? (ov.string || '') : ((ann && ann.string) || '');
  }

  function paramNames() {
    const names = [];
    const seen = new Set();
    for (const a of state.announcements) if (!seen.has(a.name)) { seen.add(a.name); names.push(a.name); }
    for (const o of state.overrides) if (!seen.has(o.name)) { seen.add(o.name); names.push(o.name); }
    return names;
  }

  let fieldSeq = 0;
  // valueInput is one value: a checkbox for boolean items, a text input
  // otherwise (number items too: a type=number input would hide bad text
  // instead of letting us say what is wrong with it).
  function valueInput(itemType, value, label, multiline) {
    const id = 'f' + (++fieldSeq);
    if (itemType === 'boolean') {
      const cb = el('input', {type: 'checkbox', class: 'val', id, 'aria-label': label, 'data-raw': value});
      cb.checked = value === 'true';
      return cb;
    }
    if (multiline) return el('textarea', {class: 'val value', id, 'aria-label': label, value, spellcheck: false});
    return el('input', {type: 'text', class: 'val value', id, 'aria-label': label, value,
      inputMode: itemType === 'number' ? 'decimal' : undefined, spellcheck: false});
  }

  function readValue(e) {
    if (e.type === 'checkbox') return e.dataset.raw;
    return e.value;
  }

  function row(kind, itemType, title, idx, key, value) {
    const r = el('div', {class: 'row', 'data-row': idx});
    if (kind === 'map') {
      r.append(el('input', {type: 'text', class: 'key', value: key, 'aria-label': `${title}: key ${idx + 1}`, spellcheck: false, placeholder: 'key'}),
        el('span', {class: 'eq', 'aria-hidden': 'true', text: '='}));
    }
    const v = valueInput(itemType, value, kind === 'map' ? `${title}: value of ${key || 'key ' + (idx + 1)}` : `${title}: item ${idx + 1}`, false);
    r.append(v);
    if (itemType === 'boolean') r.append(el('span', {class: 'rawval', text: value === '' ? 'unset' : value}));
    r.append(el('button', {type: 'button', class: 'small remove', 'aria-label': `Remove ${kind === 'map' ? 'entry' : 'item'} ${idx + 1} of ${title}`, text: '×'}));
    return r;
  }

  function renderParam(name) {
    const ann = firstAnnouncement(name);
    const ov = override(name);
    const collection = collectionOf(ann, ov);
    const itemType = (ann && ann.itemType) || 'string';
    const title = (ann && (ann.title || ann.name)) || name;
    const value = currentValue(name, collection);
    const block = el('div', {class: 'param', 'data-param': name, 'data-collection': collection, 'data-item-type': itemType});
    const head = el('div', {class: 'param-head'},
      el('span', {class: 'title', text: title}),
      ann && ann.required ? el('span', {class: 'req', title: 'required', 'aria-label': 'required', text: '*'}) : null,
      title !== name ? el('code', {class: 'pname', text: name}) : null,
      el('span', {class: 'badge', text: collection === 'string' ? itemType : collection + (itemType !== 'string' ? ' of ' + itemType : '')}),
      ann ? el('span', {class: 'badge', title: 'announced by the ' + ann.source + ' announcement', text: ann.source}) :
        el('span', {class: 'badge app', text: 'not announced'}),
      ov ? el('span', {class: 'badge override', text: 'set by the Application'}) : null,
      el('button', {type: 'button', class: 'small reset', disabled: !ov,
        title: ann ? 'Back to the announced default: removes the Application parameter' : 'Delete this Application parameter',
        text: ann ? 'Reset' : 'Delete'}));
    block.append(head);
    if (ann && ann.tooltip) block.append(el('p', {class: 'tip', text: ann.tooltip}));
    else if (ann) head.title = name;
    const editor = el('div', {class: 'editor'});
    if (collection === 'map') {
      const keys = Object.keys(value);
      keys.forEach((k, i) => editor.append(row('map', itemType, title, i, k, value[k])));
      if (keys.length === 0) editor.append(el('span', {class: 'empty', text: 'No entries'}));
      editor.append(el('div', {class: 'adds'}, el('button', {type: 'button', class: 'small add', text: '+ Add entry', 'aria-label': `Add an entry to ${title}`})));
    } else if (collection === 'array') {
      value.forEach((v, i) => editor.append(row('array', itemType, title, i, '', v)));
      if (value.length === 0) editor.append(el('span', {class: 'empty', text: 'No items'}));
      editor.append(el('div', {class: 'adds'}, el('button', {type: 'button', class: 'small add', text: '+ Add item', 'aria-label': `Add an item to ${title}`})));
    } else {
      const v = valueInput(itemType, value, title, value.includes('\n') || name === 'values');
      if (itemType === 'boolean') {
        editor.append(el('label', {class: 'check'}, v, el('span', {class: 'rawval', text: value === '' ? 'unset' : value})));
      } else editor.append(v);
    }
    block.append(editor, el('div', {class: 'warn', role: 'alert'}));
    checkBlock(block);
    return block;
  }

  // blockValue reads a block's whole value from its inputs.
  function blockValue(block) {
    const collection = block.dataset.collection;
    if (collection === 'map') {
      const m = {};
      for (const r of block.querySelectorAll('.row')) {
        const k = r.querySelector('.key').value;
        // A row without a key is not an entry yet: sent, it would become
        // PARAM_<NAME>_= and, for Helm, --set =value.
        if (k !== '') m[k] = readValue(r.querySelector('.val'));
      }
      return {map: m};
    }
    if (collection === 'array') return {array: [...block.querySelectorAll('.row .val')].map(readValue)};
    return {string: readValue(block.querySelector('.val'))};
  }

  function checkBlock(block) {
    const itemType = block.dataset.itemType;
    const msgs = [];
    const keys = new Set();
    for (const v of block.querySelectorAll('.val')) {
      const bad = misfit(itemType, readValue(v));
      v.classList.toggle('bad', !!bad);
      if (bad) msgs.push(bad);
    }
    for (const k of block.querySelectorAll('.row .key')) {
      if (k.value === '') {
        if (readValue(k.parentElement.querySelector('.val')) !== '') msgs.push('an entry without a key is not sent');
        continue;
      }
      if (keys.has(k.value)) msgs.push(`key "${k.value}" appears twice: the later entry wins`);
      keys.add(k.value);
    }
    const w = block.querySelector('.warn');
    w.textContent = msgs.slice(0, 3).join('; ') + (msgs.length > 3 ? ` (and ${msgs.length - 3} more)` : '');
  }

  // setOverride records the block's value as the Application's parameter.
  function setOverride(block) {
    const name = block.dataset.param;
    const v = Object.assign({name}, blockValue(block));
    const i = state.overrides.findIndex(o => o.name === name);
    if (i >= 0) state.overrides[i] = v; else state.overrides.push(v);
    if (!block.querySelector('.badge.override')) {
      block.querySelector('.reset').before(el('span', {class: 'badge override', text: 'set by the Application'}));
    }
    block.querySelector('.reset').disabled = false;
    checkBlock(block);
    paramsChanged();
  }

  function renderParams() {
    const t0 = performance.now();
    const list = $('#param-list');
    const focus = focusKey();
    const frag = document.createDocumentFragment();
    const names = paramNames();
    for (const n of names) frag.append(renderParam(n));
    if (names.length === 0) frag.append(el('p', {class: 'empty', text: 'The plugin announces no parameters, and the Application sets none.'}));
    list.replaceChildren(frag);
    $('#param-count').textContent = `(${names.length})`;
    applyFilter();
    restoreFocus(focus);
    window.playground.renderMs = performance.now() - t0;
  }

  function replaceBlock(block) {
    const fresh = renderParam(block.dataset.param);
    block.replaceWith(fresh);
    applyFilter();
    return fresh;
  }

  // Focus survives a re-render: the same parameter, row and input.
  function focusKey() {
    const a = document.activeElement;
    const block = a && a.closest && a.closest('.param');
    if (!block) return null;
    const r = a.closest('.row');
    return {param: block.dataset.param, row: r ? r.dataset.row : null, cls: a.classList.contains('key') ? 'key' : 'val',
      start: a.selectionStart, end: a.selectionEnd};
  }
  function restoreFocus(f) {
    if (!f) return;
    const block = [...document.querySelectorAll('.param')].find(b => b.dataset.param === f.param);
    if (!block) return;
    const scope = f.row !== null ? block.querySelector(`.row[data-row="${f.row}"]`) : block;
    const target = scope && scope.querySelector('.' + f.cls);
    if (!target) return;
    target.focus();
    if (typeof f.start === 'number' && target.setSelectionRange) { try { target.setSelectionRange(f.start, f.end); } catch (e) { /* not a text input */ } }
  }

  function applyFilter() {
    const q = $('#filter').value.trim().toLowerCase();
    for (const block of document.querySelectorAll('#param-list .param')) {
      const name = block.dataset.param.toLowerCase();
      const title = block.querySelector('.title').textContent.toLowerCase();
      const own = !q || name.includes(q) || title.includes(q);
      let rowsShown = 0;
      for (const r of block.querySelectorAll('.row')) {
        const k = r.querySelector('.key');
        const show = own || (k && k.value.toLowerCase().includes(q));
        r.hidden = !show;
        if (show) rowsShown++;
      }
      block.hidden = !(own || rowsShown > 0);
    }
  }

  // One listener per event for the whole list: 500 parameters, thousands of
  // inputs, and nothing to add or remove when they are re-rendered.
  function wireParamList() {
    const list = $('#param-list');
    list.addEventListener('input', e => {
      const block = e.target.closest('.param');
      if (!block || e.target.type === 'checkbox') return;
      setOverride(block);
    });
    list.addEventListener('change', e => {
      if (e.target.type !== 'checkbox') return;
      const block = e.target.closest('.param');
      e.target.dataset.raw = e.target.checked ? 'true' : 'false';
      const raw = e.target.parentElement.querySelector('.rawval');
      if (raw) raw.textContent = e.target.dataset.raw;
      setOverride(block);
    });
    list.addEventListener('click', e => {
      const btn = e.target.closest('button');
      if (!btn) return;
      const block = btn.closest('.param');
      const name = block.dataset.param;
      if (btn.classList.contains('reset')) {
        state.overrides = state.overrides.filter(o => o.name !== name);
        if (firstAnnouncement(name)) replaceBlock(block).querySelector('.reset').focus();
        else { block.remove(); $('#param-count').textContent = `(${paramNames().length})`; }
        paramsChanged();
      } else if (btn.classList.contains('add')) {
        const collection = block.dataset.collection;
        const title = block.querySelector('.title').textContent;
        const rows = block.querySelectorAll('.row');
        const r = row(collection, block.dataset.itemType, title, rows.length, '', '');
        const empty = block.querySelector('.empty');
        if (empty) empty.remove();
        btn.parentElement.before(r);
        r.querySelector(collection === 'map' ? '.key' : '.val').focus();
        setOverride(block);
      } else if (btn.classList.contains('remove')) {
        const r = btn.closest('.row');
        const next = r.nextElementSibling;
        r.remove();
        block.querySelectorAll('.row').forEach((x, i) => { x.dataset.row = i; });
        (next && next.querySelector('input, button') || block.querySelector('.add')).focus();
        setOverride(block);
      }
    });
  }

  // ---- runs ------------------------------------------------------------------

  // latest runs only: a response that is not the newest of its kind is dropped.
  async function runLatest(kind, path, body) {
    const n = ++state.runs[kind];
    busy++;
    setStatus(`Running ${kind}…`);
    try {
      const res = await api(path, body);
      return n === state.runs[kind] && !res.cancelled ? res : null;
    } finally {
      busy--;
      if (busy === 0) setStatus(`Up to date · ${new Date().toLocaleTimeString()}`);
    }
  }

  async function refreshEnviron() {
    const n = ++state.runs.environ;
    let res;
    try { res = await api('/api/environ', input()); } catch (e) { showBanner('#run-error', e.message); return; }
    if (n !== state.runs.environ) return;
    $('#app-parameters').textContent = res.appParameters;
    fillVars('#param-vars', res.paramVars, 'No PARAM_ variables: no parameter is set by the Application.');
    fillVars('#full-env', res.env);
    fillVars('#announce-env', res.announceEnv);
  }

  function fillVars(sel, vars, emptyText) {
    const body = $(sel + ' tbody');
    const frag = document.createDocumentFragment();
    for (const v of vars) frag.append(el('tr', {}, el('td', {text: v.name}), el('td', {text: v.value})));
    if (vars.length === 0 && emptyText) frag.append(el('tr', {}, el('td', {colSpan: 2, class: 'empty', text: emptyText})));
    body.replaceChildren(frag);
  }

  async function discover() {
    let res;
    try { res = await runLatest('discover', '/api/discover', input()); } catch (e) { $('#discovery').textContent = e.message; return; }
    if (!res) return;
    const box = $('#discovery');
    const verdict = res.error ? el('span', {class: 'verdict err', text: 'Error'}) :
      res.matched ? el('span', {class: 'verdict yes', text: 'Matches'}) :
        el('span', {class: res.configured ? 'verdict no' : 'verdict', text: res.configured ? 'Does not match' : 'No discovery'});
    const parts = [el('div', {}, verdict, ' · ', res.explanation || '')];
    if (res.rule) parts.push(el('div', {class: 'small'}, 'Decided by ', el('code', {text: res.rule}), ': ', el('code', {text: res.value})));
    if (res.ignored && res.ignored.length) parts.push(el('div', {class: 'small warn', text: `Also set but never evaluated (Argo CD stops at the first rule): ${res.ignored.join(', ')}`}));
    if (res.error) parts.push(el('pre', {class: 'banner error', text: res.error}));
    for (const c of res.commands) {
      if (c.stderr) parts.push(el('div', {class: 'small', text: `${c.argv} (exit ${c.exit}) printed on stderr:`}), el('pre', {class: 'value', text: c.stderr}));
    }
    box.replaceChildren(...parts);
  }

  async function announce() {
    let res;
    try { res = await runLatest('announce', '/api/announce', input()); } catch (e) { showBanner('#announce-error', e.message); return; }
    if (!res) return;
    const dyn = res.commands.find(c => c.phase === 'parameters');
    showBanner('#announce-error', res.error ? 'The parameters announcement failed: ' + res.error : '');
    if (res.error) return; // keep the last good form
    const problems = $('#problems');
    problems.replaceChildren(...res.problems.map(p =>
      el('li', {class: p.severity}, p.parameter ? el('code', {text: p.parameter}) : '', p.parameter ? ': ' : '', p.message)));
    if (dyn && dyn.stderr) problems.append(el('li', {class: 'info', text: `The dynamic parameters command printed on stderr: ${dyn.stderr}`}));
    const key = JSON.stringify(res.announcements);
    $('#announcement-json').textContent = JSON.stringify(res.announcements, null, 2);
    if (key === state.annKey) return;
    state.annKey = key;
    state.announcements = res.announcements;
    renderParams();
  }

  async function generate() {
    let res;
    const started = Date.now();
    try { res = await runLatest('generate', '/api/generate', input()); } catch (e) { showBanner('#run-error', e.message); return; }
    if (!res) return;
    const st = $('#run-status');
    const gen = res.commands.filter(c => c.phase === 'generate').pop();
    const exit = gen ? gen.exit : '–';
    if (res.error) {
      st.className = 'run-status fail';
      st.textContent = `Failed · exit ${exit} · ${fmtMs(res.durationMs)}`;
    } else {
      st.className = 'run-status ok';
      st.textContent = `OK · exit ${exit} · ${fmtMs(res.durationMs)} · ${res.count} object${res.count === 1 ? '' : 's'}`;
    }
    showBanner('#run-error', res.error ? plainError(res.error) : '');
    $('#commands').replaceChildren(...res.commands.map(c => el('div', {class: 'command'},
      el('div', {}, el('strong', {text: c.phase}), ' ', el('code', {class: 'argv', text: c.argv}),
        ` · exit ${c.exit} · ${fmtMs(c.durationMs)}`, c.stopped ? ` · ${c.stopped}` : ''),
      c.stderr ? el('details', {open: !!res.error || c.stderr.length < 2000}, el('summary', {text: 'stderr'}), el('pre', {class: 'stderr', text: c.stderr})) : null)));
    const cards = (res.manifests || []).map(m => el('article', {class: 'manifest', 'aria-label': `${m.kind} ${m.name}`},
      el('header', {}, el('span', {class: 'kind', text: m.kind || '(no kind)'}), el('strong', {text: m.name || '(no name)'}),
        m.namespace ? el('span', {class: 'muted', text: 'in ' + m.namespace}) : null, el('small', {class: 'muted', text: m.apiVersion})),
      el('pre', {text: m.yaml})));
    $('#manifests').replaceChildren(...cards);
    $('#manifest-summary').textContent = res.error ? 'No manifests: the run failed.' :
      res.truncated ? `Showing ${res.shown} of ${res.count} objects (${(res.bytes / 1048576).toFixed(1)} MiB in all): the rest is too large for the page.` : '';
    window.playground.rendered++;
    window.playground.renderedAt = Date.now();
    window.playground.lastRunMs = Date.now() - started;
    document.body.dataset.rendered = window.playground.rendered;
  }

  // plainError adds a sentence for the failures authors meet most.
  function plainError(err) {
    let hint = '';
    if (/killed after the command timeout/.test(err)) hint = 'The command ran too long and was stopped.';
    else if (/output exceeds/.test(err)) hint = 'The command printed more than the server accepts.';
    else if (/failed to unmarshal manifest/.test(err)) hint = 'The command printed something that is not YAML or JSON objects.';
    else if (/executable file not found/.test(err)) hint = 'A command is not on the PATH of the playground (the sidecar image must have it too).';
    else if (/failed (exit status|signal)/.test(err)) hint = 'The command failed; its stderr is below.';
    return hint ? hint + '\n' + err : err;
  }

  const paramsChanged = (() => {
    const env = debounce(refreshEnviron, 60);
    const rerun = debounce(() => { announce(); generate(); }, 350);
    return () => { env(); if ($('#live').checked) rerun(); };
  })();

  // Generate does not wait for the announcement: it runs on the Application's
  // parameters, which a new announcement does not change.
  function runAll() {
    refreshEnviron();
    discover();
    announce();
    generate();
  }

  // ---- state, build env, events ------------------------------------------------

  async function loadState() {
    const st = await api('/api/state');
    state.plugin = st.plugin;
    $('#plugin-name').textContent = st.plugin ? st.plugin.name + (st.plugin.version ? ' ' + st.plugin.version : '') : 'plugin.yaml does not load';
    document.title = (st.plugin ? st.plugin.name : 'plugin') + ' · playground';
    $('#config-path').textContent = st.configPath;
    $('#app-dir').textContent = st.appRelPath === '.' ? st.appDir : `${st.appRelPath} in ${st.repoRoot}`;
    showBanner('#config-error', st.configError ? 'plugin.yaml does not load: ' + st.configError : '');
    showBanner('#config-warnings', st.warnings.length ? 'plugin.yaml: ' + st.warnings.join('\n') : '');
    return st;
  }

  function fillEnvForm() {
    const f = $('#env-form');
    for (const k of ['appName', 'namespace', 'project', 'revision', 'repoURL', 'targetRevision', 'kubeVersion']) f.elements[k].value = state.env[k] || '';
    f.elements.kubeAPIVersions.value = (state.env.kubeAPIVersions || []).join(',');
    const box = $('#plugin-env');
    box.replaceChildren(...state.env.pluginEnv.map((nv, i) => el('div', {class: 'row', 'data-row': i},
      el('input', {class: 'key', value: nv.name, 'aria-label': `Plugin env ${i + 1}: name`, placeholder: 'NAME'}),
      el('span', {class: 'eq', text: '='}),
      el('input', {class: 'val', value: nv.value, 'aria-label': `Plugin env ${i + 1}: value`}),
      el('button', {type: 'button', class: 'small remove', 'aria-label': `Remove plugin env ${i + 1}`, text: '×'}))));
  }

  function readEnvForm() {
    const f = $('#env-form');
    const e = {};
    for (const k of ['appName', 'namespace', 'project', 'revision', 'repoURL', 'targetRevision', 'kubeVersion']) e[k] = f.elements[k].value;
    e.kubeAPIVersions = f.elements.kubeAPIVersions.value.split(',').map(s => s.trim()).filter(Boolean);
    e.pluginEnv = [...$('#plugin-env').querySelectorAll('.row')].map(r => ({name: r.querySelector('.key').value, value: r.querySelector('.val').value}))
      .filter(nv => nv.name !== '');
    state.env = e;
    paramsChanged();
  }

  function wireEnvPanel() {
    const panel = $('#env-panel');
    const toggle = $('#env-toggle');
    const open = show => {
      panel.hidden = !show;
      toggle.setAttribute('aria-expanded', String(show));
      if (show) panel.querySelector('input').focus(); else toggle.focus();
    };
    toggle.addEventListener('click', () => open(panel.hidden));
    $('#env-close').addEventListener('click', () => open(false));
    panel.addEventListener('keydown', e => { if (e.key === 'Escape') open(false); });
    $('#env-form').addEventListener('input', readEnvForm);
    $('#env-form').addEventListener('submit', e => e.preventDefault());
    $('#plugin-env-add').addEventListener('click', () => {
      state.env.pluginEnv.push({name: '', value: ''});
      fillEnvForm();
      const rows = $('#plugin-env').querySelectorAll('.row');
      rows[rows.length - 1].querySelector('.key').focus();
    });
    $('#plugin-env').addEventListener('click', e => {
      const btn = e.target.closest('button.remove');
      if (!btn) return;
      btn.closest('.row').remove();
      readEnvForm();
      fillEnvForm();
      $('#plugin-env-add').focus();
    });
  }

  function watchEvents() {
    const es = new EventSource('/api/events');
    es.addEventListener('hello', () => setStatus('Watching the app dir and plugin.yaml'));
    es.addEventListener('change', async e => {
      const ev = JSON.parse(e.data);
      const what = ev.paths.join(', ') + (ev.more ? ` and ${ev.more} more` : '');
      setStatus(`Changed: ${what}`);
      if (ev.config) await loadState().catch(err => showBanner('#config-error', err.message));
      if (!$('#live').checked) return;
      runAll();
    });
    es.onerror = () => {
      // A refused stream (503: --max-event-streams pages already follow
      // changes) is not retried by the browser; a dropped one is.
      if (es.readyState === EventSource.CLOSED) {
        setStatus('The playground refused to send changes to this tab (too many tabs follow it: limit --max-event-streams); close other tabs and reload', 'offline');
        return;
      }
      setStatus('Lost the connection to the playground; retrying…', 'offline');
    };
  }

  function wireKeys() {
    document.addEventListener('keydown', e => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); announce(); generate(); return; }
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
      if (e.key === '/' && !typing) { e.preventDefault(); $('#filter').focus(); }
    });
    $('#generate').addEventListener('click', () => { refreshEnviron(); announce(); generate(); });
    $('#filter').addEventListener('input', debounce(applyFilter, 80));
  }

  async function main() {
    wireParamList();
    wireEnvPanel();
    wireKeys();
    let st;
    try { st = await loadState(); } catch (e) { setStatus(e.message, 'offline'); return; }
    state.env = st.env;
    state.overrides = st.parameters;
    fillEnvForm();
    watchEvents();
    runAll();
  }

  main();
})();
