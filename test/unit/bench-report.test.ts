import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { writeReport, type BenchReport } from '../../bench/report.js';

const report = (notes?: string[]): BenchReport => ({
  createdAt: '2026-11-23T00:00:00.000Z',
  machine: { cpus: 2, node: 'v20', tool: 'autocannon' },
  quick: true,
  micro: [{ name: 'scoring (one event)', opsPerSec: 1_000_000, meanUs: 1 }],
  macro: [{ scenario: 'GET /x', target: 'vigil', rps: 100, p50: 1, p99: 2, errors: 0, requests: 300 }],
  ratios: [{ scenario: 'GET vigil', against: 'fastify', ratio: 2.5, goal: 2 }],
  ledger: { records: 10 },
  goals: [{ name: 'public reads vs Fastify', target: '≥ 2.0×', measured: '2.5×', met: true }],
  ...(notes === undefined ? {} : { notes }),
});

describe('bench report files', () => {
  it('carry the notes a reader needs, in the JSON and under the goals in the markdown', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vigil-test-report-'));
    try {
      const out = writeReport(report(['the load generator <autocannon> caps the figures']), dir);
      const md = readFileSync(out.md, 'utf8');
      expect(md).toContain('1/1 goals met.');
      expect(md.indexOf('Note: the load generator &lt;autocannon&gt; caps the figures')).toBeGreaterThan(md.indexOf('goals met'));
      expect(JSON.parse(readFileSync(out.json, 'utf8')).notes).toEqual(['the load generator <autocannon> caps the figures']);
      writeReport(report(), dir);
      expect(readFileSync(out.md, 'utf8')).not.toContain('Note:');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
