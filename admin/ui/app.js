// vera's admin page: memories, the curator and health, over the admin
// JSON API. Every text from the API is put in the page with textContent
// (through el below), never as markup: memories hold what users typed.
'use strict';

(() => {
  const TOKEN_KEY = 'vera.adminToken';
  const PAGE = 50;

  const $ = (id) => document.getElementById(id);

  // el builds an element. Strings among the children become text nodes.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children) {
      if (c !== undefined && c !== null && c !== false) node.append(c);
    }
    return node;
  }

  // say puts a message in the live region, read out by screen readers.
  function say(msg, kind) {
    const s = $('status');
    s.textContent = msg;
    s.dataset.kind = kind || 'info';
  }

  function when(ts) {
    if (!ts) return '';
    const d = new Date(ts);
    return isNaN(d) || d.getFullYear() < 2 ? '' : d.toLocaleString();
  }

  // day and minute write a time as 2026-11-28 and 2026-11-28 12:00, in
  // the browser's time zone; '' when there is none.
  const pad = (n) => String(n).padStart(2, '0');
  function day(ts) {
    const d = new Date(ts);
    if (!ts || isNaN(d) || d.getFullYear() < 2) return '';
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
  }
  function minute(ts) {
    const d = new Date(ts);
    return day(ts) && `${day(ts)} ${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  // ---- the API, and the token it may ask for

  class APIError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body;
    }
  }

  let tokenWait = null; // {promise, resolve} while the token form is open

  function askToken(refused) {
    if (tokenWait) return tokenWait.promise;
    let resolve;
    const promise = new Promise((r) => { resolve = r; });
    tokenWait = { promise, resolve };
    $('token-hint').textContent = refused
      ? 'vera refused that token. Give the admin token (VERA_ADMIN_TOKEN) again.'
      : 'This vera needs its admin token (VERA_ADMIN_TOKEN). It is kept for this tab only.';
    $('token-section').hidden = false;
    const input = $('token-input');
    input.value = '';
    input.focus();
    say(refused ? 'The admin token was refused.' : 'vera asks for the admin token.', 'error');
    return promise;
  }

  $('token-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const t = $('token-input').value.trim();
    if (!t) return;
    sessionStorage.setItem(TOKEN_KEY, t);
    $('token-input').value = '';
    $('token-section').hidden = true;
    say('Token set for this tab.');
    const w = tokenWait;
    tokenWait = null;
    if (w) w.resolve();
  });

  // api sends a request to vera and returns its decoded JSON (null when
  // there is none). A 401 asks for the token and sends it again.
  async function api(method, path, body) {
    for (;;) {
      const sent = sessionStorage.getItem(TOKEN_KEY) || '';
      const headers = { Accept: 'application/json' };
      if (sent) headers.Authorization = 'Bearer ' + sent;
      const init = { method, headers, cache: 'no-store', credentials: 'same-origin' };
      if (body !== undefined) {
        headers['Content-Type'] = 'application/json';
        init.body = JSON.stringify(body);
      }
      let res;
      try {
        res = await fetch(path, init);
      } catch (err) {
        throw new APIError(0, 'vera did not answer (' + err.message + ')');
      }
      if (res.status === 401) {
        // Only forget the token this request sent: the user may already
        // have given a new one while it was on its way.
        if (sent && sessionStorage.getItem(TOKEN_KEY) === sent) sessionStorage.removeItem(TOKEN_KEY);
        await askToken(Boolean(sent));
        continue;
      }
      const text = await res.text();
      let data = null;
      if (text) {
        try { data = JSON.parse(text); } catch (_) { data = null; }
      }
      if (!res.ok) {
        const msg = (data && (data.error || data.summary)) || (res.status + ' ' + res.statusText);
        throw new APIError(res.status, msg, data);
      }
      return data;
    }
  }

  function failed(what, err) {
    say(what + ': ' + err.message, 'error');
  }

  // ---- memories

  const list = $('memory-list');
  let shown = null; // the query the list shows: {namespace, type, private, order, q}
  let cursor = '';
  let loads = 0;
  let asked = 0; // the latest list asked for: an older answer is dropped

  function query() {
    return {
      namespace: $('ns').value.trim(),
      type: $('type').value,
      private: $('private').value, // '', 'true' or 'false'
      order: $('order').value, // 'newest' or 'oldest'; a search is by relevance
      q: $('q').value.trim(),
    };
  }

  async function loadMemories(more) {
    const qy = more ? shown : query();
    if (!qy.namespace) {
      say('Give a namespace.', 'error');
      $('ns').focus();
      return;
    }
    const params = new URLSearchParams({ namespace: qy.namespace, limit: String(PAGE) });
    if (qy.type) params.set('type', qy.type);
    if (qy.private) params.set('private', qy.private);
    if (qy.order === 'oldest') params.set('order', 'oldest');
    if (qy.q) params.set('q', qy.q);
    if (more && cursor) params.set('cursor', cursor);
    list.setAttribute('aria-busy', 'true');
    const mine = ++asked;
    try {
      const data = await api('GET', '/memories?' + params);
      if (mine !== asked) return; // another pick came since: its list shows
      if (!more) list.replaceChildren();
      const ms = (data && data.memories) || [];
      for (const m of ms) list.append(memoryItem(m));
      const before = shown;
      shown = qy;
      showErase(!before || before.namespace !== qy.namespace);
      cursor = (data && data.next_cursor) || '';
      $('more').hidden = !cursor;
      // A search lists the best matches first: the sort waits for the
      // next list that is not one.
      $('order').disabled = Boolean(qy.q);
      describeList();
      say(more ? `${ms.length} more loaded.` : $('list-info').textContent);
    } catch (err) {
      // Without memory, /memories is not vera's: it goes on to Ollama.
      if (err.status === 404) err.message = 'vera has no memory routes (memory.enabled = false?)';
      failed('Loading memories', err);
    } finally {
      list.removeAttribute('aria-busy');
      list.dataset.loads = String(++loads);
    }
  }

  const NOUNS = {
    raw: ['raw memory', 'raw memories'],
    curated: ['curated memory', 'curated memories'],
    rule: ['rule', 'rules'],
    profile: ['profile', 'profiles'],
    forgotten: ['forgotten memory', 'forgotten memories'],
  };

  // ---- people: every namespace, by who its user is

  // who names a namespace for a person: their name and email when their
  // client sent them (Open WebUI), else the namespace itself.
  function who(n) {
    const parts = [n.name, n.email ? `<${n.email}>` : ''].filter(Boolean);
    return parts.length ? parts.join(' ') : n.namespace;
  }

  // pick shows a namespace's memories.
  function pick(ns) {
    $('ns').value = ns;
    const sel = $('ns-pick');
    sel.value = [...sel.options].some((o) => o.value === ns) ? ns : '';
    loadMemories(false);
  }

  function personItem(n) {
    const c = n.counts || {};
    const total = Object.values(c).reduce((a, b) => a + b, 0);
    const btn = el('button', { type: 'button', 'data-ns': n.namespace, class: 'pick' }, 'Show memories');
    btn.addEventListener('click', () => pick(n.namespace));
    return el('li', { class: 'person', 'data-ns': n.namespace },
      el('p', { class: 'who', 'data-role': 'who', text: who(n) }),
      el('p', { class: 'muted', text: `${n.namespace} · ${total} memories · last seen ${when(n.last_seen) || 'never'}` }),
      n.profile ? el('p', { class: 'profile', 'data-role': 'profile', text: n.profile }) : null,
      btn);
  }

  // loadPeople fills the people list and the picker. At the start, the
  // first person (the most recently seen) is shown, unless a namespace
  // was typed.
  async function loadPeople(start) {
    let data;
    try {
      data = await api('GET', '/namespaces');
    } catch (err) {
      if (err.status !== 404) failed('Loading people', err);
      return false;
    }
    const people = (data && data.namespaces) || [];
    $('people-list').replaceChildren(...people.map(personItem));
    const sel = $('ns-pick');
    sel.replaceChildren(el('option', { value: '' }, 'another namespace…'),
      ...people.map((n) => el('option', { value: n.namespace }, who(n))));
    $('people-info').textContent = people.length
      ? `${people.length} ${people.length === 1 ? 'person' : 'people'}, most recently seen first.`
      : 'Nobody yet: memories appear here after a first chat.';
    $('people-list').dataset.loads = String(Number($('people-list').dataset.loads || 0) + 1);
    if (start && people.length && $('ns').value.trim() === 'default' && !people.some((n) => n.namespace === 'default')) {
      pick(people[0].namespace);
      return true;
    }
    sel.value = people.some((n) => n.namespace === $('ns').value.trim()) ? $('ns').value.trim() : '';
    return false;
  }
  $('ns-pick').addEventListener('change', () => {
    const ns = $('ns-pick').value;
    if (ns) pick(ns);
    else $('ns').focus();
  });

  function describeList() {
    const n = list.children.length;
    const noun = NOUNS[shown.type] || ['memory', 'memories'];
    const word = noun[n === 1 ? 0 : 1];
    let s = shown.private === 'true' ? `${n} private ${word}`
      : shown.private === 'false' ? `${n} ${word} not private` : `${n} ${word}`;
    s += ` in “${shown.namespace}”`;
    if (shown.q) s += ` matching “${shown.q}”, best matches first`;
    if (cursor) s += ', more below';
    $('list-info').textContent = s + '.';
  }

  function memoryItem(m) {
    const textID = 'text-' + m.id;
    const meta = el('p', { class: 'meta' },
      el('span', { class: 'badge type-' + m.type, text: m.type }));
    const priv = isPrivate(m);
    if (priv) {
      meta.append(el('span', { class: 'badge private', 'data-role': 'lock', title: NEVER_CLOUD }, lockIcon(), 'private'));
    }
    const t = when(m.timestamp);
    if (t) meta.append(el('time', { datetime: m.timestamp, text: t }));
    if (m.model) meta.append(el('span', { class: 'model', text: m.model }));
    if (typeof m.score === 'number') meta.append(el('span', { class: 'score', text: 'score ' + m.score.toFixed(3) }));
    const src = sourceOf(m);
    const facts = el('p', { class: 'meta facts' },
      el('span', { 'data-role': 'source', title: src.more || null, text: src.text }),
      el('span', { 'data-role': 'usage', text: usageText(m) }),
      priv ? el('span', { class: 'private', 'data-role': 'private', title: NEVER_CLOUD_MORE },
        el('strong', { 'data-role': 'private-why', text: privateText(m) }), ' ',
        el('span', { 'data-role': 'never-cloud', text: NEVER_CLOUD + '.' })) : null,
      m.type === 'forgotten' ? el('span', { 'data-role': 'forgotten', text: forgottenText(m) }) : null);
    const history = el('details', { class: 'history', 'data-role': 'history' },
      el('summary', { text: 'History' }),
      el('div', { 'data-role': 'history-body' }));
    history.addEventListener('toggle', () => { if (history.open) loadHistory(m.id, history); });
    const li = el('li', { class: 'memory', 'data-id': m.id, 'data-type': m.type, 'data-private': String(priv) },
      meta,
      el('p', { class: 'text', id: textID, 'data-role': 'text', text: m.text }),
      facts,
      history,
      actionsFor(m, textID));
    li.memory = m;
    return li;
  }

  function actionsFor(m, textID) {
    const forgotten = m.type === 'forgotten';
    return el('div', { class: 'actions', 'data-role': 'actions' },
      el('button', { type: 'button', 'data-action': 'edit', 'aria-describedby': textID, text: 'Edit' }),
      forgotten
        ? el('button', { type: 'button', 'data-action': 'restore', 'aria-describedby': textID, text: 'Restore' })
        : el('button', { type: 'button', 'data-action': 'forget', 'aria-describedby': textID, title: 'Hide it from chats; restorable for 30 days', text: 'Forget' }),
      isPrivate(m)
        ? el('button', { type: 'button', 'data-action': 'unmark-private', 'aria-describedby': textID, title: 'Cloud models may get it again', text: 'Unmark private' })
        : el('button', { type: 'button', 'data-action': 'mark-private', 'aria-describedby': textID, title: NEVER_CLOUD, text: 'Mark private' }),
      el('button', { type: 'button', class: 'danger', 'data-action': 'delete', 'aria-describedby': textID, text: 'Erase' }));
  }

  // ---- private memories: never sent to a model whose policy is
  // "shareable", which every cloud model's is unless told otherwise.

  const NEVER_CLOUD = 'Never sent to cloud models';
  const NEVER_CLOUD_MORE = 'Never sent to cloud models, nor to any model whose memory policy is “shareable”.';

  function isPrivate(m) {
    return Boolean(m.metadata && m.metadata.private === true);
  }

  // Why a memory is private (metadata.private_why), in words.
  const WHY = {
    email: 'email address',
    phone: 'phone number',
    card: 'payment card number',
    iban: 'bank account number (IBAN)',
    secret: 'secret key or token',
    password: 'password',
    curator: 'marked by the curator',
    user: 'marked by you',
  };

  function privateText(m) {
    const why = m.metadata && Array.isArray(m.metadata.private_why) ? m.metadata.private_why : [];
    const words = [...new Set(why.filter((w) => typeof w === 'string' && w).map((w) => WHY[w] || w))];
    return words.length ? `Private: ${words.join(', ')}.` : 'Private.';
  }

  // lockIcon draws a padlock, hidden from screen readers: the text next
  // to it says "private".
  function lockIcon() {
    const NS = 'http://www.w3.org/2000/svg';
    const svg = document.createElementNS(NS, 'svg');
    for (const [k, v] of Object.entries({ viewBox: '0 0 16 16', width: '11', height: '11', 'aria-hidden': 'true', focusable: 'false', class: 'icon' })) svg.setAttribute(k, v);
    const shackle = document.createElementNS(NS, 'path');
    for (const [k, v] of Object.entries({ d: 'M5 7.5V5a3 3 0 0 1 6 0v2.5', fill: 'none', stroke: 'currentColor', 'stroke-width': '2' })) shackle.setAttribute(k, v);
    const body = document.createElementNS(NS, 'rect');
    for (const [k, v] of Object.entries({ x: '2.5', y: '7', width: '11', height: '8.5', rx: '1.5', fill: 'currentColor' })) body.setAttribute(k, v);
    svg.append(shackle, body);
    return svg;
  }

  // setPrivate marks a memory private, or unmarks it: by the person's
  // say, which the detectors then leave be. A list that shows only
  // private memories, or only the others, lets go of it.
  async function setPrivate(li, btn, on) {
    btn.disabled = true;
    try {
      const m = keepUsage(await api('PATCH', '/memories/' + encodeURIComponent(li.memory.id), { metadata: { private: on } }), li.memory);
      if (!shown.private || shown.private === String(isPrivate(m))) {
        const fresh = memoryItem(m);
        li.replaceWith(fresh);
        fresh.querySelector(`button[data-action=${isPrivate(m) ? 'unmark-private' : 'mark-private'}]`).focus();
      } else {
        drop(li);
      }
      say(isPrivate(m)
        ? 'Memory marked private: it is never sent to cloud models.'
        : 'Memory no longer private: cloud models may get it.');
    } catch (err) {
      btn.disabled = false;
      failed(on ? 'Marking the memory private' : 'Unmarking the memory private', err);
    }
  }

  // ---- where a memory came from, how much it is used, its history

  // sourceOf says where a memory came from (metadata.source) in words:
  // {text, more} (more: the request and chat ids, for a tooltip). A
  // memory without one was written before vera kept it.
  function sourceOf(m) {
    const s = m.metadata && m.metadata.source;
    if (!s || typeof s !== 'object' || !s.via) return { text: 'From: unknown (written before vera kept where memories came from)' };
    const str = (v) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
    const chats = Array.isArray(s.chats) ? s.chats.map(str).filter(Boolean) : [];
    const heads = {
      chat: 'From a chat',
      command: 'Told in a chat with “remember that”',
      curator: 'Distilled by the curator' + (chats.length ? ` from ${chats.length} chat${chats.length === 1 ? '' : 's'}` : ''),
      admin: 'Added by hand',
      mcp: 'Added by an agent over MCP',
      import: 'Imported',
    };
    let text = heads[s.via] || 'Came in by ' + str(s.via);
    const details = [s.via === 'admin' ? 'admin' : '', str(s.dialect), s.chat_id ? 'chat ' + str(s.chat_id) : '', str(s.client), str(s.model)].filter(Boolean);
    if (details.length) text += ` (${details.join(', ')})`;
    const from = day(s.from);
    const until = day(s.until);
    if (from && until && from !== until) text += `, ${from} to ${until}`;
    else if (from || until) text += `, on ${from || until}`;
    const more = [s.request_id ? 'request ' + str(s.request_id) : '', chats.length ? 'chats: ' + chats.join(', ') : ''].filter(Boolean);
    return { text, more: more.join('; ') };
  }

  function usageText(m) {
    const n = Number(m.used_count) || 0;
    if (n <= 0) return 'Never used yet';
    const last = minute(m.last_used);
    return `Used in ${n} answer${n === 1 ? '' : 's'}` + (last ? `, last on ${last}` : '');
  }

  // forgottenText says when a forgotten memory goes for good: the
  // curator erases it 30 days after it was forgotten.
  function forgottenText(m) {
    const at = m.metadata && m.metadata.forgotten_at;
    const d = new Date(at);
    if (!at || isNaN(d)) return 'Forgotten: restorable for 30 days';
    return `Forgotten on ${day(at)}: restorable until ${day(new Date(d.getTime() + 30 * 864e5).toISOString())}`;
  }

  // keepUsage carries a memory's usage over to its rewritten form: vera
  // answers an edit without it.
  function keepUsage(m, old) {
    if (!m.used_count && old.used_count) {
      m.used_count = old.used_count;
      m.last_used = old.last_used;
    }
    return m;
  }

  // loadHistory shows a memory's history, read each time it is opened.
  async function loadHistory(id, box) {
    const body = box.querySelector('[data-role=history-body]');
    body.replaceChildren(el('p', { class: 'muted', text: 'Loading…' }));
    box.setAttribute('aria-busy', 'true');
    try {
      const data = await api('GET', '/memories/' + encodeURIComponent(id) + '/history');
      const es = (data && data.history) || [];
      body.replaceChildren(es.length
        ? el('ol', { class: 'history-list' }, ...es.map((e) => el('li', { text: `${minute(e.at) || e.at} — ${e.action} by ${e.actor}` })))
        : el('p', { class: 'muted', text: 'No history: written before vera kept one.' }));
    } catch (err) {
      body.replaceChildren(el('p', { class: 'error', text: 'The history could not be read: ' + err.message }));
    } finally {
      box.removeAttribute('aria-busy');
      box.dataset.loads = String(Number(box.dataset.loads || 0) + 1);
    }
  }

  function itemOf(node) {
    return node.closest('li.memory');
  }

  list.addEventListener('click', (ev) => {
    const btn = ev.target.closest('button[data-action]');
    if (!btn) return;
    const li = itemOf(btn);
    switch (btn.dataset.action) {
      case 'edit': startEdit(li); break;
      case 'cancel-edit': endEdit(li); break;
      case 'forget': setForgotten(li, btn, true); break;
      case 'restore': setForgotten(li, btn, false); break;
      case 'delete': askDelete(li); break;
      case 'cancel-delete': endDelete(li); break;
      case 'confirm-delete': doDelete(li, btn); break;
      case 'mark-private': setPrivate(li, btn, true); break;
      case 'unmark-private': setPrivate(li, btn, false); break;
    }
  });

  list.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const li = itemOf(ev.target);
    if (li) saveEdit(li, ev.target);
  });

  list.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape') return;
    const li = itemOf(ev.target);
    if (!li) return;
    if (li.querySelector('form[data-role=edit]')) endEdit(li);
    else if (li.querySelector('[data-role=confirm]')) endDelete(li);
  });

  function startEdit(li) {
    const m = li.memory;
    const id = 'edit-' + m.id;
    const area = el('textarea', { id, name: 'text', rows: Math.min(12, Math.max(3, m.text.split('\n').length + 1)), required: true });
    area.value = m.text;
    const form = el('form', { class: 'edit', 'data-role': 'edit' },
      el('label', { for: id, text: 'Memory text' }),
      area,
      el('div', { class: 'actions' },
        el('button', { type: 'submit', class: 'primary', 'data-action': 'save', text: 'Save' }),
        el('button', { type: 'button', 'data-action': 'cancel-edit', text: 'Cancel' })));
    li.querySelector('[data-role=text]').hidden = true;
    li.querySelector('[data-role=actions]').replaceWith(form);
    area.focus();
  }

  function endEdit(li, focusAction) {
    const form = li.querySelector('form[data-role=edit]');
    if (form) form.replaceWith(actionsFor(li.memory, 'text-' + li.memory.id));
    li.querySelector('[data-role=text]').hidden = false;
    li.querySelector(`button[data-action=${focusAction || 'edit'}]`).focus();
  }

  async function saveEdit(li, form) {
    const text = form.elements.text.value.trim();
    if (!text) {
      say('A memory cannot be empty: erase it instead.', 'error');
      return;
    }
    const btn = form.querySelector('button[type=submit]');
    btn.disabled = true;
    try {
      const m = await api('PATCH', '/memories/' + encodeURIComponent(li.memory.id), { text });
      const fresh = memoryItem(keepUsage(m, li.memory));
      li.replaceWith(fresh);
      fresh.querySelector('button[data-action=edit]').focus();
      say('Memory saved.');
    } catch (err) {
      btn.disabled = false;
      failed('Saving the memory', err);
    }
  }

  // askDelete asks on the page itself, not with window.confirm, so that
  // it is styled, announced and reachable as any other control.
  function askDelete(li) {
    const box = el('div', { class: 'confirm', 'data-role': 'confirm', role: 'group', 'aria-label': 'Confirm deletion' },
      el('span', { text: 'Erase this memory? Nothing of it is kept, on disk either.' }),
      el('button', { type: 'button', class: 'danger', 'data-action': 'confirm-delete', text: 'Yes, erase' }),
      el('button', { type: 'button', 'data-action': 'cancel-delete', text: 'Keep it' }));
    li.querySelector('[data-role=actions]').replaceWith(box);
    box.querySelector('[data-action=cancel-delete]').focus();
  }

  function endDelete(li) {
    const box = li.querySelector('[data-role=confirm]');
    if (box) box.replaceWith(actionsFor(li.memory, 'text-' + li.memory.id));
    li.querySelector('button[data-action=delete]').focus();
  }

  async function doDelete(li, btn) {
    btn.disabled = true;
    try {
      await api('DELETE', '/memories/' + encodeURIComponent(li.memory.id));
      drop(li);
      say('Memory erased.');
    } catch (err) {
      btn.disabled = false;
      failed('Deleting the memory', err);
    }
  }

  // drop takes a memory out of the list, focus going to its neighbour.
  function drop(li) {
    const next = li.nextElementSibling || li.previousElementSibling;
    li.remove();
    describeList();
    (next ? next.querySelector('button[data-action=edit]') : $('search')).focus();
  }

  // setForgotten forgets a memory (hidden from chats, restorable for 30
  // days) or restores a forgotten one. It stays in a list that shows its
  // new type.
  async function setForgotten(li, btn, forget) {
    btn.disabled = true;
    const path = '/memories/' + encodeURIComponent(li.memory.id);
    try {
      const m = keepUsage(forget ? await api('PATCH', path, { type: 'forgotten' }) : await api('POST', path + '/restore'), li.memory);
      if (!shown.type || shown.type === m.type) {
        const fresh = memoryItem(m);
        li.replaceWith(fresh);
        fresh.querySelector(`button[data-action=${forget ? 'restore' : 'forget'}]`).focus();
      } else {
        drop(li);
      }
      say(forget
        ? 'Memory forgotten: chats no longer get it. Restore it within 30 days (type “forgotten”), or it is erased.'
        : 'Memory restored: chats get it again.');
    } catch (err) {
      btn.disabled = false;
      failed(forget ? 'Forgetting the memory' : 'Restoring the memory', err);
    }
  }

  $('filter-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    loadMemories(false);
  });
  $('more').addEventListener('click', () => loadMemories(true));
  // The sort applies at once, from the start of the list.
  $('order').addEventListener('change', () => loadMemories(false));

  $('add-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ns = $('ns').value.trim();
    const type = $('add-type').value;
    const text = $('add-text').value.trim();
    if (!ns || !text) {
      say('Give a namespace and a text.', 'error');
      return;
    }
    const btn = $('add');
    btn.disabled = true;
    try {
      const m = await api('POST', '/memories', { namespace: ns, type, text });
      $('add-text').value = '';
      // The newest: first when the list is newest first; last when it
      // is oldest first and all of it is shown, else on a later page.
      if (shown && shown.namespace === m.namespace && !shown.q && (!shown.type || shown.type === m.type) &&
        (!shown.private || shown.private === String(isPrivate(m))) && (shown.order !== 'oldest' || !cursor)) {
        if (shown.order === 'oldest') list.append(memoryItem(m));
        else list.prepend(memoryItem(m));
        describeList();
      }
      say(`Added a ${type === 'rule' ? 'rule' : 'curated memory'} to “${m.namespace}”.`);
    } catch (err) {
      failed('Adding the memory', err);
    } finally {
      btn.disabled = false;
    }
  });

  // ---- erase everything of one person: the namespace the list shows,
  // once its name is typed exactly.

  const eraseInput = $('erase-confirm');

  // showErase names the namespace shown; changed: another one, whose
  // confirmation starts empty.
  function showErase(changed) {
    const ns = shown ? shown.namespace : '';
    $('erase-person').hidden = !ns;
    $('erase-ns').textContent = ns;
    if (changed) {
      eraseInput.value = '';
      $('erase-receipt').replaceChildren();
    }
    $('erase-all').disabled = !ns || eraseInput.value !== ns;
  }
  eraseInput.addEventListener('input', () => showErase(false));

  const ERASED = [
    ['raw', 'chat turn', 'chat turns'],
    ['queued', 'chat turn still queued', 'chat turns still queued'],
    ['curated', 'curated memory', 'curated memories'],
    ['rule', 'rule', 'rules'],
    ['profile', 'profile', 'profiles'],
    ['forgotten', 'forgotten memory', 'forgotten memories'],
    ['plans', 'conversation plan', 'conversation plans'],
  ];

  // receiptText says what DELETE /namespaces/{ns} erased.
  function receiptText(r) {
    const e = (r && r.erased) || {};
    const known = ERASED.map(([k]) => k);
    const parts = ERASED.filter(([k]) => Number(e[k]) > 0).map(([k, one, many]) => `${e[k]} ${Number(e[k]) === 1 ? one : many}`)
      .concat(Object.keys(e).filter((k) => !known.includes(k) && Number(e[k]) > 0).map((k) => `${e[k]} ${k}`));
    const at = minute(r && r.at);
    return (parts.length ? `Erased ${parts.join(', ')} of “${r.namespace}”` : `Erased “${r.namespace}”, which held nothing`) +
      (at ? ` at ${at}.` : '.');
  }

  $('erase-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ns = shown ? shown.namespace : '';
    if (!ns || eraseInput.value !== ns) {
      say(`Nothing erased: type the namespace “${ns}” exactly to erase everything of this person.`, 'error');
      eraseInput.focus();
      return;
    }
    const box = $('erase-receipt');
    $('erase-all').disabled = true;
    let r;
    try {
      r = await api('DELETE', '/namespaces/' + encodeURIComponent(ns));
    } catch (err) {
      box.replaceChildren(el('p', { class: 'error', 'data-role': 'erase-error', text: 'Erasing failed: ' + err.message }));
      failed(`Erasing everything of “${ns}”`, err);
      showErase(false);
      return;
    }
    const text = receiptText(r);
    eraseInput.value = '';
    $('ns').value = ns;
    await loadMemories(false);
    const receipt = el('p', { class: 'receipt', 'data-role': 'receipt', tabindex: -1, text });
    box.replaceChildren(receipt);
    showErase(false);
    receipt.focus();
    say(text);
    loadPeople(false);
  });

  // ---- curator

  function resultView(r) {
    const dl = el('dl', { class: 'pairs' });
    const add = (k, v) => {
      if (v === undefined || v === null || v === '') return;
      dl.append(el('dt', { text: k }), el('dd', { text: String(v) }));
    };
    add('Status', r.status + (r.dry_run ? ' (dry run)' : ''));
    add('Mode', r.mode);
    add('Started', when(r.started));
    add('Finished', when(r.finished));
    add('Counts', `processed ${r.processed || 0} · curated ${r.curated || 0} · rules ${r.rules || 0} · deleted ${r.deleted || 0}`);
    if (r.namespaces && r.namespaces.length) add('Namespaces', r.namespaces.join(', '));
    add('Summary', r.summary);
    add('Error', r.error);
    return dl;
  }

  async function loadCurator() {
    const box = $('curator-status');
    try {
      const st = await api('GET', '/curator/status');
      const head = el('dl', { class: 'pairs' },
        el('dt', { text: 'Now' }), el('dd', { text: st.running ? 'running' : 'idle' }));
      if (st.schedule) head.append(el('dt', { text: 'Schedule' }), el('dd', { text: st.schedule }));
      if (st.next_run) head.append(el('dt', { text: 'Next run' }), el('dd', { text: when(st.next_run) }));
      const runs = el('div', { class: 'runs' });
      const last = st.last || {};
      const names = Object.keys(last).sort();
      if (!names.length) runs.append(el('p', { class: 'muted', text: 'No run yet since vera started.' }));
      for (const ns of names) {
        runs.append(el('article', { class: 'run', 'data-namespace': ns },
          el('h3', { text: 'Last run: ' + ns }),
          resultView(last[ns])));
      }
      box.replaceChildren(head, runs);
    } catch (err) {
      box.replaceChildren(el('p', { class: 'error', text: err.message }));
    }
  }

  // deletedText renders one entry of preview.deleted: a plain text, or an
  // object {id, type, text}.
  function deletedItem(d) {
    if (d === null || typeof d !== 'object') return el('li', { text: String(d) });
    const li = el('li', {});
    if (d.type) li.append(el('span', { class: 'badge type-' + d.type, text: d.type }), ' ');
    li.append(el('span', { class: 'text', text: d.text || '' }));
    if (d.id) li.append(' ', el('code', { class: 'muted', text: d.id }));
    return li;
  }

  function previewList(title, role, items, item) {
    const id = 'preview-' + role;
    const ul = el('ul', { class: 'preview-list', 'data-role': 'preview-' + role, 'aria-labelledby': id });
    for (const x of items || []) ul.append(item(x));
    if (!ul.children.length) ul.append(el('li', { class: 'muted', text: 'nothing' }));
    return [el('h4', { id, text: title + ` (${(items || []).length})` }), ul];
  }

  $('dry-run-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const ns = $('dry-ns').value.trim();
    const btn = $('dry-run');
    const out = $('preview');
    btn.disabled = true;
    out.setAttribute('aria-busy', 'true');
    say('Dry run under way…');
    const params = new URLSearchParams({ dry_run: 'true' });
    if (ns) params.set('namespace', ns);
    let r;
    try {
      r = await api('POST', '/curator/run?' + params);
    } catch (err) {
      r = err.body && err.body.status ? err.body : null;
      if (!r) {
        out.replaceChildren(el('p', { class: 'error', text: err.message }));
        failed('The dry run', err);
      }
    } finally {
      btn.disabled = false;
      out.removeAttribute('aria-busy');
    }
    if (!r) return;
    const p = r.preview || {};
    const text = (s) => el('li', { class: 'text', text: String(s) });
    out.replaceChildren(
      el('h3', { text: 'Dry run' + (ns ? ': ' + ns : '') }),
      resultView(r),
      ...previewList('Would add curated memories', 'curated', p.curated, text),
      ...previewList('Would add rules', 'rules', p.rules, text),
      ...previewList('Would delete', 'deleted', p.deleted, deletedItem));
    out.dataset.state = r.status || '';
    say(`Dry run ${r.status}: ${r.summary || 'nothing to do'}.`, r.status === 'error' ? 'error' : 'info');
  });
  $('curator-refresh').addEventListener('click', loadCurator);

  // ---- health

  function valueView(v) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      const dl = el('dl', { class: 'pairs' });
      for (const [k, x] of Object.entries(v)) {
        const dd = el('dd', {}, valueView(x));
        if (k === 'ok') dd.dataset.ok = String(x);
        dl.append(el('dt', { text: k }), dd);
      }
      return dl;
    }
    if (Array.isArray(v)) return v.map((x) => (typeof x === 'object' ? JSON.stringify(x) : String(x))).join(', ') || '—';
    return String(v);
  }

  async function loadHealth() {
    const body = $('health-body');
    const badge = $('health-badge');
    let h;
    try {
      // /healthz needs no token; a degraded vera may answer it with an
      // error status and the document all the same.
      const res = await fetch('/healthz', { cache: 'no-store', headers: { Accept: 'application/json' } });
      h = await res.json();
    } catch (err) {
      badge.textContent = 'health: unreachable';
      badge.dataset.status = 'down';
      body.replaceChildren(el('p', { class: 'error', text: 'vera did not answer /healthz: ' + err.message }));
      return;
    }
    const status = String(h.status || 'unknown');
    badge.textContent = 'health: ' + status;
    badge.dataset.status = status;
    const rest = Object.assign({}, h);
    delete rest.status;
    body.replaceChildren(
      el('p', { class: 'health-status', 'data-status': status, 'data-role': 'health-status', text: status }),
      valueView(rest));
  }
  $('health-refresh').addEventListener('click', loadHealth);

  // ---- start

  loadHealth();
  loadPeople(true).then((picked) => { if (!picked) loadMemories(false); });
  loadCurator();
})();
