import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/receiver.js';
import { describeModes, type ModeServers } from '../support/modes.js';
import { call, removeDir, spawnServer, tempDir, type ServerProcess } from '../support/server.js';

/**
 * Issue 13, item 10: a reviewer's release vouches for the agent. It used to leave an agent held
 * once at hold, so each of its next clean events was held again, each with a review item and a
 * `gate.hold` webhook ("clean output").
 */
const ENV = { VIGIL_WEBHOOK_ALLOW_PRIVATE: '1', VIGIL_WEBHOOK_RETRY_SCHEDULE: '0.2,0.2,0.2,0.2,0.2' };
const severe = (agent_id: string) => ({ agent_id, event_type: 'monitoring_state_change', payload: { enabled: false } });
const clean = (agent_id: string) => ({ agent_id, event_type: 'output_generated', payload: {} });

describeModes('review vouch', (m) => {
  describe('a release over HTTP', () => {
    let server: ModeServers;
    let receiver: Receiver;
    let webhookId: string;

    beforeAll(async () => {
      server = await m.start(ENV);
      receiver = await startReceiver();
      const created = await call(server.ownerUrl, 'POST', '/webhooks', { body: { url: receiver.url(), events: ['gate.hold', 'gate.alert', 'gate.collapse'] } });
      expect(created.status).toBe(200);
      webhookId = created.body.id;
    });
    afterAll(async () => {
      await server.close();
      await receiver.close();
    });

    const post = async (path: string, body: unknown) => {
      const res = await call(server.url, 'POST', path, { body });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    // Deliveries are stored before the request that caused them is answered: no waiting needed.
    const gateDeliveries = async (): Promise<string[]> =>
      (await call(server.ownerUrl, 'GET', `/webhooks/${webhookId}/deliveries`)).body.map((d: { event: string }) => d.event);

    it('after one severe event and its release, fourteen clean events pass: no review item, no gate webhook', async () => {
      expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'bot', name: 'Bot' } })).status).toBe(201);
      const held = await post('/events/', severe('bot'));
      expect(held).toMatchObject({ gate_status: 'hold', requires_human_review: true, reason: 'monitoring switched off' });
      expect((await call(server.readUrl, 'GET', '/reviews?agent_id=bot')).body.map((i: { action_id: number }) => i.action_id)).toEqual([held.action_id]);
      expect(await gateDeliveries()).toEqual(['gate.hold']);

      const released = await post(`/reviews/${held.action_id}`, { outcome: 'released', note: 'checked: maintenance window' });
      expect(released).toMatchObject({ held_gate: 'hold', gate_status: 'pass', bii: 0.75 });
      expect((await call(server.readUrl, 'GET', '/agents/bot')).body).toMatchObject({ gate: 'pass', bii: 0.75 });

      for (let i = 1; i <= 14; i++) {
        const answer = await post('/events/', clean('bot'));
        expect(answer, `clean event ${i}`).toMatchObject({ gate_status: 'pass', requires_human_review: false });
      }
      expect((await call(server.readUrl, 'GET', '/reviews?agent_id=bot')).body).toEqual([]);
      expect(await gateDeliveries()).toEqual(['gate.hold']);

      // A new risky signal holds it again at once.
      const again = await post('/events/', severe('bot'));
      expect(again).toMatchObject({ gate_status: 'hold', requires_human_review: true });
      expect((await call(server.readUrl, 'GET', '/reviews?agent_id=bot')).body.map((i: { action_id: number }) => i.action_id)).toEqual([again.action_id]);
      expect((await gateDeliveries()).sort()).toEqual(['gate.hold', 'gate.hold']);
    });
  });

  describe('the rule after a restart', () => {
    m.embeddedOnly('kill -9 and SIGTERM of one `vigil serve` process, replaying its own ledger or checkpoints')('replays to the same gate and BII, and to the same decisions, from the ledger alone and from a checkpoint', async () => {
      const dir = tempDir();
      let child: ServerProcess | null = null;
      const spawn = async () => (child = await spawnServer(dir, ENV));
      const stop = async (signal: 'SIGKILL' | 'SIGTERM') => {
        child!.child.kill(signal);
        await child!.exited;
        child = null;
      };
      const post = async (path: string, body: unknown) => {
        const res = await call(child!.url, 'POST', path, { body });
        expect(res.status, res.text).toBe(200);
        return res.body;
      };
      const view = async () => (await call(child!.url, 'GET', '/agents/k')).body;
      try {
        await spawn();
        expect((await call(child!.url, 'POST', '/agents/', { body: { agent_id: 'k', name: 'K' } })).status).toBe(201);
        const first = await post('/events/', severe('k')); // hold
        const second = await post('/events/', severe('k')); // a newer incident: alert
        const cleanAfter = await post('/events/', clean('k')); // held only because the agent is
        expect([first.gate_status, second.gate_status, cleanAfter.gate_status]).toEqual(['hold', 'alert', 'alert']);
        const live = await view();
        await stop('SIGKILL'); // no checkpoint: the next start replays the ledger

        await spawn();
        expect(await view()).toEqual(live);
        // The replayed writer still knows the newer incident: releasing the first vouches for nothing.
        expect(await post(`/reviews/${first.action_id}`, { outcome: 'released' })).toMatchObject({ gate_status: 'alert', bii: live.bii });
        const afterFirst = await view();
        expect(afterFirst).toMatchObject({ gate: 'alert', bii: live.bii });
        await stop('SIGTERM'); // a clean stop saves checkpoints

        await spawn();
        expect(await view()).toEqual(afterFirst);
        // …and that the newer incident is open: releasing the clean event after it vouches for nothing either.
        expect(await post(`/reviews/${cleanAfter.action_id}`, { outcome: 'released' })).toMatchObject({ gate_status: 'alert', bii: live.bii });
        expect(await post(`/reviews/${second.action_id}`, { outcome: 'released' })).toMatchObject({ gate_status: 'pass', bii: 0.75 });
        const vouched = await view();
        expect(vouched).toMatchObject({ gate: 'pass', bii: 0.75 });
        await stop('SIGKILL');

        await spawn();
        expect(await view()).toEqual(vouched);
        expect(await post('/events/', clean('k'))).toMatchObject({ gate_status: 'pass', requires_human_review: false });
        expect((await call(child!.url, 'GET', '/reviews?agent_id=k')).body).toEqual([]);
        expect((await call(child!.url, 'GET', '/audit/k/verify')).body.ok).toBe(true);
      } finally {
        if (child !== null) await stop('SIGTERM');
        removeDir(dir);
      }
    });
  });
});
