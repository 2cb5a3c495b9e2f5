/** Escapes text for HTML element content and double-quoted attribute values. */
export function esc(value: string | number | boolean | null | undefined): string {
  return String(value ?? '')
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** A page shell: no scripts at all; the CSP header forbids them too. */
export function layout(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(title)}</title>
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
footer{margin-top:2rem;color:#6b7280;font-size:.85rem}
</style>
</head>
<body>
${body}
<footer>Vigil — agent behavior governance. Records are read from a hash-chained ledger.</footer>
</body>
</html>`;
}

export const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};
