// The operator console: log in with the device key, bind a node, list the bound nodes, show
// credits and evidence. The page keeps the session token and the device key in this
// module's memory only (never in storage), and builds its DOM from text, never from HTML.

import { call, ApiError } from './api.js';
import * as canonical from './canonical.js';
import { el } from './dom.js';
import * as keys from './keys.js';
import * as network from './network.js';
import { ago, localMoment, localTime, timeEl } from './time.js';

// STATEMENT is the README's statement on credits, word for word; no amount is shown
// without it.
export const STATEMENT = 'Credits are a test unit: not cash, not redeemable, not convertible, and not a claim on future value. While source is not_yet_wired, every amount is a placeholder — a zero means nothing is counting, not that nothing was earned — and an empty evidence list means unknown.';

const NOT_YET_WIRED = 'NOT YET WIRED: amounts are placeholders, not measurements. A zero means nothing is counting, not that nothing was earned.';

// The protocol gives no push: the page asks for the session's state this often.
const POLL_MS = 2000;
// An AuthorizationCredential is valid this long, as the CLI's.
const AUTHORIZATION_DAYS = 365;
const TERMINAL = new Set(['ACTIVE', 'EXPIRED', 'REJECTED_BY_OPERATOR', 'REJECTED_BY_NODE', 'CANCELLED']);

const $ = (id) => document.getElementById(id);

let config = { prefix: 'service', hints: {} };
// session is {token, operatorDID, expiresAt, key, credential} while logged in.
let session = null;
// resolved is the resolve view the operator is deciding on.
let resolved = null;
let pollTimer = 0;
let pollingID = '';

// ---- messages and errors ----

function clearMessages() {
  $('error').hidden = true;
  $('info').hidden = true;
}

function info(text) {
  $('info').textContent = text;
  $('info').hidden = false;
}

// showError shows a failure with its protocol code and the hint the CLI gives for it.
function showError(err) {
  const code = err && typeof err.code === 'string' ? err.code : '';
  $('error-code').textContent = code ? code + (err.status ? ` (HTTP ${err.status})` : '') : 'Error';
  $('error-text').textContent = err && err.message ? err.message : String(err);
  const hint = config.hints[code];
  $('error-hint').hidden = !hint;
  $('error-hint').textContent = hint ? 'hint: ' + hint.replaceAll('{dir}', 'DIR').replaceAll('{registry}', location.origin) : '';
  $('error').hidden = false;
}

// guarded runs an action with its button disabled, showing any failure.
async function guarded(button, action) {
  clearMessages();
  if (button) button.disabled = true;
  try {
    await action();
  } catch (e) {
    showError(e);
  } finally {
    if (button) button.disabled = false;
  }
}

// ---- views ----

const VIEWS = ['network', 'login', 'bind', 'nodes', 'credits'];

function show(name) {
  for (const v of VIEWS) $('view-' + v).hidden = v !== name;
  network.shown(name === 'network');
  for (const b of document.querySelectorAll('nav [data-view]')) {
    if (b.dataset.view === name) b.setAttribute('aria-current', 'page');
    else b.removeAttribute('aria-current');
  }
  $('view-' + name).querySelector('h2').focus();
}

// ---- login and logout ----

async function readInput(fileInput, textarea, what) {
  const f = fileInput.files && fileInput.files[0];
  if (f) {
    if (f.size > 64 << 10) throw new keys.KeyError(`${what} is larger than 64 KiB`);
    return f.text();
  }
  if (textarea.value.trim() === '') throw new keys.KeyError(`load ${what} from disk or paste it`);
  return textarea.value;
}

async function login() {
  const seedText = await readInput($('seed-file'), $('seed-text'), 'device.seed');
  const credText = await readInput($('cred-file'), $('cred-text'), 'credential.json');
  let dc;
  try {
    dc = JSON.parse(credText);
  } catch {
    throw new keys.KeyError('credential.json is not valid JSON');
  }
  if (!dc || typeof dc !== 'object' || typeof dc.operator_did !== 'string' || typeof dc.device_public_key !== 'string') {
    throw new keys.KeyError('credential.json is not a device credential (operator_did and device_public_key are missing)');
  }
  const { privateKey, publicKey } = await keys.importSeed(keys.parseSeedFile(seedText));
  clearLoginInputs();
  if (!keys.sameKey(publicKey, dc.device_public_key)) {
    throw new keys.KeyError('the device key is not the one the credential names');
  }
  const ch = await call('POST', '/v1/auth/challenge');
  const issuedAt = canonical.formatTime(new Date());
  const msg = canonical.bytes(config.prefix, canonical.LOGIN, {
    operator_did: dc.operator_did,
    device_public_key: dc.device_public_key,
    challenge: ch.challenge,
    issued_at: issuedAt,
  });
  const signature = await keys.sign(privateKey, msg);
  const res = await call('POST', '/v1/auth/device-login', {
    body: { device_credential: dc, challenge: ch.challenge, issued_at: issuedAt, signature },
  });
  session = {
    token: res.session_token,
    operatorDID: res.operator_did,
    expiresAt: new Date(Date.now() + res.expires_in * 1000),
    key: privateKey,
    credential: dc,
  };
  $('who').replaceChildren(`Logged in as ${session.operatorDID}; the session ends at `,
    timeEl(canonical.formatTime(session.expiresAt), localTime(session.expiresAt)), ' (one hour).');
  $('who').hidden = false;
  $('nav').hidden = false;
  $('public-nav').hidden = true;
  resetBind();
  show('bind');
}

function clearLoginInputs() {
  for (const id of ['seed-file', 'seed-text', 'cred-file', 'cred-text']) $(id).value = '';
}

async function logout() {
  const s = session;
  dropSession();
  if (!s) return;
  try {
    await call('POST', '/v1/auth/logout', { token: s.token });
    info('Logged out. The registry ended the session; the device key and the session token are gone from this page.');
  } catch (e) {
    // A registry without POST /v1/auth/logout answers NOT_FOUND: nothing to show but that.
    if (e.code !== 'NOT_FOUND') showError(e);
    info('The device key and the session token are gone from this page, but the registry did not confirm the logout: the session ends by itself within the hour.');
  }
}

// dropSession forgets everything the login brought: the token, the key, the credential,
// and every view made with them.
function dropSession() {
  stopPolling();
  session = null;
  resolved = null;
  clearLoginInputs();
  resetBind();
  $('nodes-list').replaceChildren();
  $('nodes-summary').textContent = '';
  $('credits').replaceChildren();
  $('evidence').replaceChildren();
  $('who').hidden = true;
  $('nav').hidden = true;
  $('public-nav').hidden = false;
  show('login');
}

// ---- bind ----

function resetBind() {
  stopPolling();
  resolved = null;
  $('code').value = '';
  $('node-did').value = '';
  $('request').hidden = true;
  $('progress').hidden = true;
  $('resolve-form').hidden = false;
}

function requireSession() {
  if (!session) throw new ApiError('NO_SESSION', 'not logged in', 0);
  return session;
}

async function resolve() {
  const s = requireSession();
  const code = $('code').value.trim();
  if (code === '') throw new keys.KeyError("type the short code the node shows, for example T53Y-YRCG");
  // The registry then finds only that node's request, and strangers failing resolves
  // cannot spend the budget that lets this one through.
  const nodeDID = $('node-did').value.trim();
  if (nodeDID === '') throw new keys.KeyError('type the node DID the node shows beside its code, for example did:svrp:n:14d0455e');
  const v = await call('POST', '/v1/bindings/resolve', { token: s.token, body: { short_code: code, node_did: nodeDID } });
  await keys.checkNodeView(v);
  if (!(await keys.namesKey(nodeDID, v.node_public_key))) {
    throw new keys.KeyError('the registry showed the request of another node than the one named');
  }
  $('code').value = '';
  $('node-did').value = '';
  resolved = v;
  renderRequest(v);
}

function limitText(v) {
  return v === null || v === undefined ? 'no cap' : canonical.formatNumber(v);
}

function orNone(v) {
  return v === null || v === undefined || v === '' ? '(not given)' : v;
}

// detail adds a term and its value (text, or an element such as a <time>) to dl.
function detail(dl, term, value) {
  dl.append(el('dt', { textContent: term }), el('dd', {}, value));
}

function renderRequest(v) {
  $('fingerprint').textContent = v.node_public_key_fingerprint;
  const dl = $('request-details');
  dl.replaceChildren();
  detail(dl, 'node', v.node_did);
  detail(dl, 'device', orNone(v.device_summary));
  detail(dl, 'os', orNone(v.os));
  detail(dl, 'region', orNone(v.region));
  detail(dl, 'task types', v.requested.task_types.length ? v.requested.task_types.join(', ') : '(none)');
  detail(dl, 'single limit', limitText(v.requested.single_limit));
  detail(dl, 'daily limit', limitText(v.requested.daily_limit));
  detail(dl, 'session', el('span', {}, `${v.binding_session_id} (${v.state}, expires `,
    timeEl(v.expires_at, localTime(Date.parse(v.expires_at))), ')'));

  const tasks = $('grant-tasks');
  tasks.replaceChildren();
  v.requested.task_types.forEach((t, i) => {
    const id = 'grant-task-' + i;
    tasks.append(el('div', { class: 'check' },
      el('input', { type: 'checkbox', id, value: t, checked: true }),
      el('label', { htmlFor: id, textContent: t })));
  });
  if (!v.requested.task_types.length) tasks.append(el('p', { textContent: 'The node asked for no task types.' }));
  for (const [name, asked] of [['single', v.requested.single_limit], ['daily', v.requested.daily_limit]]) {
    $(name + '-limit').value = asked === null || asked === undefined ? '' : canonical.formatNumber(asked);
    $(name + '-help').textContent = asked === null || asked === undefined
      ? 'The node asked for no cap. Leave empty to grant none, or set one.'
      : `The node asked for ${canonical.formatNumber(asked)}. Grant that or less.`;
  }
  $('resolve-form').hidden = true;
  $('progress').hidden = true;
  $('request').hidden = false;
  $('fingerprint-box').focus();
}

// grantedLimit reads a limit field: empty grants no cap, which only a node that asked for
// none may get; otherwise a number from 0 up to what the node asked for.
function grantedLimit(id, asked, what) {
  const t = $(id).value.trim();
  if (t === '') {
    if (asked !== null && asked !== undefined) {
      throw new keys.KeyError(`the node asked for a ${what} of ${canonical.formatNumber(asked)}: grant that or less`);
    }
    return null;
  }
  const v = Number(t);
  if (!/^\d+(\.\d+)?$/.test(t) || !(v >= 0 && v <= canonical.MAX_LIMIT)) {
    throw new keys.KeyError(`the ${what} must be a number of 0 or more`);
  }
  if (asked !== null && asked !== undefined && v > asked) {
    throw new keys.KeyError(`the ${what} may be at most ${canonical.formatNumber(asked)}, what the node asked for`);
  }
  return v;
}

async function authorize() {
  const s = requireSession();
  const v = resolved;
  if (!v) return;
  if (s.credential.operator_did !== s.operatorDID) {
    throw new ApiError('PERMISSION_DENIED', "the credential is not the logged-in operator's", 0);
  }
  const taskTypes = [...$('grant-tasks').querySelectorAll('input:checked')].map((c) => c.value);
  const now = new Date();
  const m = {
    binding_session_id: v.binding_session_id,
    node_did: v.node_did,
    operator_did: s.operatorDID,
    task_types: taskTypes,
    single_limit: grantedLimit('single-limit', v.requested.single_limit, 'single limit'),
    daily_limit: grantedLimit('daily-limit', v.requested.daily_limit, 'daily limit'),
    revocation_id: 'rev-' + keys.randomHex(16),
    issued_at: canonical.formatTime(now),
    expires_at: canonical.formatTime(new Date(now.getTime() + AUTHORIZATION_DAYS * 86400e3)),
  };
  const signature = await keys.sign(s.key, canonical.bytes(config.prefix, canonical.AUTHORIZATION, m));
  const res = await call('POST', '/v1/bindings/authorize', {
    token: s.token,
    body: {
      binding_session_id: v.binding_session_id,
      device_credential: s.credential,
      authorization_credential: { ...m, signature },
    },
  });
  showProgress(v.binding_session_id, res.state);
}

async function reject() {
  const s = requireSession();
  if (!resolved) return;
  const res = await call('POST', `/v1/bindings/${encodeURIComponent(resolved.binding_session_id)}/reject`, { token: s.token });
  showProgress(resolved.binding_session_id, res.state);
}

async function cancel() {
  const s = requireSession();
  if (!pollingID) return;
  const res = await call('POST', `/v1/bindings/${encodeURIComponent(pollingID)}/cancel`, { token: s.token });
  showProgress(pollingID, res.state);
}

const STATE_TEXT = {
  PENDING_OPERATOR: 'Waiting for your decision.',
  PENDING_NODE_ACCEPTANCE: 'Authorized. The node now shows these terms; waiting for it to accept or reject them (checked every 2 seconds).',
  VERIFYING: 'The node answered; the registry is checking the signatures.',
  ACTIVE: 'The node accepted: it is bound to you.',
  EXPIRED: 'The session expired before both sides agreed. Start again on the node.',
  REJECTED_BY_OPERATOR: 'You rejected this request. Nothing was bound.',
  REJECTED_BY_NODE: 'The node rejected the terms. Nothing was bound.',
  CANCELLED: 'The session was cancelled. Nothing was bound.',
};

function showProgress(id, state) {
  pollingID = id;
  $('request').hidden = true;
  $('resolve-form').hidden = true;
  $('progress').hidden = false;
  $('progress-id').textContent = id;
  setState(state);
  $('progress-state').focus();
  stopPolling();
  if (!TERMINAL.has(state)) pollTimer = setTimeout(pollOnce, POLL_MS);
}

function setState(state) {
  $('progress-state').textContent = state;
  $('progress-text').textContent = STATE_TEXT[state] || '';
  const done = TERMINAL.has(state);
  $('cancel-button').hidden = done;
  $('show-nodes-button').hidden = state !== 'ACTIVE';
}

async function pollOnce() {
  pollTimer = 0;
  const id = pollingID;
  try {
    const st = await call('GET', `/v1/bindings/${encodeURIComponent(id)}/status`);
    if (id !== pollingID) return;
    setState(st.state);
    if (TERMINAL.has(st.state)) return;
  } catch (e) {
    showError(e);
    // The network and an overloaded registry get another try; anything else ends the wait.
    if (!(e.code === 'TRANSPORT_ERROR' || e.status === 429 || e.status >= 500)) return;
  }
  if (id === pollingID && session) pollTimer = setTimeout(pollOnce, POLL_MS);
}

function stopPolling() {
  if (pollTimer) clearTimeout(pollTimer);
  pollTimer = 0;
}

// ---- nodes ----

async function loadNodes() {
  const s = requireSession();
  const minutes = Number($('window').value);
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 10080) {
    throw new keys.KeyError('the online window must be a whole number of minutes from 1 to 10080 (a week)');
  }
  const list = $('nodes-list');
  list.setAttribute('aria-busy', 'true');
  let res;
  try {
    res = await call('GET', `/v1/operator/me/nodes?online_within=${minutes * 60}`, { token: s.token });
  } finally {
    list.setAttribute('aria-busy', 'false');
  }
  const online = res.nodes.filter((n) => n.online).length;
  $('nodes-summary').textContent = `${res.count} bound node${res.count === 1 ? '' : 's'}, ${online} online (seen within ${minutes} min).`;
  list.replaceChildren();
  for (const n of res.nodes) {
    const dl = el('dl');
    detail(dl, 'last seen', n.last_seen ? timeEl(n.last_seen, ago(n.last_seen, Date.now())) : 'never');
    detail(dl, 'endpoint', orNone(n.endpoint));
    detail(dl, 'region', orNone(n.region));
    detail(dl, 'task types', n.authorization.task_types.length ? n.authorization.task_types.join(', ') : '(none)');
    detail(dl, 'single limit', limitText(n.authorization.single_limit));
    detail(dl, 'daily limit', limitText(n.authorization.daily_limit));
    detail(dl, 'bound since', timeEl(n.authorization.activated_at, localMoment(Date.parse(n.authorization.activated_at))));
    const card = el('li', { class: 'card', data: { node: n.node_did } },
      el('h3', {},
        el('span', { class: 'did', textContent: n.node_did }), ' ',
        el('span', { class: n.online ? 'badge online' : 'badge offline', textContent: n.online ? 'online' : 'offline' })),
      dl);
    if (n.binding_session_id) {
      // Two presses, so that one stray key or tap unbinds nothing; no modal dialog.
      const b = el('button', { type: 'button', class: 'danger unbind', textContent: 'Unbind' });
      b.setAttribute('aria-label', 'Unbind ' + n.node_did);
      b.addEventListener('click', () => {
        if (b.dataset.armed !== 'yes') {
          b.dataset.armed = 'yes';
          b.textContent = 'Press again to unbind';
          info(`Unbinding ${n.node_did} ends its binding; binding it again takes a new code from the node.`);
          return;
        }
        guarded(b, () => unbind(n));
      });
      card.append(el('div', { class: 'actions' }, b));
    }
    list.append(card);
  }
}

async function unbind(n) {
  const s = requireSession();
  await call('POST', `/v1/bindings/${encodeURIComponent(n.binding_session_id)}/unbind`, { token: s.token });
  await loadNodes();
  info(`${n.node_did} is no longer bound to you.`);
}

// ---- credits and evidence ----

async function loadCredits() {
  const s = requireSession();
  const [c, e] = await Promise.all([
    call('GET', '/v1/operator/me/credits', { token: s.token }),
    call('GET', '/v1/operator/me/evidence', { token: s.token }),
  ]);
  const credits = $('credits');
  credits.replaceChildren();
  // The statement comes first, and the amounts only with it.
  $('statement').textContent = STATEMENT;
  if (c.source !== 'ledger') credits.append(el('p', { class: 'warning', textContent: NOT_YET_WIRED }));
  const table = el('dl', { class: 'amounts' });
  for (const name of ['settled', 'pending', 'estimated']) {
    const a = c[name] || {};
    detail(table, name, `${canonical.formatNumber(Number(a.amount) || 0)} ${c.unit} — ${a.meaning || ''}`);
  }
  credits.append(
    table,
    el('p', { textContent: 'The three amounts mean different things and are never added up.' }),
    el('p', { class: 'small', textContent: `source: ${c.source}. The registry's disclaimer: ${c.disclaimer}` }));
  const ev = $('evidence');
  ev.replaceChildren(
    el('h3', { textContent: 'Evidence' }),
    el('p', { textContent: `count: ${e.count}; source: ${e.source}` }),
    el('p', { textContent: e.note }));
}

// ---- start ----

async function start() {
  network.setup();
  for (const b of document.querySelectorAll('nav [data-view]')) {
    b.addEventListener('click', () => {
      clearMessages();
      show(b.dataset.view);
      if (b.dataset.view === 'nodes') guarded(null, loadNodes);
      if (b.dataset.view === 'credits') guarded(null, loadCredits);
    });
  }
  $('logout-button').addEventListener('click', () => guarded($('logout-button'), logout));
  const onSubmit = (form, button, action) => $(form).addEventListener('submit', (ev) => {
    ev.preventDefault();
    guarded($(button), action);
  });
  onSubmit('login-form', 'login-button', login);
  onSubmit('resolve-form', 'resolve-button', resolve);
  onSubmit('grant-form', 'authorize-button', authorize);
  onSubmit('nodes-form', 'refresh-button', loadNodes);
  $('reject-button').addEventListener('click', () => guarded($('reject-button'), reject));
  $('cancel-button').addEventListener('click', () => guarded($('cancel-button'), cancel));
  $('again-button').addEventListener('click', () => { clearMessages(); resetBind(); $('code').focus(); });
  $('show-nodes-button').addEventListener('click', () => $('nav-nodes').click());

  try {
    const res = await fetch('config.json', { cache: 'no-store' });
    config = await res.json();
  } catch (e) {
    showError(new ApiError('TRANSPORT_ERROR', 'could not read the console configuration', 0));
  }
  const why = await keys.unsupported();
  if (why) {
    $('unsupported').textContent = why;
    $('unsupported').hidden = false;
    $('login-button').disabled = true;
  }
  show('network');
  document.body.dataset.ready = why ? 'unsupported' : 'yes';
}

start();
