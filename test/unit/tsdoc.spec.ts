import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as ts from 'typescript';
import { COMPILER_OPTIONS } from '../support/readme';

const ROOT = join(__dirname, '..', '..');

/**
 * Every public export has a TSDoc comment (issue 26, point 3; STYLE.md rule 9): what a user reads
 * in the editor's hover and in the TypeDoc reference. The entry points are package.json's
 * "exports" (dist/<dir>/index.d.ts is built from lib/<dir>/index.ts). Besides each export, the
 * members a user touches must be documented too: every member of an exported interface or object
 * type (option types, Job, ...), and the public members of an exported class (Queue,
 * QueueService, the errors' fields, ...) but for the framework's hooks below, which Nest calls
 * and a user never does.
 */
const FRAMEWORK_HOOKS = new Set([
  'onModuleInit',
  'onModuleDestroy',
  'onApplicationBootstrap',
  'beforeApplicationShutdown',
  'onApplicationShutdown',
  'canActivate', // CanActivate (the dashboard's guard)
  'catch', // ExceptionFilter (the dashboard's input filter)
  'configure', // NestModule (middleware wiring)
]);

/** lib/<dir>/index.ts of each entry point in package.json's "exports". */
export function entryPointSources(): { name: string; file: string }[] {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
    name: string;
    exports: Record<string, string | { types?: string }>;
  };
  return Object.entries(pkg.exports).flatMap(([subpath, target]) => {
    const types = typeof target === 'string' ? target : target.types;
    const dir = /^\.\/dist\/(?:(.+)\/)?index\.d\.ts$/.exec(types ?? '');
    if (!dir) return []; // ./package.json
    return [
      { name: subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`, file: join(ROOT, 'lib', dir[1] ?? '', 'index.ts') },
    ];
  });
}

/**
 * A member tagged `@internal` is public to the package's own files only (Queue's hooks for the flow
 * producer): TypeDoc leaves it out (`excludeInternal`), and so does this check.
 */
const isInternal = (node: ts.Node): boolean => ts.getJSDocTags(node).some((t) => t.tagName.text === 'internal');

/**
 * An optional member of an options type (`...Options`, `...Thresholds`): its comment says what
 * leaving it out means with `@default` (`@default undefined (no timeout)` where nothing is set).
 */
const isOption = (typeName: string, member: ts.Node): boolean =>
  /(Options|Thresholds)$/.test(typeName) &&
  (ts.isPropertySignature(member) || ts.isPropertyDeclaration(member)) &&
  member.questionToken !== undefined;

const hasText = (parts: ts.SymbolDisplayPart[]): boolean => ts.displayPartsToString(parts).trim() !== '';

function where(node: ts.Node): string {
  const sf = node.getSourceFile();
  return `${relative(ROOT, sf.fileName)}:${sf.getLineAndCharacterOfPosition(node.getStart()).line + 1}`;
}

/**
 * The object type literals a type alias is made of (`{...}`, `A & {...}`). Not a union's variants
 * (`{ event: 'completed'; ... } | { event: 'failed'; ... }`): the alias's own comment describes
 * each variant, which reads better than one comment per field repeated in every variant.
 */
function typeLiterals(type: ts.TypeNode): ts.TypeLiteralNode[] {
  if (ts.isTypeLiteralNode(type)) return [type];
  if (ts.isParenthesizedTypeNode(type)) return typeLiterals(type.type);
  if (ts.isIntersectionTypeNode(type)) return type.types.flatMap(typeLiterals);
  return [];
}

function isPublicMember(member: ts.ClassElement): boolean {
  if (ts.isConstructorDeclaration(member) || ts.isClassStaticBlockDeclaration(member)) return false;
  if (ts.isIndexSignatureDeclaration(member) || ts.isSemicolonClassElement(member)) return false;
  if (member.name && ts.isPrivateIdentifier(member.name)) return false;
  const flags = ts.getCombinedModifierFlags(member as ts.Declaration);
  return !(flags & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected));
}

/** The members of `decl` a user reads or calls, for an exported interface, object type or class. */
function userMembers(decl: ts.Declaration): ts.NamedDeclaration[] {
  if (ts.isInterfaceDeclaration(decl)) return decl.members.filter((m) => m.name !== undefined);
  if (ts.isTypeAliasDeclaration(decl))
    return typeLiterals(decl.type).flatMap((t) => t.members.filter((m) => m.name !== undefined));
  if (ts.isClassDeclaration(decl))
    return decl.members.filter((m) => isPublicMember(m) && !(m.name && FRAMEWORK_HOOKS.has(m.name.getText())));
  return [];
}

/** "<entry point>: <what> (<file>:<line>)" for each export or member without a doc comment. */
export function undocumented(): string[] {
  const entries = entryPointSources();
  // The examples' compiler settings, without the mapping of the package's names (the entry points are read as they are).
  const { baseUrl: _baseUrl, paths: _paths, ...options } = COMPILER_OPTIONS;
  const program = ts.createProgram(
    entries.map((e) => e.file),
    options,
  );
  const checker = program.getTypeChecker();
  const missing = new Set<string>();
  const seen = new Set<ts.Node>();
  for (const entry of entries) {
    const sf = program.getSourceFile(entry.file);
    const moduleSymbol = sf && checker.getSymbolAtLocation(sf);
    if (!moduleSymbol) throw new Error(`${entry.file} is not a module`);
    for (const exported of checker.getExportsOfModule(moduleSymbol)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const decls = (symbol.declarations ?? []).filter((d) => !d.getSourceFile().isDeclarationFile);
      if (!decls.length) continue;
      if (!hasText(symbol.getDocumentationComment(checker))) missing.add(`${entry.name}: ${exported.name} (${where(decls[0])})`);
      for (const decl of decls) {
        for (const member of userMembers(decl)) {
          if (seen.has(member) || isInternal(member)) continue;
          seen.add(member);
          const memberSymbol = checker.getSymbolAtLocation(member.name!);
          if (!memberSymbol || !hasText(memberSymbol.getDocumentationComment(checker)))
            missing.add(`${entry.name}: ${exported.name}.${member.name!.getText()} (${where(member)})`);
          else if (isOption(exported.name, member) && !ts.getJSDocTags(member).some((t) => t.tagName.text === 'default'))
            missing.add(`${entry.name}: ${exported.name}.${member.name!.getText()} has no @default (${where(member)})`);
        }
      }
    }
  }
  return [...missing];
}

describe('the API reference (TSDoc on the public surface)', () => {
  it("documents every export of every entry point, the members a user touches, and the options' defaults", () => {
    expect(undocumented()).toEqual([]);
  }, 120_000); // type-checks the whole library: seconds alone, a minute on a busy 2-core machine
});
