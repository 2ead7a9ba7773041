/**
 * What `ensure` wants: the openings' rule shapes for a chain of a table family on a path, with
 * their keys, worked out once per family and path however many chains of that family drop.
 */
import type { Opening } from '@meshp/core';
import type { Family } from './schema.js';
import { shapeKey, shapesFor, type Shape } from './shape.js';

export type OpeningPath = Opening['path'];

export interface WantedShape {
  shape: Shape;
  /** shapeKey(shape). */
  key: string;
  path: OpeningPath;
}

function wantedShapes(o: Opening, family: Family, privateRange?: string): WantedShape[] {
  return shapesFor(o, family, privateRange).map((shape) => ({ shape, key: shapeKey(shape), path: o.path }));
}

export class Wants {
  /** The refusals and the drop openings, in order: rules of the mesh's own (inet) table. */
  readonly drops: readonly WantedShape[];
  private readonly accepts: readonly Opening[];
  private readonly byChain = new Map<string, WantedShape[]>();

  constructor(openings: readonly Opening[], refusals: readonly Opening[], privateRange?: string) {
    this.accepts = openings.filter((o) => o.action === 'accept');
    const drops = [...refusals, ...openings.filter((o) => o.action === 'drop')];
    this.drops = drops.flatMap((r) => wantedShapes({ ...r, action: 'drop' }, 'inet', privateRange));
  }

  /** The shapes of the accepts on `path` for a chain of `family`, in the openings' order. */
  accepting(family: Family, path: OpeningPath): WantedShape[] {
    const key = `${family} ${path}`;
    let out = this.byChain.get(key);
    if (!out) {
      out = this.accepts.filter((o) => o.path === path).flatMap((o) => wantedShapes(o, family));
      this.byChain.set(key, out);
    }
    return out;
  }
}
