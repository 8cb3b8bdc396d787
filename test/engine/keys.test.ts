// The key layout is a contract between versions and regions: a state key must not change when its hashing is
// made cheaper. This pins shardOf and identityHash to the digest they are defined by (SHA-256 of the UTF-8 text;
// the shard is its first 32 bits big-endian mod KEY_SHARDS, the identity its first 12 bytes in base64url), for
// any text, unicode and lone surrogates included, and to a few literal keys.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KEY_SHARDS, identityHash, ruleKey, shardOf } from '../../src/keys.ts';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest();
const framed = (rule: string, dimensions: readonly string[]) =>
  [rule, ...dimensions].map((part) => `${Buffer.byteLength(part, 'utf8')}:${part}`).join('|');
const text = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme' }),
  fc.string({ unit: 'binary' }),
  fc.string({ minLength: 300, maxLength: 9000 }),
);

describe('key layout', () => {
  it('shardOf is the first 32 bits of SHA-256, mod the shard count', () => {
    fc.assert(
      fc.property(text, (principal) => {
        expect(shardOf(principal)).toBe(sha256(principal).readUInt32BE(0) % KEY_SHARDS);
      }),
      { numRuns: 500 },
    );
  });

  it('identityHash is the first 12 bytes of SHA-256 over the length-prefixed parts, in base64url', () => {
    fc.assert(
      fc.property(text, fc.array(text, { minLength: 1, maxLength: 4 }), (rule, dimensions) => {
        expect(identityHash(rule, dimensions)).toBe(sha256(framed(rule, dimensions)).subarray(0, 12).toString('base64url'));
      }),
      { numRuns: 500 },
    );
  });

  it('keeps the keys a running federation already holds', () => {
    expect(ruleKey('per-key', { principal: 'key-1', dimensions: ['key-1'] })).toBe('qf:{s20}:per-key:9m31B18AOQ_-XM9n');
    expect(ruleKey('per-key', { principal: '', dimensions: [''] })).toBe('qf:{s2}:per-key:n0De3nptle_Xw3RO');
    expect(ruleKey('r|x', { principal: 'a', dimensions: ['a', '/search', 'GET'] })).toBe('qf:{s18}:r|x:mqmLbbqg9xuFLqCW');
  });
});
