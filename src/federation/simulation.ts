// A deterministic, virtual-time simulation of the federation protocol (no Redis): regions decide with the
// pure functions of protocol.ts, gossip whole views through per-peer pending sets over links that can be
// slow, lossy, one-way or partitioned, and regions and workers crash. The property tests and the chaos lab
// drive it; the same seed always yields the same trace.
import type { LeakageBudget } from '../config/schema.ts';
import {
  KEPT_WINDOWS,
  SHARE_UNITS,
  emptyEpochSlot,
  newWindowState,
  bucketGossip,
  decideBucket,
  decideWindow,
  epochCells,
  federationParams,
  mergeBucket,
  mergeWindow,
  shareAt,
  sweepBucket,
  sweepWindow,
  bucketHasHungryPeer,
  windowHasHungryPeer,
  windowAllowance,
  windowCells,
  windowForfeited,
  windowGossip,
  windowIdAt,
  newBucket,
  refill,
  type BucketState,
  type EpochSlot,
  type FederationParams,
  type RebalancePolicy,
  type WindowSlot,
  type WindowState,
} from './protocol.ts';

export type SimAlgorithm = 'fixedWindow' | 'slidingWindow' | 'tokenBucket';

export interface SimRegion {
  name: string;
  weight?: number;
  /** This region's clock minus true time; keep |offset| ≤ maxClockSkewMs / 2. */
  clockOffsetMs?: number;
}

export interface LinkSpec {
  latencyMs: number;
  /** Uniform extra delay in [0, jitterMs] per message (reorders messages). */
  jitterMs?: number;
  /** Chance that a delivered job is processed a second time, later (at-least-once redelivery). */
  duplicateProbability?: number;
}

export type Fault =
  /** One direction of one link goes down or comes back. */
  | { at: number; kind: 'linkDown' | 'linkUp'; from: string; to: string }
  /** Links between different groups go down in both directions (regions not listed form their own group). */
  | { at: number; kind: 'partition'; groups: string[][] }
  /** Every link up again. */
  | { at: number; kind: 'heal' }
  /** The link from → to toggles every `everyMs` until `until`, ending up. */
  | { at: number; kind: 'flap'; from: string; to: string; everyMs: number; until: number }
  /** The region stops serving; with wipe its Redis loses everything (state, pending sets, queued jobs). */
  | { at: number; kind: 'crash'; region: string; wipe: boolean }
  | { at: number; kind: 'restart'; region: string }
  /** The region's gossip worker stops applying jobs (they stay queued in its Redis) / resumes. */
  | { at: number; kind: 'workerStop' | 'workerStart'; region: string };

export type TrafficShape =
  | { kind: 'even' }
  | { kind: 'region'; region: string }
  /** All traffic in one region at a time, moving to the next region every `everyMs`. */
  | { kind: 'shifting'; everyMs: number }
  | { kind: 'weighted'; weights: number[] };

export interface TrafficStream {
  key: string;
  /** Mean arrivals per second (Poisson). */
  ratePerSec: number;
  shape: TrafficShape;
  cost?: number;
  startMs?: number;
  endMs?: number;
}

export interface Scenario {
  regions: SimRegion[];
  rule: {
    algorithm: SimAlgorithm;
    limit: number;
    periodMs: number;
    burst?: number;
    leakageBudget: LeakageBudget;
  };
  syncIntervalMs: number;
  maxClockSkewMs: number;
  durationMs: number;
  /** Default for every direction; `links["a>b"]` overrides the direction a → b. */
  link: LinkSpec;
  links?: Record<string, LinkSpec>;
  /** A sent job not acknowledged within this long is sent again (default 1000 ms). */
  ackTimeoutMs?: number;
  faults?: Fault[];
  traffic: TrafficStream[];
  rebalance?: Partial<RebalancePolicy>;
  /** True times at which to snapshot every region's own rows and measure when all views include them. */
  probes?: number[];
  /** Check the per-region invariants and the global share sum after every event (slower). */
  audit?: boolean;
  /**
   * The fast lane (publisher.ts FAST_LANE_MS): a key whose change matters now (a region's first admission in a
   * window/epoch, a grant made by a merge or a sweep) goes to every peer at once instead of at the next tick,
   * at most once per this many ms per key. Absent: every key waits for the sync tick.
   */
  fastLaneMs?: number;
}

export interface SimDecision {
  /** True (virtual) time. */
  t: number;
  /** The deciding region's clock. */
  local: number;
  region: number;
  key: string;
  cost: number;
  allowed: boolean;
  /** Window (or epoch) id by the deciding region's clock. */
  window: number;
}

export interface WindowTally {
  key: string;
  window: number;
  /** Admitted by the federation in this window id (ids by each deciding region's clock). */
  admitted: number;
  /** Admitted by one exact global limiter over the merged trace (ids by true time). */
  exactAdmitted: number;
  demand: number;
}

export interface SimStats {
  requests: number;
  admitted: number;
  /** Requests that arrived at a crashed region (no decision). */
  unserved: number;
  exactAdmitted: number;
  messagesSent: number;
  messagesApplied: number;
  sendFailures: number;
  messagesLost: number;
  windows: WindowTally[];
  /** Max over windows of admitted − limit (window algorithms; 0 when never over). */
  maxWindowOverage: number;
  /** Admission in one region until a peer's view includes it, ms (every admission × peer that resolved). */
  syncLagMs: number[];
  convergence: { probe: number; convergedAt: number | null }[];
  /** Audit only: the largest Σ_r σ_r seen at any instant (token bucket), and invariant violations. */
  maxShareSum: number;
  invariantViolations: string[];
  /** Keys sent on the fast lane (each to every peer). */
  fastSends: number;
  /**
   * Denials while the federation as a whole had room: windows, the deciding region's own view shows
   * G + cost ≤ L (and the window is not forfeited); buckets, the regions' tokens add up to ≥ cost.
   */
  falseDenials: number;
  /** From a region's first denial of a key in a window/epoch until its view next shows a grant to it (ms). */
  timeToGrantMs: number[];
}

export interface SimResult {
  decisions: SimDecision[];
  stats: SimStats;
}

// ---------------------------------------------------------------------------------------------------------

/** mulberry32: small, fast, deterministic. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type KeyState = WindowState | BucketState;
type Slots = WindowSlot[] | EpochSlot[];

interface Message {
  from: number;
  to: number;
  key: string;
  version: number;
  slots: Slots;
  /** The sender's incarnation when sent (a wipe makes old acknowledgements meaningless). */
  incarnation: number;
}

interface RegionSim {
  index: number;
  name: string;
  offset: number;
  params: FederationParams;
  up: boolean;
  workerUp: boolean;
  wiped: boolean;
  incarnation: number;
  fence: number;
  keys: Map<string, KeyState>;
  versions: Map<string, number>;
  /** Per peer: key → version waiting to be delivered. */
  pending: Map<string, number>[];
  /** Per peer: key → the version in flight and when it was sent. */
  outstanding: Map<string, { version: number; sentAt: number }>[];
  /** Jobs delivered to this region's Redis, not yet applied. */
  queue: Message[];
  /** Keys whose view showed a hungry peer: rebalanced again on every sync tick (the sweep). */
  watch: Set<string>;
  /** Fast lane: key → last fast send, and keys with a fast send already scheduled. */
  fastSent: Map<string, number>;
  fastDue: Set<string>;
}

type Event =
  | { kind: 'arrival'; stream: number; exact: number }
  | { kind: 'tick'; region: number }
  | { kind: 'deliver'; message: Message; duplicate: boolean }
  | { kind: 'ack'; message: Message }
  | { kind: 'fault'; fault: Fault }
  | { kind: 'probe'; probe: number }
  | { kind: 'fast'; region: number; key: string };

interface Scheduled {
  at: number;
  seq: number;
  event: Event;
}

/** Binary min-heap on (at, seq): ties resolve in scheduling order, so runs are deterministic. */
class EventQueue {
  private heap: Scheduled[] = [];
  private seq = 0;
  /** Virtual time never runs backwards: nothing is scheduled before the event being handled. */
  floor = 0;

  push(at: number, event: Event): void {
    const item = { at: Math.max(at, this.floor), seq: this.seq++, event };
    const heap = this.heap;
    heap.push(item);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i]!, heap[parent]!)) break;
      [heap[i], heap[parent]] = [heap[parent]!, heap[i]!];
      i = parent;
    }
  }

  pop(): Scheduled | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (heap.length > 0 && last) {
      heap[0] = last;
      let i = 0;
      for (;;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && before(heap[left]!, heap[smallest]!)) smallest = left;
        if (right < heap.length && before(heap[right]!, heap[smallest]!)) smallest = right;
        if (smallest === i) break;
        [heap[i], heap[smallest]] = [heap[smallest]!, heap[i]!];
        i = smallest;
      }
    }
    return top;
  }
}

function before(a: Scheduled, b: Scheduled): boolean {
  return a.at < b.at || (a.at === b.at && a.seq < b.seq);
}

/** A safety valve for generated scenarios: no run processes more events than this. */
const MAX_EVENTS = 2_000_000;

export function simulate(scenario: Scenario, seed: number): SimResult {
  return new Simulation(scenario, seed).run();
}

class Simulation {
  private readonly random: () => number;
  private readonly queue = new EventQueue();
  private readonly regions: RegionSim[];
  private readonly names: string[];
  private readonly windowed: boolean;
  private readonly sliding: boolean;
  private readonly linkUp: boolean[][];
  private readonly decisions: SimDecision[] = [];
  private readonly arrivals: { t: number; key: string; cost: number }[] = [];
  private readonly lagWatch = new Map<string, { origin: number; window: number; value: number; since: number }[]>();
  private readonly probes: { probe: number; truth: ProbeTruth; convergedAt: number | null }[] = [];
  private readonly stats: SimStats = {
    requests: 0,
    admitted: 0,
    unserved: 0,
    exactAdmitted: 0,
    messagesSent: 0,
    messagesApplied: 0,
    sendFailures: 0,
    messagesLost: 0,
    windows: [],
    maxWindowOverage: 0,
    syncLagMs: [],
    convergence: [],
    maxShareSum: 0,
    invariantViolations: [],
    fastSends: 0,
    falseDenials: 0,
    timeToGrantMs: [],
  };
  /** region|key|window → the region's first admission in that window, waiting for a grant. */
  private readonly needs = new Map<string, number>();
  private now = 0;

  constructor(
    private readonly scenario: Scenario,
    seed: number,
  ) {
    this.random = prng(seed);
    const sorted = [...scenario.regions].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    this.names = sorted.map((region) => region.name);
    const weights = sorted.map((region) => region.weight ?? 1);
    const n = sorted.length;
    this.windowed = scenario.rule.algorithm !== 'tokenBucket';
    this.sliding = scenario.rule.algorithm === 'slidingWindow';
    this.linkUp = Array.from({ length: n }, () => new Array<boolean>(n).fill(true));
    this.regions = sorted.map((region, index) => ({
      index,
      name: region.name,
      offset: Math.round(region.clockOffsetMs ?? 0),
      params: federationParams({
        regions: n,
        self: index,
        weights,
        limit: scenario.rule.limit,
        periodMs: scenario.rule.periodMs,
        burst: scenario.rule.burst,
        leakageBudget: scenario.rule.leakageBudget,
        maxClockSkewMs: scenario.maxClockSkewMs,
        rebalance: scenario.rebalance,
      }),
      up: true,
      workerUp: true,
      wiped: false,
      incarnation: 0,
      fence: 0,
      keys: new Map(),
      versions: new Map(),
      pending: Array.from({ length: n }, () => new Map()),
      outstanding: Array.from({ length: n }, () => new Map()),
      queue: [],
      watch: new Set(),
      fastSent: new Map(),
      fastDue: new Set(),
    }));
  }

  run(): SimResult {
    const { scenario } = this;
    scenario.traffic.forEach((stream, index) => this.scheduleArrival(index, stream.startMs ?? 0));
    for (const region of this.regions) {
      this.queue.push(Math.floor(this.random() * scenario.syncIntervalMs), { kind: 'tick', region: region.index });
    }
    for (const fault of scenario.faults ?? []) this.queue.push(Math.round(fault.at), { kind: 'fault', fault });
    (scenario.probes ?? []).forEach((at, probe) => this.queue.push(Math.round(at), { kind: 'probe', probe }));

    for (let processed = 0; processed < MAX_EVENTS; processed++) {
      const next = this.queue.pop();
      if (!next || next.at > scenario.durationMs) break;
      this.now = next.at;
      this.queue.floor = next.at;
      this.handle(next.event);
      if (scenario.audit) this.audit();
    }
    this.finish();
    return { decisions: this.decisions, stats: this.stats };
  }

  private local(region: RegionSim): number {
    return this.now + region.offset;
  }

  private handle(event: Event): void {
    switch (event.kind) {
      case 'arrival':
        this.arrive(event.stream, event.exact);
        return;
      case 'tick':
        this.tick(event.region);
        return;
      case 'deliver':
        this.deliver(event.message, event.duplicate);
        return;
      case 'ack':
        this.acknowledge(event.message);
        return;
      case 'fault':
        this.fault(event.fault);
        return;
      case 'probe':
        this.takeProbe(event.probe);
        return;
      case 'fast':
        this.fastSend(event.region, event.key);
        return;
    }
  }

  // --- traffic ---------------------------------------------------------------------------------------------

  private scheduleArrival(stream: number, after: number): void {
    const spec = this.scenario.traffic[stream]!;
    if (spec.ratePerSec <= 0) return;
    const gap = (-Math.log(1 - this.random()) * 1000) / spec.ratePerSec;
    // The next gap counts from the exact (fractional) time, so rates above 1,000/s keep their count.
    const exact = after + gap;
    const at = Math.round(exact);
    if (at > (spec.endMs ?? this.scenario.durationMs)) return;
    this.queue.push(at, { kind: 'arrival', stream, exact });
  }

  private pickRegion(shape: TrafficShape): number {
    const n = this.regions.length;
    switch (shape.kind) {
      case 'even':
        return Math.min(n - 1, Math.floor(this.random() * n));
      case 'region':
        return Math.max(0, this.names.indexOf(shape.region));
      case 'shifting':
        return Math.floor(this.now / shape.everyMs) % n;
      case 'weighted': {
        const total = shape.weights.reduce((a, b) => a + b, 0);
        let pick = this.random() * total;
        for (let i = 0; i < n; i++) {
          pick -= shape.weights[i] ?? 0;
          if (pick < 0) return i;
        }
        return n - 1;
      }
    }
  }

  private arrive(stream: number, exact: number): void {
    const spec = this.scenario.traffic[stream]!;
    this.scheduleArrival(stream, exact);
    const cost = spec.cost ?? 1;
    this.stats.requests++;
    this.arrivals.push({ t: this.now, key: spec.key, cost });
    const region = this.regions[this.pickRegion(spec.shape)]!;
    if (!region.up) {
      this.stats.unserved++;
      return;
    }
    const local = this.local(region);
    const { params } = region;
    const held = region.keys.get(spec.key);
    let allowed: boolean;
    let state: KeyState | undefined;
    if (this.windowed) {
      const decision = decideWindow(
        params,
        (held as WindowState | undefined) ?? newWindow(params),
        region.fence,
        local,
        cost,
        this.sliding,
      );
      allowed = decision.allowed;
      state = decision.state;
    } else {
      const decision = decideBucket(params, held as BucketState | undefined, region.fence, local, cost);
      allowed = decision.allowed;
      state = decision.state;
    }
    const window = windowIdAt(local, params.periodMs);
    this.decisions.push({ t: this.now, local, region: region.index, key: spec.key, cost, allowed, window });
    if (!allowed && this.federationHadRoom(region, spec.key, held, local, cost)) this.stats.falseDenials++;
    const need = `${region.index}|${spec.key}|${window}`;
    if (!allowed && !this.needs.has(need)) this.needs.set(need, this.now);
    if (!allowed || !state) return;
    this.stats.admitted += cost;
    const first = held === undefined || ownCount(this.slotsOf(held), window, region.index) === 0;
    this.changed(region, spec.key, state);
    if (first) this.fastLane(region, spec.key);
    const own = this.slotsOf(state);
    const value = ownCount(own, window, region.index);
    for (const peer of this.regions) {
      if (peer.index === region.index) continue;
      const watchKey = `${peer.index}|${spec.key}`;
      let list = this.lagWatch.get(watchKey);
      if (!list) this.lagWatch.set(watchKey, (list = []));
      list.push({ origin: region.index, window, value, since: this.now });
    }
  }

  private slotsOf(state: KeyState): Slots {
    return this.windowed ? windowGossip(state as WindowState) : bucketGossip(state as BucketState);
  }

  /** Store a changed state: new version, pending for every peer ("newer state supersedes"). */
  private changed(region: RegionSim, key: string, state: KeyState): void {
    region.keys.set(key, state);
    const version = (region.versions.get(key) ?? 0) + 1;
    region.versions.set(key, version);
    for (const peer of this.regions) if (peer.index !== region.index) region.pending[peer.index]!.set(key, version);
  }

  // --- gossip ----------------------------------------------------------------------------------------------

  private link(from: number, to: number): LinkSpec {
    return this.scenario.links?.[`${this.names[from]}>${this.names[to]}`] ?? this.scenario.link;
  }

  private delay(from: number, to: number): number {
    const spec = this.link(from, to);
    return Math.max(0, Math.round(spec.latencyMs + this.random() * (spec.jitterMs ?? 0)));
  }

  private tick(index: number): void {
    const region = this.regions[index]!;
    this.queue.push(this.now + this.scenario.syncIntervalMs, { kind: 'tick', region: index });
    if (!region.up) return;
    this.sweep(region);
    for (const peer of this.regions) {
      if (peer.index === index) continue;
      for (const key of [...region.pending[peer.index]!.keys()]) this.send(region, peer, key, false);
    }
  }

  /** Sends the pending version of `key` to `peer` unless it is in flight (and not timed out) already. */
  private send(region: RegionSim, peer: RegionSim, key: string, fast: boolean): void {
    const pending = region.pending[peer.index]!;
    const outstanding = region.outstanding[peer.index]!;
    const version = pending.get(key);
    if (version === undefined) return;
    const ackTimeout = this.scenario.ackTimeoutMs ?? 1_000;
    const inFlight = outstanding.get(key);
    if (inFlight && inFlight.version === version && this.now - inFlight.sentAt < ackTimeout) return;
    if (!this.linkUp[region.index]![peer.index] || !peer.up) {
      if (!fast) this.stats.sendFailures++;
      return;
    }
    const state = region.keys.get(key);
    if (!state) {
      pending.delete(key);
      return;
    }
    const message: Message = {
      from: region.index,
      to: peer.index,
      key,
      version,
      slots: this.slotsOf(state),
      incarnation: region.incarnation,
    };
    outstanding.set(key, { version, sentAt: this.now });
    this.stats.messagesSent++;
    const arrival = this.now + this.delay(region.index, peer.index);
    this.queue.push(arrival, { kind: 'deliver', message, duplicate: false });
    const duplicate = this.link(region.index, peer.index).duplicateProbability ?? 0;
    if (duplicate > 0 && this.random() < duplicate) {
      const later = arrival + Math.round(this.random() * (this.scenario.syncIntervalMs + this.delay(region.index, peer.index)));
      this.queue.push(later, { kind: 'deliver', message, duplicate: true });
    }
  }

  /** Queue `key` on the fast lane: now, or when the per-key debounce allows. */
  private fastLane(region: RegionSim, key: string): void {
    const debounce = this.scenario.fastLaneMs;
    if (debounce === undefined || region.fastDue.has(key)) return;
    const last = region.fastSent.get(key);
    const at = last === undefined ? this.now : Math.max(this.now, last + debounce);
    region.fastDue.add(key);
    this.queue.push(at, { kind: 'fast', region: region.index, key });
  }

  private fastSend(index: number, key: string): void {
    const region = this.regions[index]!;
    region.fastDue.delete(key);
    if (!region.up) return;
    region.fastSent.set(key, this.now);
    this.stats.fastSends++;
    for (const peer of this.regions) if (peer.index !== index) this.send(region, peer, key, true);
  }

  /** See SimStats.falseDenials. */
  private federationHadRoom(region: RegionSim, key: string, held: KeyState | undefined, local: number, cost: number): boolean {
    const { params } = region;
    if (this.windowed) {
      const id = windowIdAt(local, params.periodMs);
      if (windowForfeited(params, region.fence, id) || !held) return false;
      const state = held as WindowState;
      const global = windowCells(state, id).c.reduce((a, b) => a + b, 0);
      if (global + cost > params.limit) return false;
      if (!this.sliding) return true;
      const previous = windowCells(state, id - 1).c.reduce((a, b) => a + b, 0);
      const weighted = (previous * (params.periodMs - (local - id * params.periodMs))) / params.periodMs;
      return Math.floor(params.limit - weighted - global) >= cost;
    }
    // Fractions of a token in several regions are not room: at least cost + N − 1 tokens in all.
    let tokens = -(this.regions.length - 1);
    for (const other of this.regions) {
      if (!other.up) continue;
      const state = other.keys.get(key) as BucketState | undefined;
      const at = this.local(other);
      tokens += state ? refill(other.params, state, other.fence, at) : newBucket(other.params, other.fence, at).tokens;
    }
    return tokens >= cost;
  }

  /** Did the region's own transfer row grow (a grant)? */
  private gave(region: RegionSim, before: KeyState | undefined, after: KeyState): boolean {
    const given = (state: KeyState | undefined): number => {
      if (!state) return 0;
      let total = 0;
      for (const slot of this.slotsOf(state)) for (const value of slot.x[region.index]!) total += value;
      return total;
    };
    return given(after) > given(before);
  }

  private deliver(message: Message, duplicate: boolean): void {
    const target = this.regions[message.to]!;
    if (!duplicate && (!this.linkUp[message.from]![message.to] || !target.up)) {
      this.stats.messagesLost++;
      return;
    }
    if (!target.up) return;
    target.queue.push(message);
    // The add's reply travels back; it is lost if that direction is down (the sender then sends again).
    if (!duplicate && this.linkUp[message.to]![message.from]) {
      this.queue.push(this.now + this.delay(message.to, message.from), { kind: 'ack', message });
    }
    this.work(target);
  }

  private acknowledge(message: Message): void {
    const sender = this.regions[message.from]!;
    if (!sender.up || sender.incarnation !== message.incarnation) return;
    const outstanding = sender.outstanding[message.to]!;
    if (outstanding.get(message.key)?.version === message.version) outstanding.delete(message.key);
    const pending = sender.pending[message.to]!;
    if (pending.get(message.key) === message.version) pending.delete(message.key);
  }

  /** The region's worker applies every queued job (if it runs). */
  private work(region: RegionSim): void {
    if (!region.up || !region.workerUp) return;
    const jobs = region.queue.splice(0);
    for (const job of jobs) this.apply(region, job);
  }

  private apply(region: RegionSim, message: Message): void {
    this.stats.messagesApplied++;
    const local = this.local(region);
    const held = region.keys.get(message.key);
    let result: { state: KeyState | undefined; changed: boolean };
    if (this.windowed) {
      result = mergeWindow(
        region.params,
        (held as WindowState | undefined) ?? newWindow(region.params),
        region.fence,
        local,
        message.slots as WindowSlot[],
      );
    } else {
      result = mergeBucket(region.params, held as BucketState | undefined, region.fence, local, message.slots as EpochSlot[]);
    }
    if (!result.changed || !result.state) return;
    const window = windowIdAt(local, region.params.periodMs);
    const need = `${region.index}|${message.key}|${window}`;
    const since = this.needs.get(need);
    if (
      since !== undefined &&
      received(this.slotsOf(result.state), window, region.index) > received(held ? this.slotsOf(held) : [], window, region.index)
    ) {
      this.stats.timeToGrantMs.push(this.now - since);
      this.needs.delete(need);
    }
    if (this.hasHungryPeer(region, result.state, local)) region.watch.add(message.key);
    this.changed(region, message.key, result.state);
    if (this.gave(region, held, result.state)) this.fastLane(region, message.key);
    this.resolveLag(region, message.key, result.state);
    this.checkProbes();
  }

  private hasHungryPeer(region: RegionSim, state: KeyState, local: number): boolean {
    return this.windowed
      ? windowHasHungryPeer(region.params, state as WindowState, local)
      : bucketHasHungryPeer(region.params, state as BucketState, local);
  }

  /** The sync loop's sweep: rebalance watched keys without new gossip (protocol.ts, sweepWindow). */
  private sweep(region: RegionSim): void {
    const local = this.local(region);
    for (const key of region.watch) {
      const state = region.keys.get(key);
      if (!state || !this.hasHungryPeer(region, state, local)) {
        region.watch.delete(key);
        continue;
      }
      const result = this.windowed
        ? sweepWindow(region.params, state as WindowState, region.fence, local)
        : sweepBucket(region.params, state as BucketState, region.fence, local);
      if (result.changed) {
        this.changed(region, key, result.state);
        this.fastLane(region, key);
      }
    }
  }

  private resolveLag(region: RegionSim, key: string, state: KeyState): void {
    const list = this.lagWatch.get(`${region.index}|${key}`);
    if (!list || list.length === 0) return;
    const slots = this.slotsOf(state);
    const keep = [];
    for (const watch of list) {
      if (ownCount(slots, watch.window, watch.origin) >= watch.value) this.stats.syncLagMs.push(this.now - watch.since);
      else keep.push(watch);
    }
    this.lagWatch.set(`${region.index}|${key}`, keep);
  }

  // --- faults ----------------------------------------------------------------------------------------------

  private indexOf(name: string): number {
    const index = this.names.indexOf(name);
    if (index < 0) throw new Error(`unknown region "${name}" in scenario`);
    return index;
  }

  private fault(fault: Fault): void {
    const n = this.regions.length;
    switch (fault.kind) {
      case 'linkDown':
      case 'linkUp':
        this.linkUp[this.indexOf(fault.from)]![this.indexOf(fault.to)] = fault.kind === 'linkUp';
        return;
      case 'partition': {
        const group = new Array<number>(n).fill(-1);
        fault.groups.forEach((members, g) => members.forEach((name) => (group[this.indexOf(name)] = g)));
        group.forEach((g, i) => (group[i] = g < 0 ? fault.groups.length + i : g));
        for (let a = 0; a < n; a++) for (let b = 0; b < n; b++) if (group[a] !== group[b]) this.linkUp[a]![b] = false;
        return;
      }
      case 'heal':
        for (const row of this.linkUp) row.fill(true);
        return;
      case 'flap': {
        const from = this.indexOf(fault.from);
        const to = this.indexOf(fault.to);
        this.linkUp[from]![to] = !this.linkUp[from]![to];
        const next = this.now + Math.max(1, fault.everyMs);
        if (next < fault.until) this.queue.push(next, { kind: 'fault', fault: { ...fault, at: next } });
        else this.queue.push(fault.until, { kind: 'fault', fault: { at: fault.until, kind: 'linkUp', from: fault.from, to: fault.to } });
        return;
      }
      case 'crash': {
        const region = this.regions[this.indexOf(fault.region)]!;
        region.up = false;
        if (fault.wipe) {
          region.wiped = true;
          region.incarnation++;
          region.keys.clear();
          region.versions.clear();
          region.pending.forEach((pending) => pending.clear());
          region.outstanding.forEach((outstanding) => outstanding.clear());
          region.queue = [];
          region.watch.clear();
        }
        return;
      }
      case 'restart': {
        const region = this.regions[this.indexOf(fault.region)]!;
        if (region.up) return;
        region.up = true;
        if (region.wiped) {
          // The first script call finds the marker missing and fences at its own clock.
          region.fence = Math.max(1, this.local(region));
          region.wiped = false;
        }
        this.work(region);
        return;
      }
      case 'workerStop':
        this.regions[this.indexOf(fault.region)]!.workerUp = false;
        return;
      case 'workerStart': {
        const region = this.regions[this.indexOf(fault.region)]!;
        region.workerUp = true;
        this.work(region);
        return;
      }
    }
  }

  // --- measurements ----------------------------------------------------------------------------------------

  private takeProbe(probe: number): void {
    const truth: ProbeTruth = [];
    for (const region of this.regions) {
      for (const [key, state] of region.keys) {
        for (const slot of this.slotsOf(state)) {
          truth.push({ origin: region.index, key, window: slot.id, c: slot.c[region.index]!, x: [...slot.x[region.index]!] });
        }
      }
    }
    this.probes[probe] = { probe: this.now, truth, convergedAt: null };
    this.checkProbes();
  }

  /** A probe has converged once every region's view holds every region's own rows as they were at the probe. */
  private checkProbes(): void {
    for (const probe of this.probes) {
      if (!probe || probe.convergedAt !== null) continue;
      const done = probe.truth.every((row) =>
        this.regions.every((region) => {
          if (region.index === row.origin) return true;
          const state = region.keys.get(row.key);
          const current = windowIdAt(this.local(region), this.scenario.rule.periodMs);
          if (row.window < current - 1) return true; // that window is gone everywhere that matters
          if (!state) return false;
          const cells = this.windowed
            ? windowCells(state as WindowState, row.window)
            : epochCells((state as BucketState).slots, row.window);
          return cells.c[row.origin]! >= row.c && row.x.every((value, d) => cells.x[row.origin]![d]! >= value);
        }),
      );
      if (done) probe.convergedAt = this.now;
    }
  }

  private audit(): void {
    const keys = new Set(this.scenario.traffic.map((stream) => stream.key));
    for (const key of keys) {
      if (this.windowed) {
        for (const region of this.regions) {
          const state = region.keys.get(key) as WindowState | undefined;
          if (!state || region.params.budget === null) continue;
          for (const slot of state.slots) {
            if (slot.id < 0 || windowForfeited(region.params, region.fence, slot.id)) continue;
            const allowance = windowAllowance(region.params, slot, region.index);
            if (slot.c[region.index]! > allowance) {
              this.stats.invariantViolations.push(
                `t=${this.now} ${region.name} ${key} w${slot.id}: c=${slot.c[region.index]} > l=${allowance}`,
              );
            }
          }
        }
      } else {
        let total = 0;
        for (const region of this.regions) {
          if (region.wiped) continue; // holds nothing until it restarts behind a fence
          const state = region.keys.get(key) as BucketState | undefined;
          const slots = state?.slots ?? newBucketSlots(region.params.regions);
          const share = shareAt(region.params, slots, region.fence, this.local(region));
          if (share < 0) this.stats.invariantViolations.push(`t=${this.now} ${region.name} ${key}: σ=${share} < 0`);
          total += share;
        }
        this.stats.maxShareSum = Math.max(this.stats.maxShareSum, total);
        if (total > SHARE_UNITS && this.regions[0]!.params.budget !== null) {
          this.stats.invariantViolations.push(`t=${this.now} ${key}: Σσ=${total} > ${SHARE_UNITS}`);
        }
      }
    }
  }

  private finish(): void {
    const { stats, scenario } = this;
    stats.convergence = this.probes.filter(Boolean).map(({ probe, convergedAt }) => ({ probe, convergedAt }));
    // One exact limiter over the merged trace, by true time.
    const exact = federationParams({
      regions: 1,
      self: 0,
      weights: [1],
      limit: scenario.rule.limit,
      periodMs: scenario.rule.periodMs,
      burst: scenario.rule.burst,
      leakageBudget: 0,
      maxClockSkewMs: 0,
    });
    const exactState = new Map<string, KeyState | undefined>();
    const tallies = new Map<string, WindowTally>();
    const tally = (key: string, window: number): WindowTally => {
      const id = `${key}|${window}`;
      let entry = tallies.get(id);
      if (!entry) tallies.set(id, (entry = { key, window, admitted: 0, exactAdmitted: 0, demand: 0 }));
      return entry;
    };
    for (const arrival of this.arrivals) {
      const window = windowIdAt(arrival.t, scenario.rule.periodMs);
      const entry = tally(arrival.key, window);
      entry.demand += arrival.cost;
      const held = exactState.get(arrival.key);
      if (this.windowed) {
        const decision = decideWindow(
          exact,
          (held as WindowState | undefined) ?? newWindow(exact),
          0,
          arrival.t,
          arrival.cost,
          this.sliding,
        );
        exactState.set(arrival.key, decision.state);
        if (decision.allowed) entry.exactAdmitted += arrival.cost;
      } else {
        const decision = decideBucket(exact, held as BucketState | undefined, 0, arrival.t, arrival.cost);
        exactState.set(arrival.key, decision.state);
        if (decision.allowed) entry.exactAdmitted += arrival.cost;
      }
    }
    for (const decision of this.decisions) if (decision.allowed) tally(decision.key, decision.window).admitted += decision.cost;
    stats.windows = [...tallies.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.window - b.window));
    stats.exactAdmitted = stats.windows.reduce((total, entry) => total + entry.exactAdmitted, 0);
    if (this.windowed) {
      stats.maxWindowOverage = Math.max(0, ...stats.windows.map((entry) => entry.admitted - scenario.rule.limit));
    }
  }
}

type ProbeTruth = { origin: number; key: string; window: number; c: number; x: number[] }[];

function newWindow(params: FederationParams): WindowState {
  return newWindowState(params.regions);
}

function newBucketSlots(n: number): EpochSlot[] {
  return Array.from({ length: KEPT_WINDOWS }, () => emptyEpochSlot(n));
}

/** Σ_o x[o][r] in one window/epoch: what r has been given. */
function received(slots: Slots, window: number, r: number): number {
  let total = 0;
  for (const slot of slots) if (slot.id === window) for (let o = 0; o < slot.x.length; o++) if (o !== r) total += slot.x[o]![r]!;
  return total;
}

function ownCount(slots: Slots, window: number, origin: number): number {
  for (const slot of slots) if (slot.id === window) return slot.c[origin]!;
  return 0;
}
