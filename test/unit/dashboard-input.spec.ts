import {
  DashboardInputError,
  decodeCursor,
  encodeCursor,
  parseEnqueueBody,
  parseIdsBody,
  parseJobListQuery,
} from '../../lib/dashboard/dashboard-input';
import { isHashedName, isSafeAssetName, renderIndex } from '../../lib/dashboard/dashboard-assets';
import { resolveDashboardOptions } from '../../lib/dashboard/dashboard.options';

describe('dashboard input', () => {
  it('a cursor round-trips for its state, and is refused for another shape', () => {
    const claim = { priority: -3, runAt: '2026-12-01T09:00:00.123456', id: '42' };
    expect(decodeCursor(encodeCursor(claim), 'waiting')).toEqual(claim);
    expect(decodeCursor(encodeCursor({ id: '7' }), 'failed')).toEqual({ id: '7' });
    expect(() => decodeCursor(encodeCursor({ id: '7' }), 'waiting')).toThrow(DashboardInputError);
    expect(() => decodeCursor(encodeCursor(claim), 'failed')).toThrow(/pass the "next" value/);
    expect(() => decodeCursor(encodeCursor({ ...claim, runAt: "2026'; DROP" }), 'delayed')).toThrow(DashboardInputError);
  });

  it('list queries: defaults, and every bad value refused with what to pass', () => {
    expect(parseJobListQuery({ state: 'failed' })).toEqual({ state: 'failed', filters: {}, cursor: null, limit: 50, id: null });
    expect(parseJobListQuery({ state: 'waiting', payload: '{"a": 1}', name: 'x', limit: '10' })).toMatchObject({
      filters: { payloadJson: '{"a":1}', name: 'x' },
      limit: 10,
    });
    expect(() => parseJobListQuery({ state: 'waiting', limit: '1.5' })).toThrow(/limit must be an integer/);
    expect(() => parseJobListQuery({ state: ['a', 'b'] })).toThrow(/more than once/);
  });

  it('ids: 1 to 1000 positive integers, duplicates dropped', () => {
    expect(parseIdsBody({ ids: ['1', 2, '1'] })).toEqual(['1', '2']);
    expect(() => parseIdsBody({ ids: Array.from({ length: 1001 }, (_, i) => String(i + 1)) })).toThrow(/1 to 1000/);
    expect(() => parseIdsBody({ ids: ['0'] })).toThrow(/positive integer/);
  });

  it('enqueue: runAt as ISO text becomes a Date; transaction handles are not job options', () => {
    expect(parseEnqueueBody({ name: 'a', payload: null, options: { runAt: '2030-01-01T00:00:00Z' } }).options.runAt).toEqual(
      new Date('2030-01-01T00:00:00Z'),
    );
    expect(() => parseEnqueueBody({ name: 'a', payload: 1, options: { client: {} } })).toThrow(/Unknown job option/);
  });
});

describe('dashboard assets', () => {
  it('serves only plain names with a known extension', () => {
    for (const ok of ['app.js', 'app-3F9A1C2B.js', 'style.css', 'favicon.svg'])
      expect([ok, isSafeAssetName(ok)]).toEqual([ok, true]);
    for (const bad of ['../x.js', '..js', '.env', 'a/b.js', 'a\\b.js', 'x.exe', 'x.html', '', 'a'.repeat(200) + '.js']) {
      expect([bad, isSafeAssetName(bad)]).toEqual([bad, false]);
    }
    expect(isHashedName('app-3F9A1C2B.js')).toBe(true);
    expect(isHashedName('favicon.svg')).toBe(false);
  });

  it('index.html gets the settings as escaped meta tags and the base path', () => {
    const o = resolveDashboardOptions({ public: true, title: '"><script>x</script>', path: '/admin/q' });
    const html = renderIndex(
      '<html><head><title>t</title></head><body><script src="%BASE%/assets/app.js"></script></body></html>',
      o,
    );
    expect(html).toContain('<meta name="pgq-base" content="/admin/q">');
    expect(html).toContain('<meta name="pgq-title" content="&#34;&#62;&#60;script&#62;x&#60;/script&#62;">');
    expect(html).toContain('src="/admin/q/assets/app.js"');
    expect(html).not.toContain('<script>x');
  });
});
