import { readFile } from 'node:fs/promises';
import { MeshpError } from '@meshp/core';

export async function readDeclaration(file: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    throw new MeshpError('MESHP_DECLARATION_INVALID', `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new MeshpError('MESHP_DECLARATION_INVALID', `${file} is not JSON: ${(e as Error).message}`);
  }
}
