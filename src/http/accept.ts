/**
 * The quality (RFC 9110 12.4.2) an Accept header gives `type`: that of the most specific matching
 * range (type/subtype over type/* over *\/*), 0 when none matches. A missing header accepts all.
 */
export function acceptQuality(accept: string | undefined, type: string): number {
  if (accept === undefined || accept.trim() === '') return 1;
  const [main] = type.split('/');
  let best = { specificity: -1, q: 0 };
  for (const range of accept.split(',')) {
    const [media = '', ...params] = range.split(';').map((p) => p.trim().toLowerCase());
    const specificity = media === type ? 2 : media === `${main}/*` ? 1 : media === '*/*' ? 0 : -1;
    if (specificity <= best.specificity) continue;
    const qParam = params.find((p) => p.startsWith('q='));
    const q = qParam === undefined ? 1 : Number(qParam.slice(2));
    best = { specificity, q: Number.isFinite(q) ? Math.min(Math.max(q, 0), 1) : 0 };
  }
  return best.q;
}

/**
 * Whether to answer a bundle as .tar.gz: only when gzip is named explicitly with q > 0 and not
 * ranked below JSON. JSON stays the default, so `*\/*` (curl's default) or no header gets JSON.
 */
export function prefersGzip(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const named = accept.split(',').some((r) => r.split(';')[0]!.trim().toLowerCase() === 'application/gzip');
  const gzip = acceptQuality(accept, 'application/gzip');
  return named && gzip > 0 && gzip >= acceptQuality(accept, 'application/json');
}
