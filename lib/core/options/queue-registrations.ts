import { PgQueueConfigError } from '../errors';
import { shorten } from '../input-text';
import type { RegisterQueueOptions } from './types';
import type { ResolvedJobDefaults, ResolvedQueueOptions } from './resolved';
import { resolveQueueOptions } from './module-checks';

// One queue may be registered in several modules (a producer's module and a worker's). A bare
// registerQueue({ name }) (or { name, connection }) declares the queue: it may be injected there.
// A full one (any other option) also configures it. Every full one of a name must say the same;
// a bare one takes the full one's options, in whatever order the modules are created.

/** True for a registration that only declares the queue (name, and at most its connection). */
export function isBareRegistration(q: RegisterQueueOptions): boolean {
  return Object.entries(q).every(([k, v]) => k === 'name' || k === 'connection' || v === undefined);
}

/**
 * The first option where `a` and `b` differ, as its path and both values (JSON), or null when
 * they are the same. Paths read as the option is written: `defaultJobOptions.backoff.delayMs`.
 */
export function firstDifference(a: unknown, b: unknown, path = ''): { path: string; a: string; b: string } | null {
  if (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && Array.isArray(a) === Array.isArray(b)) {
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
    for (const k of keys) {
      const d = firstDifference((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], path ? `${path}.${k}` : k);
      if (d) return d;
    }
    return null;
  }
  // A function (defaultJobOptions.group) by its source: two modules that each write the same
  // arrow function register the same queue; JSON would call any two functions the same.
  if (typeof a === 'function' || typeof b === 'function') {
    const fa = typeof a === 'function' ? String(a) : (JSON.stringify(a) ?? 'undefined');
    const fb = typeof b === 'function' ? String(b) : (JSON.stringify(b) ?? 'undefined');
    return fa === fb ? null : { path, a: shorten(fa, 120), b: shorten(fb, 120) };
  }
  const ja = JSON.stringify(a) ?? 'undefined';
  const jb = JSON.stringify(b) ?? 'undefined';
  return ja === jb ? null : { path, a: shorten(ja, 120), b: shorten(jb, 120) };
}

/**
 * Every queue's options from all its registrations (each validated): a full one's, else the
 * bare one's (the defaults). Throws, naming the option and both values, when two full ones
 * differ, or when a bare one names another connection than the full one.
 */
export function mergeRegistrations(
  all: readonly RegisterQueueOptions[],
  base: ResolvedJobDefaults,
): Map<string, ResolvedQueueOptions> {
  const full = new Map<string, ResolvedQueueOptions>();
  const bare = new Map<string, { resolved: ResolvedQueueOptions; saysConnection: boolean }>();
  for (const q of all) {
    const resolved = resolveQueueOptions(q, base);
    if (isBareRegistration(q)) {
      const seen = bare.get(resolved.name);
      if (seen && seen.saysConnection && q.connection !== undefined) sameRegistration(seen.resolved, resolved);
      if (!seen || q.connection !== undefined) bare.set(resolved.name, { resolved, saysConnection: q.connection !== undefined });
      continue;
    }
    const prev = full.get(resolved.name);
    if (prev) sameRegistration(prev, resolved);
    else full.set(resolved.name, resolved);
  }
  const out = new Map(full);
  for (const [name, b] of bare) {
    const f = full.get(name);
    if (f && b.saysConnection) sameRegistration(f, { ...f, connection: b.resolved.connection });
    if (!f) out.set(name, b.resolved);
  }
  return out;
}

/** Throws, naming the first option that differs and both values, unless `a` and `b` are the same. */
export function sameRegistration(a: ResolvedQueueOptions, b: ResolvedQueueOptions): void {
  const d = firstDifference(a, b);
  if (!d) return;
  throw new PgQueueConfigError(
    `Queue "${a.name}" is registered twice with different options: ${d.path} is ${d.a} in one registerQueue(...) ` +
      `and ${d.b} in another (as resolved, defaults filled in). Give every full registration the same options, or ` +
      `register it with options once (where its worker is) and as registerQueue({ name: '${a.name}' }) elsewhere: ` +
      'a bare registration takes the options of the full one.',
  );
}
