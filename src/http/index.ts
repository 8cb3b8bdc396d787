// The HTTP surface (Hono): the public app with the gateway, /v1/check, /v1/release, nginx's /v1/auth, health and
// metrics (app.ts), the admin app, the embeddable `quotafed()` middleware, the 429 contract and rate-limit
// headers, identity and canonical paths.
export { createAdminApp } from './admin.ts';
export { createAdminListenerApp, createPublicApp } from './app.ts';
export { quotafed } from './middleware.ts';
export { canonicalPath } from './path.ts';
