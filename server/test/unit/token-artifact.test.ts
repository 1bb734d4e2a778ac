import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ARTIFACT_PATH, compileTokenArtifact } from '../chain/compile-token.js';

describe('test token artifact', () => {
  it('the committed bytecode and ABI are what EIP3009Token.sol compiles to (regenerate: npx tsx server/test/chain/compile-token.ts)', () => {
    expect(compileTokenArtifact()).toBe(readFileSync(ARTIFACT_PATH, 'utf8'));
  });
});
