// The engine the resilient wrapper decides with, and what it may offer beyond a DecisionEngine. The Redis
// engine offers both extras; any other DecisionEngine (a test double, a custom store) works without them.
import type { Config, Rule } from '../config/schema.ts';
import type { Unsettled } from './local-fallback.ts';
import type { Decision, DecisionEngine, MatchedRule, RequestContext } from './types.ts';

/** The rules and the inner engine in force; a policy reload replaces both. */
export interface EngineInUse {
  config: Config;
  inner: DecisionEngine;
}

/** An inner engine that decides rules matched by the caller (the Redis engine), so they are matched once. */
export interface MatchedDecider {
  readonly rules: readonly Rule[];
  decideMatched(matched: readonly MatchedRule[], request: RequestContext): Promise<Decision>;
  /** The answer decideMatched would give from memory (the over-limit cache), if any. */
  cached?(matched: readonly MatchedRule[], request: RequestContext): Decision | undefined;
}

/** An inner engine with a memory of denials per state key (the Redis engine's over-limit cache). */
export interface Forgetter {
  forget(keys: readonly string[]): void;
}

/** The engine as a Forgetter, when it is one. */
export function asForgetter(engine: DecisionEngine): Forgetter | undefined {
  const candidate = engine as Partial<Forgetter>;
  return typeof candidate.forget === 'function' ? (candidate as Forgetter) : undefined;
}

/** An inner engine that can write local-fallback admissions into Redis (the Redis engine). */
export interface Settler {
  settle(items: readonly Unsettled[]): Promise<void>;
}

/** The engine as a Settler, when it is one. */
export function asSettler(engine: DecisionEngine): Settler | undefined {
  const candidate = engine as Partial<Settler>;
  return typeof candidate.settle === 'function' ? (candidate as Settler) : undefined;
}

/** The engine as a MatchedDecider, when it is one. */
export function asMatchedDecider(engine: DecisionEngine): MatchedDecider | undefined {
  const candidate = engine as Partial<MatchedDecider>;
  return typeof candidate.decideMatched === 'function' && candidate.rules !== undefined ? (candidate as MatchedDecider) : undefined;
}
