// The launcher shows each service's pino lines as one short readable line behind the region prefix.
import { describe, expect, it } from 'vitest';
import { readableLogLine } from '../../src/ops/service-process.ts';

describe('readableLogLine', () => {
  it('shortens a pino JSON line to level, message and fields', () => {
    const line = JSON.stringify({
      level: 30,
      time: 1,
      pid: 9,
      hostname: 'h',
      region: 'us-east',
      msg: 'listening',
      url: 'http://x',
      rules: ['a', 'b'],
    });
    expect(readableLogLine(line)).toBe('INFO listening url=http://x rules=["a","b"]');
  });

  it('passes other lines through unchanged', () => {
    expect(readableLogLine('plain text')).toBe('plain text');
    expect(readableLogLine('{not json')).toBe('{not json');
    expect(readableLogLine('{"no":"msg"}')).toBe('{"no":"msg"}');
  });
});
