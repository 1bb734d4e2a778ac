/** The HTML pages of sign-in outside the dashboard: a link's confirmation, a spent or expired link (410), a foreign form (403). */
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

/**
 * What a sign-in link opens (GET, nothing spent): the email and one button that POSTs the
 * token back. A scanner that fetches the link gets this page and uses nothing up. A link a
 * command line asked for says it leads to the device page, where the person types the code
 * their own terminal shows; it never names a code (a stranger may have asked for the link).
 */
export function confirmSignInPage(input: { email: string; token: string; forDevice: boolean }): string {
  const device = input.forDevice
    ? '<p>A command-line sign-in (svc login) asked for this link. Signing in approves nothing by itself: on the next page, type the code that your own terminal shows. Never type a code that someone sent you.</p>'
    : '';
  return page(
    'Sign in to svc-checkout',
    `<p>Signing in as <strong>${escape(input.email)}</strong>.</p>${device}<form method="post" action="/v1/auth/verify"><input type="hidden" name="token" value="${escape(input.token)}"><button type="submit">Sign in</button></form><p>The link works once, within 15 minutes of being sent.</p>`,
  );
}

export function foreignFormPage(): string {
  return page('Sign in from the link', '<p>This sign-in was sent from another page. Open the link from your email and press its button.</p>');
}
