// A silent federated key's one-string form (state layout 3; lua/includes/silent_string.lua): the fields its hash
// would hold, in a fixed order, empty for an absent field. A token bucket's
// `S<r>|tokens|last_refill|sig|w0|w1|w2|c0.<r>|t0.<r>|c1.<r>|t1.<r>|c2.<r>|t2.<r>`, a window's
// `W<r>|w0|w1|w2|c0.<r>|t0.<r>|a0.<r>.<r>|c1.<r>|t1.<r>|a1.<r>.<r>|c2.<r>|t2.<r>|a2.<r>.<r>`.
// Read here for the admin view and the tests; only the Lua writes it.

const TWELVE = Array.from({ length: 12 }, () => '\\|([^|]*)').join('');
const BUCKET = new RegExp(`^S(\\d+)${TWELVE}$`);
const WINDOW = new RegExp(`^W(\\d+)${TWELVE}$`);
const BUCKET_FIELDS = ['tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2'] as const;

/**
 * The hash a silent key's string stands for (z = '1' and its non-empty fields), or undefined when `text` is not
 * one (a single region's bucket is a plain number: lua/includes/gcra.lua).
 *
 * @example
 * silentStringFields('S0|7|1700000000000|1000000|28333333|||3|1700000000000||||')
 * // { z: '1', tokens: '7', last_refill: '1700000000000', sig: '1000000', w0: '28333333', 'c0.0': '3', 't0.0': '1700000000000' }
 */
export function silentStringFields(text: string): Record<string, string> | undefined {
  const fields: Record<string, string> = { z: '1' };
  const add = (name: string, value: string) => {
    if (value !== '') fields[name] = value;
  };
  const bucket = BUCKET.exec(text);
  if (bucket) {
    const [, region, ...values] = bucket as unknown as [string, string, ...string[]];
    BUCKET_FIELDS.forEach((name, i) => add(name, values[i]!));
    for (let k = 0; k < 3; k++) {
      add(`c${k}.${region}`, values[6 + 2 * k]!);
      add(`t${k}.${region}`, values[7 + 2 * k]!);
    }
    return fields;
  }
  const window = WINDOW.exec(text);
  if (!window) return undefined;
  const [, region, ...values] = window as unknown as [string, string, ...string[]];
  for (let k = 0; k < 3; k++) add(`w${k}`, values[k]!);
  for (let k = 0; k < 3; k++) {
    add(`c${k}.${region}`, values[3 + 3 * k]!);
    add(`t${k}.${region}`, values[4 + 3 * k]!);
    add(`a${k}.${region}.${region}`, values[5 + 3 * k]!);
  }
  return fields;
}
