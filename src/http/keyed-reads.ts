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

/** A public log read has no key (RouteContext.key is set only on keyed routes). */
const NO_KEY = undefined as unknown as RouteContext['key'];

export interface KeyedReadsOptions {
  /** This node's name: a forwarded read's answer says which node answered it (`x-vigil-answered-by`). */
  node: string;
  /** Whether this node owns the org now (its partition's lease). */
  owns: (org: string) => boolean;
  /** Read-your-writes on this node: its copy holds the org's writes acknowledged so far. */
  caughtUp: (org: string) => Promise<void>;
  /**
   * Resolves once this node's projections of the org (directory, reviews, meter, export log) have
   * taken the rows its ledger holds (bounded, else 503): `caughtUp` brings the rows only, and a
   * projection is fed from them after. What a read answered here for an org this node does not own reads.
   */
  settled: (org: string) => Promise<void>;
  commands: CommandRouter;
  registry: Registry;
  log: Logger;
}

/**
 * Cluster mode's keyed reads (GETs with a key): answered by the org's owner, like its writes. On
 * the owner they run here once this node's copy holds the org's writes acknowledged so far; on
 * any other node the request goes to the owner through the command router (as `read.forward`,
 * packed with the turn's other requests to that partition) and its answer comes back as the
 * owner wrote it: status, headers and body, plus `x-vigil-answered-by` naming the owner. A route
 * marked `forward: false` (the streamed export, the whole-chain verification) is answered by the
 * node it reaches, from its own ledger rows once caught up (it reads nothing else of the org).
 * An answer too large to carry is answered here too, once this node's projections have taken its rows.
 *
 * The key's secret does not travel: the owner finds the key by its id and digest in the shared
 * registry, so a key revoked meanwhile is refused there too (401).
 *
 * Public log reads (tiles, consistency proofs: Route.owner) take the same way with no key: the
 * node asked admits them (public rate limit, CORS), the owner answers from its tree.
 */
export class KeyedReads {
  private routes: ReadonlyMap<string, Route> | null = null;
  /** The mounted public log routes' owner sides, by path: what a forwarded read without a key names. */
  private logRoutes: ReadonlyMap<string, NonNullable<Route['owner']>> | null = null;

  constructor(private readonly o: KeyedReadsOptions) {}

  /** The mounted keyed GET routes and public log routes, by path: what a forwarded read names. */
  register(routes: readonly Route[]): void {
    this.routes = new Map(routes.filter((r) => r.method === 'get' && r.auth !== 'none').map((r) => [r.path, r]));
    this.logRoutes = new Map(routes.flatMap((r) => (r.method === 'get' && r.auth === 'none' && r.owner !== undefined ? [[r.path, r.owner] as const] : [])));
  }

  /** A keyed GET's answer: here on the owner (or for a route not forwarded), else from the owner. */
  async answer(route: Route, ctx: RouteContext): Promise<RouteResult> {
    const org = ctx.key.org;
    if (route.forward === false || this.o.owns(org)) {
      await this.o.caughtUp(org);
      return route.handler(ctx);
    }
    const answer = await this.forward(org, route, ctx, { id: ctx.key.id, hash: ctx.key.hash });
    if (answer !== null) return answer;
    // Too large for one message: answered here, from this node's copy once caught up and its
    // projections have taken what the catch-up brought.
    await this.o.caughtUp(org);
    await this.o.settled(org);
    return route.handler(ctx);
  }

  /**
   * A public log read's answer (Route.owner), less the public gate's headers: here on the owner,
   * else from the owner. Not caught up first: a public read must not cost a stream request, and
   * the owner's tree holds every row it wrote (a tile past it is a 404 or, inside the checkpoint
   * served, a 503 to ask again).
   */
  async logRead(route: Route, ctx: RouteContext): Promise<RouteResult> {
    const org = ctx.params.org ?? '';
    if (this.o.owns(org)) return route.owner!(ctx);
    const answer = await this.forward(org, route, ctx, undefined);
    // Tiles (8 KiB) and proofs (a few KiB) always fit: an answer that does not is no log read's.
    if (answer === null) throw new Error(`the answer to ${route.path} is too large to forward`);
    return answer;
  }

  /** The owner's answer to the read, or null when too large to carry. */
  private async forward(org: string, route: Route, ctx: RouteContext, key: ReadForwardCommand['key']): Promise<RouteResult | null> {
    const headers: Record<string, string> = {};
    for (const name of CARRIED) if (ctx.headers[name] !== undefined) headers[name] = ctx.headers[name];
    const command: ReadForwardCommand = { type: 'read.forward', org, path: route.path, params: ctx.params, query: ctx.query.toString(), headers, url: ctx.url };
    if (key !== undefined) command.key = key;
    const answer = unwrap(await this.o.commands.request(command, { abandoned: ctx.connection }));
    if ('tooLarge' in answer) return null;
    const result = answer.base64 === true ? { bytes: Buffer.from(answer.body, 'base64') } : { text: answer.body };
    return { status: answer.status, contentType: answer.contentType, headers: answer.headers, ...result };
  }

  /** The owner's side of a forwarded read: run here as if it had come in here, its answer written down. */
  async serve(command: ReadForwardCommand): Promise<OrgReply> {
    try {
      const ctx: RouteContext = {
        params: command.params,
        query: new URLSearchParams(command.query),
        headers: command.headers,
        key: NO_KEY,
        body: undefined,
        ip: '',
        url: command.url,
        connection: { aborted: false },
      };
      const answer = written(await this.run(command, ctx));
      answer.headers = { ...answer.headers, [ANSWERED_BY]: this.o.node };
      if (Buffer.byteLength(JSON.stringify(answer)) > MAX_FORWARDED_BYTES) return { ok: true, value: { tooLarge: true } };
      return { ok: true, value: answer };
    } catch (error) {
      const { status, body, headers } = errorResponse(error, this.o.log);
      return { ok: true, value: { status, contentType: 'application/json', headers: { ...headers, [ANSWERED_BY]: this.o.node }, body } };
    }
  }

  /** A keyed read once its key is checked again and this node caught up; a public log read (no key) as it is. */
  private async run(command: ReadForwardCommand, ctx: RouteContext): Promise<RouteResult> {
    const notYet = (): VigilError => new VigilError('unavailable', 'this node is not serving reads yet', undefined, { retryAfterSeconds: 1 });
    if (command.key === undefined) {
      const owner = this.logRoutes?.get(command.path);
      if (owner === undefined) throw notYet();
      return owner(ctx);
    }
    const route = this.routes?.get(command.path);
    if (route === undefined) throw notYet();
    const key = this.o.registry.current(command.key);
    if (key === undefined) throw new VigilError('unauthorized', 'this API key was revoked');
    ctx.key = key;
    await this.o.caughtUp(command.org);
    return route.handler(ctx);
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
