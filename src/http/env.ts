// The Hono environment shared by quotafed's apps: Node bindings (for the client socket) and the decision
// the middleware stores for later handlers.
import type { HttpBindings } from '@hono/node-server';
import type { IncomingHttpHeaders } from 'node:http';
import type { Decision } from '../engine/types.ts';

export type QuotafedVariables = {
  /** The decision for this request, set by the quotafed middleware. */
  quotafed: Decision;
  /** The canonical request path (src/http/path.ts), set by the gateway before the limiter. */
  canonicalPath: string;
  /**
   * The upstream answer's headers (lower-case names), set by the gateway when it wrote the answer straight to
   * Node's response (forward.ts), where the middleware cannot read them from `c.res`: costFromResponse reads them.
   */
  upstreamHeaders: IncomingHttpHeaders;
};

/**
 * The Hono environment of quotafed's apps and middleware: Node bindings, and the decision the middleware stores
 * (`c.get('quotafed')`). Type your app with it to read the decision in handlers.
 *
 * @example
 * ```ts
 * import { Hono } from 'hono';
 * import { quotafed, type QuotafedEnv } from 'quotafed/hono';
 *
 * const app = new Hono<QuotafedEnv>();
 * app.use('/api/*', quotafed({ engine }));
 * app.get('/api/me', (c) => c.json({ remaining: c.get('quotafed').binding?.remaining }));
 * ```
 */
export type QuotafedEnv = {
  Bindings: HttpBindings;
  Variables: QuotafedVariables;
};
