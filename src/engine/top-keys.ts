// Who is being limited: per rule, a space-saving sketch of the keys with the most denials and one of the keys with
// the most consumption (admitted cost), for the rule's current window (floor(now / period), as the rules count),
// fed by every decision of the resilient engine. The last complete window is kept beside it. This process's view:
// each gateway process of a region has its own sketches.
import type { Rule } from '../config/schema.ts';
import type { TopKeysSettings } from '../config/observability.ts';
import { SpaceSaving } from './space-saving.ts';
import type { Decision, MatchedRule, RequestContext } from './types.ts';

/** What a sketch counts: denied decisions (1 each, shadow denials included) or the cost of admitted ones. */
export type TopKeysMeasure = 'denials' | 'consumption';
/** The window a read covers: the one in progress, or the one before it. */
export type TopKeysWindow = 'current' | 'previous';

/** One key of a top list. */
export interface TopKeyEntry {
  /** The key as a request names it, one value per dimension of the rule (API keys masked unless `apiKeys: plain`). */
  key: string;
  /** The key's identity hash under the rule (the last part of its Redis state key). */
  id: string;
  /** Counted for this key in the window: an upper bound of its true count. */
  count: number;
  /** How much of `count` may belong to keys it replaced in the sketch: the true count is at least count - error. */
  error: number;
}

/** One rule's top list for one window and measure. */
export interface TopKeysView {
  rule: string;
  by: TopKeysMeasure;
  window: { which: TopKeysWindow; startMs: number; endMs: number; periodMs: number };
  /** Total counted for the rule in the window (denials or admitted cost), over every key. */
  total: number;
  /** Counters of the sketch. */
  capacity: number;
  /** A key not listed was counted at most this much (0 while the sketch held every key it saw). */
  floor: number;
  entries: TopKeyEntry[];
}

interface WindowSketches {
  windowId: number;
  denials: SpaceSaving<string>;
  consumption: SpaceSaving<string>;
}

interface RuleSketches {
  periodMs: number;
  current: WindowSketches;
  previous: WindowSketches;
}

/**
 * The per-rule sketches of one engine: `record` on every decision (O(1) for a cost of 1), `top` to read.
 *
 * @example
 * ```ts
 * const topKeys = createTopKeys({ enabled: true, capacity: 256, metricsTopN: 10, apiKeys: 'masked' });
 * topKeys.record(matched, decision, request, Date.now());
 * topKeys.top(rule, 'denials', 10, 'current', Date.now())?.entries; // [{ key: 'demo…#3fKq0Z', id, count, error }]
 * ```
 */
export interface TopKeys {
  readonly settings: TopKeysSettings;
  /** Counts one decision: a denial per denying rule, the cost per rule of an admitted request. */
  record(matched: readonly MatchedRule[], decision: Decision, request: RequestContext, nowMs: number): void;
  /** The top `n` keys of `rule` by `by` in the window holding `nowMs` (or the one before). */
  top(rule: Pick<Rule, 'name' | 'period' | 'by'>, by: TopKeysMeasure, n: number, which: TopKeysWindow, nowMs: number): TopKeysView;
  /** Drops the sketches of rules not in `rules` (a policy reload). */
  retain(rules: readonly Pick<Rule, 'name'>[]): void;
}

const emptyWindow = (capacity: number, windowId: number): WindowSketches => ({
  windowId,
  denials: new SpaceSaving<string>(capacity),
  consumption: new SpaceSaving<string>(capacity),
});

/** The last part of a state key `<prefix>:{s<n>}:<rule>:<identity hash>`. */
function identityIdOf(stateKey: string): string {
  return stateKey.slice(stateKey.lastIndexOf(':') + 1);
}

/** An API key as shown: its first 4 characters (none of a short key) and 6 of its identity hash. */
export function maskApiKey(apiKey: string, id: string): string {
  return `${apiKey.length > 8 ? apiKey.slice(0, 4) : ''}…#${id.slice(0, 6)}`;
}

/** Separates the dimension values of a key in a sketch entry's raw label. */
const SEPARATOR = '\u0000';
/** Starts the raw label of an Envoy descriptor (shown as it is). */
const DESCRIPTOR = '\u0001';

/**
 * What a sketch entry keeps of the key: its dimension values as the request gave them (one value is kept as is,
 * without a copy), or an Envoy descriptor's entries. Masked and joined only when read (displayLabel).
 */
function rawLabelOf(entry: MatchedRule, request: RequestContext): string {
  if (request.descriptor) return DESCRIPTOR + request.descriptor.entries.map(({ key, value }) => `${key}=${value}`).join(' ');
  const { by } = entry.rule;
  if (by.length === 1) return dimensionValue(by[0]!, entry, request);
  let raw = dimensionValue(by[0]!, entry, request);
  for (let i = 1; i < by.length; i++) raw += SEPARATOR + dimensionValue(by[i]!, entry, request);
  return raw;
}

function dimensionValue(dimension: Rule['by'][number], entry: MatchedRule, request: RequestContext): string {
  if (dimension === 'apiKey') return request.apiKey ?? '';
  if (dimension === 'ip') return request.ip;
  if (dimension === 'endpoint') return entry.endpoint ?? request.path;
  return request.method.toUpperCase();
}

/** The key as GET /admin/keys/top shows it: the rule's dimension values space-separated, API keys masked unless plain. */
function displayLabel(raw: string, rule: Pick<Rule, 'by'>, id: string, apiKeys: TopKeysSettings['apiKeys']): string {
  if (raw.startsWith(DESCRIPTOR)) return raw.slice(1);
  const values = rule.by.length === 1 ? [raw] : raw.split(SEPARATOR);
  if (values.length !== rule.by.length) return raw.replaceAll(SEPARATOR, ' ');
  return values.map((value, i) => (rule.by[i] === 'apiKey' && apiKeys === 'masked' ? maskApiKey(value, id) : value)).join(' ');
}

/**
 * The sketches of one engine, with `settings.capacity` counters per rule, measure and window (two windows).
 *
 * @example
 * ```ts
 * const topKeys = createTopKeys(config.topKeys);
 * ```
 */
export function createTopKeys(settings: TopKeysSettings): TopKeys {
  const { capacity } = settings;
  const byRule = new Map<string, RuleSketches>();

  /** The rule's sketches with `current` on the window of `nowMs` (rolled over, or reset after a gap or a new period). */
  const sketchesOf = (rule: Pick<Rule, 'name' | 'period'>, nowMs: number): RuleSketches => {
    const windowId = Math.floor(nowMs / rule.period);
    let sketches = byRule.get(rule.name);
    if (sketches === undefined || sketches.periodMs !== rule.period) {
      sketches = { periodMs: rule.period, current: emptyWindow(capacity, windowId), previous: emptyWindow(capacity, windowId - 1) };
      byRule.set(rule.name, sketches);
      return sketches;
    }
    const { current, previous } = sketches;
    if (current.windowId === windowId) return sketches;
    // Roll over, reusing the older window's counters: O(capacity) once per window.
    previous.denials.clear();
    previous.consumption.clear();
    if (current.windowId === windowId - 1) {
      sketches.previous = current;
      sketches.current = previous;
    } else {
      current.denials.clear();
      current.consumption.clear();
      current.windowId = windowId - 1;
      sketches.previous = current;
      sketches.current = previous;
    }
    sketches.current.windowId = windowId;
    return sketches;
  };

  return {
    settings,
    record(matched, decision, request, nowMs) {
      const cost = request.cost ?? 1;
      for (const outcome of decision.outcomes) {
        const denied = !outcome.allowed;
        // A request denied by any rule consumes from none.
        if (!denied && !decision.allowed) continue;
        let entry: MatchedRule | undefined;
        for (const candidate of matched) {
          if (candidate.rule.name === outcome.rule) {
            entry = candidate;
            break;
          }
        }
        if (entry === undefined) continue;
        const window = sketchesOf(entry.rule, nowMs).current;
        const hit = denied ? window.denials.add(entry.key, 1) : window.consumption.add(entry.key, cost);
        if (hit !== undefined && hit.meta === undefined) hit.meta = rawLabelOf(entry, request);
      }
    },
    top(rule, by, n, which, nowMs) {
      const sketches = sketchesOf(rule, nowMs);
      const window = which === 'current' ? sketches.current : sketches.previous;
      const sketch = by === 'denials' ? window.denials : window.consumption;
      const startMs = window.windowId * rule.period;
      return {
        rule: rule.name,
        by,
        window: { which, startMs, endMs: startMs + rule.period, periodMs: rule.period },
        total: sketch.total,
        capacity,
        floor: sketch.floor,
        entries: sketch.top(n).map((hit) => {
          const id = identityIdOf(hit.id);
          return { key: displayLabel(hit.meta ?? '', rule, id, settings.apiKeys), id, count: hit.count, error: hit.error };
        }),
      };
    },
    retain(rules) {
      const names = new Set(rules.map((rule) => rule.name));
      for (const name of byRule.keys()) if (!names.has(name)) byRule.delete(name);
    },
  };
}
