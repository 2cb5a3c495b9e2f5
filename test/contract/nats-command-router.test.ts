import { afterAll, describe, it } from 'vitest';
import { connect } from '@nats-io/transport-node';
import type { CommandRouter } from '../../src/bus/command-router.js';
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
    // The router's own node owns the orgs (decided without a round trip), and another node does
    // (every command over NATS: the requests on one connection, the serving on another).
    runCommandRouterContract(`NatsCommandRouter (${nodes} node${nodes > 1 ? 's' : ''}, owner on the requesting node)`, ['many-owners'], async () => {
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
    runCommandRouterContract(`NatsCommandRouter (${nodes} node${nodes > 1 ? 's' : ''}, owner on another node)`, ['many-owners'], async () => {
      servers ??= startNats({ nodes });
      const { urls } = await servers;
      const prefix = `t${++cases}.cmd`;
      const front = await connect({ servers: [urls[0]!] });
      const back = await connect({ servers: [urls[urls.length - 1]!] });
      const requester = NatsCommandRouter.open(front, { prefix, log: silentLogger() });
      const owner = NatsCommandRouter.open(back, { prefix, log: silentLogger() });
      // Requests made after a serve go once its subscription has crossed the cluster's routes (as
      // in a running cluster, where nodes serve long before): a command published before that
      // meets no interest and is routed again, possibly after later ones (README: the order
      // weakens only while an owner appears). Requests keep their order through the wait.
      let ready: Promise<unknown> = Promise.resolve();
      const router: CommandRouter = {
        capabilities: requester.capabilities,
        serve: (handler, options) => {
          const serving = owner.serve(handler, options);
          ready = back.flush().then(() => new Promise((resolve) => setTimeout(resolve, 250)));
          return serving;
        },
        request: (command, options) => ready.then(() => requester.request(command, options)),
        async close() {
          await requester.close();
          await owner.close();
        },
      };
      return {
        router,
        async dispose() {
          await router.close();
          await front.close();
          await back.close();
        },
      };
    });
  }
} else {
  describe('NatsCommandRouter contract', () => {
    it.skip('needs nats-server (skipped loudly above)', () => {});
  });
}
