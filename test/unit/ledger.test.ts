import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyLedgerFile } from '../../src/cli/verify-file.js';
import { canonicalize } from '../../src/domain/jcs.js';
import {
  ChainVerifier,
  GENESIS_HASH,
  canonicalEntry,
  chainStep,
  exportLine,
  makeRow,
  rowFromExport,
  sha256,
} from '../../src/domain/ledger.js';
import type { ExportedRecord, LedgerRow } from '../../src/domain/ledger.js';

const FIXTURE_URL = new URL('../fixtures/ledger-v1.jsonl', import.meta.url);
const FIXTURE_HEAD = 'f8b564bcb30fc3441bd450595fe79071be9dca1745b923c8ccd8aa00b1c739ea';
const ZERO_HASH = '0'.repeat(64);

const fixtureText = readFileSync(FIXTURE_URL, 'utf8');
const fixtureLines = fixtureText.split('\n').filter((line) => line.trim() !== '');

/** Fresh parsed copies of the fixture records (callers may mutate them). */
function fixtureRecords(): ExportedRecord[] {
  return fixtureLines.map((line) => JSON.parse(line) as ExportedRecord);
}

function at<T>(items: readonly T[], index: number): T {
  const item = items[index];
  if (item === undefined) throw new Error(`no item at index ${index}`);
  return item;
}

function verify(records: readonly ExportedRecord[], options?: ConstructorParameters<typeof ChainVerifier>[0]) {
  const verifier = new ChainVerifier(options);
  for (const record of records) verifier.push(rowFromExport(record));
  return { verifier, report: verifier.report() };
}

/** Paths (as key lists) of every string or number leaf of a JSON value. */
function leafPaths(value: unknown, path: (string | number)[] = []): (string | number)[][] {
  if (typeof value === 'string' || typeof value === 'number') return [path];
  if (Array.isArray(value)) return value.flatMap((item, i) => leafPaths(item, [...path, i]));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([key, item]) => leafPaths(item, [...path, key]));
  }
  return [];
}

/** Changes exactly one character of the leaf at `path` (a string's last char, or a number's leading digit). */
function mutateLeaf(root: unknown, path: (string | number)[]): void {
  if (path.length === 0) throw new Error('cannot mutate the root');
  let parent = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) parent = parent[key] as Record<string | number, unknown>;
  const last = at(path, path.length - 1);
  const leaf = parent[last];
  if (typeof leaf === 'string') {
    const tail = leaf.slice(-1);
    parent[last] = leaf.length === 0 ? 'x' : leaf.slice(0, -1) + (tail === 'x' ? 'y' : 'x');
  } else if (typeof leaf === 'number') {
    // Bump the leading digit: always a different double, and one character of the canonical text.
    const text = String(leaf);
    const digitIndex = text.search(/[0-9]/);
    const digit = Number(at(text.split(''), digitIndex));
    const swapped = text.slice(0, digitIndex) + String((digit + 1) % 10) + text.slice(digitIndex + 1);
    if (Number(swapped) === leaf) throw new Error(`mutation of ${text} had no effect`);
    parent[last] = Number(swapped);
  } else {
    throw new Error('not a leaf');
  }
}

describe('fixed test vector (fixture seq 1, copied literally)', () => {
  it('makeRow reproduces the independently computed hashes of seq 1', () => {
    const row = makeRow(GENESIS_HASH, 1, 'agent', '2026-11-22T00:00:01.111Z', 'agent-1', {
      agent_id: 'agent-1',
      name: 'Agent One',
      kind: 'production',
      observed: true,
    });
    expect(row.contentHash.toString('hex')).toBe('8eb1ee1c3f6242805ee015380b50bf87bd5cc5a1598731b4efdad3689a19e434');
    expect(row.prevHash.toString('hex')).toBe(ZERO_HASH);
    expect(row.chainHash.toString('hex')).toBe('5dcb4ba4cadf2d2ae7a1b20d2055f8173579f2044a79e73f51b22b762f320e34');
    expect(row.bodyJson).toBe('{"agent_id":"agent-1","kind":"production","name":"Agent One","observed":true}');
  });

  it('the canonical entry of seq 1 is exactly the JCS text that was hashed', () => {
    const entry = canonicalEntry(
      1,
      'agent',
      '2026-11-22T00:00:01.111Z',
      'agent-1',
      '{"agent_id":"agent-1","kind":"production","name":"Agent One","observed":true}',
    );
    expect(entry).toBe(
      '{"agent_id":"agent-1","body":{"agent_id":"agent-1","kind":"production","name":"Agent One","observed":true},' +
        '"kind":"agent","recorded_at":"2026-11-22T00:00:01.111Z","seq":1}',
    );
    expect(createHash('sha256').update(entry, 'utf8').digest('hex')).toBe(
      '8eb1ee1c3f6242805ee015380b50bf87bd5cc5a1598731b4efdad3689a19e434',
    );
  });

  it('GENESIS_HASH is 32 zero bytes', () => {
    expect(GENESIS_HASH.length).toBe(32);
    expect(GENESIS_HASH.toString('hex')).toBe(ZERO_HASH);
  });
});

describe('hash rule helpers', () => {
  it('chainStep is SHA-256 over the raw 32-byte prev hash followed by the raw 32-byte content hash', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), fc.uint8Array({ minLength: 32, maxLength: 32 }), (a, b) => {
        const prev = Buffer.from(a);
        const content = Buffer.from(b);
        const expected = createHash('sha256').update(Buffer.concat([prev, content])).digest();
        expect(chainStep(prev, content).equals(expected)).toBe(true);
        // Not the hex text concatenation.
        const hexVariant = createHash('sha256').update(prev.toString('hex') + content.toString('hex')).digest();
        expect(chainStep(prev, content).equals(hexVariant)).toBe(false);
      }),
    );
  });

  it('canonicalEntry equals JCS of the {seq, kind, recorded_at, agent_id, body} object', () => {
    fc.assert(
      fc.property(
        fc.nat(),
        fc.string(),
        fc.string(),
        fc.option(fc.string(), { nil: null }),
        fc.jsonValue(),
        (seq, kind, recordedAt, agentId, body) => {
          const expected = canonicalize({ seq, kind, recorded_at: recordedAt, agent_id: agentId, body });
          expect(canonicalEntry(seq, kind, recordedAt, agentId, canonicalize(body))).toBe(expected);
        },
      ),
    );
  });

  it('makeRow hashes the canonical entry and chains it onto the given prev hash', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 32, maxLength: 32 }),
        fc.integer({ min: 1, max: 1_000_000 }),
        fc.constantFrom('event', 'agent', 'review', 'export'),
        fc.option(fc.string(), { nil: null }),
        fc.jsonValue(),
        (prevBytes, seq, kind, agentId, body) => {
          const prev = Buffer.from(prevBytes);
          const recordedAt = '2026-01-01T00:00:00.000Z';
          const row = makeRow(prev, seq, kind, recordedAt, agentId, body);
          const content = sha256(canonicalize({ seq, kind, recorded_at: recordedAt, agent_id: agentId, body }));
          expect(row.contentHash.equals(content)).toBe(true);
          expect(row.prevHash.equals(prev)).toBe(true);
          expect(row.chainHash.equals(createHash('sha256').update(Buffer.concat([prev, content])).digest())).toBe(true);
        },
      ),
    );
  });
});

describe('fixture ledger-v1.jsonl', () => {
  it('holds five records with seq 1..5', () => {
    expect(fixtureRecords().map((r) => r.seq)).toEqual([1, 2, 3, 4, 5]);
  });

  it('every record recomputes to its content_hash and chain_hash, and the head matches', () => {
    let prev = GENESIS_HASH;
    for (const record of fixtureRecords()) {
      expect(record.prev_hash).toBe(prev.toString('hex'));
      const row = makeRow(Buffer.from(record.prev_hash, 'hex'), record.seq, record.kind, record.recorded_at, record.agent_id, record.body);
      expect(row.contentHash.toString('hex'), `content_hash of seq ${record.seq}`).toBe(record.content_hash);
      expect(row.chainHash.toString('hex'), `chain_hash of seq ${record.seq}`).toBe(record.chain_hash);
      prev = row.chainHash;
    }
    expect(prev.toString('hex')).toBe(FIXTURE_HEAD);
  });

  it('exportLine(rowFromExport(record)) parses back to the record', () => {
    for (const record of fixtureRecords()) {
      const line = exportLine(rowFromExport(record));
      expect(JSON.parse(line)).toEqual(record);
      expect(line).not.toContain('\n');
    }
  });

  it('exportLine prints fields in the documented order', () => {
    const line = exportLine(rowFromExport(at(fixtureRecords(), 4)));
    expect(Object.keys(JSON.parse(line) as object)).toEqual([
      'seq',
      'kind',
      'recorded_at',
      'agent_id',
      'body',
      'content_hash',
      'prev_hash',
      'chain_hash',
    ]);
    expect((JSON.parse(line) as ExportedRecord).agent_id).toBeNull();
  });

  it('a row made by makeRow round-trips through exportLine/rowFromExport unchanged', () => {
    let prev = GENESIS_HASH;
    for (const record of fixtureRecords()) {
      const made = makeRow(prev, record.seq, record.kind, record.recorded_at, record.agent_id, record.body);
      const back = rowFromExport(JSON.parse(exportLine(made)) as ExportedRecord);
      const { body: _body, ...withoutBody } = made;
      expect(back).toEqual(withoutBody satisfies Omit<LedgerRow, 'body'>);
      prev = made.chainHash;
    }
  });
});

describe('ChainVerifier', () => {
  it('accepts the fixture: ok, length 5, correct head', () => {
    const { report } = verify(fixtureRecords());
    expect(report).toEqual({ ok: true, head: FIXTURE_HEAD, length: 5, first_bad_seq: null, problem: null });
  });

  it('reports an empty chain as ok with a null head', () => {
    expect(new ChainVerifier().report()).toEqual({ ok: true, head: null, length: 0, first_bad_seq: null, problem: null });
  });

  it('watchHead finds the seq at which a chain hash appeared', () => {
    const records = fixtureRecords();
    const seq3 = at(records, 2);
    const { verifier } = verify(records, { watchHead: Buffer.from(seq3.chain_hash, 'hex') });
    expect(verifier.watchedSeq).toBe(3);
  });

  it('watchHead reports null for a hash that is not in the chain', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 32, maxLength: 32 }), (bytes) => {
        const hash = Buffer.from(bytes);
        fc.pre(!fixtureRecords().some((r) => r.chain_hash === hash.toString('hex')));
        const { verifier, report } = verify(fixtureRecords(), { watchHead: hash });
        expect(verifier.watchedSeq).toBeNull();
        expect(report.ok).toBe(true);
      }),
      { numRuns: 20 },
    );
  });

  it('watchHead reports the seq of the record, also when verifying a window', () => {
    const records = fixtureRecords();
    const { verifier, report } = verify(records.slice(2), {
      startSeq: 2,
      startHash: Buffer.from(at(records, 1).chain_hash, 'hex'),
      watchHead: Buffer.from(at(records, 3).chain_hash, 'hex'),
    });
    expect(report.ok).toBe(true);
    expect(verifier.watchedSeq).toBe(4);
  });

  it('verifies a window of the chain from startSeq/startHash', () => {
    const records = fixtureRecords();
    const start = at(records, 1);
    const { report } = verify(records.slice(2), { startSeq: 2, startHash: Buffer.from(start.chain_hash, 'hex') });
    expect(report).toEqual({ ok: true, head: FIXTURE_HEAD, length: 3, first_bad_seq: null, problem: null });
    // The same window from the wrong start hash fails at its first record.
    const wrong = verify(records.slice(2), { startSeq: 2, startHash: GENESIS_HASH }).report;
    expect(wrong.ok).toBe(false);
    expect(wrong.first_bad_seq).toBe(3);
  });

  describe('tampering', () => {
    const mutations: { seq: number; describe: string; mutate: (body: Record<string, unknown>) => void }[] = [
      { seq: 1, describe: 'name "Agent One" → "Agent Onx"', mutate: (b) => void (b.name = 'Agent Onx') },
      { seq: 2, describe: 'bii 0.955 → 0.956', mutate: (b) => void (b.bii = 0.956) },
      {
        seq: 3,
        describe: 'payload.key "monitoring.enabled" → "monitoring.enablex"',
        mutate: (b) => void ((b.payload as Record<string, unknown>).key = 'monitoring.enablex'),
      },
      { seq: 4, describe: 'note "checked by hand" → "checked by hanx"', mutate: (b) => void (b.note = 'checked by hanx') },
      { seq: 5, describe: 'until_seq 4 → 5', mutate: (b) => void (b.until_seq = 5) },
    ];

    for (const { seq, describe: what, mutate } of mutations) {
      it(`detects a one-character body change in seq ${seq} (${what})`, () => {
        const records = fixtureRecords();
        mutate(at(records, seq - 1).body as Record<string, unknown>);
        const { report } = verify(records);
        expect(report.ok).toBe(false);
        expect(report.first_bad_seq).toBe(seq);
        expect(report.problem).toMatch(/content_hash/);
        expect(report.length).toBe(5);
      });
    }

    it('detects a one-character change to any string or number leaf of any body', () => {
      let cases = 0;
      for (const [index, line] of fixtureLines.entries()) {
        const seq = index + 1;
        for (const path of leafPaths((JSON.parse(line) as ExportedRecord).body)) {
          const records = fixtureRecords();
          mutateLeaf(at(records, index).body, path);
          const { report } = verify(records);
          expect(report.ok, `seq ${seq} body.${path.join('.')}`).toBe(false);
          expect(report.first_bad_seq, `seq ${seq} body.${path.join('.')}`).toBe(seq);
          cases++;
        }
      }
      expect(cases).toBeGreaterThan(40);
    });

    it('detects a change to the hashed header fields (kind, recorded_at, agent_id)', () => {
      const changes: ((r: ExportedRecord) => void)[] = [
        (r) => void (r.kind = 'review'),
        (r) => void (r.recorded_at = r.recorded_at.replace('03.333Z', '03.334Z')),
        (r) => void (r.agent_id = 'agent-2'),
        (r) => void (r.agent_id = null),
      ];
      for (const change of changes) {
        const records = fixtureRecords();
        change(at(records, 2));
        const { report } = verify(records);
        expect(report.ok).toBe(false);
        expect(report.first_bad_seq).toBe(3);
      }
    });

    it('detects two swapped records', () => {
      const records = fixtureRecords();
      const swapped = [at(records, 0), at(records, 2), at(records, 1), at(records, 3), at(records, 4)];
      const { report } = verify(swapped);
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(3);
      expect(report.problem).toMatch(/seq/);
    });

    it('detects swapped records even when their seq numbers are swapped back', () => {
      const records = fixtureRecords();
      const second = { ...at(records, 2), seq: 2 };
      const third = { ...at(records, 1), seq: 3 };
      const { report } = verify([at(records, 0), second, third, at(records, 3), at(records, 4)]);
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(2);
    });

    it('detects a dropped record (gap in seq)', () => {
      const records = fixtureRecords();
      records.splice(2, 1);
      const { report } = verify(records);
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(4);
      expect(report.problem).toMatch(/expected seq 3/);
    });

    it('detects a dropped first record', () => {
      const { report } = verify(fixtureRecords().slice(1));
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(2);
    });

    it('detects an altered prev_hash', () => {
      const records = fixtureRecords();
      const r4 = at(records, 3);
      r4.prev_hash = r4.prev_hash.slice(0, -1) + (r4.prev_hash.endsWith('0') ? '1' : '0');
      const { report } = verify(records);
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(4);
      expect(report.problem).toMatch(/prev_hash/);
    });

    it('detects a re-hashed record whose prev_hash no longer links to its predecessor', () => {
      // An attacker rewrites seq 3 and recomputes its hashes consistently, but cannot fix seq 2.
      const records = fixtureRecords();
      const r3 = at(records, 2);
      const forgedBody = { ...(r3.body as Record<string, unknown>), gate_status: 'pass' };
      const forged = makeRow(Buffer.alloc(32, 1), r3.seq, r3.kind, r3.recorded_at, r3.agent_id, forgedBody);
      records[2] = JSON.parse(exportLine(forged)) as ExportedRecord;
      const { report } = verify(records);
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(3);
    });

    it('detects an altered chain_hash or a malformed content_hash', () => {
      const altered = fixtureRecords();
      const r5 = at(altered, 4);
      r5.chain_hash = r5.chain_hash.slice(0, -1) + (r5.chain_hash.endsWith('a') ? 'b' : 'a');
      expect(verify(altered).report).toMatchObject({ ok: false, first_bad_seq: 5, problem: 'chain_hash does not match' });

      const uppercase = fixtureRecords();
      const r2 = at(uppercase, 1);
      r2.content_hash = r2.content_hash.toUpperCase();
      expect(verify(uppercase).report).toMatchObject({ ok: false, first_bad_seq: 2 });
    });

    it('a fully re-hashed (rewritten) chain verifies, but no longer contains the anchored head', () => {
      const records = fixtureRecords();
      (at(records, 1).body as Record<string, unknown>).bii = 0.1;
      let prev = GENESIS_HASH;
      const rewritten = records.map((r) => {
        const row = makeRow(prev, r.seq, r.kind, r.recorded_at, r.agent_id, r.body);
        prev = row.chainHash;
        return JSON.parse(exportLine(row)) as ExportedRecord;
      });
      const { verifier, report } = verify(rewritten, { watchHead: Buffer.from(FIXTURE_HEAD, 'hex') });
      expect(report.ok).toBe(true);
      expect(report.head).not.toBe(FIXTURE_HEAD);
      expect(verifier.watchedSeq).toBeNull();
      // seq 1 is untouched, so its hash is still found.
      const anchored = verify(rewritten, { watchHead: Buffer.from(at(fixtureRecords(), 0).chain_hash, 'hex') });
      expect(anchored.verifier.watchedSeq).toBe(1);
    });
  });
});

describe('verifyLedgerFile', () => {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-ledger-test-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  function writeLedger(name: string, text: string): string {
    const path = join(dir, name);
    writeFileSync(path, text, 'utf8');
    return path;
  }

  it('accepts the fixture', async () => {
    const report = await verifyLedgerFile(FIXTURE_URL.pathname);
    expect(report).toEqual({ ok: true, head: FIXTURE_HEAD, length: 5, first_bad_seq: null, problem: null });
  });

  it('accepts the fixture with CRLF line endings and blank lines', async () => {
    const path = writeLedger('crlf.jsonl', fixtureLines.join('\r\n\r\n') + '\r\n');
    const report = await verifyLedgerFile(path);
    expect(report).toEqual({ ok: true, head: FIXTURE_HEAD, length: 5, first_bad_seq: null, problem: null });
  });

  for (const seq of [1, 2, 3, 4, 5]) {
    it(`names the tampered seq ${seq} in a tampered copy`, async () => {
      const records = fixtureRecords();
      const record = at(records, seq - 1);
      const paths = leafPaths(record.body);
      mutateLeaf(record.body, at(paths, 0));
      const path = writeLedger(`tampered-${seq}.jsonl`, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
      const report = await verifyLedgerFile(path);
      expect(report.ok).toBe(false);
      expect(report.first_bad_seq).toBe(seq);
      expect(report.length).toBe(5);
    });
  }

  it('reports a non-JSON line as bad at its position', async () => {
    const lines = [...fixtureLines];
    lines[2] = '{"seq":3,"kind":"event", this is not json';
    const report = await verifyLedgerFile(writeLedger('garbage.jsonl', lines.join('\n') + '\n'));
    expect(report.ok).toBe(false);
    expect(report.first_bad_seq).toBe(3);
    expect(report.problem).toMatch(/unreadable/);
    expect(report.length).toBe(5);
  });

  it('reports a non-JSON first line as bad seq 1', async () => {
    const lines = ['not json at all', ...fixtureLines.slice(1)];
    const report = await verifyLedgerFile(writeLedger('garbage-first.jsonl', lines.join('\n')));
    expect(report.ok).toBe(false);
    expect(report.first_bad_seq).toBe(1);
  });

  it('reports a JSON line that is not a record (no body) as bad at its position', async () => {
    const lines = [...fixtureLines];
    lines[1] = '{"seq":2}';
    const report = await verifyLedgerFile(writeLedger('no-body.jsonl', lines.join('\n')));
    expect(report.ok).toBe(false);
    expect(report.first_bad_seq).toBe(2);
  });

  it('a truncated file verifies up to its last record (head moves back)', async () => {
    const report = await verifyLedgerFile(writeLedger('truncated.jsonl', fixtureLines.slice(0, 3).join('\n')));
    expect(report).toEqual({
      ok: true,
      head: at(fixtureRecords(), 2).chain_hash,
      length: 3,
      first_bad_seq: null,
      problem: null,
    });
  });
});
