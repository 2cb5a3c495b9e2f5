import type { Route } from '../../src/http/router.js';

/** The document's path of a mounted route: `:name` as `{name}`, a trailing `*` as `{path}`, a collection's trailing slash dropped. */
export function documentPath(route: Pick<Route, 'path'>): string {
  const path = route.path.length > 1 && route.path.endsWith('/') ? route.path.slice(0, -1) : route.path;
  return path.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{path}');
}

/** The OpenAPI operation of a mounted route in `doc`, if the document describes it. */
export function operationIn(doc: any, route: Pick<Route, 'method' | 'path'>): any {
  return doc.paths[documentPath(route)]?.[route.method === 'del' ? 'delete' : route.method];
}

/**
 * Collects the statuses routes answered and says which the document does not list: each as
 * `<route>: <status>` (a route the document lacks is the openapi suite's to catch).
 */
export class StatusLedger {
  private readonly seen = new Map<string, { route: Route; statuses: Set<number> }>();

  note(route: Route, status: number): void {
    const key = `${route.method} ${route.path}`;
    const entry = this.seen.get(key) ?? { route, statuses: new Set<number>() };
    entry.statuses.add(status);
    this.seen.set(key, entry);
  }

  undocumented(doc: any): string[] {
    const out: string[] = [];
    for (const [key, { route, statuses }] of this.seen) {
      const listed = Object.keys(operationIn(doc, route)?.responses ?? {});
      for (const status of [...statuses].sort()) if (!listed.includes(String(status))) out.push(`${key}: ${status} (listed: ${listed.join(', ')})`);
    }
    return out;
  }
}
