/** Escapes text for HTML element content and double-quoted attribute values. */
export function esc(value: string | number | boolean | null | undefined): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/**
 * A page shell. No inline script, ever: a page names at most one script file of this server
 * (`script`, a same-origin path), which its CSP (SCRIPTED_PAGE_HEADERS) allows; the others run none.
 */
export function layout(title: string, body: string, script?: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>${script === undefined ? '' : `\n<script type="module" src="${esc(script)}"></script>`}
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem;color:#1d232b}
h1{margin:.2rem 0 1rem;font-size:1.7rem;overflow-wrap:anywhere}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.35rem 1rem}
dt{color:#5b6572}dd{margin:0;overflow-wrap:anywhere}
code,pre{font-family:ui-monospace,monospace;font-size:.9rem}
pre{background:#f3f5f7;padding:.8rem;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.badge{display:inline-block;padding:.15rem .6rem;border-radius:1rem;font-weight:600;color:#fff}
.gate-pass{background:#1f7a3a}.gate-hold{background:#a86b00}.gate-alert{background:#c2410c}
.gate-collapse{background:#b91c1c}.gate-none{background:#6b7280}
.note{border-left:4px solid #cbd2d9;padding-left:1rem;color:#3e4752}
meter{width:8rem;vertical-align:middle}
.copy{margin-left:.5rem;font-size:.8rem;padding:.05rem .5rem}
.log-status{border-left:4px solid #cbd2d9;padding:.1rem 1rem}.log-status p{margin:.4rem 0}
.log-ok{border-color:#1f7a3a}.log-unchecked{border-color:#a86b00}
.log-warning{border-color:#b91c1c;background:#fef2f2;color:#7f1d1d;font-weight:600}
footer{margin-top:2rem;color:#6b7280;font-size:.85rem}
</style>
</head>
<body>
${body}
<footer>Vigil — agent behavior governance. Records are read from a hash-chained ledger.</footer>
</body>
</html>`;
}

const STRICT = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/** A page that runs no script. */
export const PAGE_HEADERS = {
  'content-security-policy': STRICT,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * A page that runs its script file (the agent page): scripts of this origin only, never inline,
 * fetches to this origin only, and Trusted Types so that no string ever becomes HTML or script.
 */
export const SCRIPTED_PAGE_HEADERS = {
  ...PAGE_HEADERS,
  'content-security-policy': `${STRICT}; script-src 'self'; connect-src 'self'; require-trusted-types-for 'script'; trusted-types 'none'`,
};
