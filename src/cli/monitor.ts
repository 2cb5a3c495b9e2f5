import { setTimeout as sleep } from 'node:timers/promises';
import { judge, needsProof, openCheckpoint, type Opened } from '../domain/log-monitor.js';
import { orgSlug } from '../domain/schemas.js';
import type { Checkpoint, NoteKey } from '../domain/signed-note.js';
import { parseCommand, usageLine, UsageError, verifierKeyOf } from './args.js';
import { Progress } from './progress.js';
import { LogReadError, PublicLog } from './log-client.js';
import { readState, StateFileError, writeState, type SeenCheckpoint } from './monitor-state.js';

export const MONITOR_USAGE = `usage: vigil monitor <base url> <org> --key <vkey|@file> --state <file> [--follow [--interval <seconds>] [--withheld <polls>]]
  Follows an org's public checkpoints (GET <base url>/public/checkpoints/<org>; README, "Transparency log"): checks
  each new one's signature and origin, and that it extends the last one seen (a consistency proof).
  --key <vkey>      the log's verifier key, as GET <base url>/public/log-key serves it
  --key @<file>     the same, read from a file
  --state <file>    JSON of the last checkpoint seen; made on the first run, replaced atomically
  --follow          keep polling, a line per new checkpoint, until an alarm or SIGINT/SIGTERM;
                    network errors are reported and retried
  --interval <s>    seconds between polls with --follow (default 10)
  --withheld <n>    with --follow: polls that may serve a larger signed checkpoint but no consistency
                    proof for it (before one is proven) until that is an alarm (default 6)
  --progress        with --follow: a line on stderr at each poll that found nothing new, even when
                    stderr is not a terminal (on a terminal the poll count is shown in place anyway)
exit status: 0 checked (or first seen, or stopped by a signal); 1 bad arguments, network or state
  file error (and, without --follow, a proof not served); 2 alarm: a fork (a smaller size, two
  roots for one size, a failing consistency proof), a bad signature or origin, or with --follow a
  proof withheld. An alarm is told on stderr and leaves the state file as it was.`;

const EXIT = { ok: 0, error: 1, alarm: 2 } as const;
const DEFAULT_INTERVAL_SECONDS = 10;
/** Polls in a row (a minute at the default interval) a signed checkpoint may go unproven: a restart's tree rebuild answers 503 for seconds. */
const DEFAULT_WITHHELD_POLLS = 6;

export interface MonitorOptions {
  log: PublicLog;
  key: NoteKey;
  statePath: string;
  follow: boolean;
  intervalSeconds: number;
  withheldPolls: number;
  /** --progress: polls that found nothing new are told on stderr even when it is not a terminal. */
  progress: boolean;
}

/** One look at the log: the checkpoint accepted (and remembered), or why not. */
type Step =
  | { type: 'accepted'; verdict: 'first' | 'unchanged' | 'consistent'; seen: SeenCheckpoint; previous: SeenCheckpoint | null }
  | { type: 'refused'; exit: 1 | 2; message: string }
  /** A larger checkpoint, signed, whose consistency proof the log did not serve. */
  | { type: 'withheld'; next: Checkpoint; from: number; error: LogReadError };

/** `vigil monitor`: the exit status, as MONITOR_USAGE tells it. */
export async function monitor(args: string[]): Promise<number> {
  let options: MonitorOptions | 'help';
  try {
    options = await parseMonitorArgs(args);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(usageLine('monitor', error.message));
    return EXIT.error;
  }
  if (options === 'help') {
    console.log(MONITOR_USAGE);
    return EXIT.ok;
  }
  try {
    return options.follow ? await follow(options) : await once(options);
  } catch (error) {
    if (error instanceof LogReadError || error instanceof StateFileError) {
      console.error(error.message);
      return EXIT.error;
    }
    throw error;
  }
}

async function once(o: MonitorOptions): Promise<number> {
  const step = await check(o, await readState(o.statePath), new AbortController().signal);
  if (step.type === 'refused') {
    console.error(step.message);
    return step.exit;
  }
  if (step.type === 'withheld') {
    console.error(`${withheldLine(o, step)}; not judged (--follow raises an alarm when it goes on)`);
    return EXIT.error;
  }
  console.log(progressLine(o, step));
  return EXIT.ok;
}

/** Polls until an alarm (or a state file it cannot use) or a signal; network errors are told once each and retried. */
async function follow(o: MonitorOptions): Promise<number> {
  const stop = new AbortController();
  const onSignal = (): void => stop.abort();
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    let seen = await readState(o.statePath);
    // The network error last told, and how many polls in a row have failed.
    let failure: string | null = null;
    let failures = 0;
    /** Polls since the last proven extension that served a larger signed checkpoint and no proof for it. */
    let withheld = 0;
    let first = true;
    let polls = 0;
    const progress = Progress.forStderr(o.progress);
    const tell = (line: string): void => {
      progress.clear();
      console.error(line);
    };
    while (!stop.signal.aborted) {
      polls++;
      try {
        const step = await check(o, seen, stop.signal);
        if (step.type === 'refused') {
          tell(step.message);
          return step.exit;
        }
        if (step.type === 'withheld') {
          withheld++;
          if (withheld >= o.withheldPolls) {
            tell(`WITHHELD PROOF: ${withheldLine(o, step)}, ${withheld} polls in a row: a log that signs a checkpoint must prove it extends what it signed before`);
            return EXIT.alarm;
          }
          if (withheld === 1) tell(`${withheldLine(o, step)}; retrying every ${o.intervalSeconds} s (an alarm after ${o.withheldPolls} polls in a row)`);
          await sleep(o.intervalSeconds * 1000, undefined, { signal: stop.signal }).catch(() => undefined);
          continue;
        }
        // Only a proven extension ends a run of withheld proofs: a log that answers with the old
        // checkpoint between them has still not proven the larger one it signed.
        if (step.verdict !== 'unchanged') withheld = 0;
        if (failures > 0) tell(`${o.log.checkpointUrl}: answering again after ${failures} failed attempt${failures === 1 ? '' : 's'}`);
        [failure, failures] = [null, 0];
        if (first || step.verdict !== 'unchanged') {
          progress.clear();
          console.log(progressLine(o, step));
        } else {
          progress.update(() => `monitor: ${o.log.org} at size ${step.seen.size}, nothing new at poll ${polls} (${new Date().toISOString()})`);
        }
        first = false;
        seen = step.seen;
      } catch (error) {
        if (stop.signal.aborted) break;
        if (!(error instanceof LogReadError)) throw error;
        if (failure !== error.message) tell(`${error.message}; retrying every ${o.intervalSeconds} s`);
        [failure, failures] = [error.message, failures + 1];
      }
      await sleep(o.intervalSeconds * 1000, undefined, { signal: stop.signal }).catch(() => undefined);
    }
    return EXIT.ok;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

/** Reads the latest checkpoint, judges it against `seen` and, when accepted as new, writes it to the state file. */
async function check(o: MonitorOptions, seen: SeenCheckpoint | null, signal: AbortSignal): Promise<Step> {
  const opened = openCheckpoint(await o.log.checkpoint(signal), o.key, o.log.org);
  if (!opened.ok) return { type: 'refused', exit: EXIT.alarm, message: openAlarm(o, opened) };
  const next = opened.checkpoint;
  const remember = async (verdict: 'first' | 'consistent'): Promise<Step> => {
    const now = { ...next, seenAt: new Date().toISOString() };
    await writeState(o.statePath, now);
    return { type: 'accepted', verdict, seen: now, previous: seen };
  };
  if (seen === null) return remember('first');
  let proof: Buffer[] | null = null;
  if (needsProof(seen, next)) {
    let answer: Awaited<ReturnType<PublicLog['consistency']>>;
    try {
      answer = await o.log.consistency(seen.size, next.size, signal);
    } catch (error) {
      if (!(error instanceof LogReadError) || signal.aborted) throw error;
      return { type: 'withheld', next, from: seen.size, error };
    }
    if (!answer.ok) return { type: 'refused', exit: EXIT.alarm, message: `BAD PROOF: ${o.log.consistencyUrl(seen.size, next.size)}: not a consistency proof from size ${seen.size} to size ${next.size}: ${answer.problem}` };
    proof = answer.hashes;
  }
  const verdict = judge(seen, next, proof);
  switch (verdict.type) {
    case 'consistent':
      return remember('consistent');
    case 'unchanged':
      return { type: 'accepted', verdict: 'unchanged', seen, previous: seen };
    case 'other-log':
      return { type: 'refused', exit: EXIT.error, message: `the state file ${o.statePath} follows the log ${seen.origin}, not ${next.origin}: give this log its own state file` };
    case 'fork':
      return { type: 'refused', exit: EXIT.alarm, message: forkAlarm(o, seen, next, verdict.problem) };
  }
}

const hex = (root: Buffer): string => root.toString('hex');
const at = (c: Checkpoint): string => `size ${c.size} (root ${hex(c.root)})`;

function progressLine(o: MonitorOptions, step: Extract<Step, { type: 'accepted' }>): string {
  const head = `${o.log.org}: size ${step.seen.size}, root ${hex(step.seen.root).slice(0, 16)}…`;
  switch (step.verdict) {
    case 'first':
      return `${head}, first checkpoint seen, recorded in ${o.statePath}`;
    case 'unchanged':
      return `${head}, unchanged since ${step.seen.seenAt}`;
    case 'consistent':
      return `${head}, consistent with size ${step.previous?.size ?? 0}`;
  }
}

function withheldLine(o: MonitorOptions, step: Extract<Step, { type: 'withheld' }>): string {
  return `${o.log.checkpointUrl} signs ${at(step.next)}, but gives no proof that it extends size ${step.from}: ${step.error.message}`;
}

function openAlarm(o: MonitorOptions, opened: Exclude<Opened, { ok: true }>): string {
  const url = o.log.checkpointUrl;
  const key = `${o.key.name}+${o.key.keyId.toString('hex')}`;
  switch (opened.problem) {
    case 'signature':
      return `BAD SIGNATURE: ${url}: no valid signature by ${key}${opened.claimed === null ? '' : ` on its checkpoint of ${at(opened.claimed)}`}`;
    case 'malformed':
      return `BAD CHECKPOINT: ${url}: signed by ${key}, but not a checkpoint (origin, size, base64 root)`;
    case 'origin':
      return `BAD ORIGIN: ${url}: the checkpoint is of the log ${opened.origin}, not ${opened.expected} (org ${o.log.org} under the key ${key})`;
  }
}

function forkAlarm(o: MonitorOptions, seen: SeenCheckpoint, next: Checkpoint, problem: 'shrunk' | 'two-roots' | 'proof-fails'): string {
  const was = `${at(seen)} seen at ${seen.seenAt}`;
  switch (problem) {
    case 'shrunk':
      return `FORK: ${o.log.checkpointUrl} signs ${at(next)}, smaller than ${was}: a log never shrinks`;
    case 'two-roots':
      return `FORK: ${o.log.checkpointUrl} signs size ${next.size} with root ${hex(next.root)}, but size ${seen.size} had root ${hex(seen.root)} when seen at ${seen.seenAt}`;
    case 'proof-fails':
      return `FORK: ${o.log.consistencyUrl(seen.size, next.size)} does not prove ${at(next)} an extension of ${was} (RFC 9162 §2.1.4.2)`;
  }
}

/** The arguments of `vigil monitor`, checked; a UsageError names the first that is wrong. */
export async function parseMonitorArgs(args: string[]): Promise<MonitorOptions | 'help'> {
  const { positionals, values } = parseCommand(args, { key: { type: 'string' }, state: { type: 'string' }, follow: { type: 'boolean' }, interval: { type: 'string' }, withheld: { type: 'string' }, progress: { type: 'boolean' } }, 2);
  if (values.help === true) return 'help';
  const [base, org] = positionals;
  if (base === undefined || org === undefined) throw new UsageError('monitor needs a base URL and an org');
  if (values.key === undefined || values.state === undefined) throw new UsageError('monitor needs --key and --state');
  const slug = orgSlug.safeParse(org);
  if (!slug.success) throw new UsageError(`<org>: ${slug.error.issues[0]?.message ?? 'not an org slug'}`);
  if (values.interval !== undefined && values.follow !== true) throw new UsageError('--interval applies to --follow');
  const seconds = values.interval === undefined ? DEFAULT_INTERVAL_SECONDS : Number(values.interval);
  if (!(seconds > 0 && seconds <= 86_400)) throw new UsageError(`--interval: ${values.interval} is not a number of seconds above 0 and at most 86400`);
  if (values.withheld !== undefined && values.follow !== true) throw new UsageError('--withheld applies to --follow');
  if (values.progress === true && values.follow !== true) throw new UsageError('--progress applies to --follow');
  const withheldPolls = values.withheld === undefined ? DEFAULT_WITHHELD_POLLS : Number(values.withheld);
  if (!(Number.isInteger(withheldPolls) && withheldPolls >= 1 && withheldPolls <= 10_000)) throw new UsageError(`--withheld: ${values.withheld} is not a whole number of polls from 1 to 10000`);
  return { log: new PublicLog(baseUrl(base), slug.data), key: await verifierKeyOf(values.key), statePath: values.state, follow: values.follow === true, intervalSeconds: seconds, withheldPolls, progress: values.progress === true };
}

/** The base URL without a trailing slash; http or https, no query or fragment. */
function baseUrl(text: string): string {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new UsageError(`<base url>: ${text} is not a URL (e.g. https://vigil.example)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError(`<base url>: ${text} is not an http or https URL`);
  if (url.search !== '' || url.hash !== '') throw new UsageError(`<base url>: ${text} has a query or fragment; give the server's base URL`);
  return url.href.replace(/\/+$/, '');
}

