// One window (or epoch) slot of a gossip entry on the wire (wire.ts writes the entries around it): its id as a
// delta against its rule's base in the job, then only its non-zero cells, in the shortest of three forms:
//   - pairs: (tag, value) per cell, the tag naming the cell's index and the value's form (integer, decimal,
//     float), so a slot with a few busy cells pays one character of index per cell;
//   - a presence mask: one bit per cell (six per character), then one integer per set bit, for a slot whose
//     cells are all integers and so many that the mask is shorter than their tags;
//   - the previous slot's tags again (the previous slot written in this job, any form), then only the values: the
//     other window of a key, and the next key of a batch, mostly use the same cells.
// Counts travel as themselves, t cells as a delta against the entry's change time (`ref`), a non-integer as its
// shortest decimal (mantissa, exponent), anything else (negative, NaN, infinite) as a float64: lossless, so the
// receiver's range checks (message.ts) judge exactly what the sender had.
//
// slot  := raw ? id:float field:uint : uint((base − id)·FIELDS + field), then, with FIELDS = CELLS + 3 and
//          CELLS = slotLength(n) − 1:
//            field ≤ CELLS      field × (tag:uint value)
//            field = CELLS + 1  mask (⌈CELLS/6⌉ chars), then an integer value per set bit
//            field = CELLS + 2  a value per tag of the previous slot
// tag   := form·CELLS + index   form 0 integer (uint v, or int(ref − v) for t cells), 1 decimal
//                               (uint mantissa, int exponent), 2 float
import { slotLength, timeCellsOffset } from './cells.ts';
import { MAX_ZIGZAG, type PackReader, type PackWriter, uintLength, WireError } from './packing.ts';

/** The cell layout of one slot for n regions, counted after the id. */
export interface SlotLayout {
  cells: number;
  /** Index of the first t cell. */
  times: number;
  /** Values of a slot head's field: 0..cells pairs, cells + 1 the mask, cells + 2 the previous slot's tags. */
  fields: number;
  /** Characters of the presence mask. */
  maskChars: number;
}

export function slotLayout(n: number): SlotLayout {
  const cells = slotLength(n) - 1;
  return { cells, times: timeCellsOffset(n) - 1, fields: cells + 3, maskChars: Math.ceil(cells / 6) };
}

/** Whether a slot id travels as a delta (a safe integer ≥ 0 whose slot head stays a safe integer). */
export function isDeltaId(id: number, layout: SlotLayout): boolean {
  return Number.isSafeInteger(id) && id >= 0 && id * layout.fields + layout.fields <= Number.MAX_SAFE_INTEGER;
}

/** What the slots of one job share: the tags of the slot written (or read) last. */
export interface SlotContext {
  lastTags: number[];
}

/** A fresh context for one payload. */
export function slotContext(): SlotContext {
  return { lastTags: [] };
}

const INTEGER = 0;
const DECIMAL = 1;
const FLOAT = 2;

/** The shortest decimal of a positive finite non-integer as mantissa · 10^exponent, when the mantissa is safe. */
function decimalOf(value: number): [number, number] | undefined {
  const match = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(value));
  if (!match) return undefined;
  const fraction = match[2] ?? '';
  const mantissa = Number(match[1]! + fraction);
  const exponent = Number(match[3] ?? 0) - fraction.length;
  if (!Number.isSafeInteger(mantissa) || Number(`${mantissa}e${exponent}`) !== value) return undefined;
  return [mantissa, exponent];
}

interface Cell {
  index: number;
  value: number;
  form: number;
  decimal?: [number, number] | undefined;
}

function formOf(index: number, value: number, layout: SlotLayout, ref: number): Cell {
  const time = index >= layout.times;
  if (Number.isSafeInteger(value) && (time ? Math.abs(ref - value) <= MAX_ZIGZAG : value >= 0)) return { index, value, form: INTEGER };
  const decimal = Number.isFinite(value) && value > 0 ? decimalOf(value) : undefined;
  return decimal ? { index, value, form: DECIMAL, decimal } : { index, value, form: FLOAT };
}

function writeInteger(out: PackWriter, cell: Cell, layout: SlotLayout, ref: number): void {
  if (cell.index >= layout.times) out.int(ref - cell.value);
  else out.uint(cell.value);
}

function writeValue(out: PackWriter, cell: Cell, layout: SlotLayout, ref: number): void {
  if (cell.form === INTEGER) writeInteger(out, cell, layout, ref);
  else if (cell.form === DECIMAL) {
    out.uint(cell.decimal![0]);
    out.int(cell.decimal![1]);
  } else out.float(cell.value);
}

const sameTags = (a: readonly number[], b: readonly number[]) => a.length === b.length && a.every((tag, i) => tag === b[i]);

/**
 * Writes one flattened slot (id, then the cells). `ref` is the entry's change time (0 for a raw entry), `base`
 * the rule's largest id in the job; a raw slot writes its id as a float.
 *
 * @example
 * const context = slotContext();
 * writeSlot(out, context, [29_936_137, 3, 0, 0, ...], slotLayout(3), entry.t, false, 29_936_137);
 */
export function writeSlot(
  out: PackWriter,
  context: SlotContext,
  slot: readonly number[],
  layout: SlotLayout,
  ref: number,
  raw: boolean,
  base: number,
): void {
  const cells: Cell[] = [];
  for (let index = 0; index < layout.cells; index++) {
    const value = slot[index + 1]!;
    if (value !== 0) cells.push(formOf(index, value, layout, ref));
  }
  const tags = cells.map((cell) => cell.form * layout.cells + cell.index);
  const tagChars = tags.reduce((sum, tag) => sum + uintLength(tag), 0);
  const repeat = tags.length > 0 && sameTags(tags, context.lastTags);
  const masked = !repeat && layout.maskChars < tagChars && cells.every((cell) => cell.form === INTEGER);
  const field = repeat ? layout.cells + 2 : masked ? layout.cells + 1 : cells.length;
  context.lastTags = tags;
  if (raw) {
    out.float(slot[0]!);
    out.uint(field);
  } else {
    out.uint((base - slot[0]!) * layout.fields + field);
  }
  if (masked) {
    const mask = new Array<number>(layout.maskChars).fill(0);
    for (const cell of cells) mask[Math.floor(cell.index / 6)]! |= 1 << (cell.index % 6);
    for (const char of mask) out.char(char);
  }
  for (const [i, cell] of cells.entries()) {
    if (!repeat && !masked) out.uint(tags[i]!);
    writeValue(out, cell, layout, ref);
  }
}

function readValue(input: PackReader, tag: number, layout: SlotLayout, ref: number): number {
  const form = Math.floor(tag / layout.cells);
  const index = tag % layout.cells;
  if (form === INTEGER) return index >= layout.times ? ref - input.int() : input.uint();
  if (form === DECIMAL) return Number(`${input.uint()}e${input.int()}`);
  return input.float();
}

/** Reads a slot writeSlot wrote, flattened (id, then every cell). Throws a WireError on anything else. */
export function readSlot(input: PackReader, context: SlotContext, layout: SlotLayout, ref: number, raw: boolean, base: number): number[] {
  const slot = new Array<number>(layout.cells + 1).fill(0);
  let field: number;
  if (raw) {
    slot[0] = input.float();
    field = input.uint();
    if (field >= layout.fields) throw new WireError(`slot field ${field}`);
  } else {
    const head = input.uint();
    field = head % layout.fields;
    slot[0] = base - Math.floor(head / layout.fields);
  }
  let tags: number[];
  if (field === layout.cells + 2) {
    if (context.lastTags.length === 0) throw new WireError('a slot repeats the tags of no slot');
    tags = context.lastTags;
  } else if (field === layout.cells + 1) {
    tags = [];
    for (let j = 0; j < layout.maskChars; j++) {
      const bits = input.char();
      for (let b = 0; b < 6; b++) if (bits & (1 << b)) tags.push(6 * j + b);
    }
    if (tags.length > 0 && tags.at(-1)! >= layout.cells) throw new WireError('mask bit beyond the last cell');
  } else {
    // Pairs: each tag is followed by its value.
    tags = [];
    for (let c = 0; c < field; c++) {
      const tag = input.uint();
      const index = tag % layout.cells;
      if (tag >= 3 * layout.cells || (c > 0 && index <= tags[c - 1]! % layout.cells))
        throw new WireError(`cell tag ${tag} out of order or range`);
      tags.push(tag);
      slot[index + 1] = readValue(input, tag, layout, ref);
    }
    context.lastTags = tags;
    return slot;
  }
  for (const tag of tags) slot[(tag % layout.cells) + 1] = readValue(input, tag, layout, ref);
  context.lastTags = tags;
  return slot;
}
