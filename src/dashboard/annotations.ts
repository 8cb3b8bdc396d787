// Chaos annotations: what an experiment tells the dashboard it is doing (scenario, an active partition, the
// leakage it measured against the budget). They expire unless refreshed, so a chaos run that died does not
// leave a partition shaded on the page forever.
import { z } from 'zod';

const RegionName = z.string().regex(/^[a-z0-9-]{1,32}$/, { error: 'region names use lowercase letters, digits and "-"' });
const EpochMs = z.number().int().min(0).max(8_640_000_000_000_000);

export const PartitionAnnotation = z
  .strictObject({
    /** A region cut off from all others. */
    region: RegionName.optional(),
    /** Individual cut links; `oneWay` means only from → to is cut. */
    links: z
      .array(z.strictObject({ from: RegionName, to: RegionName, oneWay: z.boolean().default(false) }))
      .max(32)
      .optional(),
    /** When the partition started (epoch ms); the time of the POST when omitted. */
    since: EpochMs.optional(),
    /** When it healed; absent while it lasts. */
    until: EpochMs.optional(),
  })
  .refine((partition) => partition.region !== undefined || (partition.links?.length ?? 0) > 0, {
    error: 'a partition names a region or at least one link',
  })
  .refine((partition) => partition.until === undefined || partition.since === undefined || partition.until >= partition.since, {
    error: 'until must not be before since',
  });

export const LeakageReading = z.strictObject({
  /** Requests admitted beyond the limit so far (absolute). */
  leakage: z.number().min(0).max(1e12),
  /** The configured budget in requests; null when unbounded (plain gossip). */
  budget: z.number().min(0).max(1e12).nullable(),
  limit: z.number().positive().max(1e12).optional(),
  /** Requests the whole federation admitted in the measured window. */
  admitted: z.number().min(0).max(1e12).optional(),
  /** Which key or rule the reading is for. */
  key: z.string().max(200).optional(),
});

/** A key for the page to show, named the way a request names it (src/dashboard/key-view.ts, WatchedKey). */
export const WatchedKeyInput = z.strictObject({
  rule: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/),
  apiKey: z.string().min(1).max(512).optional(),
  ip: z.string().max(64).optional(),
  path: z.string().startsWith('/').max(2_048).optional(),
  method: z
    .string()
    .regex(/^[A-Za-z]{1,16}$/)
    .optional(),
  /** What the page shows for the key; the API key itself is never shown. */
  label: z.string().min(1).max(64),
});

export const AnnotationInput = z.strictObject({
  scenario: z.string().min(1).max(120).nullable().optional(),
  /** A set field replaces the current one, null clears it, an absent field keeps it. */
  partition: PartitionAnnotation.nullable().optional(),
  leakage: LeakageReading.nullable().optional(),
  /** Keys the run drives (its hot key), shown next to the region's configured ones while the annotations last. */
  watch: z.array(WatchedKeyInput).max(8).nullable().optional(),
  /** How long the annotations stay without another POST. */
  ttlMs: z.number().int().min(1_000).max(3_600_000).optional(),
});
export type AnnotationInput = z.input<typeof AnnotationInput>;

export interface Partition {
  region?: string | undefined;
  links?: Array<{ from: string; to: string; oneWay: boolean }> | undefined;
  since: number;
  until?: number | undefined;
}

export interface Annotations {
  scenario: string | null;
  partition: Partition | null;
  leakage: z.infer<typeof LeakageReading> | null;
  watch: Array<z.infer<typeof WatchedKeyInput>> | null;
  updatedAt: number;
  expiresAt: number;
}

export interface AnnotationStore {
  /** Applies a validated POST body; returns the annotations now in force. */
  apply(input: z.infer<typeof AnnotationInput>): Annotations;
  clear(): void;
  /** The annotations in force, or null when none were posted or they expired. */
  current(): Annotations | null;
}

export interface AnnotationStoreOptions {
  defaultTtlMs?: number;
  now?: () => number;
}

export function createAnnotationStore(options: AnnotationStoreOptions = {}): AnnotationStore {
  const now = options.now ?? Date.now;
  const defaultTtlMs = options.defaultTtlMs ?? 30_000;
  let state: Annotations | null = null;

  const current = () => {
    if (state !== null && state.expiresAt <= now()) state = null;
    return state;
  };

  return {
    apply(input) {
      const at = now();
      const previous = current();
      const pick = <K extends 'scenario' | 'partition' | 'leakage' | 'watch'>(
        field: K,
        next: Annotations[K] | undefined,
      ): Annotations[K] => (next === undefined ? (previous?.[field] ?? null) : next);
      const partition =
        input.partition === undefined || input.partition === null
          ? input.partition
          : { ...input.partition, since: input.partition.since ?? previous?.partition?.since ?? at };
      state = {
        scenario: pick('scenario', input.scenario),
        partition: pick('partition', partition),
        leakage: pick('leakage', input.leakage),
        watch: pick('watch', input.watch),
        updatedAt: at,
        expiresAt: at + (input.ttlMs ?? defaultTtlMs),
      };
      return state;
    },
    clear() {
      state = null;
    },
    current,
  };
}
