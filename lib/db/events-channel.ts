import { escapeLiteral } from 'pg';

/** The events channel of a schema: `<schema>_events`, beside the wake-up channel `<schema>_jobs`. */
export function eventsChannel(schema: string): string {
  // A schema is at most 48 bytes (names.ts): the channel always fits an identifier's 63.
  return `${schema}_events`;
}

/** The channel as a quoted literal, or null when publishing is off (schemaSql's `events`). */
export function eventsLiteral(schema: string, publish: boolean): string | null {
  return publish ? escapeLiteral(eventsChannel(schema)) : null;
}
