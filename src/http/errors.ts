// Last-resort handlers. Client faults (HTTPException from Hono helpers: body limit, bad Connection header)
// keep their 4xx status; anything else is our fault, logged with the request line, answered with a generic
// 500 that leaks nothing.
import type { ErrorHandler, NotFoundHandler } from 'hono';
import { HTTPException } from 'hono/http-exception';
import type { Logger } from '../log.ts';
import type { QuotafedEnv } from './env.ts';
import { jsonError } from './json-error.ts';

/** The client went away or cut its body off (a chunked body never finished): its fault, not ours. */
function clientAborted(error: Error, signal: AbortSignal | undefined): boolean {
  const code = (error as NodeJS.ErrnoException).code;
  return signal?.aborted === true || error.message === 'aborted' || code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE';
}

export function errorHandler(logger: Logger): ErrorHandler<QuotafedEnv> {
  return (error, c) => {
    if (error instanceof HTTPException && error.status < 500) {
      return jsonError(error.status, error.message || 'Bad request');
    }
    if (clientAborted(error, c.req.raw.signal)) {
      // Nobody may be left to read the answer; a half-closed client still gets it.
      logger.debug(
        { event: 'http.client_aborted', method: c.req.method, path: c.req.path, error: error.message },
        'client aborted the request',
      );
      return jsonError(400, 'Request body incomplete: the client closed the connection');
    }
    logger.error(
      { event: 'http.error', method: c.req.method, path: c.req.path, error: error.message, stack: error.stack },
      'unhandled error',
    );
    return jsonError(500, 'Internal server error');
  };
}

export const notFound: NotFoundHandler<QuotafedEnv> = () => jsonError(404, 'Not found');
