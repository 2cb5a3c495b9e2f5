import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connect, createInbox, type NatsConnection } from '@nats-io/transport-node';
import type { CommandHandler } from '../../src/bus/command-router.js';
import type { OrgCommand, OrgReply } from '../../src/bus/messages.js';
import { decodeAnswer, encodeRequest } from '../../src/nats/command-wire.js';
import { NatsCommandRouter, OwnerLostError } from '../../src/nats/nats-command-router.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';

/**
 * NatsCommandRouter beyond the contract, as in a cluster: each "node" is its own router on its own
 * connection to its own server of a 3-node nats cluster, so commands cross the cluster's routes.
 */
const run = natsAvailable('NatsCommandRouter behaviour') ? describe : describe.skip;

const ingest = (org: string, n: number): OrgCommand => ({
  type: 'event.ingest',
  org,
  event: { agent_id: `a${n}`, event_type: 'output_generated', payload: { n }, dti: null, source: 'self', actor: null },
});
const numberOf = (command: OrgCommand): number => (command.type === 'event.ingest' ? (command.event.payload.n as number) : -1);
const ok = (command: OrgCommand, tag: string): OrgReply => ({ ok: true, value: { event_id: numberOf(command), tag } }) as unknown as OrgReply;
const valueOf = (reply: OrgReply): unknown => (reply.ok ? reply.value : reply.code);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Short heartbeats so a lost owner is noticed in well under a second. */
const timings = { heartbeatMs: 100 };

run('NatsCommandRouter on a 3-node nats cluster', () => {
  let servers: NatsServers;
  let prefixes = 0;
  const open: { router: NatsCommandRouter; nc: NatsConnection }[] = [];

  beforeAll(async () => {
    servers = await startNats({ nodes: 3 });
  }, 60_000);
  afterAll(async () => {
    for (const { router, nc } of open) {
      await router.close();
      if (!nc.isClosed()) await nc.close();
    }
    await servers?.stop();
  });

  /** One router per node, node i connected to nats server i only; all of a case share a prefix. */
  async function nodes(count: number): Promise<{ router: NatsCommandRouter; nc: NatsConnection }[]> {
    const prefix = `it${++prefixes}.cmd`;
    const made = [];
    for (let i = 0; i < count; i++) {
      const nc = await connect({ servers: [servers.urls[i]!] });
      const node = { router: NatsCommandRouter.open(nc, { prefix, log: silentLogger() }, timings), nc };
      open.push(node);
      made.push(node);
    }
    return made;
  }

  it('routes each org to the node owning it, from any node', async () => {
    const [a, b, front] = await nodes(3);
    const taken: Record<string, number[]> = { a: [], b: [] };
    const handler = (tag: 'a' | 'b'): CommandHandler => (command) => {
      taken[tag]!.push(numberOf(command));
      return Promise.resolve(ok(command, tag));
    };
    a!.router.serve(handler('a'), { owns: (org) => org < 'm' });
    b!.router.serve(handler('b'), { owns: (org) => org >= 'm' });
    await sleep(100); // interest crosses the cluster's routes
    const replies = await Promise.all([
      front!.router.request(ingest('alpha', 1)),
      front!.router.request(ingest('zulu', 2)),
      a!.router.request(ingest('yankee', 3)),
      b!.router.request(ingest('bravo', 4)),
    ]);
    expect(replies.map(valueOf)).toEqual([{ event_id: 1, tag: 'a' }, { event_id: 2, tag: 'b' }, { event_id: 3, tag: 'b' }, { event_id: 4, tag: 'a' }]);
    // Different callers: no order between their commands.
    expect({ a: taken.a!.sort(), b: taken.b!.sort() }).toEqual({ a: [1, 4], b: [2, 3] });
  });

  it('moves an org from one node to the other under load: each command decided once, in order, not_owner never shown', async () => {
    const [a, b, front] = await nodes(3);
    let owner: 'a' | 'b' | null = 'a';
    const taken: number[] = [];
    const by: Record<string, number> = { a: 0, b: 0 };
    let notOwner = 0;
    const handler = (tag: 'a' | 'b'): CommandHandler => (command) => {
      if (owner !== tag) {
        notOwner++;
        return Promise.resolve({ ok: false, code: 'not_owner', message: `${tag} lost ${command.org}` });
      }
      taken.push(numberOf(command));
      by[tag]!++;
      return Promise.resolve(ok(command, tag));
    };
    // The routing entries lag the handlers, as leases do: for a while both or neither claim the org.
    let aClaims = true;
    let bClaims = false;
    a!.router.serve(handler('a'), { owns: () => aClaims });
    b!.router.serve(handler('b'), { owns: () => bClaims });
    await sleep(100);
    const replies: Promise<OrgReply>[] = [];
    for (let n = 0; n < 60; n++) {
      replies.push(front!.router.request(ingest('moving', n), { deadline: Date.now() + 10_000 }));
      if (n === 20) owner = null; // a loses its lease; its routing entry still claims the org
      if (n === 30) {
        aClaims = false; // and a gap with no owner at all
        await sleep(300);
        bClaims = true;
      }
      if (n === 40) owner = 'b';
      await sleep(5);
    }
    const values = (await Promise.all(replies)).map(valueOf);
    expect(values.every((v) => typeof v === 'object')).toBe(true);
    expect(taken).toEqual(Array.from({ length: 60 }, (_, n) => n));
    expect(by.a! + by.b!).toBe(60);
    expect(by.a).toBeGreaterThan(0);
    expect(by.b).toBeGreaterThan(0);
    expect(notOwner).toBeGreaterThan(0); // the handover was met, not slept through
  });

  it('keeps the order sent when a later command of the org learns first that it must wait', async () => {
    const [a, b, front] = await nodes(3);
    let moved = false;
    const taken: number[] = [];
    // a lost the org but its routing entry lags; its not_owner for command 1 is slow to come back.
    a!.router.serve(async (command) => {
      if (numberOf(command) === 1) await sleep(150);
      return { ok: false, code: 'not_owner', message: 'a lost it' };
    }, { owns: () => !moved });
    b!.router.serve((command) => {
      taken.push(numberOf(command));
      return Promise.resolve(ok(command, 'b'));
    }, { owns: () => moved });
    await sleep(100);
    const replies = [1, 2, 3].map((n) => front!.router.request(ingest('org', n), { deadline: Date.now() + 5_000 }));
    setTimeout(() => (moved = true), 50);
    expect((await Promise.all(replies)).map(valueOf)).toEqual([1, 2, 3].map((n) => ({ event_id: n, tag: 'b' })));
    expect(taken).toEqual([1, 2, 3]);
  });

  it('once a waiting request is answered, the org\'s requests under steady load go at once again, not one at a time', async () => {
    const [a, front] = await nodes(2);
    const taken: number[] = [];
    let deciding = 0;
    let most = 0;
    // Each command takes 20 ms to decide, as a ledger append does: concurrency shows in `most`.
    const handler: CommandHandler = async (command) => {
      taken.push(numberOf(command));
      most = Math.max(most, ++deciding);
      await sleep(20);
      deciding--;
      return ok(command, 'a');
    };
    await sleep(100);
    // A request every 2 ms before any owner serves (they wait) and for a while after it does.
    const replies: Promise<OrgReply>[] = [];
    for (let n = 0; n < 150; n++) {
      replies.push(front!.router.request(ingest('busy', n), { deadline: Date.now() + 10_000 }));
      if (n === 10) a!.router.serve(handler, { owns: () => true });
      if (n === 75) most = 0; // the second half: long after the owner appeared
      await sleep(2);
    }
    expect((await Promise.all(replies)).map(valueOf).every((v) => typeof v === 'object')).toBe(true);
    expect(taken).toEqual(Array.from({ length: 150 }, (_, n) => n));
    // One at a time (each request waiting for the one before it to be answered) would keep this at 1.
    expect(most).toBeGreaterThan(3);
  });

  it('a request for an org its own node owns goes to that node\'s handler without crossing NATS, in order with the rest', async () => {
    const [a, b] = await nodes(2);
    const taken: string[] = [];
    a!.router.serve((command) => {
      taken.push(`a${numberOf(command)}`);
      return Promise.resolve(ok(command, 'a'));
    }, { owns: (org) => org === 'mine' });
    b!.router.serve((command) => {
      taken.push(`b${numberOf(command)}`);
      return Promise.resolve(ok(command, 'b'));
    }, { owns: (org) => org === 'theirs' });
    await sleep(100);
    // Taken before the request's first await: no round trip happened.
    const local = a!.router.request(ingest('mine', 1));
    expect(taken).toEqual(['a1']);
    const replies = await Promise.all([local, a!.router.request(ingest('theirs', 2)), a!.router.request(ingest('mine', 3))]);
    expect(replies.map(valueOf)).toEqual([{ event_id: 1, tag: 'a' }, { event_id: 2, tag: 'b' }, { event_id: 3, tag: 'a' }]);
    expect(taken).toEqual(['a1', 'a3', 'b2']);
  });

  it('the requests of one turn leave as one message per partition, their answers come back packed, and order holds', async () => {
    const [a, front, raw] = await nodes(3);
    const taken: number[] = [];
    a!.router.serve(async (command) => {
      taken.push(numberOf(command));
      await sleep(5);
      return ok(command, 'a');
    }, { owns: () => true });
    let requests = 0;
    const packedAnswers: number[] = [];
    raw!.nc.subscribe(a!.router.subjectOf('packed'), { callback: () => void requests++ });
    raw!.nc.subscribe('_INBOX.>', { callback: (_error, msg) => void (msg.subject.endsWith('.batch') && packedAnswers.push(msg.data.length)) });
    await sleep(100);
    const replies = await Promise.all(Array.from({ length: 200 }, (_, n) => front!.router.request(ingest('packed', n))));
    expect(replies.map(valueOf)).toEqual(Array.from({ length: 200 }, (_, n) => ({ event_id: n, tag: 'a' })));
    expect(taken).toEqual(Array.from({ length: 200 }, (_, n) => n));
    await sleep(50);
    expect(requests).toBe(1);
    // The 200 `accepted` in one pack, the replies in a few (they settle over a few turns).
    expect(packedAnswers.length).toBeGreaterThanOrEqual(2);
    expect(packedAnswers.length).toBeLessThan(20);
  });

  it('a turn\'s requests past the server\'s max payload go in several packs, and their many answers too: every one answered, in order', async () => {
    const [a, front] = await nodes(2);
    const taken: number[] = [];
    a!.router.serve((command) => {
      taken.push(numberOf(command));
      return Promise.resolve(ok(command, 'a'));
    }, { owns: () => true });
    let messages = 0;
    // On the requester's own connection: its server has the interest at once.
    front!.nc.subscribe(a!.router.subjectOf('big'), { callback: () => void messages++ });
    await sleep(100);
    const big = (n: number): OrgCommand => {
      const command = ingest('big', n);
      if (command.type === 'event.ingest') command.event.payload = { n, pad: 'x'.repeat(2000) };
      return command;
    };
    // ~2 KB each: 1500 of them are three times a 1 MB max_payload.
    const replies = await Promise.all(Array.from({ length: 1500 }, (_, n) => front!.router.request(big(n), { deadline: Date.now() + 20_000 })));
    expect(replies.map(valueOf)).toEqual(Array.from({ length: 1500 }, (_, n) => ({ event_id: n, tag: 'a' })));
    expect(taken).toEqual(Array.from({ length: 1500 }, (_, n) => n));
    // Sent once, in a few packs within the limit: none refused by the server and sent again.
    expect(messages).toBeGreaterThanOrEqual(3);
    expect(messages).toBeLessThanOrEqual(10);
  });

  it('the owner says `accepted` before its reply even for a command decided at once (it precedes any append of the command on the owner\'s connection)', async () => {
    const [a, raw] = await nodes(2);
    a!.router.serve(async (command) => {
      if (numberOf(command) === 2) await sleep(150);
      return ok(command, 'a');
    }, { owns: () => true });
    await sleep(100);
    const heard = async (n: number): Promise<string[]> => {
      const inbox = createInbox();
      const types: string[] = [];
      const sub = raw!.nc.subscribe(inbox, { callback: (_error, msg) => void types.push(decodeAnswer(msg.data)?.t ?? '?') });
      raw!.nc.publish(a!.router.subjectOf('org'), encodeRequest({ command: ingest('org', n), deadline: Date.now() + 5_000, abandoned: false }), { reply: inbox });
      await sleep(300);
      sub.unsubscribe();
      return types;
    };
    expect(await heard(1)).toEqual(['accepted', 'reply']);
    const slow = await heard(2); // heartbeats (`working`) may come between
    expect([slow[0], slow.at(-1), slow.filter((t) => t === 'reply').length]).toEqual(['accepted', 'reply', 1]);
  });

  it('tells the owner when the caller goes away while the owner decides, so it can refuse the command', async () => {
    const [a, front] = await nodes(2);
    const seen: boolean[] = [];
    a!.router.serve(async (_command, options) => {
      seen.push(options?.abandoned?.aborted === true);
      await sleep(400); // queued behind other work; then decides, unless the caller is gone
      seen.push(options?.abandoned?.aborted === true);
      return { ok: false, code: 'unavailable', message: 'caller gone' };
    }, { owns: () => true });
    await sleep(100);
    const caller = { aborted: false };
    const reply = front!.router.request(ingest('org', 1), { abandoned: caller });
    setTimeout(() => (caller.aborted = true), 100);
    expect(await reply).toMatchObject({ ok: false, code: 'unavailable' });
    expect(seen).toEqual([false, true]);
  });

  it('an owner that took a command answers after its deadline within the grace: its reply comes; a command too close to its deadline is not taken', async () => {
    const [a, front] = await nodes(2);
    const taken: number[] = [];
    a!.router.serve(async (command) => {
      taken.push(numberOf(command));
      await sleep(400); // longer than the deadline, with heartbeats meanwhile
      return ok(command, 'a');
    }, { owns: () => true });
    await sleep(100);
    expect(valueOf(await front!.router.request(ingest('org', 1), { deadline: Date.now() + 200 }))).toEqual({ event_id: 1, tag: 'a' });
    // Under the accept margin (50 ms) left: the owner leaves it, so the requester's `unavailable` is true.
    expect(await front!.router.request(ingest('org', 2), { deadline: Date.now() + 20 })).toMatchObject({ ok: false, code: 'unavailable' });
    await sleep(100);
    expect(taken).toEqual([1]);
  });

  it('past its deadline a command is abandoned for its owner (never decided), and the requester answers by the deadline plus the grace, outcome unknown, whoever owns the org', async () => {
    const [a, front] = await nodes(2);
    const seen: boolean[][] = [];
    // A wedged writer: takes the command, keeps sending heartbeats, decides nothing for seconds.
    a!.router.serve(async (_command, options) => {
      const marks = [options?.abandoned?.aborted === true];
      seen.push(marks);
      await sleep(500);
      marks.push(options?.abandoned?.aborted === true);
      await sleep(2500);
      return { ok: false, code: 'unavailable', message: 'decided too late' };
    }, { owns: () => true });
    await sleep(100);
    for (const router of [front!.router, a!.router]) {
      const started = Date.now();
      const reply = await router.request(ingest('org', 1), { deadline: started + 300 });
      const took = Date.now() - started;
      expect(reply).toMatchObject({ ok: false, code: 'unavailable' });
      expect(reply.ok ? '' : reply.message).toContain('may have been recorded');
      expect(took).toBeGreaterThanOrEqual(1250); // the deadline (300 ms) and its grace (1 s)
      expect(took).toBeLessThan(2500); // not the owner's 3 s
    }
    // Remote and local alike: not abandoned when taken, abandoned once its deadline passed.
    expect(seen).toEqual([[false, true], [false, true]]);
  });

  it('answers unavailable at a short deadline when nobody serves, and when only non-owners do', async () => {
    const [a, front] = await nodes(2);
    let started = Date.now();
    expect(await front!.router.request(ingest('nobody', 1), { deadline: started + 200 })).toMatchObject({ ok: false, code: 'unavailable' });
    expect(Date.now() - started).toBeLessThan(400);
    const taken: number[] = [];
    a!.router.serve((command) => {
      taken.push(numberOf(command));
      return Promise.resolve(ok(command, 'a'));
    }, { owns: (org) => org === 'mine' });
    await sleep(100);
    started = Date.now();
    expect(await front!.router.request(ingest('theirs', 2), { deadline: started + 200 })).toMatchObject({ ok: false, code: 'unavailable' });
    expect(Date.now() - started).toBeLessThan(400);
    expect(taken).toEqual([]);
  });

  it('a node killed while deciding: its requester is told the owner was lost, and the org moves to another node', async () => {
    const [a, b, front] = await nodes(3);
    let aAlive = true;
    a!.router.serve(() => new Promise<OrgReply>(() => {}), { owns: () => aAlive }); // takes commands, never answers
    await sleep(100);
    const started = Date.now();
    const lost = front!.router.request(ingest('org', 1), { deadline: started + 2_000 });
    await sleep(150);
    await a!.nc.close(); // the node dies: no more heartbeats, no answer
    aAlive = false;
    await expect(lost).rejects.toBeInstanceOf(OwnerLostError);
    expect(Date.now() - started).toBeLessThan(1_000);
    b!.router.serve((command) => Promise.resolve(ok(command, 'b')), { owns: () => true });
    expect(valueOf(await front!.router.request(ingest('org', 2), { deadline: Date.now() + 5_000 }))).toEqual({ event_id: 2, tag: 'b' });
  });

  it('a node killed before taking a request: the request is re-routed to the next owner, or unavailable at its deadline', async () => {
    const [a, b, front] = await nodes(3);
    await a!.nc.close(); // a was the owner; it is gone before the request is sent
    const started = Date.now();
    expect(await front!.router.request(ingest('org', 1), { deadline: started + 300 })).toMatchObject({ ok: false, code: 'unavailable' });
    expect(Date.now() - started).toBeLessThan(500);
    const waiting = front!.router.request(ingest('org', 2), { deadline: Date.now() + 5_000 });
    await sleep(200);
    b!.router.serve((command) => Promise.resolve(ok(command, 'b')), { owns: () => true });
    expect(valueOf(await waiting)).toEqual({ event_id: 2, tag: 'b' });
  });

  it('a nats-server killed under an idle owner: requests are answered again once its client reconnects to another', async () => {
    const prefix = `it${++prefixes}.cmd`;
    // The owner on server 0 (server 1 its fallback), the requester on server 2, which stays up.
    const ownerNc = await connect({ servers: [servers.urls[0]!, servers.urls[1]!], noRandomize: true, reconnectTimeWait: 50, maxReconnectAttempts: -1 });
    const frontNc = await connect({ servers: [servers.urls[2]!] });
    const owner = NatsCommandRouter.open(ownerNc, { prefix }, timings);
    const front = NatsCommandRouter.open(frontNc, { prefix }, timings);
    open.push({ router: owner, nc: ownerNc }, { router: front, nc: frontNc });
    owner.serve((command) => Promise.resolve(ok(command, 'owner')), { owns: () => true });
    await sleep(100);
    expect(valueOf(await front.request(ingest('org', 1)))).toEqual({ event_id: 1, tag: 'owner' });
    expect(ownerNc.info?.port).toBe(Number(new URL(servers.urls[0]!).port));
    await servers.kill(0);
    try {
      expect(valueOf(await front.request(ingest('org', 2), { deadline: Date.now() + 10_000 }))).toEqual({ event_id: 2, tag: 'owner' });
      expect(ownerNc.info?.port).toBe(Number(new URL(servers.urls[1]!).port));
    } finally {
      await servers.restart(0);
    }
  }, 60_000);
});
