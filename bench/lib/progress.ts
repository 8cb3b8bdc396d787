// Progress goes to stderr so stdout carries only the tables.
const started = Date.now();

function stamp(): string {
  const s = Math.round((Date.now() - started) / 1000);
  return `[${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}]`;
}

export function progress(message: string): void {
  process.stderr.write(`${stamp()} ${message}\n`);
}

export function elapsedSeconds(): number {
  return (Date.now() - started) / 1000;
}
