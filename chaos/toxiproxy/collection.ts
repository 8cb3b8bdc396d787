// Every proxy of the server by name, with the multi-proxy operations: create, populate, reset, delete.
import type { Logger } from 'pino';
import { ApiError, proxyNotFound } from './errors.ts';
import { Proxy, type ProxyConfig } from './proxy.ts';

export interface ProxyInput extends ProxyConfig {
  enabled: boolean;
}

export class ProxyCollection {
  private readonly proxies = new Map<string, Proxy>();

  constructor(private readonly logger: Logger) {}

  /** Sorted by name, as Go's JSON encoding of the map sorts its keys. */
  list(): Proxy[] {
    return [...this.proxies.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  get(name: string): Proxy {
    const proxy = this.proxies.get(name);
    if (!proxy) throw proxyNotFound();
    return proxy;
  }

  async create(input: ProxyInput): Promise<Proxy> {
    if (this.proxies.has(input.name)) throw new ApiError(409, 'proxy already exists');
    const proxy = await this.started(input);
    this.proxies.set(proxy.name, proxy);
    return proxy;
  }

  /**
   * Creates or replaces each entry in order; an equal existing proxy is kept as it is (toxics, enabled state).
   * A failure part-way keeps what was done and reports it in the error body.
   */
  async populate(inputs: ProxyInput[]): Promise<Proxy[]> {
    const done: Proxy[] = [];
    for (const input of inputs) {
      try {
        const existing = this.proxies.get(input.name);
        if (existing && !(await existing.differs(input))) {
          done.push(existing);
          continue;
        }
        await existing?.stop();
        this.proxies.delete(input.name);
        const proxy = await this.started(input);
        this.proxies.set(proxy.name, proxy);
        done.push(proxy);
      } catch (error) {
        if (!(error instanceof ApiError)) throw error;
        throw new ApiError(error.status, error.message, { proxies: done.map((proxy) => proxy.toJSON()) });
      }
    }
    return done;
  }

  async remove(name: string): Promise<void> {
    const proxy = this.get(name);
    await proxy.stop();
    this.proxies.delete(name);
    this.logger.info({ proxy: name }, 'proxy deleted');
  }

  /** Re-enables every proxy and removes every toxic; proxies and connections stay. */
  async reset(): Promise<void> {
    for (const proxy of this.proxies.values()) {
      await proxy.start();
      proxy.toxics.removeAll();
    }
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.proxies.values()].map((proxy) => proxy.stop()));
    this.proxies.clear();
  }

  private async started(input: ProxyInput): Promise<Proxy> {
    const proxy = new Proxy(input, this.logger);
    if (input.enabled) await proxy.start();
    return proxy;
  }
}
