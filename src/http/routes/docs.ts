import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { AppDeps } from '../deps.js';
import { openApiDocument } from '../openapi/document.js';
import { OPERATIONS } from '../openapi/operations.js';
import { ASSET_HEADERS } from '../pages/assets.js';
import type { Route } from '../router.js';
import { VERSION } from '../../version.js';

/** The WebSocket of DESIGN §9: not a Route (uWebSockets.js mounts it apart), documented all the same. */
const STREAM = { method: 'get', path: '/events/stream', auth: 'events:write' } as const;

/** The swagger-ui-dist package's directory and version. */
const SWAGGER_PACKAGE = createRequire(import.meta.url).resolve('swagger-ui-dist/package.json');
const SWAGGER_VERSION = (JSON.parse(readFileSync(SWAGGER_PACKAGE, 'utf8')) as { version: string }).version;

/** Swagger UI's files, from the swagger-ui-dist package (read on first use). */
const swaggerUi = (file: string): string => readFileSync(join(dirname(SWAGGER_PACKAGE), file), 'utf8');

/** The assets are cached for a week: their URLs change with Vigil's and Swagger UI's versions, so an upgrade is fetched at once. */
const ASSET_VERSION = `?v=${VERSION}-${SWAGGER_VERSION}`;

const DOCS_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Vigil API</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/swagger-ui.css${ASSET_VERSION}">
</head>
<body>
<div id="docs"><noscript>This page renders <a href="/openapi.json">/openapi.json</a>, the OpenAPI 3.1 document of this service, with a script.</noscript></div>
<script src="/docs/swagger-ui-bundle.js${ASSET_VERSION}"></script>
<script src="/docs/docs.js${ASSET_VERSION}"></script>
</body>
</html>
`;

/**
 * Scripts and styles of this origin only (Swagger UI sets style attributes, and draws icons as
 * data: images); fetches to this origin only (the document, and "try it out").
 */
const DOCS_HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * `GET /openapi.json`, the OpenAPI 3.1 document of `mounted()` (every route this server mounts,
 * built on first request), and `GET /docs`, which renders it with Swagger UI shipped in the
 * package. Public: the interface is no secret.
 */
export function docsRoutes(deps: AppDeps, mounted: () => readonly Route[]): Route[] {
  let json: string | null = null;
  const document = (): string => {
    if (json !== null) return json;
    const built = openApiDocument([...mounted(), STREAM], OPERATIONS, deps.config.baseUrl);
    // The tests fail on such a route; a build that has one anyway says so rather than hide it.
    if (built.undocumented.length > 0) deps.log.warn({ routes: built.undocumented }, 'routes missing from GET /openapi.json (no operation in src/http/openapi)');
    return (json = JSON.stringify(built.document));
  };
  const asset = (path: string, contentType: string, read: () => string): Route => {
    let text: string | null = null;
    return { method: 'get', path, auth: 'none', headers: [], handler: () => ({ text: (text ??= read()), contentType, headers: ASSET_HEADERS }) };
  };
  return [
    { method: 'get', path: '/openapi.json', auth: 'none', headers: [], handler: () => ({ text: document(), contentType: 'application/json', headers: { 'cache-control': 'no-cache' } }) },
    { method: 'get', path: '/docs', auth: 'none', headers: [], handler: () => ({ text: DOCS_PAGE, contentType: 'text/html; charset=utf-8', headers: DOCS_HEADERS }) },
    asset('/docs/swagger-ui.css', 'text/css; charset=utf-8', () => swaggerUi('swagger-ui.css')),
    asset('/docs/swagger-ui-bundle.js', 'application/javascript; charset=utf-8', () => swaggerUi('swagger-ui-bundle.js')),
    asset('/docs/docs.js', 'application/javascript; charset=utf-8', () => readFileSync(new URL('../pages/docs.js', import.meta.url), 'utf8')),
  ];
}
