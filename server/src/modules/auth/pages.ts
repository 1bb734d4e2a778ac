/** The one HTML page of sign-in outside the dashboard: a spent or expired link (410). */
const escape = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

export function page(title: string, bodyHtml: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} · svc-checkout</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#111}code{font-size:1.4rem;letter-spacing:.1em}button,input{font:inherit;padding:.4rem .6rem}label{display:block;margin:.5rem 0}</style>
</head><body><main><h1>${escape(title)}</h1>${bodyHtml}</main></body></html>`;
}

export function linkGonePage(): string {
  return page('This link has expired', '<p>The sign-in link was already used or is older than 15 minutes. <a href="/dashboard/login">Request a new one</a>.</p>');
}
