// A small request body, read with a size cap and without building a web Request.
//
// Hono's bodyLimit middleware touches `c.req.raw.body`, which makes @hono/node-server build a full undici
// Request (AbortSignal, ReadableStream) for every POST: about a quarter of /v1/check's CPU. Here a declared
// Content-Length is checked first and the body read through @hono/node-server's direct path (`c.req.text()`,
// straight from the IncomingMessage); a body without a length (chunked) is read from the IncomingMessage
// chunk by chunk and refused as soon as it passes the cap. Outside Node (app.request in tests) the web body
// stream is read with the same cap.
import type { Context } from 'hono';
import type { IncomingMessage } from 'node:http';
import { jsonError } from './json-error.ts';

export type BodyText = { ok: true; text: string } | { ok: false; response: Response };

const tooLarge = (): BodyText => ({ ok: false, response: jsonError(413, 'Request body too large') });

async function readCapped(chunks: AsyncIterable<Uint8Array>, maxBytes: number): Promise<BodyText> {
  const parts: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    size += chunk.byteLength;
    if (size > maxBytes) return tooLarge();
    parts.push(chunk);
  }
  return { ok: true, text: Buffer.concat(parts, size).toString('utf8') };
}

async function* webChunks(body: ReadableStream<Uint8Array>): AsyncIterable<Uint8Array> {
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      yield value;
    }
  } finally {
    reader.releaseLock();
  }
}

/** The request body as text, or a 413 when it is (or declares itself) larger than `maxBytes`. */
export async function readBodyText(c: Context, maxBytes: number): Promise<BodyText> {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  const headers = incoming?.headers;
  if (headers !== undefined) {
    const length = headers['content-length'];
    if (length !== undefined && headers['transfer-encoding'] === undefined) {
      // Node has already refused a malformed or duplicated Content-Length (400) before we get here.
      if (Number(length) > maxBytes) return tooLarge();
      return { ok: true, text: await c.req.text() };
    }
    if (headers['transfer-encoding'] === undefined) return { ok: true, text: '' };
    return readCapped(incoming as AsyncIterable<Uint8Array>, maxBytes);
  }
  const length = c.req.header('content-length');
  if (length !== undefined && c.req.header('transfer-encoding') === undefined && Number(length) > maxBytes) return tooLarge();
  const body = c.req.raw.body;
  return body ? readCapped(webChunks(body), maxBytes) : { ok: true, text: '' };
}
