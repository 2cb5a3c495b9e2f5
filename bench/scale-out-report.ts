/** The scale-out scenario as a report table (bench/report.ts renders it for the terminal and Markdown). */
import type { Table } from './report.js';
import type { ScaleOutFigures } from './scale-out-figures.js';

const shares = (xs: number[]): string => (xs.length === 0 ? '—' : xs.map((x) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a')).join(' '));
const int = (n: number): string => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');

export function scaleOutTable(f: ScaleOutFigures): Table {
  if (f.skipped !== undefined) return { head: ['scale-out'], rows: [[`skipped: ${f.skipped}`]] };
  const embedded = f.steps.find((s) => s.label === 'embedded');
  const perEvent = (us: number, label: string): string => {
    const times = embedded === undefined || label === 'embedded' ? '' : ` (${(us / embedded.cpuPerEventUs).toFixed(2)}× embedded)`;
    return `${int(us)} µs${times}`;
  };
  return {
    head: ['nodes', 'req/s (median)', 'rounds', 'efficiency', 'p99', 'errors', `CPU per node (quota ${f.nodeCpu})`, 'CPU per nats-server', 'CPU per load generator', "nodes' CPU per event", 'with NATS'],
    rows: f.steps.map((s) => [
      s.label === 'embedded' ? 'embedded (sync)' : s.label,
      int(s.rps),
      s.rounds.map(int).join(', '),
      Number.isFinite(s.efficiency) ? s.efficiency.toFixed(2) : '—',
      `${s.p99.toFixed(2)} ms`,
      String(s.errors),
      shares(s.nodeCpu),
      shares(s.natsCpu),
      shares(s.loadCpu),
      perEvent(s.cpuPerEventUs, s.label),
      s.natsCpu.length === 0 ? '—' : `${int(s.cpuPerEventWithNatsUs)} µs`,
    ]),
    right: [1, 3, 4, 5, 9, 10],
  };
}
