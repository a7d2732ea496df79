import { ClaimBuffer } from '../../lib/worker/claim-buffer';
import type { ClaimedRow } from '../../lib/db/job-store';

// The worker's prefetch buffer (lib/worker/claim-buffer.ts) takes rows from a moving head rather
// than shifting its arrays: whatever the mix of pushes, shifts, removes and takes, it must hand
// out exactly the rows pushed, oldest first, each once, with their arrival times.
const row = (id: number) => ({ id: String(id) }) as unknown as ClaimedRow;
const rows = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => row(from + i));

describe('ClaimBuffer: prefetched rows, oldest first', () => {
  it('hands out every row once, in order, across pushes that land while rows are taken', () => {
    const b = new ClaimBuffer();
    b.push(rows(1, 5), 100);
    expect(b.shift().id).toBe('1');
    expect(b.shift().id).toBe('2');
    b.push(rows(6, 8), 200);
    const out: string[] = [];
    while (b.length > 0) out.push(String(b.shift().id));
    expect(out).toEqual(['3', '4', '5', '6', '7', '8']);
    expect(b.length).toBe(0);
    expect(b.oldestAt).toBeUndefined();
    expect(b.take()).toEqual([]);
  });

  it('keeps each row with its arrival time, and the oldest time moves with the head', () => {
    const b = new ClaimBuffer();
    b.push(rows(1, 2), 100);
    b.push(rows(3, 4), 200);
    expect(b.oldestAt).toBe(100);
    b.shift();
    expect(b.oldestAt).toBe(100);
    b.shift();
    expect(b.oldestAt).toBe(200);
    // A push after most rows were taken cuts the taken part off; times stay paired.
    b.shift();
    b.push(rows(5, 5), 300);
    expect(b.oldestAt).toBe(200);
    expect(b.ids()).toEqual(['4', '5']);
    b.shift();
    expect(b.oldestAt).toBe(300);
  });

  it('removes a row by id from what is left, never one already taken', () => {
    const b = new ClaimBuffer();
    b.push(rows(1, 6), 100);
    b.shift();
    b.shift();
    expect(b.remove('1')).toBeNull();
    expect(b.remove('4')?.id).toBe('4');
    expect(b.remove('4')).toBeNull();
    expect(b.ids()).toEqual(['3', '5', '6']);
    expect(b.length).toBe(3);
    expect(b.take()).toEqual(['3', '5', '6']);
    expect(b.length).toBe(0);
    b.push(rows(7, 7), 400);
    expect(b.shift().id).toBe('7');
  });

  it('take() returns only the rows not yet handed out', () => {
    const b = new ClaimBuffer();
    b.push(rows(1, 600), 100);
    for (let i = 0; i < 450; i++) b.shift();
    const left = b.take();
    expect(left).toHaveLength(150);
    expect(left[0]).toBe('451');
    expect(left[149]).toBe('600');
    expect(b.length).toBe(0);
  });
});
