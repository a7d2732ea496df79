import { escapeIdentifier } from 'pg';

/** The listener's one statement: subscribe its dedicated connection to the wake-up channel. */
export function listenSql(channel: string): string {
  return `LISTEN ${escapeIdentifier(channel)}`;
}
