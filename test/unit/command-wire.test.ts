import { describe, expect, it } from 'vitest';
import type { OrgCommand } from '../../src/bus/messages.js';
import { decodeAnswer, decodeRequest, encodeAnswer, encodeRequest, isPack, packFrames, packRuns, requestOrg, unpackFrames } from '../../src/nats/command-wire.js';

const command = (org: string): OrgCommand => ({
  type: 'event.ingest',
  org,
  event: { agent_id: 'a1', event_type: 'output_generated', payload: { n: 1 }, dti: null, source: 'self', actor: null },
});

describe('command wire (NatsCommandRouter)', () => {
  it('frames a request with its org in front, read without parsing the command', () => {
    for (const org of ['org_1', 'ørg ✓ with spaces', 'x'.repeat(300)]) {
      const frame = encodeRequest({ command: command(org), deadline: 123, abandoned: false });
      expect(requestOrg(frame)).toBe(org);
      expect(decodeRequest(frame)).toEqual({ command: command(org), deadline: 123, abandoned: false });
    }
  });

  it('drops a frame cut short, a body that is not a request, and a command of another org than its frame names', () => {
    const frame = encodeRequest({ command: command('mine'), deadline: 1, abandoned: true });
    expect(requestOrg(frame.subarray(0, 1))).toBeNull();
    expect(requestOrg(frame.subarray(0, 4))).toBeNull();
    expect(decodeRequest(frame.subarray(0, 4))).toBeNull();
    expect(decodeRequest(frame.subarray(0, frame.length - 1))).toBeNull();
    // The frame decides who takes a command: one claiming another org in its body is not a command.
    const forged = encodeRequest({ command: command('theirs'), deadline: 1, abandoned: false });
    const mine = new TextEncoder().encode('mine');
    const body = forged.subarray(2 + 'theirs'.length);
    const mixed = new Uint8Array([0, mine.length, ...mine, ...body]);
    expect(requestOrg(mixed)).toBe('mine');
    expect(decodeRequest(mixed)).toBeNull();
  });

  it('round-trips the owner\'s answers and ignores anything else', () => {
    for (const answer of [{ t: 'accepted' }, { t: 'working' }, { t: 'reply', reply: { ok: false, code: 'not_owner', message: 'moved' } }, { t: 'error', message: 'bug' }, { t: 'error', message: 'trails', code: 'unavailable', retryAfterSeconds: 1 }] as const) {
      expect(decodeAnswer(encodeAnswer(answer))).toEqual(answer);
    }
    expect(decodeAnswer(new TextEncoder().encode('{"t":"other"}'))).toBeNull();
    // An error code it does not know is dropped (a plain error, 500), and a Retry-After with it.
    expect(decodeAnswer(new TextEncoder().encode('{"t":"error","message":"m","code":"teapot","retryAfterSeconds":1}'))).toEqual({ t: 'error', message: 'm' });
    expect(decodeAnswer(new TextEncoder().encode('{"t":"error","message":"m","code":"unavailable","retryAfterSeconds":-1.5}'))).toEqual({ t: 'error', message: 'm', code: 'unavailable' });
    expect(decodeAnswer(new TextEncoder().encode('not json'))).toBeNull();
  });

  it('packs several frames under their keys and reads them back; a pack is never read as a request, and one cut short is dropped', () => {
    const frames = [encodeRequest({ command: command('a'), deadline: 1, abandoned: false }), new Uint8Array(0), encodeAnswer({ t: 'accepted' })];
    const entries = frames.map((frame, i) => [`_INBOX.x.${i}`, frame] as [string, Uint8Array]);
    const pack = packFrames(entries);
    expect(isPack(pack)).toBe(true);
    expect(unpackFrames(pack)).toEqual(entries);
    expect(requestOrg(pack)).toBeNull();
    expect(decodeRequest(pack)).toBeNull();
    expect(isPack(frames[0]!)).toBe(false);
    expect(unpackFrames(frames[0]!)).toBeNull();
    for (const cut of [3, 10, pack.length - 1]) expect(unpackFrames(pack.subarray(0, cut))).toBeNull();
    expect(unpackFrames(packFrames([]))).toEqual([]);
  });

  it('splits entries into packs within a size limit, in order; an entry too large for company goes alone', () => {
    const entry = (i: number, size: number): [string, Uint8Array] => [`_INBOX.x.${i}`, new Uint8Array(size).fill(i)];
    const entries = [entry(1, 300), entry(2, 300), entry(3, 300), entry(4, 5000), entry(5, 10), entry(6, 10)];
    const runs = packRuns(entries, 1000);
    expect(runs.flat()).toEqual(entries);
    for (const run of runs) if (run.length > 1) expect(packFrames(run).length).toBeLessThanOrEqual(1000);
    expect(runs.map((run) => run.length)).toEqual([3, 1, 2]);
    expect(packRuns([], 1000)).toEqual([]);
  });
});

