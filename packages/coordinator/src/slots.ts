import calculateSlot from 'cluster-key-slot';

/** Number of hash slots of Redis Cluster. */
export const SLOT_COUNT = 16384;

let table: string[] | undefined;

/**
 * A short hash tag for each cluster slot, found once by trying `s0`, `s1`, ... (base 36): `slotTags()[n]`
 * hashes to slot n. Index keys use them to sit in the same slot as the users they index.
 */
export function slotTags(): readonly string[] {
  if (table !== undefined) return table;
  const tags = new Array<string>(SLOT_COUNT);
  let found = 0;
  for (let n = 0; found < SLOT_COUNT; n++) {
    const tag = `s${n.toString(36)}`;
    const slot = calculateSlot(tag);
    if (tags[slot] === undefined) {
      tags[slot] = tag;
      found++;
    }
  }
  table = tags;
  return tags;
}

/** The cluster slot of a key, honouring `{hash tags}`. */
export function slotOf(key: string): number {
  return calculateSlot(key);
}
