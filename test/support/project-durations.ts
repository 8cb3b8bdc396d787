// A vitest reporter that prints how long each project (fast, slow) took, wall clock from its first test file's
// start to its last one's end (the projects run one after the other: `sequence.groupOrder`), and writes the
// same figures to reports/projects.json for .ci/run.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Reporter, TestModule } from 'vitest/node';

interface Span {
  files: number;
  failed: number;
  startedAt: number;
  endedAt: number;
}

export class ProjectDurations implements Reporter {
  private readonly spans = new Map<string, Span>();

  constructor(private readonly outputFile = 'reports/projects.json') {}

  onTestModuleStart(module: TestModule): void {
    const name = module.project.name || 'default';
    const span = this.spans.get(name) ?? { files: 0, failed: 0, startedAt: Date.now(), endedAt: Date.now() };
    this.spans.set(name, span);
  }

  onTestModuleEnd(module: TestModule): void {
    const span = this.spans.get(module.project.name || 'default');
    if (!span) return;
    span.files += 1;
    if (!module.ok()) span.failed += 1;
    span.endedAt = Date.now();
  }

  onTestRunEnd(): void {
    const projects = [...this.spans].map(([name, span]) => ({
      name,
      files: span.files,
      failedFiles: span.failed,
      seconds: Math.round((span.endedAt - span.startedAt) / 100) / 10,
    }));
    for (const project of projects) {
      process.stdout.write(
        `project ${project.name}: ${project.files} files in ${project.seconds} ` +
          `s${project.failedFiles ? `, ${project.failedFiles} failed` : ''}\n`,
      );
    }
    mkdirSync(dirname(this.outputFile), { recursive: true });
    writeFileSync(this.outputFile, `${JSON.stringify(projects, null, 2)}\n`);
  }
}
