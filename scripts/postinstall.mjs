// `npm ci` / `npm install`'s last step: make the embedded database's template (scripts/pglite-template.ts)
// so a fresh clone's first `npm start` unpacks its database in about 0.5 s instead of running initdb and
// every migration. It never fails the install: without tsx (a production install) or on any error the
// first start creates the database the slow way.
try {
  const { register } = await import('tsx/esm/api');
  register();
  const { ensurePgliteTemplate } = await import('./pglite-template.ts');
  const started = Date.now();
  const made = await ensurePgliteTemplate();
  if (made?.made) console.log(`svc-checkout: embedded database template written in ${((Date.now() - started) / 1000).toFixed(1)} s`);
} catch (err) {
  console.warn(`svc-checkout: no embedded database template (${err?.message ?? err}); the first start creates the database with initdb instead`);
}
