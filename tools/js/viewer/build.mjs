#!/usr/bin/env node
// Builds the page template of `jaxpr-proto view`: ONE self-contained HTML file
// (the viewer's script with protobufjs, dagre and the schema bundled in, and
// its style), committed as jaxpr_proto/cli/viewer_assets/viewer.html so that
// a pip-installed package needs no node.
//
//   npm ci                                    # once, in tools/js
//   node viewer/build.mjs                     # rewrite the committed asset
//   node viewer/build.mjs --out DIR           # write DIR/viewer.html instead
//
// The output depends only on the sources, the schema and the pinned npm
// packages, so tests/test_viewer.py rebuilds it to a temp dir and compares.

import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import protobuf from "protobufjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, "../../..");
const PROTO = resolve(ROOT, "proto/jaxpr_proto/v1/jaxpr.proto");

const argv = process.argv.slice(2);
const outDir = argv[0] === "--out" && argv[1]
  ? resolve(argv[1]) : resolve(ROOT, "jaxpr_proto/cli/viewer_assets");

// The schema as protobufjs JSON, field names as in the .proto (keepCase).
// Sorted keys: the JSON does not depend on the order protobufjs keeps.
const schemaRoot = new protobuf.Root().loadSync(PROTO, { keepCase: true });
const sortKeys = (x) => (Array.isArray(x) ? x.map(sortKeys)
  : x && typeof x === "object"
    ? Object.fromEntries(Object.keys(x).sort().map((k) => [k, sortKeys(x[k])])) : x);
const schemaJson = JSON.stringify(sortKeys(schemaRoot.toJSON({ keepComments: false })));

// `import schema from "jaxpr-schema"` in the viewer resolves to that JSON.
const schemaPlugin = {
  name: "jaxpr-schema",
  setup(b) {
    b.onResolve({ filter: /^jaxpr-schema$/ }, () => ({ path: "schema", namespace: "jaxpr-schema" }));
    b.onLoad({ filter: /.*/, namespace: "jaxpr-schema" }, () => ({ contents: schemaJson, loader: "json" }));
  },
};

const result = await esbuild.build({
  entryPoints: [resolve(HERE, "src/main.js")],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2020",
  platform: "browser",
  legalComments: "none",
  charset: "utf8",
  write: false,
  logLevel: "warning",
  plugins: [schemaPlugin],
});
const js = result.outputFiles[0].text;
// The script goes inline; esbuild escapes "</script" in strings, so this only
// guards against a change of that.
if (/<\/script/i.test(js)) throw new Error("the bundle holds </script");

const css = readFileSync(resolve(HERE, "src/style.css"), "utf8");
const page = readFileSync(resolve(HERE, "src/page.html"), "utf8")
  .replace("/*STYLE*/", () => css.trim())
  .replace("/*SCRIPT*/", () => js.trim());

mkdirSync(outDir, { recursive: true });
writeFileSync(resolve(outDir, "viewer.html"), page);
process.stdout.write(`wrote ${resolve(outDir, "viewer.html")} (${page.length.toLocaleString("en")} bytes)\n`);
