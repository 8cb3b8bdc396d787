// A silent federated token bucket's one-string form (state layout 3; lua/includes/silent_string.lua): the fields its
// hash would hold, in a fixed order, `S<r>|tokens|last_refill|sig|w0|w1|w2|c0.<r>|t0.<r>|c1.<r>|t1.<r>|c2.<r>|t2.<r>`,
// empty for an absent field. Read here for the admin view and the tests; only the Lua writes it.

const SILENT_STRING =
  /^S(\d+)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)\|([^|]*)$/;
const FIELDS = ['tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2'] as const;

/**
 * The hash a silent bucket's string stands for (z = '1' and its non-empty fields), or undefined when `text` is
 * not one (a single region's bucket is a plain number: lua/includes/gcra.lua).
 *
 * @example
 * silentStringFields('S0|7|1700000000000|1000000|28333333|||3|1700000000000||||')
 * // { z: '1', tokens: '7', last_refill: '1700000000000', sig: '1000000', w0: '28333333', c0.0: '3', t0.0: '1700000000000' }
 */
export function silentStringFields(text: string): Record<string, string> | undefined {
  const match = SILENT_STRING.exec(text);
  if (!match) return undefined;
  const [, region, ...values] = match as unknown as [string, string, ...string[]];
  const fields: Record<string, string> = { z: '1' };
  FIELDS.forEach((name, i) => {
    if (values[i] !== '') fields[name] = values[i]!;
  });
  for (let k = 0; k < 3; k++) {
    const c = values[6 + 2 * k]!;
    const t = values[7 + 2 * k]!;
    if (c !== '') fields[`c${k}.${region}`] = c;
    if (t !== '') fields[`t${k}.${region}`] = t;
  }
  return fields;
}
