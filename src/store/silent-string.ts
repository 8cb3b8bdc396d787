// A silent federated key's one-string form (lua/includes/silent_string.lua): the fields its hash would hold, in a
// fixed order, as a MessagePack array (state layout 4), each a number or false for an absent field: a token bucket's
// `["<r>", tokens, last_refill, sig, w0, w1, w2, c0.<r>, t0.<r>, c1.<r>, t1.<r>, c2.<r>, t2.<r>]`, a window's
// `["W", "<r>", w0, w1, w2, c0.<r>, t0.<r>, a0.<r>.<r>, c1.<r>, t1.<r>, a1.<r>.<r>, c2.<r>, t2.<r>, a2.<r>.<r>]`.
// Layout 3 wrote the same fields as the hash's texts, empty for an absent one: `S<r>|tokens|...|t2.<r>` and
// `W<r>|w0|...|a2.<r>.<r>`; both are read. Read here for the admin view and the tests; only the Lua writes it.
import { unpack } from 'msgpackr';

const TWELVE = Array.from({ length: 12 }, () => '\\|([^|]*)').join('');
const BUCKET = new RegExp(`^S(\\d+)${TWELVE}$`);
const WINDOW = new RegExp(`^W(\\d+)${TWELVE}$`);
const BUCKET_FIELDS = ['tokens', 'last_refill', 'sig', 'w0', 'w1', 'w2'] as const;

/** The first byte of a token bucket's string in layout 4 (a MessagePack array of 13 values) and of a window's (14). */
const PACKED_BUCKET = 0x9d;
const PACKED_WINDOW = 0x9e;

/**
 * A number as the Lua scripts write it into a hash (lua/includes/fmt.lua `fmt`): a non-zero integer below 1e15 as
 * `%d`, anything else as C's `%.17g` (17 significant digits rounded half to even from the double's exact value,
 * trailing zeros dropped, an exponent of at least two digits when below 1e-4 or from 1e17 on).
 *
 * @example
 * luaNumberText(3) // '3'
 * luaNumberText(0.1) // '0.10000000000000001'
 */
export function luaNumberText(value: number): string {
  if (value % 1 === 0 && value > -1e15 && value < 1e15 && value !== 0) return String(value);
  if (value === 0) return Object.is(value, -0) ? '-0' : '0';
  if (!Number.isFinite(value)) return Number.isNaN(value) ? 'nan' : value > 0 ? 'inf' : '-inf';
  const sign = value < 0 ? '-' : '';
  let { digits, exponent } = significantDigits(Math.abs(value), 17);
  digits = digits.replace(/0+$/, '');
  if (exponent < -4 || exponent >= 17) {
    const mantissa = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${sign}${mantissa}e${exponent < 0 ? '-' : '+'}${String(Math.abs(exponent)).padStart(2, '0')}`;
  }
  if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
  const fraction = digits.slice(exponent + 1);
  return fraction === '' ? `${sign}${whole}` : `${sign}${whole}.${fraction}`;
}

/**
 * The first `count` significant digits of a positive finite double, rounded half to even from its exact binary value
 * (as glibc's printf does), and the decimal exponent of the first: value ≈ 0.d × 10^(exponent + 1).
 */
function significantDigits(value: number, count: number): { digits: string; exponent: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, value);
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  const fraction = bits & ((1n << 52n) - 1n);
  // value = mantissa × 2^power, exactly; then exact = mantissa × 2^power as decimal digits × 10^-scale.
  const mantissa = biased === 0 ? fraction : fraction | (1n << 52n);
  const power = biased === 0 ? -1074 : biased - 1075;
  const exact = power >= 0 ? (mantissa << BigInt(power)).toString() : (mantissa * 5n ** BigInt(-power)).toString();
  const scale = power >= 0 ? 0 : -power;
  let exponent = exact.length - 1 - scale;
  let digits = exact.slice(0, count).padEnd(count, '0');
  const rest = exact.slice(count);
  const half = rest === '' ? -1 : rest[0]! > '5' ? 1 : rest[0]! < '5' ? -1 : /[1-9]/.test(rest.slice(1)) ? 1 : 0;
  if (half > 0 || (half === 0 && Number(digits[count - 1]) % 2 === 1)) {
    const up = (BigInt(digits) + 1n).toString();
    if (up.length > count) exponent += 1;
    digits = up.slice(0, count);
  }
  return { digits, exponent };
}

/**
 * The values of a layout-4 string (a MessagePack array: a bucket's 13, a window's 14 of which the first is its "W")
 * as layout 3's texts, r first ('' for an absent field), or undefined.
 */
function packedTexts(bytes: Buffer, kind: 'bucket' | 'window'): string[] | undefined {
  let values: unknown;
  try {
    values = unpack(bytes);
  } catch {
    return undefined;
  }
  if (!Array.isArray(values) || values.length !== (kind === 'bucket' ? 13 : 14)) return undefined;
  if (kind === 'window' && values.shift() !== 'W') return undefined;
  if (typeof values[0] !== 'string') return undefined;
  // A -0 is written as its text (MessagePack has no negative zero integer).
  return values.map((value: unknown) =>
    value === false ? '' : typeof value === 'number' || typeof value === 'bigint' ? luaNumberText(Number(value)) : String(value),
  );
}

/**
 * The hash a silent key's string stands for (z = '1' and its non-empty fields), or undefined when `held` is not
 * one (a single region's bucket is a plain number: lua/includes/gcra.lua). Read the key with `getBuffer`: a layout-4
 * string is binary.
 *
 * @example
 * silentStringFields(Buffer.from('S0|7|1700000000000|1000000|28333333|||3|1700000000000||||'))
 * // { z: '1', tokens: '7', last_refill: '1700000000000', sig: '1000000', w0: '28333333', 'c0.0': '3', 't0.0': '1700000000000' }
 */
export function silentStringFields(held: Buffer): Record<string, string> | undefined {
  const fields: Record<string, string> = { z: '1' };
  const add = (name: string, value: string) => {
    if (value !== '') fields[name] = value;
  };
  const first = held[0];
  const text = first === PACKED_BUCKET || first === PACKED_WINDOW ? '' : held.toString('utf8');
  // [r, then the 12 values] of a bucket's string in either layout.
  const bucket = first === PACKED_BUCKET ? packedTexts(held, 'bucket') : BUCKET.exec(text)?.slice(1);
  if (bucket) {
    const [region, ...values] = bucket as [string, ...string[]];
    BUCKET_FIELDS.forEach((name, i) => add(name, values[i]!));
    for (let k = 0; k < 3; k++) {
      add(`c${k}.${region}`, values[6 + 2 * k]!);
      add(`t${k}.${region}`, values[7 + 2 * k]!);
    }
    return fields;
  }
  const window = first === PACKED_WINDOW ? packedTexts(held, 'window') : WINDOW.exec(text)?.slice(1);
  if (!window) return undefined;
  const [region, ...values] = window as [string, ...string[]];
  for (let k = 0; k < 3; k++) add(`w${k}`, values[k]!);
  for (let k = 0; k < 3; k++) {
    add(`c${k}.${region}`, values[3 + 3 * k]!);
    add(`t${k}.${region}`, values[4 + 3 * k]!);
    add(`a${k}.${region}.${region}`, values[5 + 3 * k]!);
  }
  return fields;
}
