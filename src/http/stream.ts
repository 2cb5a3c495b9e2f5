import { resumeReading, statusLine, type Exchange } from './exchange.js';

const STREAM_CHUNK = 64 * 1024;

/** Streams text lines with backpressure; yields to the event loop between chunks. */
export async function streamLines(
  exchange: Exchange,
  status: number,
  contentType: string,
  lines: AsyncIterable<string> | Iterable<string>,
  headers?: Record<string, string>,
): Promise<void> {
  const { res } = exchange;
  if (exchange.aborted) return;
  res.cork(() => {
    res.writeStatus(statusLine(status));
    res.writeHeader('content-type', contentType);
    if (headers !== undefined) for (const name in headers) res.writeHeader(name, headers[name]!);
  });
  let buffer = '';
  try {
    for await (const line of lines) {
      buffer += line + '\n';
      if (buffer.length < STREAM_CHUNK) continue;
      const chunk = buffer;
      buffer = '';
      if (exchange.aborted) return;
      let ok = true;
      res.cork(() => {
        ok = res.write(chunk);
      });
      if (!ok) await drained(exchange);
      else await new Promise<void>((resolve) => setImmediate(resolve));
      if (exchange.aborted) return;
    }
  } catch (error) {
    exchange.log.error({ err: error }, 'stream failed');
    // Recorded as the server's failure before the close, which uWebSockets.js reports as an abort.
    exchange.observer?.answered(exchange, 500);
    if (!exchange.aborted) res.cork(() => res.close());
    return;
  }
  if (!exchange.aborted) {
    res.cork(() => {
      resumeReading(exchange);
      res.end(buffer);
    });
    exchange.observer?.answered(exchange, status);
  }
}

function drained(exchange: Exchange): Promise<void> {
  return new Promise((resolve) => {
    const check = setInterval(() => exchange.aborted && done(), 1000);
    const done = (): void => {
      clearInterval(check);
      resolve();
    };
    exchange.res.onWritable(() => {
      done();
      return true;
    });
  });
}
