// PostgreSQL in a Docker container through Testcontainers, for `npm test` when a Docker engine
// answers (scripts/test.mjs picks: DATABASE_URL, then this, then the embedded server).
//
//   PGQUEUE_TEST_IMAGE   the image (default postgres:17-alpine; CI builds a local one with
//                        scripts/docker/build-pg-image.sh, as no registry is reachable there)
//   DOCKER_HOST          where the engine is (default unix:///var/run/docker.sock; with a local
//                        socket the suite connects to the mapped port on 127.0.0.1)
//   TESTCONTAINERS_RYUK_DISABLED=true   when the Ryuk helper image cannot be pulled; the
//                        container is then removed only by stop() (scripts/test.mjs calls it
//                        on every exit path it controls, SIGINT and SIGTERM included)

import { spawnSync } from 'node:child_process';

export const DEFAULT_IMAGE = 'postgres:17-alpine';

// One Docker check for the package's testing entry point and this harness: `npm test` runs after
// `npm run build`, so the built one is there.
export { dockerAnswers } from '../dist/testing/index.js';

/**
 * Starts a throwaway PostgreSQL container. Resolves to { url, image, stop() }; `url` is a
 * superuser's URL on database `postgres` (the suite creates a database per test file from it).
 */
export async function startContainer({ image = process.env.PGQUEUE_TEST_IMAGE || DEFAULT_IMAGE } = {}) {
  let PostgreSqlContainer;
  try {
    ({ PostgreSqlContainer } = await import('@testcontainers/postgresql'));
  } catch (err) {
    throw new Error(
      `Docker answers, but @testcontainers/postgresql is not installed (${err.code ?? err.message}): ` +
        'npm install --save-dev @testcontainers/postgresql, or set PGQUEUE_TEST_SERVER=embedded.',
      { cause: err },
    );
  }
  // With a local engine the mapped port is on this machine: connect through loopback. Left to
  // itself, Testcontainers takes the bridge gateway's address whenever it believes it runs inside
  // a container (as in some sandboxes and CI runners).
  const host = process.env.DOCKER_HOST ?? 'unix://';
  if (host.startsWith('unix://')) process.env.TESTCONTAINERS_HOST_OVERRIDE ??= '127.0.0.1';
  const container = await new PostgreSqlContainer(image)
    .withDatabase('postgres')
    .withUsername('postgres')
    .withPassword('postgres')
    .withStartupTimeout(120_000)
    .start();
  let stopped;
  const stop = () => (stopped ??= container.stop({ timeout: 5_000 }).then(() => undefined));
  return { url: container.getConnectionUri(), image, stop, describe: () => describeContainer(container.getId()) };
}

/**
 * The container's state and its last log lines, for a failed run: the suite sees a server it
 * cannot reach only as failed connections ("Connection terminated unexpectedly" in stop 20's CI,
 * where a killed container answers ECONNREFUSED), and says nothing of the container's fate.
 */
function describeContainer(id) {
  // `docker logs` passes the server's stderr through as its own: read both streams.
  const docker = (...args) => {
    const r = spawnSync('docker', args, { encoding: 'utf8', timeout: 10_000 });
    if (r.error || r.status !== 0) throw new Error(r.error?.message ?? r.stderr.trim());
    return `${r.stdout}${r.stderr}`.trim();
  };
  try {
    const state = docker(
      'inspect',
      '-f',
      'status={{.State.Status}} exit={{.State.ExitCode}} oom={{.State.OOMKilled}} error={{.State.Error}}',
      id,
    );
    return `container ${id.slice(0, 12)}: ${state}\n${docker('logs', '--tail', '40', id)}`;
  } catch (err) {
    return `container ${id.slice(0, 12)}: docker inspect/logs failed: ${err.message}`;
  }
}
