// The time units of Envoy's rate limits (envoyproxy/ratelimit's `rate_limit.unit`, RLS's RateLimitUnit and
// RateLimitResponse.RateLimit.Unit) and their windows: one table for the importer, the limit override Envoy
// sends, and the unit the answers report. Fixed lengths, as envoyproxy/ratelimit counts them: a week is 7 days,
// a month 30 days and a year 365 days, epoch-aligned windows (not calendar months or years).

export type EnvoyUnit = 'second' | 'minute' | 'hour' | 'day' | 'week' | 'month' | 'year';

/** Window length of each unit in ms. */
export const ENVOY_UNIT_MS: Readonly<Record<EnvoyUnit, number>> = {
  second: 1_000,
  minute: 60_000,
  hour: 3_600_000,
  day: 86_400_000,
  week: 7 * 86_400_000,
  month: 30 * 86_400_000,
  year: 365 * 86_400_000,
};

export const ENVOY_UNITS = Object.keys(ENVOY_UNIT_MS) as EnvoyUnit[];

/**
 * The unit whose window is exactly `periodMs`, if any.
 *
 * @example
 * ```ts
 * envoyUnitOf(604_800_000); // 'week'
 * envoyUnitOf(90_000); // undefined
 * ```
 */
export function envoyUnitOf(periodMs: number): EnvoyUnit | undefined {
  return ENVOY_UNITS.find((unit) => ENVOY_UNIT_MS[unit] === periodMs);
}
