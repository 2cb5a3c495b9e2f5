/**
 * Bare Fastify peer for the macro benchmark: the same two routes Vigil serves hot, with no
 * auth, validation, ledger or storage behind them. Run as its own process:
 *   PORT=0 node --import tsx bench/peers/fastify.ts
 * Prints exactly one line, {"listening":<port>}, once it accepts connections; exits on SIGTERM.
 */
import Fastify from 'fastify';
import { DECISION, PUBLIC_RECORD } from './fixtures.js';

const app = Fastify({ logger: false });

// Fastify's built-in application/json parser reads the whole body and JSON.parses it.
app.post('/events/', async (request, reply) => {
  void request.body;
  return reply.code(200).header('content-type', 'application/json').send(DECISION);
});

app.get('/public/agents/:org/:agent_id', async (_request, reply) => {
  return reply.code(200).header('content-type', 'application/json').send(PUBLIC_RECORD);
});

const port = Number(process.env.PORT ?? '0');
await app.listen({ host: '127.0.0.1', port: Number.isFinite(port) ? port : 0 });
const address = app.server.address();
if (address === null || typeof address === 'string') throw new Error(`unexpected listen address: ${String(address)}`);
process.stdout.write(`${JSON.stringify({ listening: address.port })}\n`);

let closing = false;
function shutdown(): void {
  if (closing) return;
  closing = true;
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
