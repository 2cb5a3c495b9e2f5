import { afterAll, describe, it } from 'vitest';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { jetstreamManager } from '@nats-io/jetstream';
import type { LedgerLog } from '../../src/bus/ledger-log.js';
import { JetStreamLedgerLog } from '../../src/nats/jetstream-ledger-log.js';
import { silentLogger } from '../support/logs.js';
import { natsAvailable, startNats, type NatsServers } from '../support/nats.js';
import { runLedgerLogContract } from './ledger-log.case.js';

/**
 * The LedgerLog contract on real nats-servers: one server set per cluster size for the whole
 * file (started on first use), and per case its own stream and subjects, deleted afterwards.
 */
const sizes = [
  { nodes: 1, replicas: 1 },
  { nodes: 3, replicas: 3 },
] as const;

let cases = 0;

if (natsAvailable('JetStreamLedgerLog contract')) {
  for (const { nodes, replicas } of sizes) {
    let servers: Promise<NatsServers> | null = null;
    afterAll(async () => {
      await (await servers)?.stop();
    });
    runLedgerLogContract(`JetStreamLedgerLog (${nodes} node${nodes > 1 ? 's' : ''}, R${replicas})`, [], async () => {
      servers ??= startNats({ nodes });
      const { urls } = await servers;
      const n = ++cases;
      const options = { stream: `LEDGER_T${n}`, subjectPrefix: `t${n}.ledger`, replicas, log: silentLogger() };
      const nc = await connect({ servers: urls });
      const log = await JetStreamLedgerLog.open(nc, options);
      const others: LedgerLog[] = [];
      return {
        log,
        reopen: async () => {
          const other = await JetStreamLedgerLog.connect(urls, options);
          others.push(other);
          return other;
        },
        async dispose() {
          for (const other of others) await other.close();
          await log.close();
          await deleteStream(nc, options.stream);
          await nc.close();
        },
      };
    });
  }
} else {
  describe('JetStreamLedgerLog contract', () => {
    it.skip('needs nats-server (skipped loudly above)', () => {});
  });
}

async function deleteStream(nc: NatsConnection, stream: string): Promise<void> {
  const jsm = await jetstreamManager(nc);
  await jsm.streams.delete(stream);
}
