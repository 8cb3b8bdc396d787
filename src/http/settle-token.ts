// The settle token of the decision API: /v1/check hands a caller whose admission is settled once the answer is
// known (rules[].countResponses, rules[].costFromResponse) the admission's refund ticket, signed, and
// POST /v1/release takes it back with the answer's status and reported cost. Signed (HMAC-SHA256) so that no caller
// can name a refund it was not given; it expires before refund.lua's marker does, so a token sent twice is refunded
// once (the marker is named by the ticket, src/engine/redis-engine.ts settleResponse).
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Rule } from '../config/schema.ts';
import { chargedCost } from '../engine/cost-from-response.ts';
import type { RefundTicket } from '../engine/types.ts';
import { REFUND_MARK_MS } from '../store/settle-calls.ts';

/** How long after the check a settle token is accepted: less than refund.lua's marker lives (clocks differ). */
export const SETTLE_TOKEN_TTL_MS = REFUND_MARK_MS - 20_000;

/** Issues and opens settle tokens with one secret (every process of a region given the same one accepts them). */
export interface SettleTokens {
  issue(ticket: RefundTicket): string;
  /**
   * The ticket a token stands for, its rules those in force now (a rule gone, or now charging another amount, is
   * left out: it keeps what it charged), or why the token is refused.
   */
  open(token: string, ruleOf: (name: string) => Rule | undefined): { ok: true; ticket: RefundTicket } | { ok: false; reason: string };
}

interface Signed {
  /** Issued at (ms). */
  at: number;
  id: string;
  cost: number;
  lease: string;
  /** Per script call: shard, decide's now, then [rule name, state key, units charged] per rule. */
  calls: [number, number, [string, string, number][]][];
}

/**
 * Settle tokens signed with `secret` (the region's admin token; without one, a random secret of this process, so
 * only this process accepts its tokens).
 *
 * @example
 * ```ts
 * const tokens = settleTokens(config.admin.token);
 * const token = tokens.issue(decision.refund!);
 * const opened = tokens.open(token, (name) => config.rules.find((rule) => rule.name === name));
 * ```
 */
export function settleTokens(secret: string | undefined, now: () => number = Date.now): SettleTokens {
  const key = createHmac('sha256', secret ?? randomBytes(32))
    .update('quotafed settle token v1')
    .digest();
  const sign = (payload: string) => createHmac('sha256', key).update(payload).digest();
  return {
    issue(ticket) {
      const signed: Signed = {
        at: now(),
        id: ticket.id,
        cost: ticket.cost,
        lease: ticket.leaseId,
        calls: ticket.calls.map((call) => [
          call.shard,
          call.now,
          call.rules.map(({ rule, key }) => [rule.name, key, chargedCost(rule, ticket.cost)]),
        ]),
      };
      const payload = Buffer.from(JSON.stringify(signed)).toString('base64url');
      return `${payload}.${sign(payload).toString('base64url')}`;
    },
    open(token, ruleOf) {
      const [payload, mac, extra] = token.split('.');
      if (payload === undefined || mac === undefined || extra !== undefined) return { ok: false, reason: 'not a settle token' };
      const expected = sign(payload);
      const given = Buffer.from(mac, 'base64url');
      if (given.length !== expected.length || !timingSafeEqual(given, expected))
        return { ok: false, reason: 'settle token not issued by this region (or by this process, without admin.token)' };
      const signed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Signed;
      if (now() - signed.at > SETTLE_TOKEN_TTL_MS)
        return { ok: false, reason: `settle token expired (accepted for ${SETTLE_TOKEN_TTL_MS / 1000} s after the check)` };
      const calls = signed.calls.map(([shard, at, rules]) => ({
        shard,
        now: at,
        rules: rules.flatMap(([name, key, charged]) => {
          const rule = ruleOf(name);
          return rule !== undefined && chargedCost(rule, signed.cost) === charged ? [{ rule, key }] : [];
        }),
      }));
      return { ok: true, ticket: { id: signed.id, cost: signed.cost, leaseId: signed.lease, calls } };
    },
  };
}
