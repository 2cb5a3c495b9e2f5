import type { HttpResponse } from 'uWebSockets.js';
import { VigilError } from '../errors.js';
import { jsonShapeProblem } from './json-shape.js';

export const MAX_BODY_BYTES = 1024 * 1024;

/**
 * Reads and parses a JSON request body. uWebSockets.js reuses the chunk memory after the
 * callback returns, so every chunk is copied (or decoded) inside it.
 * An empty body parses to `undefined`; the route's validation then says what was expected.
 */
export function readJsonBody(res: HttpResponse, contentType: string, contentLength: string): Promise<unknown> {
  if (contentLength !== '' && Number(contentLength) > MAX_BODY_BYTES) {
    return Promise.reject(tooLarge());
  }
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] | null = null;
    let size = 0;
    res.onData((chunk, isLast) => {
      size += chunk.byteLength;
      if (size > MAX_BODY_BYTES) {
        chunks = null;
        if (isLast) reject(tooLarge());
        return;
      }
      if (isLast && chunks === null) {
        // Common case: the whole body in one chunk, decoded while the memory is still ours.
        settle(Buffer.from(chunk).toString('utf8'), contentType, resolve, reject);
        return;
      }
      (chunks ??= []).push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
      if (isLast) settle(Buffer.concat(chunks, size).toString('utf8'), contentType, resolve, reject);
    });
  });
}

function settle(text: string, contentType: string, resolve: (v: unknown) => void, reject: (e: unknown) => void): void {
  if (text.length === 0) return resolve(undefined);
  if (!isJson(contentType)) {
    return reject(new VigilError('unsupported_media_type', 'request body must be JSON: send Content-Type: application/json'));
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    reject(new VigilError('bad_request', `malformed JSON: ${(error as Error).message}`, [{ path: 'body', message: 'not valid JSON' }]));
    return;
  }
  const problem = jsonShapeProblem(value);
  if (problem === null) resolve(value);
  else reject(new VigilError('validation_failed', `invalid body: ${problem.path}`, [problem]));
}

function isJson(contentType: string): boolean {
  const type = contentType.split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json' || (type.startsWith('application/') && type.endsWith('+json'));
}

function tooLarge(): VigilError {
  return new VigilError('payload_too_large', `request body is larger than ${MAX_BODY_BYTES} bytes`);
}
