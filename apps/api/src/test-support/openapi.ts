/**
 * The OpenAPI document with every `#/components/schemas/…` reference replaced by the schema it names,
 * for tests that look at a route's shapes where the document names them.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON document, read field by field
export function inlineRefs(doc: any): any {
  const schemas = (doc.components?.schemas ?? {}) as Record<string, unknown>;
  const inline = (value: unknown, within: readonly string[]): unknown => {
    if (Array.isArray(value)) return value.map((item) => inline(item, within));
    if (value === null || typeof value !== 'object') return value;
    const target = (value as { $ref?: unknown }).$ref;
    if (typeof target === 'string' && target.startsWith('#/components/schemas/')) {
      const name = target.slice('#/components/schemas/'.length);
      if (within.includes(name)) throw new Error(`schema ${name} refers to itself`);
      if (schemas[name] === undefined) throw new Error(`no component schema ${name}`);
      return inline(schemas[name], [...within, name]);
    }
    return Object.fromEntries(Object.entries(value).map(([key, child]) => [key, inline(child, within)]));
  };
  return inline(doc, []);
}
