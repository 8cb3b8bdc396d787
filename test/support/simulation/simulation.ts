// A deterministic, virtual-time simulation of the federation protocol (no Redis): regions decide with the
// pure functions of protocol.ts, gossip whole views through per-peer pending sets over links that can be
// slow, lossy, one-way or partitioned, and regions and workers crash. The property tests and the chaos lab
// drive it; the same seed always yields the same trace. This file ties the parts together: events.ts (the
// queue), links.ts (links and their faults), traffic.ts (arrivals), statistics.ts (measurements), state.ts.
import { createFastPace } from '../../../src/federation/gossip/fast-pace.ts';
import {
  bucketAdmissionGossip,
  bucketReportTargets,
  bucketHasHungryPeer,
  decideBucket,
  decideWindow,
  fastLaneTargets,
  federationParams,
  gossipHorizonMs,
  mergeBucket,
  mergeWindow,
  marksOfMerge,
  marksPeer,
  type MergeMarks,
  newBucket,
  refill,
  sweepBucket,
  sweepWindow,
  windowCells,
  windowAdmissionGossip,
  windowForfeited,
  windowHasHungryPeer,
  windowIdAt,
  type AdmissionGossip,
  type BucketState,
  type EpochSlot,
  type FastLaneTargets,
  type WindowSlot,
  type WindowState,
} from '../../../src/protocol/index.ts';
import { EventQueue, type Event } from './events.ts';
import { Links, isLinkFault, regionIndex } from './links.ts';
import { prng } from './random.ts';
import { newWindow, ownCount, received, slotsOf } from './state.ts';
import { Probes, SyncLag, audit, emptyStats, tallyWindows } from './statistics.ts';
import { nextArrival, pickRegion } from './traffic.ts';
import type { Fault, KeyState, Message, RegionSim, Scenario, SimDecision, SimResult, SimStats, Slots } from './types.ts';

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
  private readonly links: Links;
  private readonly decisions: SimDecision[] = [];
  private readonly arrivals: { t: number; key: string; cost: number }[] = [];
  private readonly lag = new SyncLag();
  private readonly probes: Probes;
  private readonly stats: SimStats = emptyStats();
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
    this.links = new Links(scenario, this.names, this.random);
    this.probes = new Probes(scenario.rule.periodMs, this.windowed);
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
      fastPace: createFastPace(),
      fastRunAt: Number.NEGATIVE_INFINITY,
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
      if (scenario.audit) audit(scenario, this.regions, this.windowed, this.now, this.stats);
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
        this.probes.take(event.probe, this.regions, this.now);
        return;
      case 'fast':
        this.fastSend(event.region, event.key);
        return;
      case 'park': {
        const region = this.regions[event.region]!;
        if (region.up) this.decide(region, event.stream, event.cost, event.until, event.attempt);
        else this.stats.unserved++;
        return;
      }
    }
  }

  // --- traffic ---------------------------------------------------------------------------------------------

  private scheduleArrival(stream: number, after: number): void {
    const next = nextArrival(this.scenario.traffic[stream]!, after, this.scenario.durationMs, this.random);
    if (next) this.queue.push(next.at, { kind: 'arrival', stream, exact: next.exact });
  }

  private arrive(stream: number, exact: number): void {
    const spec = this.scenario.traffic[stream]!;
    this.scheduleArrival(stream, exact);
    const cost = spec.cost ?? 1;
    this.stats.requests++;
    this.arrivals.push({ t: this.now, key: spec.key, cost });
    const region = this.regions[pickRegion(spec.shape, this.names, this.now, this.random)]!;
    if (!region.up) {
      this.stats.unserved++;
      return;
    }
    this.decide(region, stream, cost, this.now + (this.scenario.maxWaitMs ?? 0), 0);
  }

  /** Decide one request in `region`; a false denial is parked (maxWaitMs) until `until`. */
  private decide(region: RegionSim, stream: number, cost: number, until: number, attempt: number): void {
    const spec = this.scenario.traffic[stream]!;
    const local = this.local(region);
    const { params } = region;
    const held = region.keys.get(spec.key);
    let allowed: boolean;
    let falseDenial: boolean;
    let state: KeyState | undefined;
    // How an admission goes to the peers (decide.lua: admission_gossip), from the state before it.
    let gossip: AdmissionGossip;
    const horizonMs = gossipHorizonMs(this.scenario.syncIntervalMs);
    if (this.windowed) {
      const before = (held as WindowState | undefined) ?? newWindow(params);
      const decision = decideWindow(params, before, region.fence, local, cost, this.sliding);
      allowed = decision.allowed;
      falseDenial = decision.falseDenial;
      state = decision.state;
      gossip = windowAdmissionGossip(params, before, local, cost, horizonMs);
    } else {
      const decision = decideBucket(params, held as BucketState | undefined, region.fence, local, cost);
      allowed = decision.allowed;
      falseDenial = decision.falseDenial;
      state = decision.state;
      gossip = bucketAdmissionGossip(params, held as BucketState | undefined, region.fence, local, cost, horizonMs);
    }
    const window = windowIdAt(local, params.periodMs);
    // decide.lua: a false denial refreshes the region's t (demand), goes to the peers, and on the fast lane.
    if (!allowed && falseDenial && state !== undefined) this.changed(region, spec.key, state);
    if (!allowed && falseDenial && this.now < until) {
      // park.ts: decide again a little later while the fast lane (below) asks the peers.
      if (state !== undefined) this.fastLane(region, spec.key);
      const pause = Math.min(5 * 2 ** attempt, 20, until - this.now);
      this.queue.push(this.now + pause, { kind: 'park', region: region.index, stream, cost, until, attempt: attempt + 1 });
      return;
    }
    this.decisions.push({ t: this.now, local, region: region.index, key: spec.key, cost, allowed, window });
    if (!allowed && this.federationHadRoom(region, spec.key, held, local, cost)) this.stats.falseDenials++;
    const need = `${region.index}|${spec.key}|${window}`;
    if (!allowed && !this.needs.has(need)) this.needs.set(need, this.now);
    if (!allowed && falseDenial && state !== undefined) this.fastLane(region, spec.key);
    if (!allowed || !state) return;
    this.stats.admitted += cost;
    // decide.lua: a token bucket's round report skips the bystanders (admission-gossip.ts bucketReportTargets).
    const to = gossip === 'round' && !this.windowed ? bucketReportTargets(params, state as BucketState, local) : this.peersOf(region.index);
    if (gossip === 'silent') region.keys.set(spec.key, state);
    else this.changed(region, spec.key, state, undefined, to);
    if (gossip === 'fast') this.fastLane(region, spec.key);
    const own = this.slotsOf(state);
    const value = ownCount(own, window, region.index);
    // Sync lag is that of the admissions the peers are sent (a silent one is, by design, not sent).
    if (gossip !== 'silent') this.lag.admitted(to, region.index, spec.key, window, value, this.now);
  }

  /** Every region's index but `self`'s. */
  private peersOf(self: number): number[] {
    return this.regions.map((peer) => peer.index).filter((index) => index !== self);
  }

  private slotsOf(state: KeyState): Slots {
    return slotsOf(this.windowed, state);
  }

  /**
   * Store a changed state: new version, pending for every peer ("newer state supersedes") or for the peers `to`
   * names (an admission's round report skips the bystanders), or after a merge for the
   * peers `heard.marks` names (apply_gossip.lua, mergeMarks: the peers it gave to, the sender when its view of this
   * region's row is behind, the others when the merge brought them news); an unmarked peer's send already pending stays, and carries the
   * state as it is when sent.
   */
  private changed(
    region: RegionSim,
    key: string,
    state: KeyState,
    heard?: { from: number; marks: MergeMarks },
    to?: readonly number[],
  ): void {
    region.keys.set(key, state);
    const version = (region.versions.get(key) ?? 0) + 1;
    region.versions.set(key, version);
    for (const peer of this.regions) {
      if (peer.index === region.index) continue;
      const pending = region.pending[peer.index]!;
      const marked = heard === undefined ? (to?.includes(peer.index) ?? true) : marksPeer(heard.marks, peer.index, heard.from);
      if (marked || (peer.index !== heard?.from && pending.has(key))) pending.set(key, version);
    }
  }

  // --- gossip ----------------------------------------------------------------------------------------------

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
    if (!this.links.isUp(region.index, peer.index) || !peer.up) {
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
    const arrival = this.now + this.links.delay(region.index, peer.index);
    this.queue.push(arrival, { kind: 'deliver', message, duplicate: false });
    const duplicate = this.links.spec(region.index, peer.index).duplicateProbability ?? 0;
    if (duplicate > 0 && this.random() < duplicate) {
      const later = arrival + Math.round(this.random() * (this.scenario.syncIntervalMs + this.links.delay(region.index, peer.index)));
      this.queue.push(later, { kind: 'deliver', message, duplicate: true });
    }
  }

  /** Queue `key` on the fast lane: now, or when the per-key debounce allows. */
  private fastLane(region: RegionSim, key: string): void {
    const debounce = this.scenario.fastLaneMs;
    if (debounce === undefined || region.fastDue.has(key)) return;
    const last = region.fastSent.get(key);
    const due = last === undefined ? this.now : Math.max(this.now, last + debounce);
    // A run already going at that instant carries the key; otherwise the region's pace may hold it back.
    const at = due === region.fastRunAt ? due : due + region.fastPace.wait(due);
    region.fastDue.add(key);
    this.queue.push(at, { kind: 'fast', region: region.index, key });
  }

  private fastSend(index: number, key: string): void {
    const region = this.regions[index]!;
    region.fastDue.delete(key);
    if (!region.up) return;
    region.fastSent.set(key, this.now);
    if (region.fastRunAt !== this.now) {
      region.fastPace.spend(this.now);
      region.fastRunAt = this.now;
    }
    this.stats.fastSends++;
    // src/federation/gossip/fast-lane.ts: demand goes to every peer, a grant only to its receivers.
    const state = region.keys.get(key);
    let targets: FastLaneTargets = 'all';
    if (state) {
      const newest = this.slotsOf(state).reduce<Slots[number] | undefined>(
        (best, slot) => (best === undefined || slot.id > best.id ? slot : best),
        undefined,
      );
      if (newest && newest.id >= 0)
        targets = fastLaneTargets(newest.c[index]!, newest.t[index]!, (d) => newest.x[index]![d]!, index, this.regions.length);
    }
    for (const peer of this.regions) {
      if (peer.index !== index && (targets === 'all' || targets.includes(peer.index))) this.send(region, peer, key, true);
    }
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
    if (!duplicate && (!this.links.isUp(message.from, message.to) || !target.up)) {
      this.stats.messagesLost++;
      return;
    }
    if (!target.up) return;
    target.queue.push(message);
    // The add's reply travels back; it is lost if that direction is down (the sender then sends again).
    if (!duplicate && this.links.isUp(message.to, message.from)) {
      this.queue.push(this.now + this.links.delay(message.to, message.from), { kind: 'ack', message });
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
    // apply_gossip.lua (protocol mergeMarks): a merge in which this region gave goes to the peers it gave to (and on
    // the fast lane); besides, to the sender when its view of this region's own row is behind, and to the others
    // when it brought them news.
    const gave = this.gave(region, held, result.state);
    const marks = marksOfMerge(held ? this.slotsOf(held) : [], message.slots, this.slotsOf(result.state), message.from, region.index);
    this.changed(region, message.key, result.state, { from: message.from, marks });
    if (gave) this.fastLane(region, message.key);
    const merged = result.state;
    this.lag.resolve(region, message.key, () => this.slotsOf(merged), this.now, this.stats);
    this.probes.check(this.regions, this.now);
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

  // --- faults ----------------------------------------------------------------------------------------------

  private indexOf(name: string): number {
    return regionIndex(this.names, name);
  }

  private fault(fault: Fault): void {
    if (isLinkFault(fault)) {
      const next = this.links.apply(fault, this.now);
      if (next) this.queue.push(next.at, { kind: 'fault', fault: next.fault });
      return;
    }
    switch (fault.kind) {
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

  private finish(): void {
    this.stats.convergence = this.probes.results();
    tallyWindows(this.scenario, this.sliding, this.arrivals, this.decisions, this.stats);
  }
}
