// The Toxiproxy 2.x API on top of a ProxyCollection, with the Go server's status codes.
import type { ProxyCollection } from '../collection.ts';
import { toxicJson } from '../proxy.ts';
import {
  decodeAttributes,
  decodePopulate,
  decodeProxyCreate,
  decodeProxyUpdate,
  decodeToxicCreate,
  decodeToxicUpdate,
  parseBody,
} from './decode.ts';
import { json, noContent } from './http.ts';
import type { Route } from './router.ts';

/** The API version this server is compatible with; clients only check that /version answers 200. */
export const TOXIPROXY_VERSION = '2.12.0';

export function toxiproxyRoutes(proxies: ProxyCollection): Route[] {
  const proxy = (name: string | undefined) => proxies.get(name ?? '');
  return [
    {
      methods: ['GET'],
      path: '/version',
      // Go writes this one by hand: a space after the colon and a trailing newline.
      handler: () => ({
        status: 200,
        body: `{"version": "${TOXIPROXY_VERSION}"}\n`,
        headers: { 'Content-Type': 'application/json;charset=utf-8' },
      }),
    },
    {
      methods: ['POST'],
      path: '/reset',
      handler: async () => {
        await proxies.reset();
        return noContent();
      },
    },
    {
      methods: ['GET'],
      path: '/proxies',
      handler: () => json(200, Object.fromEntries(proxies.list().map((p) => [p.name, p.toJSON()]))),
    },
    {
      methods: ['POST'],
      path: '/proxies',
      handler: async ({ body }) => json(201, await proxies.create(decodeProxyCreate(parseBody(body)))),
    },
    {
      methods: ['POST'],
      path: '/populate',
      handler: async ({ body }) => {
        const created = await proxies.populate(decodePopulate(parseBody(body)));
        return json(201, { proxies: created.map((p) => p.toJSON()) });
      },
    },
    {
      methods: ['GET'],
      path: '/proxies/:proxy',
      handler: ({ params }) => json(200, proxy(params.proxy)),
    },
    {
      methods: ['POST', 'PATCH'],
      path: '/proxies/:proxy',
      handler: async ({ params, body }) => {
        const target = proxy(params.proxy);
        const input = decodeProxyUpdate(parseBody(body));
        await target.update({
          name: target.name,
          listen: input.listen ?? target.listen,
          upstream: input.upstream ?? target.upstream,
          enabled: input.enabled ?? target.enabled,
        });
        return json(200, target);
      },
    },
    {
      methods: ['DELETE'],
      path: '/proxies/:proxy',
      handler: async ({ params }) => {
        await proxies.remove(params.proxy ?? '');
        return noContent();
      },
    },
    {
      methods: ['GET'],
      path: '/proxies/:proxy/toxics',
      handler: ({ params }) => json(200, proxy(params.proxy).toxics.list().map(toxicJson)),
    },
    {
      methods: ['POST'],
      path: '/proxies/:proxy/toxics',
      handler: ({ params, body }) => {
        const toxics = proxy(params.proxy).toxics;
        return json(200, toxicJson(toxics.add(decodeToxicCreate(parseBody(body)), decodeAttributes)));
      },
    },
    {
      methods: ['GET'],
      path: '/proxies/:proxy/toxics/:toxic',
      handler: ({ params }) => json(200, toxicJson(proxy(params.proxy).toxics.get(params.toxic ?? ''))),
    },
    {
      methods: ['POST', 'PATCH'],
      path: '/proxies/:proxy/toxics/:toxic',
      handler: ({ params, body }) => {
        const toxics = proxy(params.proxy).toxics;
        toxics.get(params.toxic ?? '');
        const updated = toxics.update(params.toxic ?? '', decodeToxicUpdate(parseBody(body)), decodeAttributes);
        return json(200, toxicJson(updated));
      },
    },
    {
      methods: ['DELETE'],
      path: '/proxies/:proxy/toxics/:toxic',
      handler: ({ params }) => {
        proxy(params.proxy).toxics.remove(params.toxic ?? '');
        return noContent();
      },
    },
  ];
}
