// Manual §7.3 "Conjunto de herramientas de solo lectura", as written; only the import specifier
// changed.
import { ToolRegistry } from "../../mod.ts";

// Prelude (ours).
const registry = new ToolRegistry();
const workspace = process.cwd();

import { registerReadOnlyFileTools } from "../../mod.ts";
registerReadOnlyFileTools(registry, workspace); // read_file / list_files

// Epilogue (ours).
console.log(registry.names().join(","));
