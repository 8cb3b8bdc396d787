// `quotafed/hono`: the limiter as Hono middleware, `app.use(quotafed({ engine }))`, and the Hono environment that
// types `c.get('quotafed')`. The engine comes from `quotafed/engine` or `quotafed/service`.
export { quotafed, type QuotafedOptions } from '../http/middleware.ts';
export type { QuotafedEnv } from '../http/env.ts';
