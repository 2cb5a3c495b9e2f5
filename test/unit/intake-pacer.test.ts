import { describe, expect, it } from 'vitest';
import { IntakePacer, type IntakeStep } from '../../src/http/intake-pacer.js';

const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** An ingest of `count` events whose slices log `org:from-to` and whose answers come when `answer()` is called. */
function ingest(pacer: IntakePacer, trace: string[], org: string, count: number, answers: (() => void)[] = []): IntakeStep {
  let from = 0;
  return () => {
    const to = Math.min(count, from + pacer.sliceEvents);
    trace.push(`${org}:${from}-${to}`);
    const answered = new Promise<void>((resolve) => answers.push(resolve));
    const slice = { sent: to - from, answered, last: to === count };
    from = to;
    return slice;
  };
}

describe('IntakePacer', () => {
  it('runs one slice of every org with work per turn, round robin, each org in order', async () => {
    const pacer = new IntakePacer(100, 10_000, 100_000);
    const trace: string[] = [];
    pacer.pace('a', ingest(pacer, trace, 'a', 300), 300);
    pacer.pace('a', ingest(pacer, trace, 'a', 150), 150);
    pacer.pace('b', ingest(pacer, trace, 'b', 100), 100);
    expect(trace).toEqual([]); // nothing in the turn that queued it
    await turn();
    expect(trace).toEqual(['a:0-100', 'b:0-100']);
    await turn();
    expect(trace.slice(2)).toEqual(['a:100-200']);
    for (let i = 0; i < 4; i++) await turn();
    expect(trace.slice(3)).toEqual(['a:200-300', 'a:0-100', 'a:100-150']);
    expect(pacer.waiting).toBe(0);
  });

  it('runs a one-slice ingest at once when its org has nothing queued, and queues it behind the org otherwise', async () => {
    const pacer = new IntakePacer(100, 10_000, 100_000);
    const trace: string[] = [];
    pacer.pace('a', ingest(pacer, trace, 'a', 50), 50, true);
    expect(trace).toEqual(['a:0-50']);
    pacer.pace('a', ingest(pacer, trace, 'a', 200), 200);
    pacer.pace('a', ingest(pacer, trace, 'a', 10), 10, true);
    expect(trace).toEqual(['a:0-50']); // behind the 200, so its events stay in order
    for (let i = 0; i < 3; i++) await turn();
    expect(trace).toEqual(['a:0-50', 'a:0-100', 'a:100-200', 'a:0-10']);
  });

  it('holds an org at windowEvents unanswered, and goes on as answers come; other orgs are not held', async () => {
    const pacer = new IntakePacer(100, 200, 100_000);
    const trace: string[] = [];
    const answersA: (() => void)[] = [];
    pacer.pace('a', ingest(pacer, trace, 'a', 500, answersA), 500);
    pacer.pace('b', ingest(pacer, trace, 'b', 300), 300);
    for (let i = 0; i < 5; i++) await turn();
    expect(trace.filter((t) => t.startsWith('a'))).toEqual(['a:0-100', 'a:100-200']);
    expect(trace.filter((t) => t.startsWith('b'))).toEqual(['b:0-100', 'b:100-200']); // b at its window too
    answersA[0]!();
    for (let i = 0; i < 3; i++) await turn();
    expect(trace.filter((t) => t.startsWith('a'))).toEqual(['a:0-100', 'a:100-200', 'a:200-300']);
    answersA[1]!();
    answersA[2]!();
    for (let i = 0; i < 5; i++) await turn();
    expect(trace.filter((t) => t.startsWith('a'))).toEqual(['a:0-100', 'a:100-200', 'a:200-300', 'a:300-400', 'a:400-500']);
  });

  it('drops a step that ends (null) or throws, and runs the org\'s next ingest', async () => {
    const pacer = new IntakePacer(100, 10_000, 100_000);
    const trace: string[] = [];
    pacer.pace('a', () => {
      trace.push('refused');
      return null;
    }, 5);
    pacer.pace('a', () => {
      throw new Error('broken');
    }, 5);
    pacer.pace('a', ingest(pacer, trace, 'a', 100), 100);
    for (let i = 0; i < 3; i++) await turn();
    expect(trace).toEqual(['refused', 'a:0-100']);
    expect(pacer.waiting).toBe(0);
  });

  it('admits an ingest while the org\'s events waiting (queued and unanswered) stay within the bound; any when none wait', async () => {
    const pacer = new IntakePacer(100, 200, 500);
    const trace: string[] = [];
    const answers: (() => void)[] = [];
    expect(pacer.admits('a', 5_000)).toBe(true); // nothing of the org waits
    pacer.pace('a', ingest(pacer, trace, 'a', 400, answers), 400);
    expect(pacer.admits('a', 100)).toBe(true);
    expect(pacer.admits('a', 101)).toBe(false);
    expect(pacer.admits('b', 500)).toBe(true);
    for (let i = 0; i < 4; i++) await turn();
    // 200 sent (the window), 200 queued: still 400 waiting.
    expect(trace).toEqual(['a:0-100', 'a:100-200']);
    expect(pacer.admits('a', 101)).toBe(false);
    answers[0]!();
    answers[1]!();
    for (let i = 0; i < 4; i++) await turn();
    expect(trace).toEqual(['a:0-100', 'a:100-200', 'a:200-300', 'a:300-400']);
    expect(pacer.admits('a', 300)).toBe(true); // 200 unanswered
    expect(pacer.admits('a', 301)).toBe(false);
  });
});
