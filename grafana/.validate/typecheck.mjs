// Type-checks a Grafana dashboard JSON against @grafana/schema with the TypeScript compiler.
// The JSON is pasted into a generated .ts file as object literals, so TypeScript checks every key
// (excess-property checks catch typos) and every value against the schema's types; each panel's
// options and custom field config are checked against that panel plugin's own generated types.
// Usage: node typecheck.mjs ../vgpu-exporter.json   (exit 1 and the errors on stdout on failure)
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const here = path.dirname(new URL(import.meta.url).pathname);
const file = process.argv[2];
if (!file) {
  console.error('usage: node typecheck.mjs DASHBOARD.json');
  process.exit(2);
}
const dashboard = JSON.parse(fs.readFileSync(file, 'utf8'));

// Panel plugin id -> module of @grafana/schema with its Options / FieldConfig types.
const plugins = {
  timeseries: ['TimeSeries', 'timeseries/panelcfg/x/TimeSeriesPanelCfg_types.gen', true],
  stat: ['Stat', 'stat/panelcfg/x/StatPanelCfg_types.gen', false],
  bargauge: ['BarGauge', 'bargauge/panelcfg/x/BarGaugePanelCfg_types.gen', false],
  table: ['Table', 'table/panelcfg/x/TablePanelCfg_types.gen', true],
  text: ['Text', 'text/panelcfg/x/TextPanelCfg_types.gen', false],
};

const lines = [
  "import type { Dashboard, Panel, RowPanel } from '@grafana/schema';",
  // Grafana's types use TS enums; JSON holds their string values, so compare against those.
  'type Json<T> = T extends string ? `${T}` : T extends number ? number : T extends boolean ? boolean',
  '  : T extends readonly (infer E)[] ? Json<E>[] : T extends object ? { [K in keyof T]: Json<T[K]> } : T;',
];
for (const [name, mod, hasFieldConfig] of Object.values(plugins)) {
  lines.push(`import type { Options as ${name}Options${hasFieldConfig ? `, FieldConfig as ${name}FieldConfig` : ''} } from '@grafana/schema/dist/esm/raw/composable/${mod}';`);
}
const titles = [];
const checks = [];
const panels = dashboard.panels ?? [];
panels.forEach((p, i) => {
  titles.push(p.title);
  if (p.type === 'row') {
    checks.push(`export const panel${i}: Json<RowPanel> = ${JSON.stringify(p, null, 2)};`);
    return;
  }
  const plugin = plugins[p.type];
  if (!plugin) {
    checks.push(`// panel ${i} (${p.title}): no schema for plugin ${p.type}`);
    checks.push(`export const panel${i}_unknown_plugin: never = ${JSON.stringify(p.type)};`);
    return;
  }
  const [name, , hasFieldConfig] = plugin;
  const { options, ...rest } = p;
  checks.push(`export const panel${i}: Json<Panel> = ${JSON.stringify(rest, null, 2)};`);
  checks.push(`export const panel${i}_options: Json<${name}Options> = ${JSON.stringify(options ?? {}, null, 2)};`);
  if (hasFieldConfig) {
    checks.push(`export const panel${i}_custom: Json<${name}FieldConfig> = ${JSON.stringify(p.fieldConfig?.defaults?.custom ?? {}, null, 2)};`);
  }
});
const { panels: _, ...top } = dashboard;
lines.push(`export const dashboard: Json<Dashboard> = ${JSON.stringify(top, null, 2)};`);
lines.push(...checks);

const buildDir = path.join(here, 'build');
fs.mkdirSync(buildDir, { recursive: true });
const out = path.join(buildDir, 'dashboard.ts');
fs.writeFileSync(out, lines.join('\n') + '\n');

const program = ts.createProgram([out], {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  skipLibCheck: true,
  exactOptionalPropertyTypes: false,
});
const diagnostics = ts.getPreEmitDiagnostics(program);
for (const d of diagnostics) {
  const msg = ts.flattenDiagnosticMessageText(d.messageText, '\n');
  if (d.file) {
    const { line } = d.file.getLineAndCharacterOfPosition(d.start ?? 0);
    // Name the panel the error sits in, by the nearest "export const panelN" above it.
    const before = d.file.text.slice(0, d.start ?? 0);
    const m = [...before.matchAll(/export const panel(\d+)/g)].pop();
    const where = m ? `panel "${titles[Number(m[1])]}"` : 'dashboard';
    console.log(`${path.basename(d.file.fileName)}:${line + 1} (${where}): ${msg}`);
  } else {
    console.log(msg);
  }
}
if (diagnostics.length > 0) {
  console.log(`${diagnostics.length} type error(s) in ${file}`);
  process.exit(1);
}
console.log(`${file}: ${panels.length} panels type-check against @grafana/schema`);
