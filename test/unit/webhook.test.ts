import { createHmac } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WebhookVerificationError, verifyWebhook } from '../../src/client/index.js';
import { loadConfig } from '../../src/config.js';
import {
  type Envelope,
  MAX_ATTEMPTS,
  WEBHOOK_FORMATS,
  formatBody,
  newSecret,
  parseRetryAfter,
  retryAfterDelay,
  retryDelay,
  signature,
  signatureHeader,
  signingHeaders,
  standardSignature,
} from '../../src/domain/webhook.js';
import { signingSecrets, type WebhookRecord } from '../../src/store/webhook-store.js';
import { Webhook as StandardWebhook } from 'standardwebhooks';

const T = 1_700_000_000;
const SECRET = 'whsec_test';
const atT = { now: () => T * 1000 };

const envelope: Envelope = {
  id: '0b9d3c1e-6f0a-4c7e-9a51-3f2d8e4b7c10',
  event: 'gate.hold',
  org: 'acme',
  created_at: '2025-11-22T05:40:00.123Z',
  data: {
    agent_id: 'a1',
    action_id: 7,
    event_id: 42,
    gate_status: 'hold',
    bii: 0.61,
    reason: 'config write while unobserved',
    policy_digest: 'sha256:ab12',
    ledger_seq: 1001,
  },
};

/** Independent reference: HMAC-SHA256 of "<t>." followed by the body bytes. */
function hmacHex(secret: string, t: number | string, body: string | Uint8Array): string {
  return createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');
}

/** The code verifyWebhook throws; fails the test if it returns or throws anything else. */
function failure(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof WebhookVerificationError) return error.code;
    throw error;
  }
  throw new Error('expected a WebhookVerificationError');
}

describe('formatBody', () => {
  it('json is the envelope as is', () => {
    expect(formatBody('json', envelope)).toBe(JSON.stringify(envelope));
  });

  it('json uses spec field order and drops extra properties, whatever the caller built', () => {
    const shuffled = {
      data: envelope.data,
      created_at: envelope.created_at,
      extra: 'not sent',
      org: envelope.org,
      event: envelope.event,
      id: envelope.id,
    };
    expect(formatBody('json', shuffled)).toBe(JSON.stringify(envelope));
  });

  it('siem_hec wraps the envelope with sourcetype and created_at as epoch seconds', () => {
    const body = formatBody('siem_hec', envelope);
    expect(body).toBe(`{"event":${JSON.stringify(envelope)},"sourcetype":"vigil","time":1763790000.123}`);
    const parsed = JSON.parse(body) as { time: number };
    expect(parsed.time).toBe(Date.parse(envelope.created_at) / 1000);
  });

  it('logs_intake is an array of one Datadog log item with the envelope under "vigil"', () => {
    const parsed = JSON.parse(formatBody('logs_intake', envelope)) as unknown[];
    expect(parsed).toHaveLength(1);
    expect(parsed[0]).toStrictEqual({
      ddsource: 'vigil',
      service: 'vigil',
      ddtags: 'event:gate.hold,org:acme',
      message: 'gate.hold for agent a1 in org acme: config write while unobserved',
      vigil: envelope,
    });
  });

  it('logs_intake message falls back to "<event> in org <org>" and stays on one line', () => {
    const item = (e: Envelope) => (JSON.parse(formatBody('logs_intake', e)) as { message: string }[])[0]?.message;
    expect(item({ ...envelope, event: 'ping', data: {} })).toBe('ping in org acme');
    expect(item({ ...envelope, event: 'review.rejected', data: { agent_id: 'a1', reason: 'no\r\nthanks' } })).toBe(
      'review.rejected for agent a1 in org acme: no thanks',
    );
  });

  it('every format is JSON and throws on a created_at that is not a timestamp', () => {
    for (const format of WEBHOOK_FORMATS) {
      expect(() => JSON.parse(formatBody(format, envelope)) as unknown).not.toThrow();
    }
    expect(() => formatBody('siem_hec', { ...envelope, created_at: 'yesterday' })).toThrow(RangeError);
  });
});

describe('signature', () => {
  it('matches a known vector (computed once with openssl dgst -sha256 -hmac)', () => {
    expect(signature('whsec_test', 1700000000, '{"a":1}')).toBe('38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789');
  });

  it('equals an independently computed HMAC over "<t>.<body>", secret prefix included, UTF-8', () => {
    const body = formatBody('json', { ...envelope, data: { reason: 'café ☕ 😀' } });
    expect(signature('whsec_ключ', T, body)).toBe(hmacHex('whsec_ключ', T, body));
    expect(signature(SECRET, T, body)).not.toBe(hmacHex(SECRET.slice('whsec_'.length), T, body));
  });

  it('header is t=<unix seconds>,v1=<hex>', () => {
    expect(signatureHeader(SECRET, T, '{}')).toBe(`t=${T},v1=${hmacHex(SECRET, T, '{}')}`);
  });

  it('refuses a t the receiver could not parse', () => {
    for (const t of [1.5, -1, Number.NaN, 1e21]) {
      expect(() => signature(SECRET, t, '{}')).toThrow(RangeError);
    }
  });
});

describe('Standard Webhooks signatures', () => {
  const id = 'msg_2KWPBgLlAfxdpx2AI54pPJ85f1W';
  const body = formatBody('json', { ...envelope, data: { reason: 'café ☕ 😀' } });

  it('new secrets are whsec_ and standard base64 of 32 bytes, each different', () => {
    const a = newSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(a.slice(6), 'base64')).toHaveLength(32);
    expect(newSecret()).not.toBe(a);
  });

  it('equals what the standardwebhooks package signs, and its verify accepts the headers', () => {
    // The package checks the timestamp against the clock.
    const T = Math.floor(Date.now() / 1000);
    const secret = newSecret();
    const theirs = new StandardWebhook(secret).sign(id, new Date(T * 1000), body);
    expect(`v1,${standardSignature(secret, id, T, body)}`).toBe(theirs);
    const headers = signingHeaders([secret], id, T, body);
    expect(headers).toEqual({ 'x-vigil-signature': signatureHeader(secret, T, body), 'webhook-id': id, 'webhook-timestamp': String(T), 'webhook-signature': theirs });
    expect(new StandardWebhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('keys an older base64url secret with the same bytes it decodes to', () => {
    const bytes = Buffer.from('fb'.repeat(32), 'hex'); // encodes with - and _ in base64url
    const old = `whsec_${bytes.toString('base64url')}`;
    expect(old).toMatch(/[-_]/);
    const expected = createHmac('sha256', bytes).update(`${id}.${T}.${body}`).digest('base64');
    expect(standardSignature(old, id, T, body)).toBe(expected);
    expect(standardSignature(`whsec_${bytes.toString('base64')}`, id, T, body)).toBe(expected);
  });

  it('carries one signature per secret in both headers, the current one first', () => {
    const T = Math.floor(Date.now() / 1000);
    const [current, previous] = [newSecret(), newSecret()];
    const headers = signingHeaders([current, previous], id, T, body);
    expect(headers['x-vigil-signature']).toBe(`t=${T},v1=${signature(current, T, body)},v1=${signature(previous, T, body)}`);
    expect(headers['webhook-signature']).toBe(`v1,${standardSignature(current, id, T, body)} v1,${standardSignature(previous, id, T, body)}`);
    const now = { now: () => T * 1000 };
    for (const secret of [current, previous]) {
      expect(verifyWebhook(body, headers['x-vigil-signature'], secret, now)).toEqual(JSON.parse(body));
      expect(new StandardWebhook(secret).verify(body, headers)).toBeTruthy();
    }
  });

  it('signs with a rotated-out secret until its overlap ends, not after', () => {
    const webhook = { secret: 'whsec_new', previous_secret: 'whsec_old', previous_secret_until: new Date(T * 1000).toISOString() } as WebhookRecord;
    expect(signingSecrets(webhook, T * 1000 - 1)).toEqual(['whsec_new', 'whsec_old']);
    expect(signingSecrets(webhook, T * 1000)).toEqual(['whsec_new']);
    expect(signingSecrets({ ...webhook, previous_secret: null }, 0)).toEqual(['whsec_new']);
    expect(signingSecrets({ secret: 'whsec_new' } as WebhookRecord, 0)).toEqual(['whsec_new']);
  });
});

describe('Retry-After', () => {
  const now = Date.UTC(2026, 10, 24, 12, 0, 0);

  it('reads delay-seconds and HTTP dates; anything else is unreadable (null)', () => {
    expect(parseRetryAfter('120', now)).toBe(120);
    expect(parseRetryAfter(' 0 ', now)).toBe(0);
    expect(parseRetryAfter(new Date(now + 90_000).toUTCString(), now)).toBe(90);
    expect(parseRetryAfter(new Date(now - 90_000).toUTCString(), now)).toBe(0);
    for (const bad of [null, undefined, '', 'soon', '-5', '1.5', '12345678901']) expect(parseRetryAfter(bad, now), String(bad)).toBeNull();
  });

  it('holds the asked wait within the schedule\'s shortest and longest entry, then adds at most a tenth (never past the longest)', () => {
    const schedule = [60, 300, 1800, 7200, 43200];
    expect(retryAfterDelay(schedule, 120, 0)).toBe(120);
    expect(retryAfterDelay(schedule, 120, 0.999)).toBeCloseTo(131.988);
    expect(retryAfterDelay(schedule, 5, 0.5)).toBe(63);
    expect(retryAfterDelay(schedule, 86_400 * 7, 0.5)).toBe(43200);
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 10 ** 7 }), fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), (asked, random) => {
        const held = Math.max(60, Math.min(asked, 43200));
        const wait = retryAfterDelay(schedule, asked, random);
        expect(wait).toBeGreaterThanOrEqual(held);
        expect(wait).toBeLessThanOrEqual(Math.min(43200, held * 1.1));
      }),
    );
  });
});

describe('retryDelay', () => {
  it('follows the default schedule and is dead at the sixth failure', () => {
    const schedule = loadConfig({}).webhookRetrySchedule;
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => retryDelay(schedule, n))).toEqual([
      60,
      300,
      1800,
      7200,
      43200,
      null,
      null,
    ]);
  });

  it('repeats the last entry of a short schedule and is still dead at the sixth failure', () => {
    const upTo7 = (schedule: number[]) => [1, 2, 3, 4, 5, 6, 7].map((n) => retryDelay(schedule, n));
    expect(upTo7([1, 2])).toEqual([1, 2, 2, 2, 2, null, null]);
    expect(upTo7([0.2])).toEqual([0.2, 0.2, 0.2, 0.2, 0.2, null, null]);
  });

  it('never uses entries past the fifth', () => {
    expect([5, 6].map((n) => retryDelay([1, 2, 3, 4, 5, 6, 7], n))).toEqual([5, null]);
  });

  it('allows at most MAX_ATTEMPTS (6) attempts for any schedule', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 604_800 }), { minLength: 1, maxLength: 20 }), (schedule) => {
        let attempts = 1;
        while (retryDelay(schedule, attempts) !== null) attempts++;
        expect(attempts).toBe(MAX_ATTEMPTS);
      }),
    );
  });

  it('rejects a failure count that is not a positive integer, and an empty schedule', () => {
    for (const n of [0, -1, 1.5]) expect(() => retryDelay([60], n)).toThrow(RangeError);
    expect(() => retryDelay([], 1)).toThrow(RangeError);
  });
});

describe('verifyWebhook', () => {
  const body = '{"agent_id":"a1","reason":"café ☕ 😀"}';
  const header = signatureHeader(SECRET, T, body);

  it('accepts a valid string body, including non-ASCII UTF-8', () => {
    expect(verifyWebhook(body, header, SECRET, atT)).toEqual({ agent_id: 'a1', reason: 'café ☕ 😀' });
  });

  it('accepts the same delivery as raw bytes', () => {
    expect(verifyWebhook(new TextEncoder().encode(body), header, SECRET, atT)).toEqual(JSON.parse(body));
  });

  it('hashes a Uint8Array as bytes, not decoded text', () => {
    // 0xff is not UTF-8: decoding would turn it into U+FFFD and break the signature, not the parse.
    const bytes = Uint8Array.from([0x22, 0xff, 0x22]);
    const h = `t=${T},v1=${hmacHex(SECRET, T, bytes)}`;
    expect(failure(() => verifyWebhook(bytes, h, SECRET, atT))).toBe('invalid_json');
  });

  it('rejects a parsed and re-serialized body', () => {
    const spaced = '{"a": 1, "b": [1, 2]}';
    const h = signatureHeader(SECRET, T, spaced);
    expect(verifyWebhook(spaced, h, SECRET, atT)).toEqual({ a: 1, b: [1, 2] });
    expect(failure(() => verifyWebhook(JSON.stringify(JSON.parse(spaced)), h, SECRET, atT))).toBe(
      'signature_mismatch',
    );
  });

  it('rejects a wrong secret and a tampered byte', () => {
    expect(failure(() => verifyWebhook(body, header, 'whsec_other', atT))).toBe('signature_mismatch');
    const bytes = new TextEncoder().encode(body);
    bytes[5] = (bytes[5] ?? 0) ^ 0x01;
    expect(failure(() => verifyWebhook(bytes, header, SECRET, atT))).toBe('signature_mismatch');
  });

  it('accepts |now − t| = 300 s and rejects 301 s in the past or the future', () => {
    const at = (seconds: number) => ({ now: () => seconds * 1000 });
    expect(verifyWebhook(body, header, SECRET, at(T + 300))).toEqual(JSON.parse(body));
    expect(verifyWebhook(body, header, SECRET, at(T - 300))).toEqual(JSON.parse(body));
    expect(failure(() => verifyWebhook(body, header, SECRET, at(T + 301)))).toBe('stale_timestamp');
    expect(failure(() => verifyWebhook(body, header, SECRET, at(T - 301)))).toBe('stale_timestamp');
  });

  it('honours toleranceSeconds and refuses a tolerance that would disable the check', () => {
    const late = { now: () => (T + 10) * 1000 };
    expect(failure(() => verifyWebhook(body, header, SECRET, { ...late, toleranceSeconds: 5 }))).toBe(
      'stale_timestamp',
    );
    expect(() => verifyWebhook(body, header, SECRET, { ...late, toleranceSeconds: Number.NaN })).toThrow(RangeError);
  });

  it('reports a missing header', () => {
    for (const h of [undefined, null, '', '  ']) {
      expect(failure(() => verifyWebhook(body, h, SECRET, atT))).toBe('missing_signature');
    }
  });

  it('reports a malformed header', () => {
    const v1 = hmacHex(SECRET, T, body);
    const bad = [
      'garbage',
      `v1=${v1}`,
      `t=${T}`,
      `t=abc,v1=${v1}`,
      `t=-${T},v1=${v1}`,
      `t=${T}.5,v1=${v1}`,
      `t=${T},t=${T},v1=${v1}`,
      `t=${T},v1=${v1.slice(1)}`,
      `t=${T},v1=${v1.slice(0, 63)}z`,
      `t=99999999999999999999,v1=${v1}`,
    ];
    for (const h of bad) {
      expect(failure(() => verifyWebhook(body, h, SECRET, atT)), h).toBe('malformed_signature');
    }
  });

  it('allows spaces after commas, ignores unknown keys, and uses the t digits verbatim', () => {
    const v1 = hmacHex(SECRET, T, body);
    expect(verifyWebhook(body, `t=${T}, v0=whatever, v1=${v1.toUpperCase()}`, SECRET, atT)).toEqual(JSON.parse(body));
    const padded = `0${T}`;
    expect(verifyWebhook(body, `t=${padded},v1=${hmacHex(SECRET, padded, body)}`, SECRET, atT)).toEqual(
      JSON.parse(body),
    );
  });

  it('accepts when any of several v1 entries matches (secret rotation)', () => {
    const good = hmacHex(SECRET, T, body);
    const old = hmacHex('whsec_old', T, body);
    expect(verifyWebhook(body, `t=${T},v1=${old},v1=${good}`, SECRET, atT)).toEqual(JSON.parse(body));
    expect(verifyWebhook(body, `t=${T},v1=${good},v1=${old}`, SECRET, atT)).toEqual(JSON.parse(body));
    expect(failure(() => verifyWebhook(body, `t=${T},v1=${old},v1=${old}`, SECRET, atT))).toBe(
      'signature_mismatch',
    );
  });

  it('reports invalid JSON only after the signature and timestamp pass', () => {
    const junk = 'not json {';
    const signed = signatureHeader(SECRET, T, junk);
    expect(failure(() => verifyWebhook(junk, signed, SECRET, atT))).toBe('invalid_json');
    expect(failure(() => verifyWebhook(junk, signed, 'whsec_other', atT))).toBe('signature_mismatch');
    expect(failure(() => verifyWebhook(junk, signed, SECRET, { now: () => (T + 301) * 1000 }))).toBe(
      'stale_timestamp',
    );
    // Signature before time: a forged stale delivery learns nothing about the tolerance.
    expect(failure(() => verifyWebhook(junk, signed, 'whsec_other', { now: () => (T + 301) * 1000 }))).toBe(
      'signature_mismatch',
    );
  });

  it('throws a named Error carrying the cause of a parse failure', () => {
    const junk = '{';
    try {
      verifyWebhook(junk, signatureHeader(SECRET, T, junk), SECRET, atT);
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(Error);
      expect(error).toMatchObject({ name: 'WebhookVerificationError', code: 'invalid_json' });
      expect((error as Error).cause).toBeInstanceOf(SyntaxError);
    }
  });

  it('property: a header from signatureHeader verifies at the same time, for any body and secret', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.json(), fc.string({ unit: 'binary' })),
        fc.string({ unit: 'binary' }),
        fc.integer({ min: 0, max: 4_000_000_000 }),
        (raw, secret, t) => {
          const h = signatureHeader(secret, t, raw);
          const at = { now: () => t * 1000 };
          let expected: { value: unknown } | null = null;
          try {
            expected = { value: JSON.parse(raw) as unknown };
          } catch {
            // not JSON: the signature must still pass, so the failure is invalid_json
          }
          for (const input of [raw, new TextEncoder().encode(raw)]) {
            if (expected === null) expect(failure(() => verifyWebhook(input, h, secret, at))).toBe('invalid_json');
            else expect(verifyWebhook(input, h, secret, at)).toEqual(expected.value);
          }
        },
      ),
    );
  });
});
