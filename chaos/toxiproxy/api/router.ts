// Exact-path routing like gorilla/mux without StrictSlash: `:name` matches one decoded segment, a known path
// with the wrong method is 405, anything else 404.
import type { ApiResponse } from './http.ts';

export type Params = Record<string, string>;

export interface RouteRequest {
  params: Params;
  body: string;
}

export interface Route {
  methods: readonly string[];
  path: string;
  handler: (request: RouteRequest) => Promise<ApiResponse> | ApiResponse;
}

export type RouteMatch = { kind: 'found'; route: Route; params: Params } | { kind: 'method-not-allowed' } | { kind: 'not-found' };

function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

function matchPath(pattern: string, pathname: string): Params | undefined {
  const want = pattern.split('/');
  const have = pathname.split('/');
  if (want.length !== have.length) return undefined;
  const params: Params = {};
  for (let i = 0; i < want.length; i++) {
    const segment = decodeSegment(have[i]!);
    if (segment === undefined) return undefined;
    const expected = want[i]!;
    if (expected.startsWith(':')) {
      if (segment === '') return undefined;
      params[expected.slice(1)] = segment;
    } else if (expected !== segment) {
      return undefined;
    }
  }
  return params;
}

export function matchRoute(routes: readonly Route[], method: string, pathname: string): RouteMatch {
  let pathKnown = false;
  for (const route of routes) {
    const params = matchPath(route.path, pathname);
    if (!params) continue;
    if (route.methods.includes(method)) return { kind: 'found', route, params };
    pathKnown = true;
  }
  return pathKnown ? { kind: 'method-not-allowed' } : { kind: 'not-found' };
}
