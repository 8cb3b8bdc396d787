// The characters of a gossip payload (wire.ts): every value is written with the base64url alphabet, so a payload
// is plain ASCII that BullMQ's JSON job data carries unescaped, byte for byte. Integers are little-endian base-32
// varints: a digit d is the character of index d when it is the last one and of index 32 + d when more follow,
// so 0..31 take one character, up to 1,023 two, up to 32,767 three. A float64 is its 8 bytes in 11 characters.
// The reader bounds every read and throws a WireError on anything else (the receiver counts it as `invalid`).

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
/** Digit of each char code below 128 (-1: not in the alphabet). */
const DIGIT = new Int8Array(128).fill(-1);
for (let i = 0; i < ALPHABET.length; i++) DIGIT[ALPHABET.charCodeAt(i)] = i;

/** Largest magnitude zigzag() takes: its result stays a safe integer. */
export const MAX_ZIGZAG = 2 ** 52 - 1;

/** A payload that cannot be read: truncated, a character outside the alphabet, a value out of its field's bounds. */
export class WireError extends Error {
  override readonly name = 'WireError';
}

/** Signed to unsigned (0, -1, 1, -2 → 0, 1, 2, 3), so small negatives stay short. */
export function zigzag(value: number): number {
  return value >= 0 ? 2 * value : -2 * value - 1;
}

export function unzigzag(value: number): number {
  return value % 2 === 0 ? value / 2 : -(value + 1) / 2;
}

/** Characters PackWriter.uint() writes for `value`. */
export function uintLength(value: number): number {
  let length = 1;
  for (let rest = value; rest >= 32; rest = Math.floor(rest / 32)) length++;
  return length;
}

/**
 * Builds a payload left to right.
 *
 * @example
 * const out = new PackWriter();
 * out.uint(5);
 * out.uint(1_000);
 * out.toString(); // 'Fof': 'F' for 5, 'of' for 1,000 (8 + 32·31)
 */
export class PackWriter {
  private out = '';

  /** A safe integer ≥ 0. */
  uint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not a wire integer: ${value}`);
    let rest = value;
    while (rest >= 32) {
      this.out += ALPHABET[32 + (rest % 32)];
      rest = Math.floor(rest / 32);
    }
    this.out += ALPHABET[rest];
  }

  /** A safe integer of magnitude ≤ MAX_ZIGZAG, zigzagged. */
  int(value: number): void {
    if (!Number.isSafeInteger(value) || Math.abs(value) > MAX_ZIGZAG) throw new RangeError(`not a wire delta: ${value}`);
    this.uint(zigzag(value));
  }

  /** 0..63 in exactly one character. */
  char(value: number): void {
    if (!Number.isInteger(value) || value < 0 || value > 63) throw new RangeError(`not a one-character value: ${value}`);
    this.out += ALPHABET[value];
  }

  /** Text the caller has checked, length first. */
  text(value: string): void {
    this.uint(value.length);
    this.out += value;
  }

  /** Characters of the alphabet whose count both sides know (a key hash, the fingerprint). */
  fixed(value: string, length: number): void {
    if (value.length !== length || !isAlphabet(value)) throw new RangeError(`not ${length} base64url characters: ${value}`);
    this.out += value;
  }

  /** Any float64, bit for bit, in 11 characters. */
  float(value: number): void {
    const bytes = Buffer.alloc(8);
    bytes.writeDoubleBE(value);
    this.out += bytes.toString('base64url');
  }

  toString(): string {
    return this.out;
  }
}

function isAlphabet(value: string): boolean {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i);
    if (code >= 128 || DIGIT[code]! < 0) return false;
  }
  return true;
}

/**
 * Reads a payload written by PackWriter, in the same order; every method throws a WireError past the end or on a
 * character that does not belong there.
 *
 * @example
 * const input = new PackReader('F');
 * input.uint(); // 5
 * input.end(); // nothing left
 */
export class PackReader {
  private at = 0;

  constructor(private readonly input: string) {}

  private digit(): number {
    if (this.at >= this.input.length) throw new WireError(`payload ends at character ${this.at}`);
    const code = this.input.charCodeAt(this.at++);
    const digit = code < 128 ? DIGIT[code]! : -1;
    if (digit < 0) throw new WireError(`character ${this.at - 1} is not base64url`);
    return digit;
  }

  uint(): number {
    let value = 0;
    let scale = 1;
    for (;;) {
      const digit = this.digit();
      if (digit < 32) {
        value += digit * scale;
        if (value > Number.MAX_SAFE_INTEGER) throw new WireError(`integer above 2^53 at character ${this.at}`);
        return value;
      }
      value += (digit - 32) * scale;
      scale *= 32;
      if (scale > 2 ** 50) throw new WireError(`integer longer than 11 characters at character ${this.at}`);
    }
  }

  /** An int() of PackWriter. */
  int(): number {
    return unzigzag(this.uint());
  }

  char(): number {
    return this.digit();
  }

  /** A text() of PackWriter, at most `most` characters, each matching `allowed`. */
  text(most: number, allowed: RegExp): string {
    const length = this.uint();
    if (length > most) throw new WireError(`text of ${length} characters (at most ${most})`);
    if (this.at + length > this.input.length) throw new WireError('payload ends inside a text');
    const value = this.input.slice(this.at, this.at + length);
    this.at += length;
    if (!allowed.test(value)) throw new WireError(`text ${JSON.stringify(value.slice(0, 80))} is not allowed there`);
    return value;
  }

  fixed(length: number): string {
    if (this.at + length > this.input.length) throw new WireError('payload ends inside a fixed field');
    const value = this.input.slice(this.at, this.at + length);
    this.at += length;
    if (!isAlphabet(value)) throw new WireError(`fixed field ${JSON.stringify(value)} is not base64url`);
    return value;
  }

  float(): number {
    return Buffer.from(this.fixed(11), 'base64url').readDoubleBE(0);
  }

  /** Throws unless the whole payload was read. */
  end(): void {
    if (this.at !== this.input.length) throw new WireError(`${this.input.length - this.at} characters after the payload`);
  }
}
