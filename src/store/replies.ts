// Shape checks of script replies: a typed call's parser reads a reply only through these, so a reply of
// another shape fails with the script's name and what it answered instead of as a wrong number.

/** The error for a reply of another shape than `what`, naming the script (lua/<script>.lua). */
export function unexpected(script: string, what: string, raw: unknown): Error {
  let shown: string;
  try {
    shown = JSON.stringify(raw)?.slice(0, 200) ?? String(raw);
  } catch {
    shown = String(raw);
  }
  return new Error(`lua/${script}.lua answered an unexpected reply (${what}): ${shown}`);
}

/** `raw` as an array of at least `minLength` items. */
export function arrayReply(script: string, raw: unknown, minLength = 0): unknown[] {
  if (!Array.isArray(raw) || raw.length < minLength) throw unexpected(script, `an array of at least ${minLength}`, raw);
  return raw;
}

/** `value` (an item of the reply `raw`) as a number: a Redis integer, or a number as text. */
export function numberAt(script: string, raw: unknown, value: unknown): number {
  const number = typeof value === 'number' ? value : typeof value === 'string' && value !== '' ? Number(value) : Number.NaN;
  if (Number.isNaN(number)) throw unexpected(script, 'a number', raw);
  return number;
}

/** A reply that is one number. */
export function integerReply(script: string, raw: unknown): number {
  return numberAt(script, raw, raw);
}
