import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { canonicalize } from '../../src/domain/jcs.js';
import { leafInput, sha256 } from '../../src/domain/ledger.js';
import { exportLeafInput } from '../support/rfc9162.js';

// The tests' own leaf inputs (test/support/rfc9162.ts) stand for an auditor's: they must be the
// bytes the ledger-v1 vector's content hashes cover, and JCS where a naive sorted JSON.stringify is not.
describe('exportLeafInput (the tests\' own JCS of an export line)', () => {
  const lines = readFileSync(new URL('../fixtures/ledger-v1.jsonl', import.meta.url), 'utf8').trim().split('\n').map((l) => JSON.parse(l));

  it('makes the bytes each ledger-v1 record\'s content_hash covers (numbers, escapes, non-ASCII names and emoji included)', () => {
    for (const line of lines) expect(() => exportLeafInput(line), `seq ${line.seq}`).not.toThrow();
  });

  it('sorts integer-like member names as text ("10" before "2"), as RFC 8785 does, and refuses a line whose content_hash it does not reproduce', () => {
    const body = { 2: 'two', 10: 'ten', b: [{ 1: null, a: 1.5 }], '': 0 };
    const fields = { seq: 7, kind: 'event', recorded_at: '2026-11-28T00:00:00.000Z', agent_id: null };
    const bodyJson = canonicalize(body);
    expect(bodyJson).toBe('{"":0,"10":"ten","2":"two","b":[{"1":null,"a":1.5}]}');
    const content_hash = sha256(leafInput({ seq: 7, kind: 'event', recordedAt: fields.recorded_at, agentId: null, bodyJson })).toString('hex');
    expect(exportLeafInput({ ...fields, body, content_hash }).toString('utf8')).toBe(`{"agent_id":null,"body":${bodyJson},"kind":"event","recorded_at":"2026-11-28T00:00:00.000Z","seq":7}`);
    expect(() => exportLeafInput({ ...fields, body: { ...body, 2: 'changed' }, content_hash })).toThrow(/not its content_hash/);
  });
});
