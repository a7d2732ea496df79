// Lint: typescript-eslint's recommended rules, plus the layer rules the code is built on
// (../shared/STYLE.md). Formatting is Prettier's job (`npm run format`), not ESLint's.
import js from '@eslint/js';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/**
 * The layers of lib/, lowest first: core < db < worker < producer < decorators < discovery <
 * module < the companions (health, metrics, dashboard, testing) < index.ts. Each folder may import
 * its own files and the folders listed here, nothing else in lib/ (checked twice: here by
 * no-restricted-imports, which sees value and type imports alike; and by scripts/check-imports.mjs,
 * which reads this table, resolves every import, re-export and `import()` and also finds cycles,
 * type-only ones included, that import-x/no-cycle skips).
 * - core imports nothing of lib/; db, worker and producer know nothing of Nest (NEST below).
 * - producer does not import worker: enqueueing is one way, down to db.
 * - decorators store metadata only: they import core (metadata keys, token names, name checks)
 *   and nothing that runs, so a class decorated at import time loads no engine.
 * - discovery reads that metadata at boot and builds what the worker and producer take (any
 *   layer below it), but never module: the module calls discovery, not the other way round.
 * - the companions are optional entry points (nestjs-pg-queue/health, ...): they read through
 *   the narrow read API (lib/core/read-api.ts) that lib/module hands them, never db/ or worker/
 *   internals, and never one another (each has its own optional peer to load or not).
 * - index.ts is the main entry point: everything but the companions, which have their own.
 */
const BELOW_MODULE = ['core', 'db', 'worker', 'producer', 'decorators', 'discovery'];
export const MAY_IMPORT = {
  core: [],
  db: ['core'],
  worker: ['core', 'db'],
  producer: ['core', 'db'],
  decorators: ['core'],
  discovery: ['core', 'db', 'worker', 'producer', 'decorators'],
  module: BELOW_MODULE,
  health: ['core', 'module'],
  metrics: ['core', 'module'],
  dashboard: ['core', 'module'],
  testing: ['core', 'module'],
  // The command-line tool: the framework-free layers only, as the runtime wires them (no Nest).
  cli: ['core', 'db', 'producer'],
  index: [...BELOW_MODULE, 'module'],
};
const FOLDERS = Object.keys(MAY_IMPORT).filter((f) => f !== 'index');
const NEST_FREE = ['core', 'db', 'worker', 'producer', 'cli'];

const NEST = { group: ['@nestjs/*'], message: 'The engine and the SQL layer know nothing of Nest: wire it in lib/module.' };
/**
 * The no-restricted-imports patterns of a file `depth` folders below lib/ in `layer`: the folders
 * it may not import, spelt as that file spells them (`../db/x` in lib/worker/, `../../db/x` in
 * lib/db/history/, `./db/x` in lib/index.ts), so a sub-folder named like a layer is no false hit.
 */
function layerPatterns(layer, depth) {
  const up = depth === 0 ? './' : '../'.repeat(depth);
  const allowed = MAY_IMPORT[layer];
  const refused = FOLDERS.filter((f) => f !== layer && !allowed.includes(f));
  return [
    ...(NEST_FREE.includes(layer) ? [NEST] : []),
    ...refused.map((f) => ({
      group: [`${up}${f}`, `${up}${f}/**`],
      message: `lib/${layer} may not import lib/${f}: ${layer} may import ${allowed.length ? allowed.join(', ') : 'nothing else in lib'} (eslint.config.mjs, MAY_IMPORT).`,
    })),
  ];
}
/** One config block per folder and depth (lib/F/x.ts, lib/F/a/x.ts, lib/F/a/b/x.ts), and lib/index.ts. */
const LAYERS = [
  { files: ['lib/index.ts'], rules: { 'no-restricted-imports': ['error', { patterns: layerPatterns('index', 0) }] } },
  ...FOLDERS.flatMap((layer) =>
    [1, 2, 3].map((depth) => ({
      files: [`lib/${layer}/${'*/'.repeat(depth - 1)}*.{ts,tsx}`],
      rules: { 'no-restricted-imports': ['error', { patterns: layerPatterns(layer, depth) }] },
    })),
  ),
];

// SQL statements live in lib/db only: a string or template that starts like a statement.
const SQL_START =
  '^\\s*(SELECT |INSERT INTO |UPDATE \\S+ SET |DELETE FROM |WITH \\w+ AS |(UN)?LISTEN ?("|$)|NOTIFY ?("|$)|VACUUM \\(|' +
  '(BEGIN|COMMIT|ROLLBACK)\\s*$|SET (LOCAL )?\\w+ ?(=|TO )|(CREATE|ALTER|DROP) (TABLE|INDEX|SCHEMA) )';
const NO_SQL = [
  { selector: `Literal[value=/${SQL_START}/]`, message: 'SQL lives in lib/db: add a named statement there.' },
  { selector: `TemplateElement[value.raw=/${SQL_START}/]`, message: 'SQL lives in lib/db: add a named statement there.' },
];

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      '**/node_modules/**',
      'lib/db/migrations.generated.ts',
      'coverage/**',
      '.data/**',
      'test/.readme-app-*/**',
      'dist-sample/**',
      'docs/api/**',
      'docs/.vitepress/cache/**',
      'docs/.vitepress/dist/**',
    ],
  },
  { linterOptions: { reportUnusedDisableDirectives: 'off' } },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly' },
    },
    rules: {
      // `let code = 1; try { ...; code = 0 } finally { exit(code) }` is the shape of every script here.
      'no-useless-assignment': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    files: ['lib/**/*.ts'],
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [importX.createNodeResolver({ extensions: ['.ts', '.js'] })],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts'] },
      'import-x/extensions': ['.ts', '.js'],
    },
    rules: {
      'import-x/no-cycle': ['error', { ignoreExternal: true }],
      '@typescript-eslint/no-explicit-any': 'error',
      'no-restricted-syntax': ['error', ...NO_SQL],
    },
  },
  { files: ['lib/db/**/*.ts'], rules: { 'no-restricted-syntax': 'off' } },
  ...LAYERS,
  {
    files: ['**/*.{js,cjs,mjs}'],
    languageOptions: {
      globals: {
        require: 'readonly',
        module: 'writable',
        __dirname: 'readonly',
        __filename: 'readonly',
        exports: 'writable',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        URL: 'readonly',
        performance: 'readonly',
        AbortController: 'readonly',
        structuredClone: 'readonly',
        fetch: 'readonly',
        queueMicrotask: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-non-null-assertion': 'off',
      // Tests load what they generate or build (dist/, child fixtures) at run time.
      '@typescript-eslint/no-require-imports': 'off',
    },
  },
);
