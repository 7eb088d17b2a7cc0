// Writes docs/TRANSLATION.md from the formats' tables of fields: `npm run docs:translation`.
import { writeFile } from 'node:fs/promises';
import { translationTable } from '../lib/models/formats/field-table.js';

await writeFile(new URL('../docs/TRANSLATION.md', import.meta.url), translationTable());
