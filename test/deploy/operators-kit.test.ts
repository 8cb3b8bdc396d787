// The operators' kit: the Grafana dashboard and the Prometheus alert rules only query metrics quotafed
// exports (names read from the live registry, not copied), and the rules file passes `promtool check rules` and
// its unit tests (`promtool test rules`) when promtool is installed (Debian's prometheus package; .ci/run).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { federationMetrics } from '../../src/federation/metrics.ts';
import { registry } from '../../src/metrics.ts';

const root = new URL('../../', import.meta.url);
const read = (path: string) => readFileSync(new URL(path, root), 'utf8');
const HAVE_PROMTOOL = spawnSync('promtool', ['--version'], { stdio: 'ignore' }).status === 0;
if (!HAVE_PROMTOOL)
  console.warn('test/deploy/operators-kit.test.ts: promtool checks skipped, no `promtool` on PATH (apt-get install prometheus)');

/** Every series name a query may use: counters and gauges as named, histograms with their three suffixes. */
function exportedSeries(): Set<string> {
  federationMetrics(registry);
  const names = new Set<string>();
  for (const metric of registry.getMetricsAsArray()) {
    const { name } = metric as unknown as { name: string };
    names.add(name);
    if (metric.constructor.name === 'Histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

const referenced = (exprs: readonly string[]) => [...new Set(exprs.flatMap((expr) => expr.match(/\bquotafed_[a-z0-9_]+/g) ?? []))];

interface Panel {
  id: number;
  type: string;
  title: string;
  targets?: Array<{ expr: string }>;
}

describe('deploy/grafana/quotafed.json', () => {
  const dashboard = JSON.parse(read('deploy/grafana/quotafed.json')) as {
    uid: string;
    panels: Panel[];
    templating: { list: Array<{ query?: unknown }> };
  };
  const exprs = [
    ...dashboard.panels.flatMap((panel) => panel.targets?.map((t) => t.expr) ?? []),
    ...dashboard.templating.list.map((v) =>
      typeof v.query === 'object' && v.query !== null ? (v.query as { query: string }).query : String(v.query ?? ''),
    ),
  ];

  it('queries only metric names that exist in the registry', () => {
    const series = exportedSeries();
    const names = referenced(exprs);
    expect(names.length).toBeGreaterThanOrEqual(14);
    expect(names.filter((name) => !series.has(name))).toEqual([]);
  });

  it('covers decisions and 429 per endpoint, Redis latency, breaker, sync lag per peer, backlog, degraded admissions', () => {
    const all = exprs.join('\n');
    for (const needed of [
      /sum by \(endpoint\) \(rate\(quotafed_decisions_total/,
      /sum by \(endpoint\) \(rate\(quotafed_http_429_total/,
      /quotafed_redis_command_duration_seconds_bucket/,
      /quotafed_breaker_state/,
      /by \(le, region, peer\) \(rate\(quotafed_federation_sync_lag_seconds_bucket/,
      /quotafed_federation_backlog_keys/,
      /quotafed_degraded_admissions_total/,
      /source="fail-closed"/,
    ]) {
      expect(all).toMatch(needed);
    }
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('filters every query of every panel on the $region variable', () => {
    const unfiltered = dashboard.panels.flatMap((panel) =>
      (panel.targets ?? []).flatMap((t) =>
        [...t.expr.matchAll(/\bquotafed_[a-z0-9_]+(\{[^}]*\})?/g)]
          .filter((m) => !(m[1] ?? '').includes('region=~"$region"'))
          .map((m) => `${panel.title}: ${m[0]}`),
      ),
    );
    expect(unfiltered).toEqual([]);
  });
});

describe('deploy/prometheus/alerts.yml', () => {
  const rules = parseYaml(read('deploy/prometheus/alerts.yml')) as { groups: Array<{ rules: Array<{ alert: string; expr: string }> }> };
  const alerts = rules.groups.flatMap((g) => g.rules);

  it('has the alerts of docs/operations.md §8, over metric names that exist', () => {
    const section = /## 8\. Alerts([\s\S]*?)## 9\./.exec(read('docs/operations.md'))![1]!;
    const documented = section.split('\n').filter((line) => /^\| [A-Z][^|]+\| `/.test(line));
    expect(alerts.length).toBe(documented.length);
    // Each documented expression's metric is queried by an alert.
    for (const line of documented) {
      const metric = /quotafed_[a-z0-9_]+/.exec(line)![0];
      expect(alerts.some((a) => a.expr.includes(metric))).toBe(true);
    }
    const series = exportedSeries();
    expect(referenced(alerts.map((a) => a.expr)).filter((name) => !series.has(name))).toEqual([]);
  });

  it.skipIf(!HAVE_PROMTOOL)('passes promtool check rules and the rule unit tests', () => {
    const cwd = fileURLToPath(new URL('deploy/prometheus/', root));
    const check = spawnSync('promtool', ['check', 'rules', 'alerts.yml'], { cwd, encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toMatch(/SUCCESS: 8 rules found/);
    const unit = spawnSync('promtool', ['test', 'rules', 'alerts.test.yml'], { cwd, encoding: 'utf8' });
    expect(unit.status, unit.stdout + unit.stderr).toBe(0);
  });
});
