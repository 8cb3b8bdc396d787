// The alert rules against what a running federation really exports: two regions as `quotafed serve` processes,
// each on its own redis-server, scraped over HTTP (with the `instance` and `job` labels Prometheus adds). Every
// selector of every alert must match scraped series and every label it groups by must be on them; then
// `promtool test rules` runs the shipped expressions on those very label sets (values chosen to fire each alert) and
// expects each alert with the labels the scraped series give it. us-east signs its gossip and eu-west does not, so
// us-east rejects eu-west's jobs (bad_mac) while eu-west hears us-east: both the healthy and the rejected series exist.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml, stringify as toYaml } from 'yaml';
import { freePort, startRedis, type RedisProcess } from '../../src/ops/redis-process.ts';
import { startServiceProcess, type ServiceProcess } from '../../src/ops/service-process.ts';
import { eventually } from '../support/wait.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const HAVE_PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
if (!HAVE_PROMTOOL)
  console.warn('test/deploy/alerts-scraped.test.ts: promtool run skipped, no `promtool` on PATH (apt-get install prometheus)');

type Labels = Record<string, string>;
interface Series {
  name: string;
  labels: Labels;
}

/** Prometheus text format → series (name and labels), with the target labels a scrape adds. */
function parseExposition(text: string, target: Labels): Series[] {
  const out: Series[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s/.exec(line);
    if (!match) continue;
    const labels: Labels = { ...target };
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[pair[1]!] = pair[2]!;
    out.push({ name: match[1]!, labels });
  }
  return out;
}

interface Selector {
  name: string;
  matchers: Array<{ label: string; op: string; value: string }>;
}

/** The vector selectors of a PromQL expression (quotafed metrics only). */
function selectors(expr: string): Selector[] {
  return [...expr.matchAll(/\b(quotafed_[a-z0-9_]+)(?:\{([^}]*)\})?/g)].map((m) => ({
    name: m[1]!,
    matchers: [...(m[2] ?? '').matchAll(/([a-z_]+)\s*(=~|!=|!~|=)\s*"([^"]*)"/g)].map((x) => ({ label: x[1]!, op: x[2]!, value: x[3]! })),
  }));
}

const matches = (series: Series, selector: Selector) =>
  series.name === selector.name &&
  selector.matchers.every(({ label, op, value }) => {
    const actual = series.labels[label] ?? '';
    if (op === '=') return actual === value;
    if (op === '!=') return actual !== value;
    const re = new RegExp(`^(?:${value})$`);
    return op === '=~' ? re.test(actual) : !re.test(actual);
  });

/** The labels an expression groups by (`by (a, b)`), `le` excepted (histogram_quantile consumes it). */
const groupedBy = (expr: string) =>
  [...new Set([...expr.matchAll(/by \(([^)]*)\)/g)].flatMap((m) => m[1]!.split(',').map((l) => l.trim())))].filter((l) => l !== 'le');

const SECRET = 'alerts-scraped-federation-secret';

describe('deploy/prometheus/alerts.yml on scraped series', () => {
  const dir = mkdtempSync(join(tmpdir(), 'qf-alerts-'));
  const redis: RedisProcess[] = [];
  const services: ServiceProcess[] = [];
  const scraped: Series[] = [];
  const alerts = (
    parseYaml(readFileSync(join(root, 'deploy/prometheus/alerts.yml'), 'utf8')) as {
      groups: Array<{ rules: Array<{ alert: string; expr: string; for?: string; labels?: Labels }> }>;
    }
  ).groups.flatMap((g) => g.rules);

  const scrape = async (service: ServiceProcess) => {
    const text = await (await fetch(`${service.url}/metrics`)).text();
    return parseExposition(text, { instance: new URL(service.url).host, job: 'quotafed' });
  };

  beforeAll(async () => {
    redis.push(await startRedis(), await startRedis());
    const ports = [await freePort(), await freePort()];
    const names = ['us-east', 'eu-west'];
    for (const [i, name] of names.entries()) {
      const peer = 1 - i;
      const config = {
        region: name,
        port: ports[i],
        logLevel: 'warn',
        redis: { url: redis[i]!.url, commandTimeoutMs: 300, connectTimeoutMs: 500 },
        breaker: { failureThreshold: 3, probeIntervalMs: 200, localFallback: false },
        federation: {
          syncIntervalMs: 100,
          bootstrap: 'new',
          ...(name === 'us-east' ? { secret: SECRET } : {}),
          peers: [{ name: names[peer], redisUrl: redis[peer]!.url }],
        },
        rules: [{ name: 'per-key', match: { identity: 'apiKey' }, by: ['apiKey'], algorithm: 'fixedWindow', limit: 1000, period: '1m' }],
      };
      const configPath = join(dir, `${name}.yaml`);
      writeFileSync(configPath, toYaml(config));
      services.push(await startServiceProcess({ region: name, configPath, port: ports[i]!, root, write: () => undefined }));
    }
    const [usEast, euWest] = services as [ServiceProcess, ServiceProcess];
    // Admissions in us-east are gossiped to eu-west (signed: heard, and their sync lag measured).
    const check = (service: ServiceProcess, apiKey: string, cost = 1) =>
      fetch(`${service.url}/v1/check`, { method: 'POST', body: JSON.stringify({ apiKey, method: 'GET', path: '/x', cost }) }).then((r) =>
        r.arrayBuffer(),
      );
    // Each admission crosses the watermark of us-east's share (525 of 1,000 + 50), so the keys turn loud and are
    // gossiped (a small admission far below the share is silent: src/protocol/admission-gossip.ts).
    for (let i = 0; i < 5; i++) await check(usEast, `scrape-${i}`, 500);
    await eventually(
      async () => {
        const west = await scrape(euWest);
        const east = await scrape(usEast);
        return (
          west.some((s) => s.name === 'quotafed_federation_sync_lag_seconds_bucket') &&
          west.some((s) => s.name === 'quotafed_federation_peer_last_heard_timestamp_seconds') &&
          east.some((s) => s.name === 'quotafed_federation_rejected_jobs_total')
        );
      },
      30_000,
      'gossip series in both regions',
    );
    scraped.push(...(await scrape(euWest)));
    // us-east's Redis dies: fail-open admissions, Redis errors, the breaker opens.
    await redis[0]!.kill('SIGKILL');
    for (let i = 0; i < 8; i++) await check(usEast, 'scrape-down');
    await eventually(
      async () => (await scrape(usEast)).some((s) => s.name === 'quotafed_breaker_state' && s.labels.region === 'us-east'),
      10_000,
      'the breaker series',
    );
    scraped.push(...(await scrape(usEast)));
  }, 90_000);

  afterAll(async () => {
    for (const service of services) await service.stop();
    for (const server of redis) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('puts region on every quotafed series, and build info and reload metrics beside them', () => {
    const ours = scraped.filter((s) => s.name.startsWith('quotafed_'));
    expect(ours.length).toBeGreaterThan(50);
    expect(ours.filter((s) => s.labels.region === undefined).map((s) => s.name)).toEqual([]);
    const build = scraped.find((s) => s.name === 'quotafed_build_info');
    expect(build?.labels).toMatchObject({ version: expect.stringMatching(/^\d+\.\d+\.\d+/), node_version: process.version });
    for (const name of ['quotafed_config_reloads_total', 'quotafed_config_last_reload_success_timestamp_seconds', 'quotafed_redis_up'])
      expect(scraped.some((s) => s.name === name)).toBe(true);
  });

  it('matches every selector of every alert, and every label it groups by', () => {
    expect(alerts.length).toBe(8);
    for (const alert of alerts) {
      for (const selector of selectors(alert.expr)) {
        const found = scraped.filter((s) => matches(s, selector));
        expect(found.length, `${alert.alert}: no scraped series for ${selector.name} ${JSON.stringify(selector.matchers)}`).toBeGreaterThan(
          0,
        );
        for (const label of groupedBy(alert.expr))
          expect(
            found.some((s) => s.labels[label] !== undefined),
            `${alert.alert}: ${selector.name} has no "${label}" label`,
          ).toBe(true);
      }
    }
  });

  it.skipIf(!HAVE_PROMTOOL)('fires every alert under promtool on the scraped label sets, with the labels they carry', () => {
    /** Values over 30 s steps that make each alert's expression true; a histogram's slow buckets fill, its fast ones do not. */
    const values = (series: Series): string | undefined => {
      const le = series.labels.le === undefined ? undefined : Number(series.labels.le);
      switch (series.name) {
        case 'quotafed_breaker_state':
          return '1x80';
        case 'quotafed_degraded_admissions_total':
        case 'quotafed_federation_rejected_jobs_total':
          return '0+60x80';
        case 'quotafed_redis_errors_total':
          return '0+600x80';
        case 'quotafed_federation_peer_last_heard_timestamp_seconds':
          return '0x80';
        case 'quotafed_federation_backlog_keys':
          return '20000+1000x80';
        case 'quotafed_limiter_overhead_seconds_bucket':
          return le! <= 0.005 ? '0x80' : '0+60x80';
        case 'quotafed_federation_sync_lag_seconds_bucket':
          return le! <= 1 ? '0x80' : '0+60x80';
        default:
          return undefined;
      }
    };
    const input = scraped.flatMap((series) => {
      const v = values(series);
      if (v === undefined) return [];
      const labels = Object.entries(series.labels)
        .map(([k, val]) => `${k}=${JSON.stringify(val)}`)
        .join(', ');
      return [{ series: `${series.name}{${labels}}`, values: v }];
    });
    // Each alert fires once per label set its grouping leaves, taken from the scraped series it selects.
    const alertTests = alerts.map((alert) => {
      const by = groupedBy(alert.expr);
      const sets = new Map<string, Labels>();
      for (const selector of selectors(alert.expr))
        for (const series of scraped.filter((s) => matches(s, selector) && values(s) !== undefined)) {
          const labels = Object.fromEntries(by.map((label) => [label, series.labels[label]!]));
          expect(
            Object.values(labels).every((value) => value !== undefined),
            `${alert.alert} on ${series.name}`,
          ).toBe(true);
          sets.set(JSON.stringify(labels), labels);
        }
      return {
        eval_time: '40m',
        alertname: alert.alert,
        exp_alerts: [...sets.values()].map((labels) => ({ exp_labels: { ...alert.labels, ...labels } })),
      };
    });
    for (const test of alertTests) expect(test.exp_alerts.length, test.alertname).toBeGreaterThan(0);
    // The shipped expressions, `for` and labels; annotations are alerts.test.yml's subject.
    const rules = parseYaml(readFileSync(join(root, 'deploy/prometheus/alerts.yml'), 'utf8')) as {
      groups: Array<{ rules: Array<Record<string, unknown>> }>;
    };
    for (const group of rules.groups) for (const rule of group.rules) delete rule.annotations;
    writeFileSync(join(dir, 'alerts.yml'), toYaml(rules));
    writeFileSync(
      join(dir, 'scraped.test.yml'),
      toYaml({
        rule_files: ['alerts.yml'],
        evaluation_interval: '30s',
        tests: [{ interval: '30s', input_series: input, alert_rule_test: alertTests }],
      }),
    );
    const run = spawnSync('promtool', ['test', 'rules', 'scraped.test.yml'], { cwd: dir, encoding: 'utf8' });
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
});
