import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { assertBuilt } from '../support/built';

// A worker process of an app that gives its connection does not load TypeORM for the queue:
// finding the default DataSource's token costs loading @nestjs/typeorm and TypeORM (367 modules,
// about 160 ms of the process's start, issue 30's first-job figure). Run in a fresh process on
// the built package, as an app loads it, so no module of this test process counts.
const ROOT = path.resolve(__dirname, '..', '..');

function typeormLoadedAfter(forRoot: string): { typeorm: boolean; nestTypeorm: boolean } {
  const script = `
    require('reflect-metadata');
    const { PgQueueModule } = require(${JSON.stringify(path.join(ROOT, 'dist'))});
    const m = ${forRoot};
    if (!m || !Array.isArray(m.providers)) throw new Error('forRoot returned no module');
    const loaded = Object.keys(require.cache);
    process.stdout.write(JSON.stringify({
      typeorm: loaded.some((k) => /[\\\\/]node_modules[\\\\/]typeorm[\\\\/]/.test(k)),
      nestTypeorm: loaded.some((k) => /[\\\\/]node_modules[\\\\/]@nestjs[\\\\/]typeorm[\\\\/]/.test(k)),
    }));`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { cwd: ROOT, encoding: 'utf8' })) as {
    typeorm: boolean;
    nestTypeorm: boolean;
  };
}

describe('TypeORM is loaded only where the options may use the default DataSource', () => {
  beforeAll(() => assertBuilt());

  it('forRoot({ connection }) loads neither @nestjs/typeorm nor typeorm', () => {
    expect(typeormLoadedAfter(`PgQueueModule.forRoot({ connection: 'postgres://127.0.0.1/app' })`)).toEqual({
      typeorm: false,
      nestTypeorm: false,
    });
  });

  it('forRoot({ dataSource }) given as a token loads neither', () => {
    expect(typeormLoadedAfter(`PgQueueModule.forRoot({ dataSource: 'reportsDataSource' })`)).toEqual({
      typeorm: false,
      nestTypeorm: false,
    });
  });

  it('forRoot({}) and forRootAsync look the default DataSource up, so they load it (when installed)', () => {
    expect(typeormLoadedAfter(`PgQueueModule.forRoot({})`)).toEqual({ typeorm: true, nestTypeorm: true });
    expect(typeormLoadedAfter(`PgQueueModule.forRootAsync({ useFactory: () => ({}) })`)).toEqual({
      typeorm: true,
      nestTypeorm: true,
    });
  });
});
