import type { Route } from '../router.js';

/**
 * A collection route (a path naming a set of things, listed or added to) mounted at `/things` and at
 * `/things/`: clients and proxies differ on the trailing slash, and uWebSockets.js matches paths
 * exactly. Single resources and actions (`/things/:id`, `/exports/bundle`) have one spelling.
 */
export function collection(route: Route): Route[] {
  return [route, { ...route, path: `${route.path}/` }];
}
