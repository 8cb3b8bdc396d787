// `host:port` handling for listen and upstream addresses, with Go's rules: the last colon splits, IPv6 sits in
// brackets, hostnames resolve preferring IPv4, and a wildcard host binds dual-stack and reports `[::]:P`.
import { lookup } from 'node:dns/promises';
import { isIP, type Server } from 'node:net';
import { ApiError } from './errors.ts';

export interface HostPort {
  host: string;
  port: number;
}

const WILDCARDS = new Set(['', '0.0.0.0', '::']);

/** Splits `host:port`, `[v6]:port` or `:port`; throws Go's "missing port" error otherwise. */
export function splitHostPort(address: string): HostPort {
  // Go's net.Listen treats an empty address as every interface on a free port.
  if (address === '') return { host: '', port: 0 };
  const colon = address.lastIndexOf(':');
  if (colon < 0) throw new ApiError(500, `address ${address}: missing port in address`);
  let host = address.slice(0, colon);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  else if (host.includes(':')) throw new ApiError(500, `address ${address}: too many colons in address`);
  const portText = address.slice(colon + 1);
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) throw new ApiError(500, `listen tcp: address ${address}: invalid port`);
  return { host, port };
}

export function formatAddress(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The address a listen string names, as the Go server prints it (`localhost:80` → `127.0.0.1:80`). */
export async function resolveListen(listen: string): Promise<HostPort> {
  const { host, port } = splitHostPort(listen);
  if (WILDCARDS.has(host)) return { host: '::', port };
  if (isIP(host)) return { host, port };
  try {
    const v4 = await lookup(host, { family: 4 }).catch(() => undefined);
    const found = v4 ?? (await lookup(host));
    return { host: found.address, port };
  } catch {
    throw new ApiError(500, `listen tcp: lookup ${host}: no such host`);
  }
}

/** Whether `next` names another address than the proxy's current `listen` (hostnames resolved). */
export async function listenDiffers(current: string, next: string): Promise<boolean> {
  const wanted = await resolveListen(next);
  let have: HostPort;
  try {
    have = await resolveListen(current);
  } catch {
    return true;
  }
  return have.host !== wanted.host || have.port !== wanted.port;
}

const BIND_ERRORS: Record<string, string> = {
  EADDRINUSE: 'bind: address already in use',
  EADDRNOTAVAIL: 'bind: cannot assign requested address',
  EACCES: 'bind: permission denied',
};

function listenOnce(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error) => reject(error);
    server.once('error', onError);
    server.listen({ host, port }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** Binds `server` to `listen` and returns the bound address as Go reports it, or throws a 500 ApiError. */
export async function bindListener(server: Server, listen: string): Promise<string> {
  const { host, port } = await resolveListen(listen);
  try {
    await listenOnce(server, host, port).catch((error: NodeJS.ErrnoException) => {
      // A host without IPv6 cannot bind the dual-stack wildcard; all IPv4 interfaces is the next best thing.
      const noIpv6 = error.code === 'EAFNOSUPPORT' || error.code === 'EADDRNOTAVAIL';
      if (host === '::' && noIpv6) return listenOnce(server, '0.0.0.0', port);
      throw error;
    });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    const reason = BIND_ERRORS[code] ?? (error as Error).message;
    throw new ApiError(500, `listen tcp ${formatAddress(host, port)}: ${reason}`);
  }
  const bound = server.address();
  if (bound === null || typeof bound === 'string') throw new ApiError(500, `listen tcp ${listen}: no address`);
  return formatAddress(bound.address, bound.port);
}
