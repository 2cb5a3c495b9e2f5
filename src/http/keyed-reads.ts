import type { CommandRouter } from '../bus/command-router.js';
import type { ForwardedAnswer, OrgReply, ReadForwardCommand } from '../bus/messages.js';
import { VigilError } from '../errors.js';
import type { Logger } from '../log.js';
import type { Registry } from '../services/registry.js';
import { unwrap } from './deps.js';
import { errorResponse } from './errors.js';
import type { Route, RouteContext, RouteResult } from './router.js';

/**
 * The most bytes a forwarded read's answer is, encoded (core NATS takes 1 MiB a message by
 * default, and the reply's framing is around it). A larger one is answered by the node asked.
 */
export const MAX_FORWARDED_BYTES = 768 * 1024;

/** The header naming the node that answered a forwarded read. */
export const ANSWERED_BY = 'x-vigil-answered-by';

/** Request headers a forwarded read carries: what keyed GET routes read, less the key itself. */
const CARRIED = ['accept', 'if-none-match', 'range'];

export interface KeyedReadsOptions {
  /** This node's name: a forwarded read's answer says which node answered it (`x-vigil-answered-by`). */
  node: string;
  /** Whether this node owns the org now (its partition's lease). */
  owns: (org: string) => boolean;
  /** Read-your-writes on this node: its copy holds the org's writes acknowledged so far. */
  caughtUp: (org: string) => Promise<void>;
  commands: CommandRouter;
  registry: Registry;
  log: Logger;
}

/**
 * Cluster mode's keyed reads (GETs with a key): answered by the org's owner, like its writes. On
 * the owner they run here once this node's copy holds the org's writes acknowledged so far; on
 * any other node the request goes to the owner through the command router (as `read.forward`,
 * packed with the turn's other requests to that partition) and its answer comes back as the
 * owner wrote it: status, headers and body, plus `x-vigil-answered-by` naming the owner. A route marked `forward: false` (the streamed
 * export, the whole-chain verification) is answered by the node it reaches, from its own copy.
 *
 * The key's secret does not travel: the owner finds the key by its id and digest in the shared
 * registry, so a key revoked meanwhile is refused there too (401).
 */
export class KeyedReads {
  private routes: ReadonlyMap<string, Route> | null = null;

  constructor(private readonly o: KeyedReadsOptions) {}

  /** The mounted keyed GET routes, by path: what a forwarded read names. */
  register(routes: readonly Route[]): void {
    this.routes = new Map(routes.filter((r) => r.method === 'get' && r.auth !== 'none').map((r) => [r.path, r]));
  }

  /** A keyed GET's answer: here on the owner (or for a route not forwarded), else from the owner. */
  async answer(route: Route, ctx: RouteContext): Promise<RouteResult> {
    const org = ctx.key.org;
    if (route.forward === false || this.o.owns(org)) {
      await this.o.caughtUp(org);
      return route.handler(ctx);
    }
    const headers: Record<string, string> = {};
    for (const name of CARRIED) if (ctx.headers[name] !== undefined) headers[name] = ctx.headers[name];
    const command: ReadForwardCommand = {
      type: 'read.forward',
      org,
      path: route.path,
      params: ctx.params,
      query: ctx.query.toString(),
      headers,
      url: ctx.url,
      key: { id: ctx.key.id, hash: ctx.key.hash },
    };
    const answer = unwrap(await this.o.commands.request(command, { abandoned: ctx.connection }));
    if ('tooLarge' in answer) {
      // Too large for one message: answered here, from this node's copy once caught up.
      await this.o.caughtUp(org);
      return route.handler(ctx);
    }
    const result = answer.base64 === true ? { bytes: Buffer.from(answer.body, 'base64') } : { text: answer.body };
    return { status: answer.status, contentType: answer.contentType, headers: answer.headers, ...result };
  }

  /** The owner's side of a forwarded read: run here as if it had come in here, its answer written down. */
  async serve(command: ReadForwardCommand): Promise<OrgReply> {
    try {
      const route = this.routes?.get(command.path);
      if (route === undefined) throw new VigilError('unavailable', 'this node is not serving reads yet', undefined, { retryAfterSeconds: 1 });
      const key = this.o.registry.current(command.key);
      if (key === undefined) throw new VigilError('unauthorized', 'this API key was revoked');
      const ctx: RouteContext = {
        params: command.params,
        query: new URLSearchParams(command.query),
        headers: command.headers,
        key,
        body: undefined,
        ip: '',
        url: command.url,
        connection: { aborted: false },
      };
      await this.o.caughtUp(command.org);
      const answer = written(await route.handler(ctx));
      answer.headers = { ...answer.headers, [ANSWERED_BY]: this.o.node };
      if (Buffer.byteLength(JSON.stringify(answer)) > MAX_FORWARDED_BYTES) return { ok: true, value: { tooLarge: true } };
      return { ok: true, value: answer };
    } catch (error) {
      const { status, body, headers } = errorResponse(error, this.o.log);
      return { ok: true, value: { status, contentType: 'application/json', headers: { ...headers, [ANSWERED_BY]: this.o.node }, body } };
    }
  }
}

/** A route's result as a forwarded read carries it back. */
function written(result: RouteResult): Exclude<ForwardedAnswer, { tooLarge: true }> {
  const status = result.status ?? 200;
  const headers = result.headers ?? {};
  let answer: Exclude<ForwardedAnswer, { tooLarge: true }>;
  if ('lines' in result) throw new Error('a streamed answer cannot be forwarded: mark its route forward: false');
  else if ('bytes' in result) answer = { status, contentType: result.contentType, headers, body: result.bytes.toString('base64'), base64: true };
  else if ('text' in result) answer = { status, contentType: result.contentType, headers, body: result.text };
  else answer = { status, contentType: 'application/json', headers, body: result.body === undefined ? '' : JSON.stringify(result.body) };
  return answer;
}
