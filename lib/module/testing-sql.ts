// nestjs-pg-queue/testing creates and drops test databases, so it needs SQL, which lives in
// lib/db only; a companion imports no db/ (eslint.config.mjs, MAY_IMPORT), so the module hands
// it these statements, as it hands the companions the runtime.
export { testDatabaseSql } from '../db/test-databases';
