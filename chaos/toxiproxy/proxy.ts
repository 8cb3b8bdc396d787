// One named proxy: its listener, its live connections and its toxics.
import { createServer, type Server } from 'node:net';
import type { Logger } from 'pino';
import { bindListener, listenDiffers } from './address.ts';
import { openConnection, type Connection } from './connection.ts';
import { ToxicCollection } from './toxic-collection.ts';
import type { ToxicSpec } from './toxics/types.ts';

export interface ProxyConfig {
  name: string;
  listen: string;
  upstream: string;
}

export interface ProxyJson {
  name: string;
  listen: string;
  upstream: string;
  enabled: boolean;
  /** An artifact of the Go server's struct that real responses carry; kept so that responses match. */
  Logger: Record<string, never>;
  toxics: ToxicJson[];
}

export interface ToxicJson {
  attributes: Record<string, number>;
  name: string;
  type: string;
  stream: string;
  toxicity: number;
}

export function toxicJson(spec: ToxicSpec): ToxicJson {
  return { attributes: spec.attributes, name: spec.name, type: spec.type, stream: spec.stream, toxicity: spec.toxicity };
}

export class Proxy {
  readonly name: string;
  /** As given until the first successful bind, then the bound address (so port 0 becomes the real port). */
  listen: string;
  upstream: string;
  readonly toxics = new ToxicCollection();
  private server: Server | undefined;
  private readonly connections = new Set<Connection>();
  private readonly logger: Logger;

  constructor(config: ProxyConfig, logger: Logger) {
    this.name = config.name;
    this.listen = config.listen;
    this.upstream = config.upstream;
    this.logger = logger.child({ proxy: config.name });
  }

  get enabled(): boolean {
    return this.server !== undefined;
  }

  async start(): Promise<void> {
    if (this.server) return;
    // Go's TCP connections have Nagle off; so do these, so that small writes (slicer pieces) leave at once.
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true }, (socket) => {
      const connection = openConnection(socket, this.upstream, this.toxics, (dialError) => {
        this.connections.delete(connection);
        if (dialError) this.logger.warn({ upstream: this.upstream, err: dialError.message }, 'unable to open connection to upstream');
      });
      this.connections.add(connection);
    });
    this.listen = await bindListener(server, this.listen);
    this.server = server;
    this.logger.info({ listen: this.listen, upstream: this.upstream }, 'proxy started');
  }

  /** Closes the listener and every open connection; toxics stay configured. */
  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const connection of [...this.connections]) connection.destroy();
    this.connections.clear();
    await closed;
    this.logger.info({ listen: this.listen }, 'proxy stopped');
  }

  /** Go's Proxy.Update: a changed address restarts the proxy; otherwise only `enabled` is applied. */
  async update(next: ProxyConfig & { enabled: boolean }): Promise<void> {
    if ((await listenDiffers(this.listen, next.listen)) || next.upstream !== this.upstream) {
      await this.stop();
      this.listen = next.listen;
      this.upstream = next.upstream;
    }
    if (next.enabled) await this.start();
    else await this.stop();
  }

  /** Whether a populate entry names a different proxy than this one (then it is replaced). */
  async differs(config: ProxyConfig): Promise<boolean> {
    return config.upstream !== this.upstream || (await listenDiffers(this.listen, config.listen));
  }

  toJSON(): ProxyJson {
    return {
      name: this.name,
      listen: this.listen,
      upstream: this.upstream,
      enabled: this.enabled,
      Logger: {},
      toxics: this.toxics.list().map(toxicJson),
    };
  }
}
