/** The few HTML pages of sign-in (the dashboard replaces them once it exists). */
const escape = (s: string) => s.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);

export function page(title: string, bodyHtml: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} · svc-checkout</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#111}code{font-size:1.4rem;letter-spacing:.1em}button,input{font:inherit;padding:.4rem .6rem}label{display:block;margin:.5rem 0}</style>
</head><body><main><h1>${escape(title)}</h1>${bodyHtml}</main></body></html>`;
}

export function signedInPage(email: string, deviceUserCode: string | null): string {
  const device = deviceUserCode
    ? `<p>The command line that shows <code>${escape(deviceUserCode)}</code> is signed in too; go back to it.</p>`
    : '';
  return page('You are signed in', `<p>Signed in as <strong>${escape(email)}</strong>.</p>${device}<p><a href="/docs">API reference</a></p>`);
}

export function linkGonePage(): string {
  return page('This link has expired', '<p>The sign-in link was already used or is older than 15 minutes. Request a new one.</p>');
}

/** The device verification page: confirm the code when signed in, else sign in by email with the code attached. */
export function devicePage(userCode: string, signedInAs: string | null): string {
  const code = escape(userCode);
  if (signedInAs) {
    return page(
      'Confirm the command-line sign-in',
      `<p>Signed in as <strong>${escape(signedInAs)}</strong>. Approve the command line that shows this code?</p>
<form id="f"><label for="c">Code</label><input id="c" name="user_code" value="${code}" required autocomplete="off">
<button type="submit">Approve</button></form><p id="r" role="status"></p>
<script>document.getElementById('f').onsubmit=async(e)=>{e.preventDefault();const r=await fetch('/v1/auth/cli/approve',{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify({user_code:document.getElementById('c').value})});const b=await r.json();document.getElementById('r').textContent=r.ok?'Approved: go back to the command line.':b.error_human;};</script>`,
    );
  }
  return page(
    'Sign in to approve the command line',
    `<p>Enter your email: the link we send signs you in and approves the code.</p>
<form id="f"><label for="c">Code</label><input id="c" name="user_code" value="${code}" required autocomplete="off">
<label for="e">Email</label><input id="e" name="email" type="email" required autocomplete="email">
<button type="submit">Send the link</button></form><p id="r" role="status"></p>
<script>document.getElementById('f').onsubmit=async(e)=>{e.preventDefault();const r=await fetch('/v1/auth/email/start',{method:'POST',headers:{'content-type':'application/json'},body:JSON.stringify({email:document.getElementById('e').value,user_code:document.getElementById('c').value})});const b=await r.json();document.getElementById('r').textContent=r.ok?'Check your inbox.':b.error_human;};</script>`,
  );
}
