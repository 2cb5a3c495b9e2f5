import type { z } from 'zod';

/** The groups of GET /docs, in the order shown. */
export const TAGS = [
  'System',
  'Agents',
  'Events',
  'Audit',
  'Transparency log',
  'Webhooks',
  'Reviews',
  'Exports',
  'Billing',
  'Public',
  'Pages',
  'Record scoring',
  'Demo',
] as const;
export type Tag = (typeof TAGS)[number];

/** One answer of an operation that is not an error. */
export interface Answer {
  description: string;
  /** The JSON body's schema (application/json); absent with `contentType`, or for no body (204, 304). */
  schema?: z.ZodType;
  /** A body that is not JSON: its media type (text/plain, text/html, application/x-ndjson, …), described in `description`. */
  contentType?: string;
  /** Response headers worth naming (ETag, Retry-After, Preference-Applied, …), with their meaning. */
  headers?: Record<string, string>;
}

/**
 * What GET /openapi.json says of one route (DESIGN §11): the route's auth and path parameters come
 * from the mounted route itself; this adds what the route's code alone does not say in a form a
 * document can use. Request schemas are the zod schemas the handlers validate with, so the
 * request side cannot drift from what is enforced; answers and error statuses are written here and
 * checked by the tests against what the routes answer.
 */
export interface Operation {
  summary: string;
  /** Markdown; what a caller needs beyond the summary. */
  description?: string;
  tag: Tag;
  /** Query parameters, as a zod object whose fields are the parameters (each a string on the wire). */
  query?: z.ZodObject;
  /** The JSON request body (the schema the handler validates with). */
  body?: z.ZodType;
  /** Request headers the route reads besides Authorization and Content-Type. */
  headers?: Record<string, { description: string; required?: boolean }>;
  /** Path parameters' descriptions, by name (`org`, `agent_id`; `*` for a trailing wildcard). */
  params?: Record<string, string>;
  /** Successful answers by status. */
  responses: Record<number, Answer>;
  /**
   * A credential other than what the route's auth implies (an API key, or none): the metrics
   * token, or a record-scoring sandbox key.
   */
  security?: 'metricsToken' | 'sandboxKey';
  /** The error statuses it may answer, each with the error body of DESIGN §4. */
  errors: readonly number[];
}
