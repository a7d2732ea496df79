// Imported first by this entry point, before any module that imports prom-client, so an app
// without it learns what to install (PgQueueMissingPeerError) rather than "Cannot find module".
import { assertPeerInstalled } from '../core/optional-peer';

assertPeerInstalled('prom-client', 'nestjs-pg-queue/metrics');
