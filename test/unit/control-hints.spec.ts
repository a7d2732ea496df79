import { ControlHints, type HintReads, type HintTargets } from '../../lib/worker/control-hints';

// The hints' books without a database: which hints start a confirming read, how they batch, and
// that only what the read confirms is acted on. The reads against PostgreSQL:
// test/integration/spoofed-notify.int-spec.ts.

function setup(held: string[], confirmed: string[], paused: boolean) {
  const calls = { cancelReads: [] as string[][], pauseReads: 0, cancelled: [] as string[], paused: [] as string[] };
  let releaseRead: () => void = () => undefined;
  const gate = { hold: false };
  const reads: HintReads = {
    async cancelRequested(ids) {
      calls.cancelReads.push([...ids]);
      if (gate.hold) await new Promise<void>((r) => (releaseRead = r));
      return ids.filter((id) => confirmed.includes(id));
    },
    async isPaused() {
      calls.pauseReads++;
      if (gate.hold) await new Promise<void>((r) => (releaseRead = r));
      return paused;
    },
  };
  const targets: HintTargets = {
    heldIds: () => held,
    hasQueue: (q) => q === 'q',
    cancel: (id) => calls.cancelled.push(id),
    paused: (q) => calls.paused.push(q),
    error: (err) => {
      throw err;
    },
  };
  return { hints: new ControlHints(reads, targets), calls, gate, release: () => releaseRead() };
}

describe('ControlHints', () => {
  it('acts on a cancel only when the read confirms it, and reads a burst in one statement', async () => {
    const { hints, calls } = setup(['1', '2', '3'], ['2'], false);
    for (const id of ['1', '2', '3', '4', 'x', '-1', '0', '99999999999999999999']) hints.cancelHint(id);
    await hints.settled();
    // Ids nobody here holds and malformed ones are not read at all.
    expect(calls.cancelReads).toEqual([['1', '2', '3']]);
    expect(calls.cancelled).toEqual(['2']);
  });

  it('costs no statement for cancels of ids this process does not hold', async () => {
    const { hints, calls } = setup(['1'], ['1'], false);
    for (let i = 2; i < 10_002; i++) hints.cancelHint(String(i));
    await hints.settled();
    expect(calls.cancelReads).toEqual([]);
  });

  it('keeps one cancel read in flight; hints arriving meanwhile go in the next one', async () => {
    const s = setup(['1', '2', '3'], ['1', '2', '3'], false);
    s.gate.hold = true;
    s.hints.cancelHint('1');
    await new Promise((r) => setImmediate(r));
    s.hints.cancelHint('2');
    s.hints.cancelHint('3');
    expect(s.calls.cancelReads).toEqual([['1']]);
    s.gate.hold = false;
    s.release();
    await s.hints.settled();
    expect(s.calls.cancelReads).toEqual([['1'], ['2', '3']]);
    expect(s.calls.cancelled).toEqual(['1', '2', '3']);
  });

  it('hands back on a pause only when the queue is paused, with at most one read in flight and one after', async () => {
    const unpaused = setup([], [], false);
    unpaused.hints.pauseHint('q');
    unpaused.hints.pauseHint('other');
    await unpaused.hints.settled();
    expect(unpaused.calls).toMatchObject({ pauseReads: 1, paused: [] });

    const s = setup([], [], true);
    s.gate.hold = true;
    for (let i = 0; i < 1000; i++) s.hints.pauseHint('q');
    s.gate.hold = false;
    s.release();
    await s.hints.settled();
    expect(s.calls.pauseReads).toBe(2);
    expect(s.calls.paused).toEqual(['q', 'q']);
  });
});
