// Security headers for the HTML pages this server serves (the dashboard and
// GraphiQL), which run on the origin where the dashboard keeps its token.
// Everything they load comes from this origin: nothing from a CDN, no inline
// script, no framing, no Referer to elsewhere.

/** CSP directives every page gets; a page adds what it needs (script-src, style-src, …). */
const BASE_POLICY: Record<string, string> = {
  'default-src': "'self'",
  'script-src': "'self'",
  'style-src': "'self'",
  'img-src': "'self' data:",
  'connect-src': "'self'",
  'frame-ancestors': "'none'",
  'base-uri': "'none'",
  'form-action': "'none'",
  'object-src': "'none'",
};

/** Headers for an HTML page (and its same-origin assets), with `policy` entries replacing or adding CSP directives. */
export function pageSecurityHeaders(policy: Record<string, string> = {}): Record<string, string> {
  const csp = Object.entries({ ...BASE_POLICY, ...policy })
    .map(([directive, sources]) => `${directive} ${sources}`)
    .join('; ');
  return {
    'content-security-policy': csp,
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    'x-frame-options': 'DENY', // frame-ancestors for browsers without CSP level 2
  };
}
