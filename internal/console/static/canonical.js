// The exact signed bytes of the protocol's messages (wire profile section 3), built as the Go
// canonical package builds them: a domain literal "<prefix><suffix>", then the fields in a
// fixed order, joined by one LF, no trailing LF, UTF-8. The browser test checks every case
// of the repository's vectors against this module.

const utf8 = new TextEncoder();

export class CanonicalError extends Error {
  constructor(message) {
    super(message);
    this.code = 'BAD_REQUEST';
  }
}

// Field kinds: s string, l list of strings, n number (limit), b boolean, i unix integer.
export const MESSAGES = {
  1: ['-auth-challenge:v1', 'operator_did s, device_public_key s, challenge s, issued_at s'],
  2: ['-operator-device-credential:v1', 'credential_id s, operator_did s, operator_root_public_key s, device_id s, device_public_key s, permissions l, issued_at s, expires_at s, revocation_id s'],
  3: ['-node-register:v1', 'did s, public_key s, endpoint s, capabilities l, region s'],
  4: ['-node-heartbeat:v1', 'did s, ts i'],
  5: ['-node-poll:v1', 'node_did s, ts i'],
  6: ['-binding-session:v1', 'binding_session_id s, node_did s, node_public_key s, device_summary s, os s, region s, requested_task_types l, requested_single_limit n, requested_daily_limit n, nonce s, created_at s, expires_at s'],
  7: ['-binding-authorization:v1', 'binding_session_id s, node_did s, operator_did s, task_types l, single_limit n, daily_limit n, revocation_id s, issued_at s, expires_at s'],
  8: ['-binding-acceptance:v1', 'binding_session_id s, node_did s, operator_did s, authorization_digest s, accepted b, issued_at s'],
  9: ['-binding-cancel:v1', 'binding_session_id s, node_did s, ts i'],
};

export const LOGIN = 1;
export const AUTHORIZATION = 7;

// MAX_LIMIT is the largest number a limit may carry, 2^53 - 1.
export const MAX_LIMIT = Number.MAX_SAFE_INTEGER;

// bytes returns the signed bytes of message number under prefix, with fields taken from
// an object keyed by the wire names. It throws a CanonicalError for input that could make
// two messages share bytes.
export function bytes(prefix, number, fields) {
  const spec = MESSAGES[number];
  if (!spec) throw new CanonicalError(`no message ${number}`);
  checkPrefix(prefix);
  const parts = [prefix + spec[0]];
  for (const f of spec[1].split(', ')) {
    const [name, kind] = f.split(' ');
    parts.push(render(name, kind, fields[name]));
  }
  return utf8.encode(parts.join('\n'));
}

function checkPrefix(prefix) {
  if (typeof prefix !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(prefix)) {
    throw new CanonicalError('the domain prefix must be 1-64 characters of [A-Za-z0-9._-]');
  }
}

function render(name, kind, v) {
  switch (kind) {
    case 's':
      if (v === undefined || v === null) return '';
      return checkString(name, v);
    case 'l':
      if (v === undefined || v === null) return '';
      return renderList(name, v);
    case 'n':
      if (v === undefined || v === null) return '';
      return formatNumber(checkNumber(name, v));
    case 'b':
      return v ? 'True' : 'False';
    case 'i':
      if (!Number.isSafeInteger(v)) throw new CanonicalError(`field ${name} must be an integer`);
      return String(v);
  }
  throw new CanonicalError(`field ${name}: unknown kind`);
}

function checkString(name, s) {
  if (typeof s !== 'string') throw new CanonicalError(`field ${name} must be a string`);
  if (/[\u0000-\u001f\u007f]/.test(s)) throw new CanonicalError(`field ${name} contains a control character`);
  // A lone surrogate has no UTF-8 form.
  if (/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(s)) {
    throw new CanonicalError(`field ${name} is not valid UTF-8`);
  }
  return s;
}

function renderList(name, items) {
  if (!Array.isArray(items)) throw new CanonicalError(`field ${name} must be a list`);
  for (const it of items) {
    checkString(name, it);
    if (it === '') throw new CanonicalError(`field ${name} has an empty item`);
    if (it.includes(',')) throw new CanonicalError(`field ${name} has an item containing ','`);
  }
  // Sorted by UTF-8 bytes, not by UTF-16 code units: the two disagree above U+FFFF.
  const keyed = items.map((s) => [utf8.encode(s), s]);
  keyed.sort((a, b) => compareBytes(a[0], b[0]));
  return keyed.map((k) => k[1]).join(',');
}

function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] !== b[i]) return a[i] - b[i];
  }
  return a.length - b.length;
}

function checkNumber(name, v) {
  if (typeof v !== 'number' || !(v >= 0 && v <= MAX_LIMIT)) {
    throw new CanonicalError(`field ${name} must be a number from 0 to 9007199254740991`);
  }
  return v;
}

// formatNumber renders a limit: the shortest decimal that round-trips, no exponent, no
// trailing ".0"; -0 is "0". JavaScript's own shortest form uses an exponent below 1e-6,
// which is spelled out here.
export function formatNumber(v) {
  if (v === 0) return '0';
  const s = String(v);
  const m = /^(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (!m) return s;
  const digits = m[1] + (m[2] || '');
  const point = m[1].length + Number(m[3]);
  if (point <= 0) return '0.' + '0'.repeat(-point) + digits;
  if (point >= digits.length) return digits + '0'.repeat(point - digits.length);
  return digits.slice(0, point) + '.' + digits.slice(point);
}

// formatTime renders a Date in the protocol's 20-character form, YYYY-MM-DDTHH:MM:SSZ.
export function formatTime(d) {
  return d.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
