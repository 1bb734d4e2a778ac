import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, posix, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The layering rule of server/src (docs/contributing.md, "Layers"), checked over the import
 * graph: every relative `import`, `import type`, `export … from` and dynamic `import()` of every
 * .ts file, read with the TypeScript compiler's own pre-processor (no type checking, so it runs
 * in a second). Layers, bottom up: lib/, db/, http/, rails/, migrations/ and config.ts; then
 * modules/<name>/; then the top-level app files (app.ts, boot.ts, routes.ts, services.ts, ...),
 * which wire everything and may import anything.
 *
 * Violations:
 * - `up`: a file imports a file of a higher layer (a bottom-layer file imports a module or an app
 *   file, or a module imports an app file);
 * - `via`: a module imports another module's file other than its `index.ts`;
 * - `pair`: two modules import each other;
 * - `module-cycle`: modules import each other in a circle (the modules of one strongly
 *   connected component);
 * - `file-cycle`: files import each other in a circle (one strongly connected component).
 *
 * There is no allow-list: every violation fails the test. New code that needs a lower layer to
 * call a module inverts the dependency instead (the low layer declares a function type or an
 * interface, the app layer passes the module's function in; docs/contributing.md, "Layers").
 */
const SRC = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');
const BOTTOM = new Set(['lib', 'db', 'http', 'rails', 'migrations']);

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const path = join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(path);
    return e.name.endsWith('.ts') && !e.name.endsWith('.d.ts') ? [relative(SRC, path).split('\\').join('/')] : [];
  });
}

/** 0: lib/db/http/rails/migrations and config.ts; 1: modules; 2: the top-level app files. */
function layerOf(file: string): number {
  const top = file.split('/')[0]!;
  if (BOTTOM.has(top) || file === 'config.ts') return 0;
  return top === 'modules' ? 1 : 2;
}

const moduleOf = (file: string): string | null => (file.startsWith('modules/') ? file.split('/')[1]! : null);

/** The import graph: file -> the files it imports (relative specifiers resolved like NodeNext: `.js` names the `.ts`). */
function importGraph(files: readonly string[], read: (file: string) => string): Map<string, Set<string>> {
  const known = new Set(files);
  const graph = new Map<string, Set<string>>();
  for (const file of files) {
    const targets = new Set<string>();
    for (const { fileName: spec } of ts.preProcessFile(read(file), true, true).importedFiles) {
      if (!spec.startsWith('.')) continue;
      const base = posix.normalize(posix.join(posix.dirname(file), spec));
      const target = [base.replace(/\.js$/, '.ts'), base, `${base}.ts`, `${base}/index.ts`].find((c) => known.has(c));
      if (target) targets.add(target);
    }
    graph.set(file, targets);
  }
  return graph;
}

/** Strongly connected components with more than one member (Tarjan), each sorted. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1) out.push(component.sort());
    }
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return out;
}

/** Every violation of the rule in `graph`, one line each, sorted. */
function violations(graph: Map<string, Set<string>>): string[] {
  const out: string[] = [];
  const modules = new Map<string, Set<string>>();
  for (const [from, targets] of graph) {
    for (const to of targets) {
      if (layerOf(to) > layerOf(from)) out.push(`up: ${from} -> ${to}`);
      const [a, b] = [moduleOf(from), moduleOf(to)];
      if (a && b && a !== b) {
        if (to !== `modules/${b}/index.ts`) out.push(`via: ${from} -> ${to}`);
        if (!modules.has(a)) modules.set(a, new Set());
        modules.get(a)!.add(b);
      }
    }
  }
  for (const [a, targets] of modules) for (const b of targets) if (a < b && modules.get(b)?.has(a)) out.push(`pair: ${a} <-> ${b}`);
  for (const c of cycles(modules)) out.push(`module-cycle: ${c.join(' ')}`);
  for (const c of cycles(graph)) out.push(`file-cycle: ${c.join(' ')}`);
  return out.sort();
}

describe('architecture: the import graph of server/src', () => {
  const graph = importGraph(sourceFiles(SRC), (file) => readFileSync(join(SRC, file), 'utf8'));
  const found = violations(graph);

  it('reads the whole tree (a broken reader would pass every rule)', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('boot.ts')).toContain('db/orm.ts');
  });

  it('GIVEN the layering rule THEN no import breaks it', () => {
    expect(found, 'invert the dependency (docs/contributing.md, "Layers")').toEqual([]);
  });

  it('GIVEN a bad graph THEN each kind of violation is found', () => {
    const g = new Map<string, Set<string>>([
      ['lib/a.ts', new Set(['modules/x/service.ts'])],
      ['modules/x/service.ts', new Set(['modules/y/store.ts', 'boot.ts'])],
      ['modules/y/store.ts', new Set(['modules/x/index.ts'])],
      ['modules/x/index.ts', new Set(['lib/a.ts'])],
      ['boot.ts', new Set(['modules/x/index.ts'])],
    ]);
    expect(violations(g)).toEqual([
      'file-cycle: boot.ts lib/a.ts modules/x/index.ts modules/x/service.ts modules/y/store.ts',
      'module-cycle: x y',
      'pair: x <-> y',
      'up: lib/a.ts -> modules/x/service.ts',
      'up: modules/x/service.ts -> boot.ts',
      'via: modules/x/service.ts -> modules/y/store.ts',
    ]);
  });
});
