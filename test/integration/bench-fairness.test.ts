import { describe, expect, it } from 'vitest';
import { runFairness } from '../../bench/fairness.js';

/**
 * The fairness scenario measures what it says (STYLE habit 11), against a real Vigil process:
 * every probe request is one of org B's events, acknowledged, and B's ids run on from 1 across
 * every probe (the scenario throws otherwise, so nothing else writes to B and the probe never
 * measures a refusal); org A's flood is acknowledged, none refused; the ratio is of the p99s.
 */
describe('bench: fairness scenario', () => {
  it('probes org B alone and under org A\'s flood, each request an acknowledged event of B', async () => {
    const lines: string[] = [];
    const f = await runFairness({ rounds: 1, seconds: 1, warmupSeconds: 1, log: (line) => lines.push(line) });
    expect(f.rounds).toHaveLength(1);
    const [round] = f.rounds;
    expect(round!.alone.requests).toBeGreaterThan(0);
    expect(round!.flooded.requests).toBeGreaterThan(0);
    expect(round!.flood.events).toBeGreaterThan(0);
    expect(f.probeErrors + f.floodErrors).toBe(0);
    expect(round!.alone.consecutive && round!.flooded.consecutive).toBe(true);
    expect(f.ratio).toBe(Math.round((round!.flooded.p99 / round!.alone.p99) * 100) / 100);
    expect(lines).toHaveLength(1);
  }, 120_000);
});
