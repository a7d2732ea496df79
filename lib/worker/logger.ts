/** What the engine logs through; the Nest layer passes a Nest `Logger`. */
export interface EngineLogger {
  log(message: string): void;
  warn(message: string): void;
  error(message: string, stack?: string): void;
  debug?(message: string): void;
}
