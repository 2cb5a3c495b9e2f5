import { Agent, request } from 'node:http';
import { ChainVerifier, rowFromExport } from '../../src/domain/ledger.js';
import { ADMIN_KEY, ORG, parseLines, removeDir, runCli, spawnServer, tempDir, type ServerProcess } from './server.js';

/**
 * kill -9 under concurrent writers, in a loop, on one data dir (DESIGN §4 "Durability"): each cycle
 * runs writers that post events over keep-alive connections, kills the server at a random moment,
 * restarts it and checks that every event acknowledged with 200 is in the ledger with what was
 * sent, that the new rows carry on the chain from the head verified before (no gap, no fork), and
 * that writes continue from the same head. Used by test/integration/kill-loop.test.ts (a few
 * cycles) and test/soak/kill-loop.ts (hundreds). No vitest here: problems are collected as text.
 */

export interface KillLoopOptions {
  cycles: number;
  /** Concurrent writers, each on its own keep-alive connection. */
  writers: number;
  /** Agents the writers spread events over. */
  agents: number;
  /** Seeds the kill moments and the events' mix; print it to replay a run. */
  seed: number;
  /** After the first acknowledged event of a cycle, the kill comes a random time within this range. */
  killAfterMs: [number, number];
  /** Server env on top of spawnServer's (e.g. VIGIL_DURABILITY). */
  env?: Record<string, string>;
  /** The server recomputes the whole chain every this many cycles, and after the last. */
  fullVerifyEvery?: number;
  onCycle?: (cycle: CycleReport) => void;
  /** Data dir to use (kept); a temp dir removed at the end otherwise. */
  dataDir?: string;
}

export interface CycleReport {
  cycle: number;
  /** Writers' run until the kill. */
  ranMs: number;
  sent: number;
  acked: number;
  /** Acknowledged events not in the ledger after the restart, or not as sent. */
  lost: number;
  /** Records the cycle added (acknowledged or not, plus the probe event). */
  rows: number;
  /** Ledger length after the cycle. */
  length: number;
  restartMs: number;
  chainOk: boolean;
  problems: string[];
}

export interface KillLoopReport {
  seed: number;
  cycles: CycleReport[];
  acked: number;
  lost: number;
  length: number;
  chainValid: boolean;
  problems: string[];
}

interface Ack {
  eventId: number;
  agentId: string;
  w: number;
  n: number;
}

/** mulberry32: small, seeded, good enough to pick moments and event types. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

const EVENTS = [
  { event_type: 'output_generated', payload: {} },
  { event_type: 'config_read', payload: { key: 'feature.flags' } },
  { event_type: 'file_operation', payload: { operation: 'write', path: '/workspace/out.txt' } },
  { event_type: 'config_write', payload: { key: 'monitoring.enabled', value: false } },
] as const;

/** POST over one keep-alive agent; rejects when the connection dies (the server was killed). */
function post(agent: Agent, url: string, path: string, body: string): Promise<{ status: number; json: any }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url + path,
      { method: 'POST', agent, headers: { authorization: `Bearer ${ADMIN_KEY}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: any;
          try {
            json = JSON.parse(text);
          } catch {
            json = undefined;
          }
          resolve({ status: res.statusCode ?? 0, json });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function get(url: string, path: string): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url + path, { headers: { authorization: `Bearer ${ADMIN_KEY}` } });
  return { status: res.status, text: await res.text(), headers: res.headers };
}

/** Writers post until told to stop or their connection dies; every 200 is recorded with what was sent. */
function runWriters(url: string, o: KillLoopOptions, cycle: number, agents: string[]) {
  const acked: Ack[] = [];
  const statuses = new Map<number, number>();
  let sent = 0;
  let stop = false;
  let firstAck: () => void = () => {};
  const acknowledged = new Promise<void>((resolve) => (firstAck = resolve));
  const writer = async (w: number): Promise<void> => {
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    // Each writer draws its own events, so a seed gives every writer the same sequence again.
    const random = seededRandom(o.seed + cycle * 1_000 + w);
    try {
      for (let n = 0; !stop; n++) {
        const agentId = agents[(w + n) % agents.length]!;
        const event = EVENTS[Math.floor(random() * EVENTS.length)]!;
        const body = JSON.stringify({ agent_id: agentId, event_type: event.event_type, payload: { ...event.payload, c: cycle, w, n } });
        sent++;
        const res = await post(agent, url, '/events/', body);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200) {
          acked.push({ eventId: res.json.event_id, agentId, w, n });
          firstAck();
        }
      }
    } catch {
      // The connection died with the server.
    } finally {
      agent.destroy();
    }
  };
  const done = Promise.all(Array.from({ length: o.writers }, (_, w) => writer(w)));
  return {
    acked,
    statuses,
    acknowledged,
    sent: () => sent,
    stop: async () => {
      stop = true;
      await done;
    },
  };
}

/** Head of the ledger as verified so far: the next rows must continue from it. */
interface Verified {
  length: number;
  head: Buffer;
  maxEventId: number;
}

/** Checks the rows after `from`, and that every ack is among them as sent. */
function checkNewRows(rows: any[], from: Verified, cycle: number, acked: Ack[], problems: string[]): { verified: Verified; lost: number; ok: boolean } {
  const verifier = new ChainVerifier({ startSeq: from.length, startHash: from.head });
  const events = new Map<number, any>();
  const seen = new Set<string>();
  for (const row of rows) {
    verifier.push(rowFromExport(row));
    if (row.kind !== 'event') continue;
    events.set(row.body.event_id, row);
    const mark = `${row.body.payload?.c}/${row.body.payload?.w}/${row.body.payload?.n}`;
    if (seen.has(mark)) problems.push(`cycle ${cycle}: the event sent as ${mark} is in the ledger twice`);
    seen.add(mark);
  }
  const report = verifier.report();
  if (!report.ok) problems.push(`cycle ${cycle}: the chain breaks at seq ${report.first_bad_seq}: ${report.problem}`);
  let lost = 0;
  for (const ack of acked) {
    const row = events.get(ack.eventId);
    const p = row?.body.payload;
    if (row === undefined || row.agent_id !== ack.agentId || p?.c !== cycle || p?.w !== ack.w || p?.n !== ack.n) {
      lost++;
      if (lost <= 5) problems.push(`cycle ${cycle}: acknowledged event ${ack.eventId} (writer ${ack.w}, #${ack.n}) ${row === undefined ? 'is not in the ledger' : 'is in the ledger as something else'}`);
    }
  }
  const last = rows.at(-1);
  let maxEventId = from.maxEventId;
  for (const id of events.keys()) maxEventId = Math.max(maxEventId, id);
  const verified = last === undefined ? from : { length: last.seq as number, head: Buffer.from(last.chain_hash as string, 'hex'), maxEventId };
  return { verified, lost, ok: report.ok };
}

/** After a restart: one event, which must be the next seq on the same head with the next event id. */
async function probe(url: string, agentId: string, from: Verified, cycle: number, problems: string[]): Promise<Verified> {
  const agent = new Agent({ keepAlive: false });
  const res = await post(agent, url, '/events/', JSON.stringify({ agent_id: agentId, event_type: 'output_generated', payload: { probe: cycle } }));
  if (res.status !== 200) {
    problems.push(`cycle ${cycle}: a write after the restart answered ${res.status}`);
    return from;
  }
  const rows = parseLines((await get(url, `/audit/export?since_seq=${from.length}`)).text);
  const row = rows[0];
  if (rows.length !== 1 || row.seq !== from.length + 1 || row.prev_hash !== from.head.toString('hex')) {
    problems.push(`cycle ${cycle}: the write after the restart is not seq ${from.length + 1} on head ${from.head.toString('hex')}: ${JSON.stringify(rows).slice(0, 300)}`);
    return from;
  }
  if (res.json.event_id !== from.maxEventId + 1) problems.push(`cycle ${cycle}: the next event id is ${res.json.event_id}, not ${from.maxEventId + 1}`);
  return { length: row.seq, head: Buffer.from(row.chain_hash, 'hex'), maxEventId: res.json.event_id };
}

/** The server recomputes the whole chain; it must agree with what was verified here. */
async function fullVerify(url: string, agentId: string, from: Verified, problems: string[]): Promise<boolean> {
  const res = await get(url, `/audit/${agentId}/verify`);
  const body = JSON.parse(res.text);
  const agrees = body.ok === true && body.head === from.head.toString('hex') && body.length === from.length;
  if (!agrees) problems.push(`the server's verification disagrees: ${res.text.slice(0, 300)} (expected head ${from.head.toString('hex')}, length ${from.length})`);
  return agrees;
}

export async function runKillLoop(o: KillLoopOptions): Promise<KillLoopReport> {
  const killAt = seededRandom(o.seed);
  const dir = o.dataDir ?? tempDir('vigil-kill-');
  const env = o.env ?? {};
  const problems: string[] = [];
  const cycles: CycleReport[] = [];
  let proc: ServerProcess = await spawnServer(dir, env);
  try {
    // The free plan refuses events past 100k a month; a long soak writes more.
    const plan = await runCli(['orgs', 'set-plan', '--org', ORG, '--plan', 'scale'], { VIGIL_DATA_DIR: dir });
    if (plan.code !== 0) throw new Error(`orgs set-plan failed: ${plan.stderr}`);
    const agents = Array.from({ length: o.agents }, (_, i) => `kill-${i}`);
    for (const agent_id of agents) {
      const res = await post(new Agent(), proc.url, '/agents/', JSON.stringify({ agent_id, name: agent_id }));
      if (res.status !== 201 && res.status !== 409) throw new Error(`registering ${agent_id} answered ${res.status}`);
    }
    const initial = checkNewRows(parseLines((await get(proc.url, '/audit/export')).text), { length: 0, head: Buffer.alloc(32), maxEventId: 0 }, 0, [], problems);
    let verified = initial.verified;
    let chainValid = initial.ok;
    for (let cycle = 1; cycle <= o.cycles; cycle++) {
      const cycleProblems: string[] = [];
      const writers = runWriters(proc.url, o, cycle, agents);
      const started = Date.now();
      const extra = o.killAfterMs[0] + killAt() * (o.killAfterMs[1] - o.killAfterMs[0]);
      // Waits for the first acknowledged event (a server that acknowledges nothing fails the
      // check below), then a random time; the kill lands while writes are in flight.
      await Promise.race([writers.acknowledged, proc.exited]);
      await new Promise((resolve) => setTimeout(resolve, extra));
      proc.child.kill('SIGKILL');
      await proc.exited;
      const ranMs = Date.now() - started;
      await writers.stop();
      if (writers.acked.length === 0) cycleProblems.push(`cycle ${cycle}: no event was acknowledged (statuses ${JSON.stringify([...writers.statuses])})`);
      const restarting = Date.now();
      proc = await spawnServer(dir, env);
      const restartMs = Date.now() - restarting;
      const rows = parseLines((await get(proc.url, `/audit/export?since_seq=${verified.length}`)).text);
      const checked = checkNewRows(rows, verified, cycle, writers.acked, cycleProblems);
      chainValid &&= checked.ok;
      verified = await probe(proc.url, agents[0]!, checked.verified, cycle, cycleProblems);
      if (o.fullVerifyEvery !== undefined && (cycle % o.fullVerifyEvery === 0 || cycle === o.cycles)) {
        chainValid = (await fullVerify(proc.url, agents[0]!, verified, cycleProblems)) && chainValid;
      }
      const report: CycleReport = {
        cycle,
        ranMs,
        sent: writers.sent(),
        acked: writers.acked.length,
        lost: checked.lost,
        rows: rows.length + 1,
        length: verified.length,
        restartMs,
        chainOk: checked.ok,
        problems: cycleProblems,
      };
      cycles.push(report);
      problems.push(...cycleProblems);
      o.onCycle?.(report);
    }
    const sum = (f: (c: CycleReport) => number) => cycles.reduce((s, c) => s + f(c), 0);
    return { seed: o.seed, cycles, acked: sum((c) => c.acked), lost: sum((c) => c.lost), length: verified.length, chainValid, problems };
  } finally {
    proc.child.kill('SIGTERM');
    await proc.exited;
    if (o.dataDir === undefined) removeDir(dir);
  }
}
