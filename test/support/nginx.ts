// Debian's nginx as a test child: a non-daemon master on a loopback port with its own prefix, temp dirs and pid
// file under a temporary directory and its error log on stderr. The server configuration is the documented one,
// rendered from deploy/nginx/quotafed.conf.template (the same text docs/nginx.md shows).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../src/ops/redis-process.ts';
import { stopChild } from '../../src/ops/stop-child.ts';

export const NGINX_TEMPLATE_PATH = new URL('../../deploy/nginx/quotafed.conf.template', import.meta.url);

export function nginxAvailable(): boolean {
  return spawnSync('nginx', ['-v'], { stdio: 'ignore' }).status === 0;
}

export interface TemplateValues {
  QUOTAFED_ADDR: string;
  API_ADDR: string;
  LISTEN: string;
  /** What nginx does while quotafed does not answer: `open` (forward unlimited) or `closed` (503). */
  QUOTAFED_UNAVAILABLE: 'open' | 'closed';
}

/** What `envsubst '${QUOTAFED_ADDR} ${API_ADDR} ${LISTEN} ${QUOTAFED_UNAVAILABLE}'` does to the template: nothing else is touched. */
export function renderTemplate(values: TemplateValues): string {
  let text = readFileSync(NGINX_TEMPLATE_PATH, 'utf8');
  for (const [name, value] of Object.entries(values)) text = text.replaceAll(`\${${name}}`, value);
  return text;
}

export interface NginxProcess {
  readonly url: string;
  readonly stderr: () => string;
  stop(): Promise<void>;
}

export async function startNginx(
  values: Omit<TemplateValues, 'LISTEN' | 'QUOTAFED_UNAVAILABLE'> & Partial<Pick<TemplateValues, 'QUOTAFED_UNAVAILABLE'>>,
): Promise<NginxProcess> {
  const prefix = mkdtempSync(join(tmpdir(), 'qf-nginx-'));
  const port = await freePort();
  const listen = `127.0.0.1:${port}`;
  writeFileSync(join(prefix, 'quotafed.conf'), renderTemplate({ QUOTAFED_UNAVAILABLE: 'closed', ...values, LISTEN: listen }));
  writeFileSync(
    join(prefix, 'nginx.conf'),
    `daemon off;
worker_processes 1;
pid ${join(prefix, 'nginx.pid')};
error_log stderr notice;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path ${join(prefix, 'client_body')};
    proxy_temp_path ${join(prefix, 'proxy')};
    fastcgi_temp_path ${join(prefix, 'fastcgi')};
    uwsgi_temp_path ${join(prefix, 'uwsgi')};
    scgi_temp_path ${join(prefix, 'scgi')};
    include ${join(prefix, 'quotafed.conf')};
}
`,
  );
  const child: ChildProcess = spawn('nginx', ['-p', prefix, '-c', join(prefix, 'nginx.conf'), '-e', 'stderr'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => {
    stderr += String(chunk);
  });
  const url = `http://${listen}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`nginx exited with ${child.exitCode}:\n${stderr}`);
    try {
      await fetch(`${url}/_nginx_probe`, { signal: AbortSignal.timeout(500) }).then((r) => r.arrayBuffer());
      break;
    } catch {
      if (Date.now() > deadline) {
        await stopChild(child);
        throw new Error(`nginx did not listen on ${listen}:\n${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  return {
    url,
    stderr: () => stderr,
    async stop() {
      // SIGTERM is nginx's fast shutdown; the master takes its worker with it.
      await stopChild(child);
      rmSync(prefix, { recursive: true, force: true });
    },
  };
}
