// The Hono environment shared by quotafed's apps: Node bindings (for the client socket) and the decision
// the middleware stores for later handlers.
import type { HttpBindings } from '@hono/node-server';
import type { Decision } from '../engine/types.ts';

export type QuotafedVariables = {
  /** The decision for this request, set by the quotafed middleware. */
  quotafed: Decision;
  /** The canonical request path (src/http/path.ts), set by the gateway before the limiter. */
  canonicalPath: string;
};

export type QuotafedEnv = {
  Bindings: HttpBindings;
  Variables: QuotafedVariables;
};
