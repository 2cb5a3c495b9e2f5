/**
 * A PartitionLeases in a process of its own, for tests that stop it with SIGSTOP:
 * `node --import tsx test/support/lease-holder.ts <nats url> <bucket> <partitions> <leaseSeconds>`.
 * Writes JSON lines to stdout: its log, `{"t":"ready","holder"}`, `{"t":"change",gained,lost}` at
 * each ownership change, and `{"t":"owned",owned}` for each `owned` line read on stdin; `close`
 * on stdin releases everything and exits.
 */
import { createInterface } from 'node:readline';
import { connect } from '@nats-io/transport-node';
import { createLogger } from '../../src/log.js';
import { PartitionLeases } from '../../src/nats/partition-leases.js';

const [url, bucket, partitions, leaseSeconds] = process.argv.slice(2);
const write = (line: object): boolean => process.stdout.write(`${JSON.stringify(line)}\n`);

const nc = await connect({ servers: url!, reconnectTimeWait: 100, maxReconnectAttempts: -1 });
const log = createLogger('info', { write: (line: string) => process.stdout.write(line) });
const leases = await PartitionLeases.open(nc, { node: 'child', bucket: bucket!, partitions: Number(partitions), leaseSeconds: Number(leaseSeconds), replicas: 1, log });
leases.onChange((change) => write({ t: 'change', ...change }));
leases.start();
write({ t: 'ready', holder: leases.holder });

createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'owned') write({ t: 'owned', owned: leases.owned() });
  if (line === 'close') {
    void leases
      .close()
      .then(() => nc.close())
      .then(() => process.exit(0));
  }
});
