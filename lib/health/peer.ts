// Imported first by this entry point, before any module that imports @nestjs/terminus, so an
// app without it learns what to install (PgQueueMissingPeerError) rather than "Cannot find module".
import { assertPeerInstalled } from '../core/optional-peer';

assertPeerInstalled('@nestjs/terminus', 'nestjs-pg-queue/health');
