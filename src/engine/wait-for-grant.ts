// Opt-in waiting (rules[].maxWaitMs): a request denied only because this region's share ran out while the
// federation has room (a false denial) is decided again for up to the rule's maxWaitMs, while the denial's fast
// lane carries the key's state to the peers and their grant comes back. Nothing else ever waits.
import type { Rule } from '../config/schema.ts';
import { parkedTotal } from '../metrics.ts';
import type { Decision, RequestContext } from './types.ts';

/** First re-decision after this many ms, then twice as long each time, at most POLL_MAX_MS apart. */
const POLL_FIRST_MS = 5;
const POLL_MAX_MS = 20;

/**
 * How long this denied decision may wait (ms), or 0: only when every enforcing rule that denied it was a false
 * denial and allows waiting (the shortest maxWaitMs of them). A true denial (the federation is at the limit, a
 * fenced window, a non-federated rule) is answered at once.
 */
export function waitBudgetMs(decision: Decision, rulesByName: ReadonlyMap<string, Rule>): number {
  if (decision.allowed) return 0;
  let budget = Number.POSITIVE_INFINITY;
  for (const outcome of decision.outcomes) {
    if (outcome.allowed || outcome.shadow) continue;
    const wait = rulesByName.get(outcome.rule)?.maxWaitMs ?? 0;
    if (!outcome.falseDenial || outcome.source !== 'redis' || wait <= 0) return 0;
    budget = Math.min(budget, wait);
  }
  return Number.isFinite(budget) ? budget : 0;
}

/** The pause before re-decision number `attempt` (0-based), never past `left` ms. */
function pollPauseMs(attempt: number, left: number): number {
  return Math.max(0, Math.min(POLL_FIRST_MS * 2 ** attempt, POLL_MAX_MS, left));
}

/** Which waiting requests queue behind one another: the same denying rules for the same caller and path. */
function waitSignature(decision: Decision, request: { apiKey?: string | undefined; ip: string; path: string }): string {
  const rules = decision.outcomes.filter((o) => !o.allowed && !o.shadow).map((o) => o.rule);
  return `${rules.join(',')}|${request.apiKey ?? ''}|${request.ip}|${request.path}`;
}

export interface GrantWaits {
  /**
   * Waits (at most `budgetMs`) until `redecide` admits, or returns a denial that may no longer wait (`mayWait`
   * false) or the last false denial. Per signature one waiting request polls (5, 10, 20, 20… ms apart) while the
   * others sleep. When the poller is admitted (a grant came), as many sleepers re-decide at once as its decision
   * says the region can still admit, and one more, oldest first (those calls share the engine's batches); one of
   * them still denied polls next. A true denial wakes every sleeper; a poller whose time is up wakes one to poll on.
   * So a burst of waiting requests on one key costs one decision per pause, a grant admits the waiters it has room
   * for together, and a hot key's waiters cost a decision per grant, not one each.
   */
  wait(
    signature: string,
    first: Decision,
    budgetMs: number,
    redecide: () => Promise<Decision>,
    mayWait: (decision: Decision) => boolean,
  ): Promise<Decision>;
}

interface Waiters {
  /** Waiting requests of this signature (polling, sleeping or deciding). */
  active: number;
  polling: boolean;
  /** Sleepers woken that have not yet re-decided. */
  woken: number;
  sleepers: Set<() => void>;
}

/**
 * How many more requests an admitted decision says this region can admit now: the least `remaining` of its enforcing
 * outcomes (0 when it names none).
 */
function admitsLeft(decision: Decision): number {
  let left = Number.POSITIVE_INFINITY;
  for (const outcome of decision.outcomes) if (!outcome.shadow) left = Math.min(left, Math.max(0, Math.floor(outcome.remaining)));
  return Number.isFinite(left) ? left : 0;
}

export function createGrantWaits(options: { stop?: () => boolean } = {}): GrantWaits {
  const bySignature = new Map<string, Waiters>();
  const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
  /** Resolves true when woken (the poller left), false when `ms` pass first. */
  const nap = (waiters: Waiters, ms: number) =>
    new Promise<boolean>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        resolve(true);
      };
      const timer = setTimeout(() => {
        waiters.sleepers.delete(wake);
        resolve(false);
      }, ms);
      waiters.sleepers.add(wake);
    });
  /** Wakes the `count` longest-waiting sleepers (each re-decides; one still denied polls next). */
  const wake = (waiters: Waiters, count: number) => {
    for (const sleeper of waiters.sleepers) {
      if (count-- <= 0) break;
      waiters.sleepers.delete(sleeper);
      waiters.woken++;
      sleeper();
    }
  };
  return {
    async wait(signature, first, budgetMs, redecide, mayWait) {
      const until = performance.now() + budgetMs;
      let waiters = bySignature.get(signature);
      if (!waiters) {
        waiters = { active: 0, polling: false, woken: 0, sleepers: new Set() };
        bySignature.set(signature, waiters);
      }
      waiters.active++;
      let decision = first;
      try {
        for (;;) {
          const left = until - performance.now();
          if (left <= 0 || options.stop?.()) return decision;
          if (!waiters.polling) {
            waiters.polling = true;
            // Who re-decides when this poller leaves: everyone after a true denial (theirs is one too, answered
            // without Redis by the over-limit cache) or a failure; after a grant, as many as it still has room for
            // and one more, not every waiter of a hot key for every grant of one request (the one more polls on,
            // or, denied truly, wakes everyone).
            let handOver = Number.POSITIVE_INFINITY;
            try {
              for (let attempt = 0; ; attempt++) {
                const remaining = until - performance.now();
                if (remaining <= 0 || options.stop?.()) {
                  if (remaining <= 0 && !options.stop?.()) handOver = 1;
                  return decision;
                }
                await sleep(pollPauseMs(attempt, remaining));
                decision = await redecide();
                if (decision.allowed) handOver = 1 + admitsLeft(decision);
                if (decision.allowed || !mayWait(decision)) return decision;
              }
            } finally {
              waiters.polling = false;
              wake(waiters, handOver);
            }
          }
          if (!(await nap(waiters, left))) return decision;
          try {
            decision = await redecide();
          } finally {
            waiters.woken--;
          }
          if (decision.allowed) return decision;
          if (!mayWait(decision)) {
            // A true denial now is one for every sleeper: they hear it at once (the over-limit cache answers them).
            wake(waiters, Number.POSITIVE_INFINITY);
            return decision;
          }
        }
      } finally {
        waiters.active--;
        if (waiters.active === 0) bySignature.delete(signature);
        // Never sleepers without a poller: the last waiter woken to use a grant hands the polling on as it leaves.
        else if (!waiters.polling && waiters.woken === 0) wake(waiters, 1);
      }
    },
  };
}

/**
 * Waits out a false denial with `waits` (at most `budgetMs`), re-deciding with `redecide`, and counts how the
 * wait ended. The decision may wait on while it stays a false denial of rules that allow waiting.
 */
export async function waitForGrant(
  waits: GrantWaits,
  first: Decision,
  budgetMs: number,
  request: RequestContext,
  redecide: () => Promise<Decision>,
  rulesByName: () => ReadonlyMap<string, Rule>,
): Promise<Decision> {
  const decision = await waits.wait(
    waitSignature(first, request),
    first,
    budgetMs,
    redecide,
    (next) => waitBudgetMs(next, rulesByName()) > 0,
  );
  parkedTotal.inc({ outcome: decision.allowed ? 'admitted' : 'denied' });
  return decision;
}
