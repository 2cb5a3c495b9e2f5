import { describe, expect, it } from 'vitest';
import type { CommandHandler, CommandRouter, RouterCapability } from '../../src/bus/command-router.js';
import type { OrgCommand, OrgReply } from '../../src/bus/messages.js';
import { VigilError } from '../../src/errors.js';

export interface CommandRouterHarness {
  router: CommandRouter;
  dispose(): Promise<void>;
}

const ingest = (org: string, n: number): OrgCommand => ({
  type: 'event.ingest',
  org,
  event: { agent_id: `a${n}`, event_type: 'output_generated', payload: { n }, dti: null, source: 'self', actor: null },
});

const numberOf = (command: OrgCommand): number => (command.type === 'event.ingest' ? (command.event.payload.n as number) : -1);

/** A handler that answers each command with its number, and records which it took. */
function recording(taken: number[], tag = 0): CommandHandler {
  return (command) => {
    taken.push(numberOf(command));
    return Promise.resolve({ ok: true, value: { event_id: numberOf(command), tag } } as unknown as OrgReply);
  };
}

const valueOf = (reply: OrgReply): unknown => (reply.ok ? reply.value : reply.code);

/**
 * The CommandRouter contract (src/bus/command-router.ts). Every adapter runs it, declaring its
 * capabilities: a case for a capability the adapter lacks is reported as skipped, never dropped.
 */
export function runCommandRouterContract(name: string, capabilities: readonly RouterCapability[], make: () => Promise<CommandRouterHarness>): void {
  const has = (c: RouterCapability): boolean => capabilities.includes(c);
  const soon = (): number => Date.now() + 100;

  /** Runs a case against a fresh harness, disposed of whatever happens. */
  const withHarness = (body: (h: CommandRouterHarness) => Promise<void>) => async (): Promise<void> => {
    const h = await make();
    try {
      await body(h);
    } finally {
      await h.dispose();
    }
  };

  describe(`CommandRouter contract: ${name}`, () => {
    it('declares the capabilities it is tested for', withHarness(async (h) => {
      expect([...h.router.capabilities].sort()).toEqual([...capabilities].sort());
    }));

    it('routes commands to the owner in the order sent and passes its replies on', withHarness(async (h) => {
      const taken: number[] = [];
      h.router.serve(recording(taken), { owns: () => true });
      const replies = await Promise.all(Array.from({ length: 50 }, (_, n) => h.router.request(ingest('org', n))));
      expect(taken).toEqual(Array.from({ length: 50 }, (_, n) => n));
      expect(replies.map(valueOf)).toEqual(taken.map((n) => ({ event_id: n, tag: 0 })));
    }));

    it('passes the caller\'s connection to the handler, which refuses an abandoned command itself', withHarness(async (h) => {
      const seen: boolean[] = [];
      h.router.serve((_command, options) => {
        seen.push(options?.abandoned?.aborted === true);
        return Promise.resolve({ ok: false, code: 'unavailable', message: 'gone' });
      }, { owns: () => true });
      await h.router.request(ingest('org', 1), { abandoned: { aborted: true } });
      expect(seen).toEqual([true]);
    }));

    it('answers unavailable when no owner serves the org by the deadline, and decides nothing', withHarness(async (h) => {
      const taken: number[] = [];
      h.router.serve(recording(taken), { owns: (org) => org === 'mine' });
      expect(await h.router.request(ingest('theirs', 1), { deadline: soon() })).toMatchObject({ ok: false, code: 'unavailable' });
      expect(taken).toEqual([]);
    }));

    it('waits, within the deadline, for an owner that starts serving', withHarness(async (h) => {
      const taken: number[] = [];
      const reply = h.router.request(ingest('late', 7), { deadline: Date.now() + 10_000 });
      setTimeout(() => h.router.serve(recording(taken), { owns: () => true }), 50);
      expect(valueOf(await reply)).toEqual({ event_id: 7, tag: 0 });
      expect(taken).toEqual([7]);
    }));

    it('keeps the order sent for requests that waited for an owner and requests sent once it serves', withHarness(async (h) => {
      const taken: number[] = [];
      const first = h.router.request(ingest('o', 1), { deadline: Date.now() + 10_000 });
      await new Promise((resolve) => setTimeout(resolve, 30));
      h.router.serve(recording(taken), { owns: () => true });
      const second = h.router.request(ingest('o', 2));
      await Promise.all([first, second]);
      expect(taken).toEqual([1, 2]);
    }));

    it('rejects the request when the handler throws (a broken invariant, not a refusal)', withHarness(async (h) => {
      h.router.serve(() => Promise.reject(new Error('handler bug')), { owns: () => true });
      await expect(h.router.request(ingest('o', 1))).rejects.toThrow('handler bug');
    }));

    it('throws a VigilError the handler throws to the requester with its code and Retry-After (an owner\'s 503 is the requester\'s 503)', withHarness(async (h) => {
      h.router.serve(() => Promise.reject(new VigilError('unavailable', 'this node\'s copy trails; try again', undefined, { retryAfterSeconds: 1 })), { owns: () => true });
      const thrown = await h.router.request(ingest('o', 1)).then(() => null, (error: unknown) => error);
      expect(thrown).toBeInstanceOf(VigilError);
      expect(thrown).toMatchObject({ code: 'unavailable', message: 'this node\'s copy trails; try again', retryAfterSeconds: 1 });
    }));

    it('stops routing to a handler that stopped serving', withHarness(async (h) => {
      const taken: number[] = [];
      const serving = h.router.serve(recording(taken), { owns: () => true });
      await h.router.request(ingest('o', 1));
      serving.stop();
      expect(await h.router.request(ingest('o', 2), { deadline: soon() })).toMatchObject({ ok: false, code: 'unavailable' });
      expect(taken).toEqual([1]);
    }));

    it.skipIf(!has('many-owners'))('many owners: each org goes to the handler that owns it', withHarness(async (h) => {
      const left: number[] = [];
      const right: number[] = [];
      h.router.serve(recording(left, 1), { owns: (org) => org < 'm' });
      h.router.serve(recording(right, 2), { owns: (org) => org >= 'm' });
      const replies = await Promise.all([h.router.request(ingest('alpha', 1)), h.router.request(ingest('zulu', 2)), h.router.request(ingest('bravo', 3))]);
      expect(replies.map(valueOf)).toEqual([{ event_id: 1, tag: 1 }, { event_id: 2, tag: 2 }, { event_id: 3, tag: 1 }]);
      // Different orgs: no order between them (an owner's subscription may reach the server after the first request).
      expect([...left].sort()).toEqual([1, 3]);
      expect(right).toEqual([2]);
    }));

    it.skipIf(!has('many-owners'))('many owners: a command that reached a node which lost the org is routed again to the new owner', withHarness(async (h) => {
      let ownedByOld = true;
      const taken: number[] = [];
      // The old owner's routing entry still claims the org, but the handler knows it lost it.
      h.router.serve((command) => {
        ownedByOld = false;
        return Promise.resolve({ ok: false, code: 'not_owner', message: `lost ${command.org}` });
      }, { owns: () => ownedByOld });
      h.router.serve(recording(taken, 2), { owns: () => !ownedByOld });
      const reply = await h.router.request(ingest('moving', 5), { deadline: Date.now() + 10_000 });
      expect(valueOf(reply)).toEqual({ event_id: 5, tag: 2 });
      expect(taken).toEqual([5]);
    }));

    it('never shows not_owner to the caller: with no other owner it is unavailable at the deadline', withHarness(async (h) => {
      h.router.serve(() => Promise.resolve({ ok: false, code: 'not_owner', message: 'lost it' }), { owns: () => true });
      expect(await h.router.request(ingest('o', 1), { deadline: soon() })).toMatchObject({ ok: false, code: 'unavailable' });
    }));

    it('refuses requests once closed', withHarness(async (h) => {
      h.router.serve(recording([]), { owns: () => true });
      await h.router.close();
      expect(await h.router.request(ingest('o', 1))).toMatchObject({ ok: false, code: 'unavailable' });
    }));
  });
}
