/**
 * Benchmark report: terminal tables, plus bench results written as JSON and Markdown (with an
 * inline SVG bar chart of the Vigil-vs-peer ratios). No dependencies.
 */
import type { ClusterResult } from './cluster.js';
import type { FairnessFigures } from './fairness.js';
import type { StreamFigures } from './stream.js';
import type { TenantFigures } from './tenants.js';
import type { ScaleOutFigures } from './scale-out-figures.js';
import { scaleOutTable } from './scale-out-report.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface MacroRow {
  scenario: string;
  target: string;
  /** Mean over the rounds. */
  rps: number;
  /** req/s of each round, in round order (ratios are the median of the per-round ratios). */
  rounds?: number[];
  p50: number;
  p99: number;
  errors: number;
  requests: number;
}

export interface Ratio {
  scenario: string;
  against: string;
  /** The median of the per-round ratios. */
  ratio: number;
  rounds?: number[];
  goal?: number;
}

export interface BenchReport {
  createdAt: string;
  machine: { cpus: number; node: string; tool: string };
  quick: boolean;
  micro: { name: string; opsPerSec: number; meanUs: number }[];
  macro: MacroRow[];
  ratios: Ratio[];
  ledger: Record<string, number | string>;
  goals: { name: string; target: string; measured: string; met: boolean }[];
  /** Cluster mode beside embedded (bench/cluster.ts); absent without a nats-server. */
  cluster?: ClusterResult;
  /** Streaming ingest beside its peers (bench/stream.ts). */
  stream?: StreamFigures & { perRequestRps: number };
  /** One org against many (bench/tenants.ts). */
  tenants?: TenantFigures;
  /** A small org's latency while another floods its writer (bench/fairness.ts). */
  fairness?: FairnessFigures;
  /** 1, 2 and 3 capped cluster nodes, and embedded at the same quota (bench/scale-out.ts). */
  scaleOut?: ScaleOutFigures;
  /** What a reader should know to read the figures (e.g. a load generator that caps them). */
  notes?: string[];
}

// ---------------------------------------------------------------------------------------------
// formatting

const intFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decFormat = new Intl.NumberFormat('en-US', { maximumFractionDigits: 2 });

function ok(n: number): boolean {
  return typeof n === 'number' && Number.isFinite(n);
}

/** 12,345 */
export function fmtInt(n: number): string {
  return ok(n) ? intFormat.format(Math.round(n)) : 'n/a';
}

/** 1.23 ms */
export function fmtMs(n: number): string {
  return ok(n) ? `${n.toFixed(2)} ms` : 'n/a';
}

/** 1.23× */
export function fmtRatio(n: number): string {
  return ok(n) ? `${n.toFixed(2)}×` : 'n/a';
}

function fmtUs(n: number): string {
  if (!ok(n)) return 'n/a';
  return n >= 100 ? `${decFormat.format(Math.round(n * 10) / 10)} µs` : `${n.toPrecision(3)} µs`;
}

function fmtValue(v: number | string): string {
  return typeof v === 'number' ? (ok(v) ? decFormat.format(v) : 'n/a') : v;
}

export interface Table {
  head: string[];
  rows: string[][];
  /** Columns to right-align (numbers). */
  right?: number[];
}

function microTable(r: BenchReport): Table {
  return {
    head: ['benchmark', 'ops/s', 'mean'],
    rows: r.micro.map((m) => [m.name, fmtInt(m.opsPerSec), fmtUs(m.meanUs)]),
    right: [1, 2],
  };
}

function macroTable(r: BenchReport): Table {
  return macroRowsTable(r.macro);
}

function macroRowsTable(macro: MacroRow[]): Table {
  return {
    head: ['scenario', 'target', 'req/s', 'p50', 'p99', 'errors', 'requests'],
    rows: macro.map((m) => [m.scenario, m.target, fmtInt(m.rps), fmtMs(m.p50), fmtMs(m.p99), fmtInt(m.errors), fmtInt(m.requests)]),
    right: [2, 3, 4, 5, 6],
  };
}

function ratioTable(r: BenchReport): Table {
  return {
    head: ['scenario', 'against', 'ratio (median of rounds)', 'rounds', 'goal'],
    rows: r.ratios.map((x) => [x.scenario, x.against, fmtRatio(x.ratio), (x.rounds ?? []).map(fmtRatio).join(' '), x.goal === undefined ? '—' : `≥ ${fmtRatio(x.goal)}`]),
    right: [2, 4],
  };
}

function ledgerTable(r: BenchReport): Table {
  return { head: ['metric', 'value'], rows: Object.entries(r.ledger).map(([k, v]) => [k, fmtValue(v)]), right: [1] };
}

function clusterTable(c: ClusterResult): Table {
  return {
    head: ['metric', 'value'],
    rows: [
      ['durable ingest, cluster (3 NATS R3, 2 nodes, load on both)', `${fmtInt(c.clusterRps)} req/s, p99 ${fmtMs(c.clusterP99)}, errors ${c.clusterErrors}`],
      ['durable ingest, embedded (sync), same load', `${fmtInt(c.embeddedRps)} req/s, p99 ${fmtMs(c.embeddedP99)}`],
      ['cluster / embedded', fmtRatio(c.ratio)],
      [`public read on the other node after an acknowledged write (${c.lagSamples} samples)`, `median ${fmtMs(c.lagMedianMs)}, p99 ${fmtMs(c.lagP99Ms)}`],
      [`failover: kill -9 of the owner until the other node acknowledges (lease ${c.leaseSeconds} s)`, `${(c.failoverMs / 1000).toFixed(2)} s`],
    ],
    right: [1],
  };
}

function streamTable(s: StreamFigures & { perRequestRps: number }): Table {
  const ratio = (against: number | null): string => (against === null || against === 0 ? 'n/a' : fmtRatio(Math.round((s.eventsPerSec / against) * 100) / 100));
  const shape = `${s.shape.connections} connections × ${s.shape.window} frames in flight × ${s.shape.events} events, ${s.shape.encoding}`;
  const k = s.keyed;
  return {
    head: ['metric', 'value'],
    rows: [
      [`durable ingest over GET /events/stream (${shape}; the event POST /events/ and the peers take)`, `${fmtInt(s.eventsPerSec)} events/s (rounds ${s.rounds.map(fmtInt).join(', ')}), frame p50 ${fmtMs(s.p50FrameMs)} p99 ${fmtMs(s.p99FrameMs)}, errors ${s.errors}`],
      ['the same, every event with its idempotency key (as VigilClient sends them)', `${fmtInt(k.eventsPerSec)} events/s (rounds ${k.rounds.map(fmtInt).join(', ')}), frame p99 ${fmtMs(k.p99FrameMs)}, errors ${k.errors}`],
      ...(s.noLog === undefined
        ? []
        : [['the same against a server with the transparency log off (same run)', `${fmtInt(s.noLog.eventsPerSec)} events/s (rounds ${s.noLog.rounds.map(fmtInt).join(', ')}) → with the log ${fmtRatio(s.noLog.ratio)}`]]),
      ['CPU over the window (1 = one core): server / load generator (own process)', `${s.serverCpu} / ${s.loadCpu}`],
      ['per-request POST /events/ (vigil sync, macro, same run)', `${fmtInt(s.perRequestRps)} req/s → stream ${ratio(s.perRequestRps)}`],
      ['JetStream R1 file stream, one async-published message per event', s.jetstreamPerSec === null ? 'n/a (no nats-server)' : `${fmtInt(s.jetstreamPerSec)} msgs/s (rounds ${s.jetstreamRounds.map(fmtInt).join(', ')}) → stream ${ratio(s.jetstreamPerSec)}`],
      [`bare LMDB append, batches of ${s.shape.events} rows (commit + fsync)`, `${fmtInt(s.lmdbRowsPerSec)} rows/s → stream ${ratio(s.lmdbRowsPerSec)}`],
    ],
    right: [1],
  };
}

function tenantTable(t: TenantFigures): Table {
  const rounds = (xs: number[]): string => xs.map(fmtInt).join(', ');
  return {
    head: ['metric', 'value'],
    rows: [
      ['POST /events/, one org (rounds)', rounds(t.httpSingle)],
      [`POST /events/, ${t.orgs} orgs round robin (rounds)`, rounds(t.httpMany)],
      ['ratio, median of the rounds', fmtRatio(t.httpRatio)],
      ['server CPU per request, µs, one org (rounds)', rounds(t.httpCpuSingle)],
      [`server CPU per request, µs, ${t.orgs} orgs (rounds)`, rounds(t.httpCpuMany)],
      ['CPU ratio, many / one, median of the rounds', fmtRatio(t.httpCpuRatio)],
      [`stream, ${t.streamShape.connections} sockets × ${t.streamShape.window} frames × ${t.streamShape.events} events, one org (rounds)`, rounds(t.streamSingle)],
      [`stream, the same over ${t.orgs} orgs, a socket each (rounds)`, rounds(t.streamMany)],
      ['ratio, median of the rounds', fmtRatio(t.streamRatio)],
    ],
    right: [1],
  };
}

function fairnessTable(f: FairnessFigures): Table {
  const ms = (xs: number[]): string => xs.map((x) => x.toFixed(2)).join(', ');
  return {
    head: ['metric', 'value'],
    rows: [
      ['org B, one connection, POST /events/ one after another: p50 / p99 alone (rounds)', `${fmtMs(f.aloneP50)} / ${fmtMs(f.aloneP99)} (p99 ${ms(f.rounds.map((r) => r.alone.p99))})`],
      [`the same while org A floods (${f.shape.connections} sockets × ${f.shape.window} frames × ${f.shape.events} events)`, `${fmtMs(f.floodedP50)} / ${fmtMs(f.floodedP99)} (p99 ${ms(f.rounds.map((r) => r.flooded.p99))})`],
      ['B p99 flooded / alone, median of the rounds', `${fmtRatio(f.ratio)} (rounds ${f.rounds.map((r) => fmtRatio(r.ratio)).join(', ')})`],
      ['org A acknowledged events/s (rounds)', `${fmtInt(f.floodEventsPerSec)} (${f.rounds.map((r) => fmtInt(r.flood.eventsPerSec)).join(', ')})`],
      ['errors: B / A', `${f.probeErrors} / ${f.floodErrors}`],
    ],
    right: [1],
  };
}

/** The fairness figures alone, as a terminal table (`npm run bench -- --only fairness`). */
export function fairnessText(f: FairnessFigures): string {
  return renderText(fairnessTable(f));
}

/** The scale-out figures alone, as a terminal table (`npm run bench -- --only scale-out`). */
export function scaleOutText(f: ScaleOutFigures): string {
  return renderText(scaleOutTable(f));
}

/** Goals alone, as the report's goal table (for a scenario run with `--only`). */
export function goalsText(goals: BenchReport['goals']): string {
  return renderText(goalTable(goals));
}

/** The many-tenant figures alone, as a terminal table (`npm run bench -- --only tenants`). */
export function tenantsText(t: TenantFigures): string {
  return renderText(tenantTable(t));
}

function goalTable(goals: BenchReport['goals']): Table {
  return {
    head: ['', 'goal', 'target', 'measured'],
    rows: goals.map((g) => [g.met ? '✓' : '✗', g.name, g.target, g.measured]),
  };
}

function sections(r: BenchReport): [string, Table][] {
  return [
    ['Micro', microTable(r)],
    ['Macro', macroTable(r)],
    ['Ratios', ratioTable(r)],
    ['Ledger', ledgerTable(r)],
    ...(r.cluster === undefined ? [] : [['Cluster', clusterTable(r.cluster)] as [string, Table]]),
    ...(r.stream === undefined ? [] : [['Streaming ingest', streamTable(r.stream)] as [string, Table]]),
    ...(r.tenants === undefined ? [] : [['Many tenants', tenantTable(r.tenants)] as [string, Table]]),
    ...(r.fairness === undefined ? [] : [['Fairness', fairnessTable(r.fairness)] as [string, Table]]),
    ...(r.scaleOut === undefined ? [] : [['Scale-out', scaleOutTable(r.scaleOut)] as [string, Table]]),
    ['Goals', goalTable(r.goals)],
  ];
}

function machineLine(r: BenchReport): string {
  return `${r.machine.cpus} CPUs · Node ${r.machine.node} · load tool ${r.machine.tool}${r.quick ? ' · quick run' : ''}`;
}

// ---------------------------------------------------------------------------------------------
// terminal

/** Display width, counting code points (good enough for ×, µ, ✓, ✗, —). */
function width(s: string): number {
  return [...s].length;
}

function pad(s: string, w: number, right: boolean): string {
  const fill = ' '.repeat(Math.max(0, w - width(s)));
  return right ? fill + s : s + fill;
}

function renderText(t: Table): string {
  if (t.rows.length === 0) return '  (none)';
  const right = new Set(t.right ?? []);
  const widths = t.head.map((h, i) => Math.max(width(h), ...t.rows.map((row) => width(row[i] ?? ''))));
  const line = (cells: string[]): string =>
    `  ${widths.map((w, i) => pad(cells[i] ?? '', w, right.has(i))).join('  ')}`.trimEnd();
  const rule = `  ${widths.map((w) => '─'.repeat(w)).join('  ')}`;
  return [line(t.head), rule, ...t.rows.map(line)].join('\n');
}

/** The macro rows alone, as a terminal table (`npm run bench -- --targets`). */
export function macroText(macro: MacroRow[]): string {
  return renderText(macroRowsTable(macro));
}

export function printReport(r: BenchReport): void {
  const out: string[] = ['', `Vigil benchmark — ${r.createdAt}`, machineLine(r)];
  for (const [title, table] of sections(r)) out.push('', title, renderText(table));
  const met = r.goals.filter((g) => g.met).length;
  if (r.goals.length > 0) out.push('', `${met}/${r.goals.length} goals met`);
  for (const note of r.notes ?? []) out.push('', `note: ${note}`);
  out.push('');
  console.log(out.join('\n'));
}

// ---------------------------------------------------------------------------------------------
// markdown + svg

/** Table cell text: HTML-escaped (so `<x>` is shown, not parsed), pipes escaped, one line. */
function mdCell(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/\\/g, '\\\\')
    .replace(/\|/g, '\\|')
    .replace(/\r?\n/g, ' ');
}

function renderMd(t: Table): string {
  if (t.rows.length === 0) return '_none_';
  const right = new Set(t.right ?? []);
  const head = `| ${t.head.map(mdCell).join(' | ')} |`;
  const align = `|${t.head.map((_, i) => (right.has(i) ? ' ---: ' : ' --- ')).join('|')}|`;
  const rows = t.rows.map((row) => `| ${t.head.map((_, i) => mdCell(row[i] ?? '')).join(' | ')} |`);
  return [head, align, ...rows].join('\n');
}

export function escapeXml(s: string): string {
  return s
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;')
    // Characters XML 1.0 does not allow at all.
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]/g, '');
}

/** Horizontal bars, one per ratio, with a dashed line at 1.0× and a marker at each goal. */
export function ratioChartSvg(ratios: Ratio[]): string {
  const labelW = 300;
  const plotW = 380;
  const valueW = 80;
  const rowH = 28;
  const barH = 16;
  const top = 28;
  const bottom = 26;
  const width = labelW + plotW + valueW;
  const height = top + Math.max(1, ratios.length) * rowH + bottom;
  const finite = (n: number | undefined): n is number => n !== undefined && Number.isFinite(n) && n >= 0;
  const maxValue = Math.max(1, ...ratios.flatMap((r) => [r.ratio, r.goal]).filter(finite));
  const scaleMax = niceCeil(maxValue * 1.08);
  const x = (v: number): number => labelW + (Math.min(v, scaleMax) / scaleMax) * plotW;
  const f = (n: number): string => (Math.round(n * 10) / 10).toString();
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="system-ui, -apple-system, Segoe UI, Helvetica, Arial, sans-serif" font-size="12">`,
    '<title>Vigil throughput relative to peers</title>',
    `<rect x="0" y="0" width="${width}" height="${height}" fill="#ffffff"/>`,
  ];
  // Axis ticks.
  const step = scaleMax / 4;
  for (let i = 0; i <= 4; i++) {
    const v = step * i;
    const tx = x(v);
    parts.push(
      `<line x1="${f(tx)}" y1="${top - 6}" x2="${f(tx)}" y2="${height - bottom}" stroke="#eeeeee" stroke-width="1"/>`,
      `<text x="${f(tx)}" y="${height - bottom + 16}" text-anchor="middle" fill="#666666">${escapeXml(fmtRatio(v))}</text>`,
    );
  }
  ratios.forEach((r, i) => {
    const y = top + i * rowH;
    const barY = y + (rowH - barH) / 2;
    const label = `${r.scenario} / ${r.against}`;
    const value = finite(r.ratio) ? r.ratio : 0;
    const metGoal = r.goal === undefined || (finite(r.ratio) && r.ratio >= r.goal);
    const colour = r.goal === undefined ? '#4c78a8' : metGoal ? '#54a24b' : '#e45756';
    parts.push(
      `<text x="${labelW - 8}" y="${f(y + rowH / 2 + 4)}" text-anchor="end" fill="#222222">${escapeXml(label)}</text>`,
      `<rect x="${labelW}" y="${f(barY)}" width="${f(Math.max(0, x(value) - labelW))}" height="${barH}" fill="${colour}"><title>${escapeXml(`${label}: ${fmtRatio(r.ratio)}${r.goal === undefined ? '' : ` (goal ${fmtRatio(r.goal)})`}`)}</title></rect>`,
      // The value sits right of the bar, or of the goal marker when that is further right.
      `<text x="${f(Math.max(x(value), finite(r.goal) ? x(r.goal) + 2 : 0) + 6)}" y="${f(y + rowH / 2 + 4)}" fill="#222222">${escapeXml(fmtRatio(r.ratio))}</text>`,
    );
    if (finite(r.goal)) {
      const gx = x(r.goal);
      parts.push(
        `<line x1="${f(gx)}" y1="${f(barY - 4)}" x2="${f(gx)}" y2="${f(barY + barH + 4)}" stroke="#222222" stroke-width="2"><title>${escapeXml(`goal ${fmtRatio(r.goal)}`)}</title></line>`,
        `<path d="M ${f(gx - 4)} ${f(barY - 8)} L ${f(gx + 4)} ${f(barY - 8)} L ${f(gx)} ${f(barY - 3)} Z" fill="#222222"/>`,
      );
    }
  });
  if (ratios.length === 0) {
    parts.push(`<text x="${labelW - 8}" y="${top + rowH / 2 + 4}" text-anchor="end" fill="#666666">no ratios</text>`);
  }
  const oneX = x(1);
  parts.push(
    `<line x1="${f(oneX)}" y1="${top - 10}" x2="${f(oneX)}" y2="${height - bottom}" stroke="#555555" stroke-width="1.5" stroke-dasharray="4 3"/>`,
    `<text x="${f(oneX)}" y="${top - 14}" text-anchor="middle" fill="#555555">1.0×</text>`,
    '</svg>',
  );
  return parts.join('\n');
}

/** 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10 × 10^k, at least n. */
function niceCeil(n: number): number {
  const exp = Math.floor(Math.log10(n));
  const base = 10 ** exp;
  for (const m of [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (m * base >= n - 1e-9) return m * base;
  return 10 * base;
}

function renderMarkdown(r: BenchReport): string {
  const out: string[] = [
    '# Vigil benchmark',
    '',
    `${mdCell(r.createdAt)} · ${mdCell(machineLine(r))}`,
  ];
  for (const [title, table] of sections(r)) {
    out.push('', `## ${title}`, '', renderMd(table));
    if (title === 'Ratios' && r.ratios.length > 0) out.push('', ratioChartSvg(r.ratios));
  }
  if (r.goals.length > 0) out.push('', `${r.goals.filter((g) => g.met).length}/${r.goals.length} goals met.`);
  for (const note of r.notes ?? []) out.push('', `Note: ${mdCell(note)}`);
  out.push('');
  return out.join('\n');
}

/** Writes dir/latest.json and dir/latest.md (creating dir) and returns their paths. */
export function writeReport(r: BenchReport, dir: string): { json: string; md: string } {
  mkdirSync(dir, { recursive: true });
  const json = join(dir, 'latest.json');
  const md = join(dir, 'latest.md');
  writeFileSync(json, `${JSON.stringify(r, null, 2)}\n`);
  writeFileSync(md, renderMarkdown(r));
  return { json, md };
}
