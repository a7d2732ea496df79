// Lint: typescript-eslint's recommended rules, plus the layer rules the code is built on
// (../shared/STYLE.md). Formatting is Prettier's job (`npm run format`), not ESLint's.
import js from '@eslint/js';
import importX from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

/** Folders of lib/ and what each may not import: the layers, lowest first. */
const NEST = { group: ['@nestjs/*'], message: 'The engine and the SQL layer know nothing of Nest: wire it in lib/module.' };
const up = (...folders) =>
  folders.map((f) => ({ group: [`../${f}`, `../${f}/*`], message: `Nothing reaches up into lib/${f} from this layer.` }));

const LAYERS = {
  core: [NEST, ...up('db', 'worker', 'producer', 'module', 'decorators', 'discovery', 'health', 'metrics', 'dashboard')],
  db: [NEST, ...up('worker', 'producer', 'module', 'decorators', 'discovery', 'health', 'metrics', 'dashboard')],
  worker: [NEST, ...up('producer', 'module', 'decorators', 'discovery', 'health', 'metrics', 'dashboard')],
  producer: [NEST, ...up('worker', 'module', 'decorators', 'discovery', 'health', 'metrics', 'dashboard')],
};

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
  ...Object.entries(LAYERS).map(([folder, patterns]) => ({
    files: [`lib/${folder}/**/*.ts`],
    rules: { 'no-restricted-imports': ['error', { patterns }] },
  })),
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
