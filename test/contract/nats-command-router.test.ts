import { afterAll, describe, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import { NatsCommandRouter } from '../../src/nats/nats-command-router.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { runCommandRouterContract } from './command-router.case.js';

/**
 * The CommandRouter contract on real nats-servers: one server set per cluster size for the whole
 * file (started on first use), and per case its own subject prefix and connection.
 */
let cases = 0;

if (natsAvailable('NatsCommandRouter contract')) {
  for (const nodes of [1, 3] as const) {
    let servers: Promise<NatsServers> | null = null;
    afterAll(async () => {
      await (await servers)?.stop();
    });
    runCommandRouterContract(`NatsCommandRouter (${nodes} node${nodes > 1 ? 's' : ''})`, ['many-owners'], async () => {
      servers ??= startNats({ nodes });
      const { urls } = await servers;
      const nc = await connect({ servers: urls });
      const router = NatsCommandRouter.open(nc, { prefix: `t${++cases}.cmd`, log: silentLogger() });
      return {
        router,
        async dispose() {
          await router.close();
          await nc.close();
        },
      };
    });
  }
} else {
  describe('NatsCommandRouter contract', () => {
    it.skip('needs nats-server (skipped loudly above)', () => {});
  });
}
