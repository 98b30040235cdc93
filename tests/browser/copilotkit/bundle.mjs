// Bundles the app (app.jsx, CopilotKit's React client and React, from node_modules) for
// the browser with esbuild, into a directory of its own with the page beside it:
//   node bundle.mjs <out dir>
// The bundle is built for each test session and never kept in the repository.
import { copyFile, mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const [out] = process.argv.slice(2);
await mkdir(out, { recursive: true });
await build({
  entryPoints: [join(here, "app.jsx")],
  outdir: out,
  entryNames: "app",
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "chrome120",
  jsx: "automatic",
  // React's and CopilotKit's production paths: no development-only overlays.
  define: { "process.env.NODE_ENV": '"production"' },
  loader: { ".woff": "file", ".woff2": "file", ".ttf": "file", ".svg": "file", ".png": "file" },
  logLevel: "error",
  legalComments: "none",
  minify: true,
});
for (const name of ["index.html", "page.css"]) await copyFile(join(here, name), join(out, name));
process.stdout.write(`BUNDLED ${out}\n`);
