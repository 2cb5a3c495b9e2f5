// The public agent page's one script (DESIGN §10, "In the browser"): plain browser JavaScript,
// served as it is by GET /assets/log-check.js as a module script, under the page's CSP
// (script-src 'self', connect-src 'self', Trusted Types). It writes text only, never HTML.
//
// It checks the org's transparency-log checkpoint against the published log key (WebCrypto
// Ed25519), remembers the last checkpoint seen (localStorage) and, on a later visit, checks that
// the log extends it (an RFC 9162 consistency proof). A warning never replaces what is remembered.
// It also shows times in the reader's locale and adds copy buttons to shortened hashes.
//
// The checks are exported so that Node runs this very file against the project's vectors
// (test/unit/log-check-script.test.ts); the browser ignores a module's exports.

const ED25519 = 0x01;
const SIGNATURE_LINE = /^\u2014 (\S+) ([A-Za-z0-9+/]+=*)$/;
const utf8 = new TextEncoder();

// ---- bytes ----

/** Canonical base64 decoded, or null. */
export function fromBase64(text) {
  let binary;
  try {
    binary = atob(text);
  } catch {
    return null;
  }
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  return toBase64(bytes) === text ? bytes : null;
}

export function toBase64(bytes) {
  return btoa(String.fromCharCode(...bytes));
}

/** Lowercase hex of a 32-byte hash decoded, or null. */
function hashFromHex(text) {
  if (typeof text !== 'string' || !/^[0-9a-f]{64}$/.test(text)) return null;
  return Uint8Array.from(text.match(/../g), (h) => parseInt(h, 16));
}

function toHex(bytes) {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function same(a, b) {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest('SHA-256', bytes));
}

// ---- signed notes (c2sp.org/signed-note, as src/domain/signed-note.ts writes them) ----

/** `<name>+<8 hex key id>+<base64(0x01 ‖ key)>` read back: {name, keyId, publicKey}, or null if it is not one or its id does not match. */
export async function parseVerifierKey(text) {
  const match = /^([^+\s]+)\+([0-9a-f]{8})\+([A-Za-z0-9+/]+=*)$/.exec(text.trim());
  if (match === null) return null;
  const raw = fromBase64(match[3]);
  if (raw === null || raw.length !== 33 || raw[0] !== ED25519) return null;
  const name = match[1];
  const publicKey = raw.slice(1);
  const keyId = (await sha256(concat(utf8.encode(`${name}\n`), [ED25519], publicKey))).slice(0, 4);
  return toHex(keyId) === match[2] ? { name, keyId, publicKey } : null;
}

/**
 * The note's text (the lines before the blank line) if a signature line under the key's name and
 * id verifies; null otherwise. Rejects (NotSupportedError) where WebCrypto has no Ed25519.
 */
export async function openNote(note, key) {
  const split = note.lastIndexOf('\n\n', note.length - 2);
  if (split < 0 || !note.endsWith('\n')) return null;
  const text = note.slice(0, split + 1);
  const verifier = await crypto.subtle.importKey('raw', key.publicKey, { name: 'Ed25519' }, false, ['verify']);
  for (const line of note.slice(split + 2, -1).split('\n')) {
    const match = SIGNATURE_LINE.exec(line);
    if (match === null) return null;
    if (match[1] !== key.name) continue;
    const raw = fromBase64(match[2]);
    if (raw === null || raw.length !== 4 + 64 || !same(raw.subarray(0, 4), key.keyId)) continue;
    if (await crypto.subtle.verify({ name: 'Ed25519' }, verifier, raw.subarray(4), utf8.encode(text))) return text;
  }
  return null;
}

/** A checkpoint's text (`<origin>\n<size>\n<base64 root>\n`, extension lines allowed): {origin, size, root}, or null. */
export function parseCheckpoint(text) {
  const lines = text.split('\n');
  if (lines.length < 4 || lines[lines.length - 1] !== '') return null;
  const [origin, size, root] = lines;
  if (origin === '' || !/^(0|[1-9][0-9]*)$/.test(size) || !Number.isSafeInteger(Number(size))) return null;
  const hash = fromBase64(root);
  return hash === null || hash.length !== 32 ? null : { origin, size: Number(size), root: hash };
}

// ---- RFC 9162 §2.1.4.2 consistency, as src/domain/merkle-verify.ts checks it ----

const half = (n) => Math.floor(n / 2);
/** Exact for every safe integer (a 32-bit mask would call 2^31 + 2^31·k powers of two, or not, wrongly). */
const isPowerOfTwo = (n) => Number.isSafeInteger(n) && n >= 1 && 2 ** Math.round(Math.log2(n)) === n;
const nodeHash = (left, right) => sha256(concat([0x01], left, right));

/** Whether `proof` (hashes) shows the tree of `from` leaves (root `fromRoot`) to be a prefix of the one of `to` (root `toRoot`). */
export async function verifyConsistency(from, to, fromRoot, toRoot, proof) {
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 1 || from > to) return false;
  if (from === to) return proof.length === 0 && same(fromRoot, toRoot);
  if (proof.length === 0) return false;
  const path = isPowerOfTwo(from) ? [fromRoot, ...proof] : [...proof];
  let fn = from - 1;
  let sn = to - 1;
  while (fn % 2 === 1) [fn, sn] = [half(fn), half(sn)];
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0) return false;
    if (fn % 2 === 1 || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      while (fn % 2 === 0 && fn !== 0) [fn, sn] = [half(fn), half(sn)];
    } else {
      sr = await nodeHash(sr, c);
    }
    [fn, sn] = [half(fn), half(sn)];
  }
  return sn === 0 && same(fr, fromRoot) && same(sr, toRoot);
}

/** A consistency proof's answer `{from, to, hashes}` for the sizes asked: its hashes, or null if it is not one. */
export function proofHashes(answer, from, to) {
  if (answer === null || typeof answer !== 'object' || answer.from !== from || answer.to !== to || !Array.isArray(answer.hashes)) return null;
  const hashes = answer.hashes.map(hashFromHex);
  return hashes.includes(null) ? null : hashes;
}

/**
 * `next` (signed, same log) judged against `seen`, the checkpoint remembered: 'unchanged',
 * 'consistent', or a fork: 'shrunk', 'two-roots', 'proof-fails'. `proofOf(from, to)` is called
 * only when the log grew; it resolves to the proof's hashes (null: not a proof).
 */
export async function judge(seen, next, proofOf) {
  if (next.size < seen.size) return 'shrunk';
  if (next.size === seen.size) return same(seen.root, next.root) ? 'unchanged' : 'two-roots';
  // Every tree extends the empty one.
  if (seen.size === 0) return 'consistent';
  const proof = await proofOf(seen.size, next.size);
  return proof !== null && (await verifyConsistency(seen.size, next.size, seen.root, next.root, proof)) ? 'consistent' : 'proof-fails';
}

// ---- the page ----

/** The log could not be read (network, HTTP error): nothing is known either way. */
class Unreachable extends Error {}

async function get(path, read) {
  for (let attempt = 0; ; attempt++) {
    let res;
    try {
      res = await fetch(path, { credentials: 'omit', cache: 'no-store' });
    } catch {
      throw new Unreachable('the network failed');
    }
    // 503: the log's tree is being rebuilt after a start, for a moment.
    if (res.status === 503 && attempt < 3) {
      const seconds = Math.min(Math.max(Number(res.headers.get('retry-after')) || 1, 1), 5);
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      continue;
    }
    if (!res.ok) throw new Unreachable(`the server answered ${res.status}`);
    try {
      return await read(res);
    } catch {
      throw new Unreachable('the answer could not be read');
    }
  }
}

function when(iso) {
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : at.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

const records = (n) => `${n} record${n === 1 ? '' : 's'}`;
/**
 * Where the browser keeps what it saw of an org's log: under this site and the org, never under a
 * name the server gives (a server could otherwise make the page forget by renaming its log).
 */
const storageKey = (org) => `vigil-log:${location.origin}/${org}`;

/**
 * The checkpoint remembered for the org (`{origin, key, size, root, seen_at}`: the log's name and
 * key as they were), null if none, undefined if the browser keeps nothing.
 */
function remembered(org) {
  let stored;
  try {
    stored = localStorage.getItem(storageKey(org));
  } catch {
    return undefined;
  }
  try {
    const value = JSON.parse(stored ?? 'null');
    const root = fromBase64(String(value?.root));
    if (Number.isSafeInteger(value?.size) && value.size >= 0 && root !== null && root.length === 32 && typeof value.seen_at === 'string' && typeof value.origin === 'string' && typeof value.key === 'string') {
      return { origin: value.origin, key: value.key, size: value.size, root, seen_at: value.seen_at };
    }
  } catch {
    // Not ours, or damaged: as if none.
  }
  return null;
}

function remember(org, checkpoint, keyText) {
  try {
    const entry = { origin: checkpoint.origin, key: keyText, size: checkpoint.size, root: toBase64(checkpoint.root), seen_at: new Date().toISOString() };
    localStorage.setItem(storageKey(org), JSON.stringify(entry));
    return true;
  } catch {
    return false;
  }
}

/** Shows the outcome: `verdict` (a data attribute, for tests and styles), the lines as paragraphs of text. */
function say(verdict, lines) {
  const box = document.getElementById('log-status');
  if (box === null) return;
  const warning = ['signature', 'origin', 'renamed', 'shrunk', 'two-roots', 'proof-fails'].includes(verdict);
  box.className = `log-status ${warning ? 'log-warning' : verdict === 'unchecked' ? 'log-unchecked' : 'log-ok'}`;
  box.dataset.verdict = verdict;
  if (warning) box.setAttribute('role', 'alert');
  else box.removeAttribute('role');
  box.replaceChildren(
    ...lines.map((line) => {
      const p = document.createElement('p');
      p.textContent = line;
      return p;
    }),
  );
}

const KEEPS = 'This browser keeps the checkpoint you saw then.';

async function checkLog(org) {
  const [keyText, note] = await Promise.all([
    get('/public/log-key', (r) => r.text()),
    get(`/public/checkpoints/${encodeURIComponent(org)}`, (r) => r.text()),
  ]);
  const key = await parseVerifierKey(keyText);
  if (key === null) return say('signature', ['Warning: the published log key is not a key this page can read, so the log cannot be checked.']);
  const text = await openNote(note, key);
  const checkpoint = text === null ? null : parseCheckpoint(text);
  if (checkpoint === null) {
    return say('signature', ["Warning: this log's checkpoint is not signed by the published log key. Do not trust this record's history; the checkpoint was not remembered."]);
  }
  if (checkpoint.origin !== `${key.name}/${org}`) {
    return say('origin', [`Warning: the checkpoint served for this organization is that of another log (${checkpoint.origin}); it was not remembered.`]);
  }
  const signed = `Signature checked: this log's checkpoint of ${records(checkpoint.size)} is signed by the published log key.`;
  const forgetful = 'This browser does not let the page remember what you saw, so it cannot compare the log with an earlier visit.';
  const vkey = keyText.trim();
  const seen = remembered(org);
  if (seen === undefined) return say('unchecked', [signed, forgetful]);
  if (seen === null) {
    if (!remember(org, checkpoint, vkey)) return say('unchecked', [signed, forgetful]);
    return say('first', [signed, 'This is the first time this browser has seen this log: it has remembered this checkpoint and will compare the log with it next time, to check that nothing recorded before now was changed or removed.']);
  }
  // A log that changed its name or key since is not the log remembered: nothing can be compared.
  if (seen.origin !== checkpoint.origin || seen.key !== vkey) {
    const what = seen.origin !== checkpoint.origin ? `calls itself ${checkpoint.origin}, not ${seen.origin} as` : 'is signed by another key than';
    return say('renamed', [signed, `Warning: this organization's log now ${what} when you saw it on ${when(seen.seen_at)}: it cannot be compared with what you saw. A service that rewrote its history could do this to hide it.`, KEEPS]);
  }
  const proofOf = (from, to) =>
    get(`/public/proof/${encodeURIComponent(org)}/consistency?from=${from}&to=${to}`, (r) => r.json()).then((answer) => proofHashes(answer, from, to));
  const verdict = await judge(seen, checkpoint, proofOf);
  const then = when(seen.seen_at);
  if (verdict === 'unchanged' || verdict === 'consistent') {
    remember(org, checkpoint, vkey);
    return say(verdict, [signed, `This log is consistent with what you saw on ${then}: nothing recorded before then was changed or removed.`]);
  }
  const why = {
    shrunk: `Warning: this log now holds ${records(checkpoint.size)}, fewer than the ${seen.size} you saw on ${then}: records were removed, or the log was forked.`,
    'two-roots': `Warning: this log's ${records(checkpoint.size)} differ from the ${seen.size} you saw on ${then}: records were changed, or the log was forked.`,
    'proof-fails': `Warning: this log is not consistent with what you saw on ${then}: the proof that its ${records(checkpoint.size)} extend the ${seen.size} you saw does not check. Records from before then may have been changed or removed, or the log was forked.`,
  };
  say(verdict, [signed, why[verdict], KEEPS]);
}

/** Times in the reader's locale; the ISO text the server wrote stays in the title. */
function localTimes() {
  for (const time of document.querySelectorAll('time[datetime]')) {
    const iso = time.getAttribute('datetime');
    if (Number.isNaN(new Date(iso).getTime())) continue;
    time.title = iso;
    time.textContent = when(iso);
  }
}

/** A copy button beside each shortened hash (its full value is in `data-full`). */
function copyButtons() {
  for (const hash of document.querySelectorAll('[data-full]')) {
    const button = document.createElement('button');
    button.type = 'button';
    button.className = 'copy';
    button.textContent = 'Copy';
    button.setAttribute('aria-label', `Copy the full ${hash.dataset.what ?? 'value'}`);
    button.addEventListener('click', () => void copy(hash, button));
    hash.after(button);
  }
}

async function copy(hash, button) {
  try {
    await navigator.clipboard.writeText(hash.dataset.full);
    button.textContent = 'Copied';
  } catch {
    // No clipboard here (an insecure page, a refusal): show the whole value, selected.
    hash.textContent = hash.dataset.full;
    getSelection()?.selectAllChildren(hash);
    button.textContent = 'Selected: copy it';
  }
  setTimeout(() => (button.textContent = 'Copy'), 2000);
}

function start() {
  localTimes();
  copyButtons();
  const section = document.getElementById('log-check');
  if (section === null) return;
  if (globalThis.crypto?.subtle === undefined) {
    return say('unchecked', ["This browser cannot check the log's signature on this page (WebCrypto needs a secure, HTTPS page). The verification guide shows how to check it yourself."]);
  }
  checkLog(section.dataset.org ?? '').catch((error) => {
    if (error instanceof Unreachable) say('unchecked', [`The log could not be checked just now (${error.message}). Reload the page to try again.`]);
    else if (error?.name === 'NotSupportedError') say('unchecked', ["This browser cannot check Ed25519 signatures, so it cannot check the log's signature. The verification guide shows how to check it yourself."]);
    else say('unchecked', [`The log could not be checked (${String(error?.message ?? error)}).`]);
  });
}

if (typeof document !== 'undefined') start();
