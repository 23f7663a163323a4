// Keys: base58 and hex, the device seed as a WebCrypto Ed25519 key, signatures, and the
// fingerprint and DID checks of a node key. The seed itself is held only long enough to
// import it; what stays in memory is a non-extractable CryptoKey.

const B58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

export function base58Encode(bytes) {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  const digits = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i];
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j] << 8;
      digits[j] = carry % 58;
      carry = (carry / 58) | 0;
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = (carry / 58) | 0;
    }
  }
  return '1'.repeat(zeros) + digits.reverse().map((d) => B58[d]).join('');
}

export function base58Decode(s) {
  let zeros = 0;
  while (zeros < s.length && s[zeros] === '1') zeros++;
  const bytes = [];
  for (let i = zeros; i < s.length; i++) {
    let carry = B58.indexOf(s[i]);
    if (carry < 0) return null;
    for (let j = 0; j < bytes.length; j++) {
      carry += bytes[j] * 58;
      bytes[j] = carry & 0xff;
      carry >>= 8;
    }
    while (carry > 0) {
      bytes.push(carry & 0xff);
      carry >>= 8;
    }
  }
  return Uint8Array.from([...new Array(zeros).fill(0), ...bytes.reverse()]);
}

export function hexEncode(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

export function hexDecode(s) {
  if (!/^([0-9a-fA-F]{2})*$/.test(s)) return null;
  const out = new Uint8Array(s.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(s.slice(2 * i, 2 * i + 2), 16);
  return out;
}

// decodeKey reads a 32-byte public key written in hex (64 characters) or base58, as the
// registry accepts it; null when it is neither.
export function decodeKey(s) {
  if (typeof s !== 'string') return null;
  const k = s.length === 64 ? hexDecode(s) : base58Decode(s);
  return k && k.length === 32 ? k : null;
}

function equalBytes(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

// The fixed DER prefix of an Ed25519 private key in PKCS#8 (RFC 8410): WebCrypto imports a
// bare 32-byte seed only in this wrapping.
const PKCS8_ED25519 = Uint8Array.of(0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20);

export class KeyError extends Error {}

// unsupported says why this browser cannot sign, or '' when it can.
export async function unsupported() {
  if (!globalThis.isSecureContext || !globalThis.crypto || !crypto.subtle) {
    return 'This page is not a secure context, so the browser offers no WebCrypto here. Open the console over https, or at http://127.0.0.1 or http://localhost on the registry\'s machine.';
  }
  try {
    await importSeed(new Uint8Array(32));
    return '';
  } catch (e) {
    return 'This browser has no WebCrypto Ed25519, which the console needs to sign. Use a current Chromium, Chrome, Edge, Firefox or Safari, or the svrpd operator commands.';
  }
}

// parseSeedFile reads the CLI's seed file: 64 hex characters of the Ed25519 seed and a
// newline (surrounding white space is forgiven).
export function parseSeedFile(text) {
  const t = text.trim();
  if (!/^[0-9a-fA-F]{64}$/.test(t)) {
    throw new KeyError('the device seed must be 64 hex characters (the device.seed file the CLI writes)');
  }
  return hexDecode(t);
}

// importSeed turns a 32-byte seed into {privateKey, publicKey}: a non-extractable signing key
// and the 32 public key bytes. It wipes the seed bytes it was given.
export async function importSeed(seed) {
  const der = new Uint8Array(PKCS8_ED25519.length + 32);
  der.set(PKCS8_ED25519);
  der.set(seed, PKCS8_ED25519.length);
  try {
    // The public key is read once from an extractable copy, which is then dropped.
    const tmp = await crypto.subtle.importKey('pkcs8', der, { name: 'Ed25519' }, true, ['sign']);
    const jwk = await crypto.subtle.exportKey('jwk', tmp);
    const privateKey = await crypto.subtle.importKey('pkcs8', der, { name: 'Ed25519' }, false, ['sign']);
    const publicKey = base64urlDecode(jwk.x);
    jwk.d = '';
    return { privateKey, publicKey };
  } finally {
    der.fill(0);
    seed.fill(0);
  }
}

function base64urlDecode(s) {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/'));
  return Uint8Array.from(b, (c) => c.charCodeAt(0));
}

// sign returns the base58 Ed25519 signature of bytes.
export async function sign(privateKey, bytes) {
  const sig = await crypto.subtle.sign({ name: 'Ed25519' }, privateKey, bytes);
  return base58Encode(new Uint8Array(sig));
}

async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

// fingerprint is the key's fingerprint as the node shows it: the first 8 bytes of its
// SHA-256 in hex, in four groups of four.
export async function fingerprint(key) {
  const h = hexEncode((await sha256(key)).slice(0, 8));
  return `${h.slice(0, 4)}:${h.slice(4, 8)}:${h.slice(8, 12)}:${h.slice(12, 16)}`;
}

// checkNodeView checks what resolve returned before a person compares it: the node DID
// derives from the key, and the fingerprint shown is that key's. Otherwise the fingerprint
// on screen might not be the key that gets authorized.
export async function checkNodeView(v) {
  const key = decodeKey(v.node_public_key);
  if (!key) throw new KeyError('the node key is neither hex nor base58 of 32 bytes');
  const sum = hexEncode(await sha256(key));
  const m = /^did:svrp:(?:n:([0-9a-f]{8}|[0-9a-f]{10})|([0-9a-f]{64}))$/.exec(v.node_did);
  const bound = m && (m[1] ? sum.startsWith(m[1]) : m[2] === hexEncode(key));
  if (!bound) throw new KeyError('the node DID does not derive from the node key');
  if ((await fingerprint(key)) !== v.node_public_key_fingerprint) {
    throw new KeyError("the fingerprint shown is not the node key's");
  }
}

// namesKey reports whether a node DID, in any spelling, derives from a key written in hex or
// base58: a registry that ignored node_did could otherwise show another node's request.
export async function namesKey(did, written) {
  const key = decodeKey(written);
  const m = /^did:svrp:(?:(?:[a-np-z0-9]:)?([0-9a-f]{8}|[0-9a-f]{10})|([0-9a-f]{64}))$/.exec(did);
  if (!key || !m) return false;
  return m[1] ? hexEncode(await sha256(key)).startsWith(m[1]) : m[2] === hexEncode(key);
}

// sameKey reports whether the public key bytes equal a key written in hex or base58.
export function sameKey(bytes, written) {
  const k = decodeKey(written);
  return k !== null && equalBytes(k, bytes);
}

// randomHex returns n random bytes in hex.
export function randomHex(n) {
  return hexEncode(crypto.getRandomValues(new Uint8Array(n)));
}
