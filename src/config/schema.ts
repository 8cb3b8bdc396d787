// The one config schema. Every module that reads configuration imports its types from here.
import proxyaddr from 'proxy-addr';
import { z } from 'zod';
import { parseIpRange } from './cidr.ts';
import { MetricsSettings, TopKeysSettings, TracingSettings } from './observability.ts';
import { ENVOY_UNITS, type EnvoyUnit } from './envoy-units.ts';
import { expandPlans, PLAN_NAME, planProblems, UNLIMITED } from './plans.ts';

const DURATION_FORMS = 'expected a duration: a whole number of milliseconds, or "500ms", "10s", "1m", "1h" or "1d"';

/** "500ms", "10s", "1m", "1h", "1d" or a plain number of milliseconds. */
export const Duration = z.union(
  [
    z.number().int().positive(),
    z
      .string()
      .regex(/^\d+(\.\d+)?\s*(ms|s|m|h|d)$/, { error: DURATION_FORMS })
      .transform((text) => {
        const match = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)$/.exec(text)!;
        const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 }[match[2] as 'ms' | 's' | 'm' | 'h' | 'd'];
        return Math.round(Number(match[1]) * unit);
      })
      .pipe(z.number().int().positive()),
  ],
  { error: DURATION_FORMS },
);

export const Algorithm = z.enum(['tokenBucket', 'fixedWindow', 'slidingWindow', 'slidingLog', 'concurrency']);
export type Algorithm = z.infer<typeof Algorithm>;

/** Algorithms whose state federates across regions; the others are enforced per region only. */
export const FEDERATED_ALGORITHMS: ReadonlySet<Algorithm> = new Set(['tokenBucket', 'fixedWindow', 'slidingWindow']);

/** Algorithms a rule may take local leases of (rules[].lease): the counting ones, the same as federate. */
export const LEASED_ALGORITHMS: ReadonlySet<Algorithm> = FEDERATED_ALGORITHMS;

export const FailMode = z.enum(['open', 'closed']);
export type FailMode = z.infer<typeof FailMode>;

/**
 * Leakage budget: the most the whole federation may admit beyond the limit in one window.
 * A number is an absolute count of requests, "N%" a fraction of the limit, and "unbounded" turns the escrow
 * off (plain gossip, no guarantee; for experiments).
 */
export const LeakageBudget = z.union(
  [
    z.number().int().min(0),
    z.string().regex(/^\d+(\.\d+)?%$/, { error: 'expected a count such as 50, a percentage such as "5%", or "unbounded"' }),
    z.literal('unbounded'),
  ],
  { error: 'expected a count such as 50, a percentage such as "5%", or "unbounded"' },
);
export type LeakageBudget = z.infer<typeof LeakageBudget>;

export const Dimension = z.enum(['apiKey', 'ip', 'endpoint', 'method']);
export type Dimension = z.infer<typeof Dimension>;

/** One level of an Envoy descriptor: `key` alone matches any value; `value` "foo*" matches by prefix. */
export const EnvoyEntryMatch = z.strictObject({
  key: z.string().min(1).max(256),
  value: z.string().min(1).max(1024).optional(),
});
export type EnvoyEntryMatch = z.infer<typeof EnvoyEntryMatch>;

export const EnvoyMatch = z.strictObject({
  domain: z.string().min(1).max(256),
  /** The descriptor's entries in order; a request descriptor must have exactly these levels. */
  descriptor: z.array(EnvoyEntryMatch).min(1).max(16),
});
export type EnvoyMatch = z.infer<typeof EnvoyMatch>;

/** The seed's 429 body: what a denial answers unless its rule sets its own. */
export const DEFAULT_DENIAL_BODY = '{"error":"Rate limit exceeded"}';

/** The placeholders a denial body may use (src/http/denial.ts fills them in). */
export const DENIAL_PLACEHOLDERS = ['rule', 'limit', 'remaining', 'retryAfter', 'reset', 'status'] as const;

/**
 * A rule's own denial: status, body template and content type. The body's `{rule}`, `{limit}`, `{remaining}`,
 * `{retryAfter}`, `{reset}` and `{status}` are filled in per answer; every value is a number or the rule's name,
 * so a JSON template stays JSON.
 *
 * @example
 * ```ts
 * Denial.parse({ status: 429, contentType: 'application/problem+json', body: '{"title":"Too many requests","rule":"{rule}","retryAfter":{retryAfter}}' });
 * ```
 */
export const Denial = z.strictObject({
  status: z
    .number({ error: 'expected an HTTP status code' })
    .int({ error: 'expected an integer status code' })
    .min(400, { error: 'a denial status is 400-599' })
    .max(599, { error: 'a denial status is 400-599' })
    .default(429),
  body: z
    .string()
    .max(8192, { error: 'a denial body is at most 8192 characters' })
    .superRefine((body, ctx) => {
      for (const match of body.matchAll(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g)) {
        if (!(DENIAL_PLACEHOLDERS as readonly string[]).includes(match[1]!))
          ctx.addIssue({
            code: 'custom',
            message: `unknown placeholder {${match[1]}}; known: ${DENIAL_PLACEHOLDERS.map((p) => `{${p}}`).join(', ')}`,
          });
      }
    })
    .default(DEFAULT_DENIAL_BODY),
  contentType: z
    .string()
    .min(1)
    .max(256)
    .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+\/[!#$%&'*+.^_`|~0-9A-Za-z-]+(\s*;[\t -~]*)?$/, {
      error: 'expected a media type such as "application/problem+json"',
    })
    .default('application/json'),
});
export type Denial = z.infer<typeof Denial>;

/**
 * A rule that charges what the upstream's answer says a request cost (rules[].costFromResponse): the request is
 * admitted by reserving `reserve` units (the most one request may cost), and once the answer is known the service
 * reads `header` (a non-negative integer, e.g. tokens used) and refunds `reserve - min(actual, reserve)`. A missing
 * or garbled header keeps the whole reserve; an answer above the reserve is charged the reserve (the overrun is
 * counted, never charged): nothing is charged beyond what was admitted, so the leakage bound holds.
 *
 * @example
 * ```ts
 * const cost = CostFromResponse.parse({ header: 'x-tokens-used', reserve: 100 });
 * ```
 */
export const CostFromResponse = z.strictObject({
  /** The answer header that carries the request's actual cost (case-insensitive). */
  header: z
    .string()
    .regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/, { error: 'expected an HTTP header name such as "x-tokens-used"' })
    .transform((name) => name.toLowerCase()),
  /** Units reserved at admission: the most one request may cost. */
  reserve: z.number().int().positive().max(1_000_000),
});
export type CostFromResponse = z.infer<typeof CostFromResponse>;

/**
 * One rule: which requests it applies to (`match`), what it counts them by (`by`), the algorithm and its limit.
 * A config's `rules` are these; they appear in keys, metrics and headers by `name`.
 *
 * @example
 * ```ts
 * const rule = Rule.parse({ name: 'search', match: { endpoints: ['/search'] }, by: ['apiKey'], algorithm: 'slidingWindow', limit: 100, period: '1m' });
 * ```
 */
export const Rule = z
  .strictObject({
    /** Unique per config; appears in keys, metrics and headers. */
    name: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, { error: 'rule names use letters, digits, "_", "-" and "." (1-64 chars)' }),
    match: z
      .strictObject({
        /** Which callers the rule applies to: those with an API key, those without one, or all. */
        identity: z.enum(['apiKey', 'anonymous', 'any']).default('any'),
        /** Route patterns in Hono syntax ("/search", "/v1/items/:id", "/admin/*"); all paths when omitted. */
        endpoints: z.array(z.string().startsWith('/')).min(1).optional(),
        methods: z
          .array(z.string().regex(/^[A-Z]+$/))
          .min(1)
          .optional(),
        /**
         * Envoy rate limit service requests (gRPC) this rule applies to, the way envoyproxy/ratelimit's config
         * selects a limit: the domain and the descriptor's entries level by level. Such a rule decides only
         * ShouldRateLimit descriptors (never HTTP requests); its counter is per distinct descriptor values.
         */
        envoy: EnvoyMatch.optional(),
      })
      .prefault({}),
    /** The dimensions that make up the counter key. ["apiKey", "endpoint"] gives each endpoint its own budget. */
    by: z.array(Dimension).min(1).default(['apiKey']),
    algorithm: Algorithm.default('tokenBucket'),
    /** Requests per period (window algorithms), refill per period (token bucket), or in-flight slots (concurrency). */
    limit: z.number().int().positive().max(1_000_000_000),
    period: Duration.default(60_000),
    /** Token bucket capacity; defaults to `limit`. */
    burst: z.number().int().positive().max(1_000_000_000).optional(),
    /** Concurrency lease time: a slot not released within it is reclaimed (a crashed gateway cannot leak it). */
    leaseTtl: Duration.default(30_000),
    failMode: FailMode.default('open'),
    /**
     * While the breaker is open, decide this `failMode: open` rule in memory (this instance's share) instead of
     * admitting everything; defaults to `breaker.localFallback`. A `failMode: closed` rule never uses it.
     */
    localFallback: z.boolean().optional(),
    leakageBudget: LeakageBudget.optional(),
    /**
     * Federated rules: the most a request denied only for want of this region's share (the federation has room,
     * a "false denial") waits while the key's state goes to the peers on the fast lane and a grant comes
     * back (about one round trip). 0 (the default) answers at once. docs/federation.md §5a.
     */
    maxWaitMs: z.number().int().min(0).max(5_000).default(0),
    /**
     * Local leases for hot keys (docs/leases.md): a gateway process that sees a key twice within `ttlMs` takes up
     * to `size` more units of the rule's allowance in the same decide call and admits from memory until they are
     * spent or `ttlMs` has passed (a window rule: never past the window they were counted in), then gives back
     * what it did not spend; a lease never given back (the process died) stays spent. Token bucket, fixed and
     * sliding window; used when every rule a request matches has one.
     */
    lease: z
      .strictObject({
        /** The most units one process takes at a time. */
        size: z.number().int().positive().max(1_000_000),
        /** How long a process admits from a lease before it gives the rest back (ms). */
        ttlMs: z.number().int().positive().max(60_000).default(100),
      })
      .optional(),
    /** Decide and count, but never reject (safe rollout). */
    shadow: z.boolean().default(false),
    /**
     * Which answered requests the rule counts: `all` (default), `failed` (the upstream answered 400 or above, or did
     * not answer: 502, 504) or `successful` (below 400). An admission the rule does not count is refunded once the
     * answer is known (gateway and middleware; refund.lua), so the limit applies to the requests it counts.
     */
    countResponses: z.enum(['all', 'failed', 'successful']).default('all'),
    /**
     * Charge what the upstream's answer reports (a header) instead of a fixed cost: `reserve` units are taken at
     * admission and the difference refunded once the answer is known (CostFromResponse). Not for concurrency rules.
     */
    costFromResponse: CostFromResponse.optional(),
    /** The answer a request denied by this rule gets (gateway, middleware, /v1/auth); 429 and the seed's body when absent. */
    denial: Denial.optional(),
    /**
     * Envoy rules only: a descriptor this rule matches (most specifically) is never limited and nothing is counted
     * (envoyproxy/ratelimit's `unlimited: true`); `limit` and `period` are not used. Counted in
     * quotafed_unlimited_decisions_total.
     */
    unlimited: z.boolean().optional(),
    /**
     * Envoy rules only: names of other Envoy rules of the same domain this rule replaces (envoyproxy/ratelimit's
     * `replaces`): when a request's descriptors match both, the replaced rules decide nothing for that request.
     */
    replaces: z.array(z.string().min(1)).min(1).optional(),
  })
  .superRefine((rule, ctx) => {
    if (rule.lease !== undefined) {
      const reason = !LEASED_ALGORITHMS.has(rule.algorithm)
        ? `a ${rule.algorithm} rule cannot lease (tokenBucket, fixedWindow and slidingWindow can)`
        : rule.shadow
          ? 'a shadow rule counts every request in Redis: no lease'
          : rule.costFromResponse !== undefined || rule.countResponses !== 'all'
            ? 'a rule settled after the answer (costFromResponse, countResponses) cannot lease'
            : rule.lease.size > (rule.algorithm === 'tokenBucket' ? (rule.burst ?? rule.limit) : rule.limit)
              ? `the lease size (${rule.lease.size}) exceeds the rule's ${rule.algorithm === 'tokenBucket' ? 'burst' : 'limit'}`
              : undefined;
      if (reason !== undefined) ctx.addIssue({ code: 'custom', path: ['lease'], message: reason });
    }
    if (rule.costFromResponse === undefined) return;
    if (rule.algorithm === 'concurrency')
      ctx.addIssue({
        code: 'custom',
        path: ['costFromResponse'],
        message: 'a concurrency rule holds slots, not costs: no costFromResponse',
      });
    const capacity = rule.algorithm === 'tokenBucket' ? (rule.burst ?? rule.limit) : rule.limit;
    if (rule.costFromResponse.reserve > capacity)
      ctx.addIssue({
        code: 'custom',
        path: ['costFromResponse', 'reserve'],
        message: `the reserve (${rule.costFromResponse.reserve}) exceeds the rule's ${rule.algorithm === 'tokenBucket' ? 'burst' : 'limit'} (${capacity}): no request could ever be admitted`,
      });
  });
/**
 * A validated rule, as `config.rules` holds it (defaults filled in).
 *
 * @example
 * ```ts
 * const names = config.rules.map((rule: Rule) => `${rule.name}: ${rule.limit} per ${rule.period} ms`);
 * ```
 */
export type Rule = z.infer<typeof Rule>;

/** TLS for rediss:// URLs. Files are PEM. */
export const RedisTls = z.strictObject({
  caFile: z.string().optional(),
  certFile: z.string().optional(),
  keyFile: z.string().optional(),
  /** Only for testing with self-signed certificates you do not have the CA of. */
  rejectUnauthorized: z.boolean().default(true),
  servername: z.string().optional(),
});
export type RedisTls = z.infer<typeof RedisTls>;

export const Peer = z.strictObject({
  name: z.string().regex(/^[a-z0-9-]{1,32}$/, { error: 'region names use lowercase letters, digits and "-"' }),
  redisUrl: z.string().regex(/^rediss?:\/\//, { error: 'expected a redis:// or rediss:// URL' }),
  /**
   * The peer's Redis is a Redis Cluster: its seed nodes. Gossip links and recovery questions then use a cluster
   * connection; `redisUrl` stays the address shown in status (any one node of the cluster).
   */
  clusterNodes: z
    .array(z.string().regex(/^rediss?:\/\//, { error: 'expected a redis:// or rediss:// URL' }))
    .min(1)
    .optional(),
  /** Share weight of this peer; every region's config must list the same weights. */
  weight: z.number().positive().default(1),
  /** TLS for a rediss:// peer URL; defaults to the region's `redis.tls`. */
  tls: RedisTls.optional(),
});
export type Peer = z.infer<typeof Peer>;

export const RedisSettings = z.strictObject({
  url: z
    .string()
    .regex(/^rediss?:\/\//, { error: 'expected a redis:// or rediss:// URL' })
    .default('redis://127.0.0.1:6379'),
  /** Cluster seed nodes; when given, the region's Redis is a Redis Cluster and `url` is ignored. */
  clusterNodes: z
    .array(z.string().regex(/^rediss?:\/\//))
    .min(1)
    .optional(),
  /** A decision never waits longer than this on Redis; then the fail mode decides. */
  commandTimeoutMs: z.number().int().positive().max(10_000).default(500),
  connectTimeoutMs: z.number().int().positive().default(2_000),
  /** Batch concurrent decisions into one round trip. */
  autoPipelining: z.boolean().default(true),
  /** TLS settings for rediss:// URLs (user and password go in the URL: rediss://user:pass@host:port). */
  tls: RedisTls.optional(),
  /**
   * This Redis never loses an acknowledged write across a restart or failover (AOF with `appendfsync always` on
   * every node, no promotion of a lagging replica). Only then may a federated region keep its current windows
   * when its Redis comes back as another process (a new run_id); otherwise it fences them (docs/federation.md §4).
   */
  durable: z.boolean().default(false),
  /**
   * The first part of every Redis key of this deployment (`<keyPrefix>:{s12}:<rule>:<hash>`, `<keyPrefix>:meta`,
   * BullMQ queues under `{<keyPrefix>}`), so several quotafed deployments can share one Redis. Every region of a
   * federation must use the same prefix (the gossip names keys without it and each side rebuilds them under its own).
   */
  keyPrefix: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,32}$/, { error: 'expected 1-32 letters, digits, "_" or "-" (no ":", braces or "*")' })
    .default('qf'),
});

export const Breaker = z.strictObject({
  /**
   * Fewest failed or timed-out Redis calls within `samplingWindowMs` that can open the breaker (so also the
   * fewest calls the window must hold before the ratio counts).
   */
  failureThreshold: z.number().int().positive().default(5),
  /** The breaker opens when more than this share of the calls in the sampling window failed or timed out. */
  failureRatio: z.number().gt(0).lt(1).default(0.5),
  /** The sliding window Redis calls are sampled over. */
  samplingWindowMs: z.number().int().min(1_000).max(600_000).default(10_000),
  /** How often an open breaker probes Redis with PING. */
  probeIntervalMs: z.number().int().positive().default(1_000),
  /** Consecutive successful probes needed to close it again. */
  successThreshold: z.number().int().positive().default(2),
  /**
   * While open, decide `failMode: open` rules in memory (this instance's share of each limit) instead of admitting
   * them all; a rule may override it (`rules[].localFallback`). `failMode: closed` rules always reject while open.
   */
  localFallback: z.boolean().default(true),
  /** How many gateway instances share a region; the local fallback enforces limit / instances. */
  instancesPerRegion: z.number().int().positive().default(1),
  /**
   * When a process's local fallback may first admit. `nextWindow` (default): a window that began before the
   * process started gets no local allowance, and a token bucket first seen starts empty and refills from the start,
   * because a new process cannot know what the one it replaces admitted locally before it died (the bound counts
   * instances, not process starts). `atOnce`: the full share at once; then each process start in a window during an
   * outage may add another share (docs/federation.md §4).
   */
  localFallbackStart: z.enum(['nextWindow', 'atOnce']).default('nextWindow'),
});

export const Federation = z.strictObject({
  syncIntervalMs: z.number().int().min(10).max(600_000).default(100),
  /** Budget for rules that set none. */
  leakageBudget: LeakageBudget.default('5%'),
  /** This region's share weight. */
  weight: z.number().positive().default(1),
  peers: z.array(Peer).default([]),
  /** Upper bound on clock skew between regions' Redis servers; share moves wait this long at epoch edges. */
  maxClockSkewMs: z.number().int().min(0).default(1_000),
  /** HMAC secret shared by the federation; gossip without a valid signature is rejected. */
  secret: z.string().min(16, { error: 'the federation secret must be at least 16 characters' }).optional(),
  /** Most keys in one gossip batch. */
  maxBatchKeys: z.number().int().positive().default(1_000),
  /**
   * Start-up when this region's Redis has no start-up marker: `auto` asks the peers and fences the current
   * windows unless every peer answers that it never heard of this region; `new` declares a brand-new federation,
   * so peers that cannot be asked do not fence (a peer that heard of this region, or quotafed state already in
   * this Redis, still does). Read once at start-up (docs/federation.md §4a).
   */
  bootstrap: z.enum(['auto', 'new']).default('auto'),
});

/** A proxy-addr trust entry: an IP, a CIDR range, an IP/netmask, or loopback, linklocal, uniquelocal. */
const TrustedProxy = z.string().refine(
  (entry) => {
    try {
      proxyaddr.compile(entry);
      return true;
    } catch {
      return false;
    }
  },
  { error: 'expected an IP address, a CIDR range such as "10.0.0.0/8", or loopback, linklocal, uniquelocal' },
);

/** Where the client IP comes from behind proxies, and how IPv6 clients are keyed (src/http/identity.ts). */
export const ClientIp = z
  .strictObject({
    /**
     * Proxies whose forwarding header is believed: walking from the socket's peer towards the client, every
     * address in this list is skipped and the first one that is not is the client.
     */
    trustedProxies: z.array(TrustedProxy).default([]),
    /** Instead of a list: how many proxies stand in front (1: the socket's peer, 2: a CDN then a load balancer). */
    hops: z.number().int().min(0).max(32).optional(),
    /** The header proxies append to: `x-forwarded-for`, or RFC 7239 `forwarded` (its `for=` parameters). */
    header: z.enum(['x-forwarded-for', 'forwarded']).default('x-forwarded-for'),
    /** IPv6 clients are keyed by this prefix (one host gets a /64 and can rotate addresses inside it). */
    ipv6Prefix: z.number().int().min(1).max(128).default(64),
  })
  .refine((settings) => settings.hops === undefined || settings.trustedProxies.length === 0, {
    error: 'set trustedProxies or hops, not both',
    path: ['hops'],
  });

export const Grpc = z.strictObject({
  /** Port of the gRPC listener (`QUOTAFED_GRPC_PORT`); 0 picks a free one. */
  port: z.number().int().min(0).max(65_535),
  /** Address to listen on; defaults to `host`. */
  host: z.string().optional(),
  /** A ShouldRateLimit call for a domain no rule names: answer OK (as envoyproxy/ratelimit does) or OVER_LIMIT. */
  unknownDomain: z.enum(['ok', 'overLimit']).default('ok'),
});

/** One descriptor node of an envoyproxy/ratelimit config file (domain → descriptors → key/value → rate_limit). */
export interface EnvoyDescriptorNode {
  key: string;
  value?: string | undefined;
  rate_limit?:
    | {
        /** Absent only with `unlimited: true`. */
        unit?: EnvoyUnit | undefined;
        requests_per_unit?: number | undefined;
        name?: string | undefined;
        unlimited?: boolean | undefined;
        replaces?: Array<{ name: string }> | undefined;
      }
    | undefined;
  shadow_mode?: boolean | undefined;
  detailed_metric?: boolean | undefined;
  descriptors?: EnvoyDescriptorNode[] | undefined;
}

const UNIT = z
  .string()
  .transform((unit) => unit.toLowerCase())
  .pipe(z.enum(ENVOY_UNITS as [EnvoyUnit, ...EnvoyUnit[]], { error: `expected ${ENVOY_UNITS.join(', ')}` }));

const EnvoyRateLimit = z
  .strictObject({
    unit: UNIT.optional(),
    requests_per_unit: z.number().int().positive().max(1_000_000_000).optional(),
    name: z.string().optional(),
    unlimited: z.boolean().optional(),
    /** The named limits (rate_limit.name) of the same domain this one replaces when both match a request. */
    replaces: z.array(z.strictObject({ name: z.string().min(1, { error: 'a replaces entry needs a name' }) })).optional(),
  })
  .superRefine((limit, ctx) => {
    for (const [index, replaced] of (limit.replaces ?? []).entries()) {
      if (limit.name !== undefined && replaced.name === limit.name)
        ctx.addIssue({ code: 'custom', path: ['replaces', index, 'name'], message: 'a limit cannot replace itself' });
    }
    if (limit.unlimited) {
      // As envoyproxy/ratelimit: an unlimited limit has no unit (requests_per_unit is accepted and not used).
      if (limit.unit !== undefined) ctx.addIssue({ code: 'custom', path: ['unit'], message: 'no unit with unlimited: true' });
      return;
    }
    if (limit.unit === undefined) ctx.addIssue({ code: 'custom', path: ['unit'], message: 'required (or unlimited: true)' });
    if (limit.requests_per_unit === undefined)
      ctx.addIssue({ code: 'custom', path: ['requests_per_unit'], message: 'required (or unlimited: true)' });
  });

export const EnvoyDescriptorNode: z.ZodType<EnvoyDescriptorNode> = z.lazy(() =>
  z.strictObject({
    key: z.string().min(1).max(256),
    value: z.string().min(1).max(1024).optional(),
    rate_limit: EnvoyRateLimit.optional(),
    shadow_mode: z.boolean().optional(),
    /** Accepted for compatibility; quotafed's metrics are per rule anyway. */
    detailed_metric: z.boolean().optional(),
    descriptors: z.array(EnvoyDescriptorNode).optional(),
  }),
);

/** An envoyproxy/ratelimit config document, verbatim. */
export const EnvoyConfigDocument = z.strictObject({
  domain: z.string().min(1).max(256),
  descriptors: z.array(EnvoyDescriptorNode).default([]),
});
export type EnvoyConfigDocument = z.infer<typeof EnvoyConfigDocument>;

export const EnvoyImport = z.strictObject({
  /** envoyproxy/ratelimit config documents inline. */
  configs: z.array(EnvoyConfigDocument).default([]),
  /** envoyproxy/ratelimit config files (YAML, one or more documents), relative to this config file. */
  files: z.array(z.string().min(1)).default([]),
  /** Algorithm of the imported limits (envoyproxy/ratelimit counts fixed windows). */
  algorithm: Algorithm.default('fixedWindow'),
  failMode: FailMode.default('open'),
  leakageBudget: LeakageBudget.optional(),
});
export type EnvoyImport = z.infer<typeof EnvoyImport>;

/** How request paths are canonicalised before rules match them (src/http/path.ts); the gateway forwards that form. */
/**
 * One entry of an allow or deny list: an API key, or an IP address or CIDR range (IPv6 prefixes included), with an
 * optional comment. IP entries are stored in canonical form (`2001:DB8::/32` becomes `2001:db8::/32`).
 *
 * @example
 * ```ts
 * ListEntry.parse({ ip: '10.0.0.0/8', comment: 'office' }); // { ip: '10.0.0.0/8', comment: 'office' }
 * ListEntry.parse({ apiKey: 'internal-batch' });
 * ```
 */
export const ListEntry = z
  .strictObject({
    apiKey: z.string().min(1).max(65_536).optional(),
    ip: z.string().max(64).optional(),
    comment: z.string().max(200).optional(),
  })
  .superRefine((entry, ctx) => {
    if ((entry.apiKey === undefined) === (entry.ip === undefined))
      ctx.addIssue({ code: 'custom', message: 'an entry names exactly one of apiKey or ip' });
    if (entry.ip !== undefined) {
      const parsed = parseIpRange(entry.ip);
      if (!parsed.ok) ctx.addIssue({ code: 'custom', path: ['ip'], message: parsed.reason });
    }
  })
  .transform((entry) => {
    if (entry.ip === undefined) return entry;
    const parsed = parseIpRange(entry.ip);
    return parsed.ok ? { ...entry, ip: parsed.range.text } : entry;
  });
export type ListEntry = z.infer<typeof ListEntry>;

/** The most entries one list holds (config or admin API, each). */
export const MAX_LIST_ENTRIES = 10_000;

/** Allow and deny lists, checked before every rule (src/engine/access-lists.ts). */
export const Lists = z.strictObject({
  /** Callers that skip every rule (no Redis call). */
  allow: z.array(ListEntry).max(MAX_LIST_ENTRIES).default([]),
  /** Callers refused with 403 before any rule; deny wins over allow. */
  deny: z.array(ListEntry).max(MAX_LIST_ENTRIES).default([]),
  /** How often each process re-reads the entries added through the admin API from the region's Redis. */
  refreshMs: Duration.pipe(z.number().min(100).max(600_000)).default(1_000),
});

/** A plan's name: it appears in derived rule names (`per-key.plan-pro`), metrics and the admin API. */
export const PlanName = z.string().regex(PLAN_NAME, { error: 'plan names use letters, digits, "_" and "-" (1-32 chars)' });

/** What a plan changes in one rule: its limit and, optionally, burst and period (docs/plans.md). */
export const PlanOverride = z
  .strictObject({
    limit: z.number().int().positive().max(1_000_000_000).optional(),
    burst: z.number().int().positive().max(1_000_000_000).optional(),
    period: Duration.optional(),
  })
  .refine((override) => override.limit !== undefined || override.burst !== undefined || override.period !== undefined, {
    error: 'a plan override sets limit, burst or period (or is "unlimited")',
  });

const UNLIMITED_VALUE = z.literal(UNLIMITED, { error: 'expected "unlimited" or an override such as { limit: 100 }' });

/** One tier: `unlimited`, or per rule name `{ limit, burst?, period? }` or `unlimited`. */
export const PlanTier = z.union([UNLIMITED_VALUE, z.record(z.string(), z.union([UNLIMITED_VALUE, PlanOverride]))], {
  error: 'expected "unlimited" or per rule name an override such as { limit: 100 }',
});

/**
 * `plans`: the limits of plan-aware rules per plan, the plan of API keys from the config, and the default plan
 * (docs/plans.md). Assignments from the admin API (PUT /admin/plans/<apiKey>) win over `keys`.
 *
 * @example
 * ```ts
 * Plans.parse({ default: 'free', tiers: { free: { 'per-key': { limit: 100 } }, unlimited: 'unlimited' }, keys: { 'partner-key': 'unlimited' } });
 * ```
 */
export const Plans = z.strictObject({
  /** The plan of an API key that no assignment names; absent: such keys are decided by the rules as written. */
  default: PlanName.optional(),
  /** Plan name → tier (names are checked with the rules: src/config/plans.ts). */
  tiers: z.record(z.string(), PlanTier).default({}),
  /** API key → plan. */
  keys: z.record(z.string().min(1).max(65_536), PlanName).default({}),
});

export const PathSettings = z.strictObject({
  /** Match (and forward) paths as sent; by default they are folded to lower case, so /CHECKOUT is /checkout. */
  caseSensitive: z.boolean().default(false),
  /** "ignore": /checkout/ is /checkout (default); "strict": a trailing slash names another resource. */
  trailingSlash: z.enum(['ignore', 'strict']).default('ignore'),
});

/**
 * The zod schema of a region's config (exported as `ConfigSchema`): region, Redis, rules, federation, ports. Use
 * parseConfig or loadConfigFile for the error messages that name each bad field.
 *
 * @example
 * ```ts
 * const result = ConfigSchema.safeParse(input);
 * if (!result.success) console.error(result.error.issues);
 * ```
 */
export const Config = z
  .strictObject({
    region: z.string().regex(/^[a-z0-9-]{1,32}$/, { error: 'region names use lowercase letters, digits and "-"' }),
    port: z.number().int().min(0).max(65_535).default(8080),
    host: z.string().default('127.0.0.1'),
    redis: RedisSettings.prefault({}),
    upstream: z
      .strictObject({
        url: z.url().optional(),
        timeoutMs: z.number().int().positive().default(30_000),
      })
      .prefault({}),
    identity: z
      .strictObject({
        /** Requests without an API key: limit them per client IP, or reject them with 401. */
        anonymous: z.enum(['ip', 'reject']).default('ip'),
        /** Take the client IP from X-Forwarded-For (only behind a trusted proxy): as `clientIp.hops: 1`. */
        trustForwardedFor: z.boolean().default(false),
        maxApiKeyBytes: z.number().int().positive().max(65_536).default(512),
        clientIp: ClientIp.prefault({}),
      })
      .prefault({}),
    admin: z
      .strictObject({
        /** Bearer token for admin routes; /v1/check and admin routes are closed when it is set and missing. */
        token: z.string().min(16, { error: 'the admin token must be at least 16 characters' }).optional(),
        /** Serve admin routes on a separate listener (e.g. 127.0.0.1:9464) instead of the public port. */
        port: z.number().int().min(0).max(65_535).optional(),
        /** Require the admin token on POST /v1/check as well. */
        protectCheck: z.boolean().default(false),
      })
      .prefault({}),
    paths: PathSettings.prefault({}),
    /** Bounds on slow clients (node:http server timeouts, checked every second). */
    server: z
      .strictObject({
        /** A client must send its complete request headers within this (408 and close otherwise). */
        headersTimeoutMs: z.number().int().positive().max(600_000).default(10_000),
        /** ... and its whole request, body included, within this. */
        requestTimeoutMs: z.number().int().positive().max(3_600_000).default(60_000),
        /** An idle keep-alive connection is closed after this. */
        keepAliveTimeoutMs: z.number().int().positive().max(600_000).default(5_000),
      })
      .prefault({}),
    breaker: Breaker.prefault({}),
    /** What /readyz requires (src/http/readiness.ts). */
    readiness: z
      .strictObject({
        /**
         * Not ready while the region's Redis is unreachable or the breaker is open. Off by default: the instances
         * of a region share its Redis, so a balancer would drain them all at once while the fail modes can answer.
         */
        requireRedis: z.boolean().default(false),
      })
      .prefault({}),
    federation: Federation.prefault({}),
    /** Node's process metrics (registerDefaultMetrics). */
    metrics: MetricsSettings.prefault({}),
    logLevel: z.enum(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']).default('info'),
    /** Envoy's rate limit service (RateLimitService v3) over gRPC; absent: no gRPC listener. */
    grpc: Grpc.optional(),
    /** envoyproxy/ratelimit config documents, converted into rules by the loader (src/config/envoy-import.ts). */
    envoy: EnvoyImport.optional(),
    /** Allow and deny lists, checked before the rules; reloadable (allow, deny). */
    lists: Lists.prefault({}),
    /** The heavy-hitters sketch of limited keys (src/config/observability.ts). */
    topKeys: TopKeysSettings.prefault({}),
    /** OpenTelemetry spans of decisions; absent: only OTEL_EXPORTER_OTLP_ENDPOINT turns them on. */
    tracing: TracingSettings.optional(),
    /** Plans per API key (docs/plans.md); reloadable. */
    plans: Plans.prefault({}),
    rules: z.array(Rule).min(1),
  })
  .superRefine((config, ctx) => {
    const seen = new Set<string>();
    config.rules.forEach((rule, index) => {
      if (seen.has(rule.name))
        ctx.addIssue({ code: 'custom', path: ['rules', index, 'name'], message: `duplicate rule name "${rule.name}"` });
      seen.add(rule.name);
      if (rule.match.envoy && (rule.match.endpoints || rule.match.methods || rule.match.identity !== 'any')) {
        ctx.addIssue({
          code: 'custom',
          path: ['rules', index, 'match', 'envoy'],
          message: 'an Envoy rule matches descriptors only: drop identity, endpoints and methods',
        });
      }
      (rule.match.endpoints ?? []).forEach((pattern, at) => {
        const problem = patternProblem(pattern, config.paths);
        if (problem) ctx.addIssue({ code: 'custom', path: ['rules', index, 'match', 'endpoints', at], message: problem });
      });
      if (rule.failMode === 'closed' && rule.localFallback === true) {
        ctx.addIssue({
          code: 'custom',
          path: ['rules', index, 'localFallback'],
          message: 'a failMode "closed" rule is only ever decided by Redis; localFallback applies to failMode "open" rules',
        });
      }
      for (const field of ['unlimited', 'replaces'] as const) {
        if (rule[field] !== undefined && !rule.match.envoy)
          ctx.addIssue({ code: 'custom', path: ['rules', index, field], message: `${field} applies to Envoy rules (match.envoy) only` });
      }
      (rule.replaces ?? []).forEach((name, at) => {
        const replaced = config.rules.find((other) => other.name === name);
        const problem =
          name === rule.name
            ? 'a rule cannot replace itself'
            : !replaced?.match.envoy || replaced.match.envoy.domain !== rule.match.envoy?.domain
              ? `no Envoy rule "${name}" in domain "${rule.match.envoy?.domain}"`
              : undefined;
        if (problem) ctx.addIssue({ code: 'custom', path: ['rules', index, 'replaces', at], message: problem });
      });
      if (rule.match.identity === 'anonymous' && rule.by.includes('apiKey')) {
        ctx.addIssue({ code: 'custom', path: ['rules', index, 'by'], message: 'an anonymous rule cannot be keyed by apiKey' });
      }
    });
    if (config.server.headersTimeoutMs > config.server.requestTimeoutMs) {
      ctx.addIssue({ code: 'custom', path: ['server', 'headersTimeoutMs'], message: 'headersTimeoutMs cannot exceed requestTimeoutMs' });
    }
    if (config.admin.protectCheck && !config.admin.token) {
      ctx.addIssue({
        code: 'custom',
        path: ['admin', 'protectCheck'],
        message: 'protectCheck needs admin.token (or QUOTAFED_ADMIN_TOKEN)',
      });
    }
    const names = new Set([config.region]);
    config.federation.peers.forEach((peer, index) => {
      if (names.has(peer.name))
        ctx.addIssue({ code: 'custom', path: ['federation', 'peers', index, 'name'], message: `duplicate region name "${peer.name}"` });
      names.add(peer.name);
    });
    for (const problem of planProblems(config.plans, config.rules))
      ctx.addIssue({ code: 'custom', path: ['plans', ...problem.path], message: problem.message });
  })
  // Each (plan-aware rule, plan) pair with its own parameters becomes a configured rule (src/config/plans.ts).
  .transform((config) => ({ ...config, ...expandPlans(config) }));
/**
 * A validated region config, with every default filled in: what the engines and the service take.
 *
 * @example
 * ```ts
 * const config: Config = loadConfigFile('regions/us-east.yaml');
 * console.log(config.region, config.rules.length);
 * ```
 */
export type Config = z.infer<typeof Config>;

/**
 * Rules match canonical paths (src/http/path.ts), so a pattern must be canonical itself or it could never match:
 * no "//", no "." or ".." segments, no ";", lower case static parts unless paths.caseSensitive, and no trailing
 * slash unless paths.trailingSlash is "strict".
 */
function patternProblem(pattern: string, paths: z.infer<typeof PathSettings>): string | undefined {
  if (pattern === '/' || pattern === '/*') return undefined;
  const segments = pattern.slice(1).split('/');
  if (segments.at(-1) === '' && paths.trailingSlash !== 'strict')
    return 'drop the trailing "/": paths are matched without it (paths.trailingSlash: ignore)';
  for (const [i, segment] of segments.entries()) {
    if (segment === '' && i < segments.length - 1) return 'empty path segment ("//"): paths are matched with repeated slashes collapsed';
    if (segment === '.' || segment === '..') return '"." and ".." segments never appear in a canonical path';
    if (segment.includes(';') || segment.includes('%') || segment.includes('\\'))
      return 'patterns are matched against decoded canonical paths: no ";", "%" or "\\"';
    if (!paths.caseSensitive && !segment.startsWith(':') && segment !== segment.toLowerCase()) {
      return 'paths are matched case-insensitively (folded to lower case): write the pattern in lower case or set paths.caseSensitive';
    }
  }
  return undefined;
}
/**
 * What you may write for a config (before defaults): the type of the object parseConfig accepts.
 *
 * @example
 * ```ts
 * const input: ConfigInput = { region: 'local', rules: [{ name: 'per-key', by: ['apiKey'], algorithm: 'fixedWindow', limit: 100, period: '1m' }] };
 * const config = parseConfig(input);
 * ```
 */
export type ConfigInput = z.input<typeof Config>;
