import { PgQueueConfigError } from '../core/errors';
import type { SqlExecutor } from './executor';

/**
 * Who owns the queue's schema, and whether this session's role is that owner or a member of it.
 * `CREATE SCHEMA IF NOT EXISTS` (migrator.ts) accepts a schema that already exists whoever owns
 * it: a role that created `pgqueue` first (on a shared database, any role with CREATE on the
 * database) owns every object in it that it creates, may drop or replace the queue's functions
 * and triggers, and reads every payload. No row: the schema does not exist yet.
 */
const OWNER_SQL = `
  SELECT pg_catalog.pg_get_userbyid(n.nspowner)::text AS owner, current_user::text AS me,
         pg_catalog.pg_has_role(current_user, n.nspowner, 'MEMBER') AS member
  FROM pg_catalog.pg_namespace n WHERE n.nspname = $1`;

/**
 * Refuses a queue schema owned by a role this app does not expect: `expected` names the owning
 * role (the migration role, when the runtime role is another one); left out, the owner must be
 * this session's role or a role it is a member of. `false` turns the check off. Passes when the
 * schema does not exist yet (the migration creates it, owned by this role).
 */
export async function checkSchemaOwner(db: SqlExecutor, schema: string, expected: string | false | null, on = ''): Promise<void> {
  if (expected === false) return;
  const [row] = await db.query<{ owner: string; me: string; member: boolean }>(OWNER_SQL, [schema]);
  if (!row) return;
  if (expected !== null ? row.owner === expected : row.member) return;
  const want =
    expected !== null
      ? `the role "${expected}" (option schemaOwner)`
      : `"${row.me}" (this connection's role) or a role it is a member of`;
  throw new PgQueueConfigError(
    `Schema "${schema}"${on} is owned by the role "${row.owner}", not ${want}. The owner of the queue's schema can ` +
      'drop or replace its tables, functions and triggers and read every payload, so nestjs-pg-queue refuses to use it. ' +
      `If "${row.owner}" is the role that runs your migrations, set schemaOwner: '${row.owner}'; if nobody expected it, ` +
      `find out who created the schema, then ALTER SCHEMA ${schema} OWNER TO the migration role (docs/security.md). ` +
      'schemaOwner: false turns this check off.',
  );
}
