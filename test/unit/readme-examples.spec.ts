import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as ts from 'typescript';

/**
 * Every ```ts block of the README must type-check against the library, so the documentation
 * cannot drift from the API. Blocks name no imports: this prelude supplies them, plus the
 * app-side things an example only refers to (an entity, a mailer, a pager).
 */
const root = join(__dirname, '..', '..');
const PRELUDE = `
import 'reflect-metadata';
import { Controller, Get, Injectable, Module, Res } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import {
  ActiveJob, CancelJobError, InjectQueue, Job, JobAttemptError, OnQueueEvent, PgQueueModule, Process, Processor, Queue, QueueService,
  SnoozeJobError, StalledJob,
} from '${join(root, 'lib').replace(/\\/g, '/')}';
import { PgQueueHealthIndicator } from '${join(root, 'lib', 'health').replace(/\\/g, '/')}';
import { PgQueueMetrics, PgQueueMetricsModule } from '${join(root, 'lib', 'metrics').replace(/\\/g, '/')}';
declare class Order { id: number; item: string }
declare class Mailer { sendConfirmation(orderId: number): Promise<void> }
declare class Pager { alert(message: string): void }
declare function loadReport(id: number): Promise<{ dataReady: boolean } | null>;
declare function renderReport(report: { dataReady: boolean }, opts: { signal: AbortSignal }): Promise<void>;
void Controller; void Get; void QueueService; void Res; void HealthCheck; void HealthCheckService; void TerminusModule;
void PgQueueHealthIndicator; void PgQueueMetrics; void PgQueueMetricsModule;
`;

function blocks(markdown: string): string[] {
  return [...markdown.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
}

describe('README examples', () => {
  const found = blocks(readFileSync(join(root, 'README.md'), 'utf8'));

  it('has examples to check', () => {
    expect(found.length).toBeGreaterThanOrEqual(2);
  });

  it.each(found.map((code, i) => [i + 1, code]))('block %i type-checks', (_i, code) => {
    const file = join(root, 'test', 'unit', '__readme_example__.ts');
    const options: ts.CompilerOptions = {
      strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, moduleResolution: ts.ModuleResolutionKind.Node10,
      experimentalDecorators: true, emitDecoratorMetadata: true, esModuleInterop: true, skipLibCheck: true, noEmit: true, types: ['node'],
    };
    const host = ts.createCompilerHost(options);
    const read = host.getSourceFile.bind(host);
    host.getSourceFile = (name, lang, onError, create) =>
      name === file ? ts.createSourceFile(name, PRELUDE + String(code), lang) : read(name, lang, onError, create);
    const program = ts.createProgram([file], options, host);
    const errors = ts.getPreEmitDiagnostics(program, program.getSourceFile(file)).map((d) =>
      ts.flattenDiagnosticMessageText(d.messageText, '\n'),
    );
    expect(errors).toEqual([]);
  });
});
