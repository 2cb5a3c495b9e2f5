import fc from 'fast-check';
import { fieldPath, nested, pathsOf, rawJson, withValue, type Path, type Splice } from './json-text.js';
import type { Answer } from './send.js';

/**
 * Request bodies for the fuzz suite, as fast-check arbitraries over a route's valid body: mutated
 * valid bodies, hostile shapes spliced in as raw JSON text, and wrong envelopes (content types,
 * empty, not JSON, not UTF-8). Each case carries a short label (what fast-check prints for a
 * counterexample, never a megabyte of body) and, where the contract fixes the answer, an expectation.
 */

/** DESIGN §4: bodies over 1 MiB are refused with 413. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Objects and arrays nested deeper than this anywhere in a body are refused with 400. */
export const MAX_DEPTH = 64;

/** null when the answer is what the contract says, else what is wrong. */
export type Expectation = (answer: Answer) => string | null;

export interface BodyCase {
  label: string;
  /** Built when sent: some are a megabyte. */
  body: () => string | Uint8Array | undefined;
  /** null: no Content-Type header at all. */
  contentType: string | null;
  expect?: Expectation;
}

const JSON_TYPE = 'application/json';

function bodyCase(label: string, body: BodyCase['body'], contentType: string | null = JSON_TYPE, expect?: Expectation): BodyCase {
  const built: BodyCase = { label, body, contentType, ...(expect === undefined ? {} : { expect }) };
  return Object.assign(built, { [fc.toStringMethod]: () => label });
}

/** The answer is the JSON error `code` with `status`, and (if given) a detail whose path is `path`. */
export function expectError(status: number, code: string, path?: string): Expectation {
  return (answer) => {
    if (answer.status !== status) return `expected ${status} ${code}${path === undefined ? '' : ` at ${path}`}, got ${answer.status}: ${answer.text.slice(0, 300)}`;
    let error: any;
    try {
      error = JSON.parse(answer.text).error;
    } catch {
      return `expected a JSON error body, got ${JSON.stringify(answer.text.slice(0, 200))}`;
    }
    if (error?.code !== code) return `expected code ${code}, got ${JSON.stringify(error?.code)}`;
    if (path !== undefined && !(Array.isArray(error.details) && error.details.some((d: any) => d?.path === path))) {
      return `expected a detail naming ${path}, got ${JSON.stringify(error.details)?.slice(0, 300)}`;
    }
    return null;
  };
}

const notStatus =
  (status: number): Expectation =>
  (answer) =>
    answer.status === status ? `did not expect ${status}: ${answer.text.slice(0, 200)}` : null;

/** Values of every JSON type, to put where another type belongs. */
export const WRONG_TYPES: readonly unknown[] = [null, true, 0, -1.5, '', 'text', [], {}, [1, 'a'], { k: 'v' }];

export function jsonType(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
}

const EDGE_STRINGS = ['', ' ', '\u0000', '\u2028\u2029', '😀', 'e\u0301', '\u202e', '\ufeff', 'x'.repeat(5000), '<script>', "' OR 1=1 --", '../../etc/passwd'];
const FIELD_NAMES = ['agent_id', 'name', 'event_type', 'payload', 'dti', 'source', 'actor', 'kind', 'observed', 'public', 'public_links', 'is_active', 'url', 'events', 'format', 'outcome', 'note', 'since_seq', 'until_seq', 'agents', 'scopes', 'email', 'record_id', 'fields', 'message', 'history', 'domain', 'status'];

const anyValue: fc.Arbitrary<unknown> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }),
  fc.constantFrom(...WRONG_TYPES),
  fc.constantFrom(...EDGE_STRINGS),
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.integer(),
  fc.constantFrom(Number.MAX_SAFE_INTEGER + 2, -Number.MAX_SAFE_INTEGER, 1e308, -0, 5e-324, 0.1),
);
const anyKey = fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom(...FIELD_NAMES));

/** The valid body changed by up to three edits: a value replaced, a member dropped or added. */
export function mutatedBody(base: unknown): fc.Arbitrary<BodyCase> {
  const all = pathsOf(base);
  const objects = all.filter((p) => p.object).map((p) => p.path);
  const inner = all.filter((p) => p.path.length > 0).map((p) => p.path);
  type Edit = { op: 'set'; at: Path; value: unknown } | { op: 'drop'; at: Path } | { op: 'add'; at: Path; key: string; value: unknown };
  const edits: fc.Arbitrary<Edit>[] = [fc.record({ op: fc.constant('set' as const), at: fc.constantFrom(...all.map((p) => p.path)), value: anyValue })];
  if (inner.length > 0) edits.push(fc.record({ op: fc.constant('drop' as const), at: fc.constantFrom(...inner) }));
  if (objects.length > 0) edits.push(fc.record({ op: fc.constant('add' as const), at: fc.constantFrom(...objects), key: anyKey, value: anyValue }));
  return fc.array(fc.oneof(...edits), { maxLength: 3 }).map((list) => {
    let body = base;
    for (const e of list) {
      if (e.op === 'set') body = withValue(body, e.at, e.value);
      else if (e.op === 'drop') body = withValue(body, e.at, undefined, true);
      else body = withValue(body, [...e.at, e.key], e.value);
    }
    const label = list.length === 0 ? 'valid body' : `mutated: ${list.map((e) => `${e.op} ${fieldPath(e.at)}${e.op === 'add' ? `.${e.key}` : ''}${'value' in e ? ` = ${short(e.value)}` : ''}`).join('; ')}`;
    const text = JSON.stringify(body) ?? '';
    return bodyCase(label, () => text);
  });
}

function short(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 60 ? `${text.slice(0, 60)}… (${text.length} chars)` : text;
}

const NON_FINITE = ['1e999', '-1e999', '1E+400', '-4.5e308', '123e456789'];
const NOT_JSON_NUMBERS = ['NaN', 'Infinity', '-Infinity', 'undefined', '0x10', '01', '.5', '+1'];
const UNICODE = ['"\\ud800"', '"\\udfff"', '"a\\ud800b"', '"\\udc00\\ud800"', '"\\u2028\\u2029"', '"\u2028"', '"\\u0000"', '"😀"', '"\\ud83d\\ude00"', '"\\ufeff"', '"\\uffff"', '"\\u202e"', '"e\\u0301"', '"\\"\\\\\\/\\b\\f\\n\\r\\t"'];
/** Member names as raw JSON text, with the name they decode to. */
const PROTO_NAMES: readonly (readonly [string, string])[] = [
  ['"__proto__"', '__proto__'],
  ['"constructor"', 'constructor'],
  ['"prototype"', 'prototype'],
  ['"\\u005f_proto__"', '__proto__'],
  ['"constructo\\u0072"', 'constructor'],
];
const PROTO_VALUES = ['{}', '{"polluted":true}', '1', 'null', '[]', '{"isAdmin":true,"toString":1}'];
const BAD_JSON = ['{', '{"a":1,}', '[1,]', "{'a':1}", '{"a":01}', '{} {}', 'nul', 'tru', '"open', '{"a":"\u0001"}', '{"a" 1}', '   ', '\ufeff{}'];

/** Hostile shapes spliced into the valid body at every place they can go. */
export function hostileBody(base: unknown): fc.Arbitrary<BodyCase> {
  const all = pathsOf(base);
  const values = all.map((p) => p.path);
  const objects = all.filter((p) => p.object).map((p) => p.path);
  const at = fc.constantFrom(...values);
  const parts: fc.Arbitrary<BodyCase>[] = [
    fc.tuple(at, fc.constantFrom(...NON_FINITE)).map(([p, n]) =>
      splice(base, { kind: 'value', at: p, text: n }, `non-finite ${n} at ${fieldPath(p)}`, expectError(400, 'validation_failed', fieldPath(p))),
    ),
    fc.tuple(at, fc.constantFrom(...NON_FINITE)).map(([p, n]) =>
      splice(base, { kind: 'value', at: p, text: `[0,${n}]` }, `non-finite ${n} in an array at ${fieldPath(p)}`, expectError(400, 'validation_failed', fieldPath([...p, 1]))),
    ),
    fc.tuple(at, fc.constantFrom(...NOT_JSON_NUMBERS)).map(([p, n]) =>
      splice(base, { kind: 'value', at: p, text: n }, `not JSON: ${n} at ${fieldPath(p)}`, expectError(400, 'bad_request')),
    ),
    fc.tuple(at, fc.constantFrom(100, 1000, 5000, 0, 1), fc.constantFrom('array' as const, 'object' as const)).map(([p, n, shape]) => deep(base, p, n, shape)),
    fc.tuple(fc.constantFrom(...values, ...objects.map((o) => [...o, '\u0000member'])), fc.constantFrom(-16, 0, 1, 65_536), fc.constantFrom('a', 'é', '😀', '\\u0000')).map(([p, over, pad]) =>
      huge(base, p, over, pad),
    ),
    fc.tuple(at, fc.constantFrom(...UNICODE)).map(([p, s]) => splice(base, { kind: 'value', at: p, text: s }, `string ${s} at ${fieldPath(p)}`)),
    fc.constantFrom(...BAD_JSON).map((text) => bodyCase(`malformed JSON ${JSON.stringify(text)}`, () => text, JSON_TYPE, expectError(400, 'bad_request'))),
  ];
  if (objects.length > 0) {
    const obj = fc.constantFrom(...objects);
    parts.push(
      fc.tuple(obj, fc.constantFrom(...UNICODE), fc.constantFrom('1', '"v"')).map(([p, name, v]) => splice(base, { kind: 'member', at: p, name, text: v }, `member name ${name} at ${fieldPath(p)}`)),
      fc.tuple(obj, fc.constantFrom(...NON_FINITE)).map(([p, n]) =>
        splice(base, { kind: 'member', at: p, name: '"n"', text: n }, `non-finite member ${n} at ${fieldPath([...p, 'n'])}`, expectError(400, 'validation_failed', fieldPath([...p, 'n']))),
      ),
      fc.tuple(obj, fc.constantFrom(...PROTO_NAMES), fc.constantFrom(...PROTO_VALUES), fc.boolean()).map(([p, [raw, name], v, first]) =>
        splice(base, { kind: 'member', at: p, name: raw, text: v, first }, `member ${raw} = ${v} at ${fieldPath(p)}`, expectError(400, 'validation_failed', fieldPath([...p, name]))),
      ),
      fc.tuple(at, fc.constantFrom(...PROTO_NAMES)).map(([p, [raw, name]]) =>
        splice(base, { kind: 'value', at: p, text: `{"x":{${raw}:{"polluted":true}}}` }, `nested ${raw} at ${fieldPath(p)}.x`, expectError(400, 'validation_failed', fieldPath([...p, 'x', name]))),
      ),
      duplicates(base, objects),
    );
  }
  return fc.oneof(...parts);
}

function splice(base: unknown, s: Splice, label: string, expect?: Expectation): BodyCase {
  return bodyCase(label, () => rawJson(base, s), JSON_TYPE, expect);
}

/**
 * `n` levels of nesting replacing the value at `p`. n 0 and 1 stand for the two sides of the
 * limit: as deep as allowed, and one level deeper. Past the limit the service names the first
 * container at depth 64: `p` followed by `0` (arrays) or `a` (objects) steps down to it.
 */
function deep(base: unknown, p: Path, n: number, shape: 'array' | 'object'): BodyCase {
  const levels = n === 0 ? MAX_DEPTH - p.length : n === 1 ? MAX_DEPTH - p.length + 1 : n;
  const label = `${levels} levels of ${shape}s at ${fieldPath(p)}`;
  const text = (): string => rawJson(base, { kind: 'value', at: p, text: nested(levels, shape) });
  if (p.length + levels <= MAX_DEPTH) {
    // The deepest container is at depth 63: no depth refusal (the route may still refuse the value).
    return bodyCase(label, text, JSON_TYPE, (a) => {
      let details: { path?: unknown }[] = [];
      try {
        if (a.status === 400) details = JSON.parse(a.text)?.error?.details ?? [];
      } catch {
        // not JSON: the universal checks report it
      }
      // A refusal at the limit would name the container at depth 63: a path of 63 steps.
      const tooDeep = details.find((d) => typeof d.path === 'string' && d.path.split('.').length >= MAX_DEPTH - 1);
      return tooDeep === undefined ? null : `refused at the depth limit, not past it: ${a.text.slice(0, 200)}`;
    });
  }
  const first = [...p, ...Array<string | number>(MAX_DEPTH - p.length).fill(shape === 'array' ? 0 : 'a')];
  return bodyCase(label, text, JSON_TYPE, expectError(400, 'validation_failed', fieldPath(first)));
}

/**
 * A string sized so that the whole body is MAX_BODY_BYTES + `over` bytes (padded with `pad`:
 * one to four UTF-8 bytes a character, or the six-character escape of NUL). A path ending in
 * `\0member` adds a member to that object instead of replacing a value.
 */
function huge(base: unknown, p: Path, over: number, pad: string): BodyCase {
  const member = p[p.length - 1] === '\u0000member';
  const spliceAt = (text: string): Splice => (member ? { kind: 'member', at: p.slice(0, -1), name: '"big"', text } : { kind: 'value', at: p, text });
  const target = MAX_BODY_BYTES + over;
  const label = `string making a body of ${target} bytes (pad ${JSON.stringify(pad)}) at ${fieldPath(member ? [...p.slice(0, -1), 'big'] : p)}`;
  const build = (): string => {
    const room = target - Buffer.byteLength(rawJson(base, spliceAt('""')));
    const unit = Buffer.byteLength(pad);
    const count = Math.max(0, Math.floor(room / unit));
    const fill = pad.repeat(count) + 'a'.repeat(Math.max(0, room - count * unit));
    return rawJson(base, spliceAt(`"${fill}"`));
  };
  return bodyCase(label, build, JSON_TYPE, over > 0 ? expectError(413, 'payload_too_large') : notStatus(413));
}

/** A member name given twice in one object (JSON.parse keeps the last). */
function duplicates(base: unknown, objects: Path[]): fc.Arbitrary<BodyCase> {
  const named = objects.flatMap((p) => {
    const obj = p.reduce<any>((v, k) => v[k], base) as Record<string, unknown>;
    return Object.keys(obj).map((k) => [p, k] as const);
  });
  if (named.length === 0) return fc.constant(bodyCase('duplicate member of an empty body', () => '{"a":1,"a":2}'));
  return fc.tuple(fc.constantFrom(...named), anyValue, fc.boolean()).map(([[p, k], v, first]) =>
    splice(base, { kind: 'member', at: p, name: JSON.stringify(k), text: JSON.stringify(v) ?? 'null', first }, `duplicate member ${k} = ${short(v)} ${first ? 'before' : 'after'} the original at ${fieldPath(p)}`),
  );
}

const REFUSED_TYPES = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/jsonx', 'application/xml', 'json', 'text/json', '*/*'];
const ACCEPTED_TYPES = ['application/json; charset=utf-8', 'Application/JSON', 'application/vnd.vigil+json', ' application/json ', 'application/json;charset=latin1'];

/** The right body in the wrong envelope, and envelopes with no usable body. */
export function envelopeBody(base: unknown): fc.Arbitrary<BodyCase> {
  const text = JSON.stringify(base) ?? '{}';
  const utf8 = Buffer.from(text, 'utf8');
  return fc.oneof(
    fc.constantFrom(...REFUSED_TYPES, null).map((type) => bodyCase(`content type ${String(type)}`, () => text, type, expectError(415, 'unsupported_media_type'))),
    fc.constantFrom(...ACCEPTED_TYPES).map((type) => bodyCase(`content type ${type}`, () => text, type, notStatus(415))),
    fc.constantFrom(JSON_TYPE, null).map((type) => bodyCase(`empty body, content type ${String(type)}`, () => '', type)),
    fc.constant(bodyCase('no body at all', () => undefined, null)),
    fc.constant(bodyCase('UTF-8 BOM then the body', () => Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), utf8]), JSON_TYPE, expectError(400, 'bad_request'))),
    fc.constant(bodyCase('the body in UTF-16LE', () => Buffer.from(text, 'utf16le'), JSON_TYPE, expectError(400, 'bad_request'))),
    fc.constantFrom([0xff, 0xfe], [0xed, 0xa0, 0x80], [0xc0, 0xaf], [0xf4, 0x90, 0x80, 0x80]).map((bytes) =>
      bodyCase(`invalid UTF-8 ${Buffer.from(bytes).toString('hex')} in a string`, () => Buffer.concat([Buffer.from('{"x":"'), Buffer.from(bytes), Buffer.from('"}')])),
    ),
  );
}
