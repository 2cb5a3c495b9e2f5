/**
 * Bare Fastify peer for the macro benchmark: the same two routes Vigil serves hot, with no
 * auth, validation, ledger or storage behind them. Run as its own process:
 *   PORT=0 node --import tsx bench/peers/fastify.ts
 * Prints exactly one line, {"listening":<port>}, once it accepts connections; exits on SIGTERM.
 */
import Fastify from 'fastify';

const DECISION = JSON.stringify({
  event_id: 1,
  action_id: 1,
  gate_status: 'pass',
  bii: 0.9,
  composite_trust: 0.9,
  reason: 'ok',
  requires_human_review: false,
});

/** A fixed public agent record (~450 bytes), shaped like Vigil's GET /public/agents/:org/:agent_id. */
const PUBLIC_RECORD = JSON.stringify({
  org: 'bench',
  agent_id: 'bench-agent',
  name: 'Bench Support Assistant',
  kind: 'assistant',
  gate: 'pass',
  bii: 0.9,
  ledger_records: 1024,
  ledger_head: 'fe14010b4fe83303852f0467c919ef9a7ca089b91e96e3aad7d426dd87079297',
  last_event_at: '2025-01-01T00:00:00.000Z',
  observed: true,
  policy_digest: '823412d1eacb67956220e532959f0104603057c88704863ca38e7cd188fda812',
  public_links: [],
  verify_url: 'https://vigil.example.com/a/bench/bench-agent/verify',
});

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
