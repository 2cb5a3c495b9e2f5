// GET /docs: renders GET /openapi.json with Swagger UI (swagger-ui-dist, served by Vigil itself:
// no CDN). A static file, as the page's CSP allows no inline script.
'use strict';
window.addEventListener('DOMContentLoaded', () => {
  window.SwaggerUIBundle({ url: '/openapi.json', dom_id: '#docs', deepLinking: true, tryItOutEnabled: false });
});
