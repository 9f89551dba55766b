// jit_typed_arrays.js - a named JavaScript function that allocates typed arrays, for JIT frames
// (issue 28): run by node with --perf-basic-prof --interpreted-frames-native-stack, the stacks
// of the arrays' mappings pass through allocateTypedArrays' code, which no file holds and
// node's perf map names.
//
// Truth, from the kernel: the process's anonymous memory (/proc/self/smaps_rollup's
// Anonymous) just before and just after the arrays are made and written, in bytes:
//   {"truth":"anonymous","before":B,"after":A,"written":W}
// W: the bytes the arrays hold (all of them written).
'use strict';
const fs = require('fs');

const ARRAYS = 3;
const ELEMENTS = 4 << 20; // 32 MiB of float64 each

function anonymousBytes() {
  const rollup = fs.readFileSync('/proc/self/smaps_rollup', 'utf8');
  const kb = /^Anonymous:\s+(\d+) kB$/m.exec(rollup);
  if (!kb) throw new Error('no Anonymous line in smaps_rollup');
  return Number(kb[1]) * 1024;
}

function allocateTypedArrays(n) {
  const arrays = [];
  for (let i = 0; i < n; i++) {
    const a = new Float64Array(ELEMENTS);
    a.fill(i + 1);
    arrays.push(a);
  }
  return arrays;
}

const before = anonymousBytes();
const kept = allocateTypedArrays(ARRAYS);
const after = anonymousBytes();
const written = kept.reduce((sum, a) => sum + a.byteLength, 0);
process.stdout.write(JSON.stringify({ truth: 'anonymous', before, after, written }) + '\n');
