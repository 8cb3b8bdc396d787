// Runs that compare federated token buckets should start at the same point of the minute: the per-key rule's epoch
// is a minute, and at its start every loud key draws its grants again (a burst of gossip jobs).

/**
 * Waits until second `second` of the current or next minute (wall clock); returns at once when `second` is
 * undefined or empty (the variable was not set).
 *
 * @example
 * await untilSecondOfMinute(process.env.BENCH_START_SECOND); // BENCH_START_SECOND=10: the load starts at :10
 */
export async function untilSecondOfMinute(second: string | undefined): Promise<void> {
  if (second === undefined || second === '') return;
  const at = Number(second);
  if (!Number.isInteger(at) || at < 0 || at > 59) throw new Error(`expected a second of the minute (0-59), got "${second}"`);
  const wait = (at * 1000 - (Date.now() % 60_000) + 60_000) % 60_000;
  await new Promise((resolve) => setTimeout(resolve, wait));
}
