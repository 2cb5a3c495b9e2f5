/**
 * Bare uWebSockets.js peer for the macro benchmark: the same two routes Vigil serves hot, with
 * no auth, validation, ledger or storage behind them. Run as its own process:
 *   PORT=0 node --import tsx bench/peers/uws.ts
 * Prints exactly one line, {"listening":<port>}, once it accepts connections; exits on SIGTERM.
 */
import uws from 'uWebSockets.js';
import type { us_listen_socket } from 'uWebSockets.js';
import { DECISION, PUBLIC_RECORD } from './fixtures.js';

const JSON_TYPE = 'application/json';

const app = uws.App();

app.post('/events/', (res) => {
  let aborted = false;
  res.onAborted(() => {
    aborted = true;
  });
  const chunks: Buffer[] = [];
  let size = 0;
  res.onData((chunk, isLast) => {
    // uWS reuses the chunk's memory once this callback returns: copy it.
    chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
    size += chunk.byteLength;
    if (!isLast || aborted) return;
    let status = '200 OK';
    let body = DECISION;
    try {
      JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
    } catch {
      status = '400 Bad Request';
      body = '{"error":"bad_request"}';
    }
    res.cork(() => {
      res.writeStatus(status).writeHeader('content-type', JSON_TYPE).end(body);
    });
  });
});

app.get('/public/agents/:org/:agent_id', (res) => {
  res.cork(() => {
    res.writeStatus('200 OK').writeHeader('content-type', JSON_TYPE).end(PUBLIC_RECORD);
  });
});

const requested = Number(process.env.PORT ?? '0');
let listenSocket: us_listen_socket | null = null;
app.listen('127.0.0.1', Number.isFinite(requested) ? requested : 0, (socket) => {
  if (socket === false) {
    process.stderr.write(`cannot listen on 127.0.0.1:${requested}\n`);
    process.exit(1);
  }
  listenSocket = socket;
  process.stdout.write(`${JSON.stringify({ listening: uws.us_socket_local_port(socket) })}\n`);
});

function shutdown(): void {
  if (listenSocket !== null) {
    uws.us_listen_socket_close(listenSocket);
    listenSocket = null;
  }
  // Keep-alive connections would hold the event loop open; the peer has no state to flush.
  process.exit(0);
}
process.on('SIGTERM', shutdown);
process.on('SIGINT', shutdown);
