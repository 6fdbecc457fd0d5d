// Bytes of a .jaxpb file -> the Module as a plain object, decoded in the
// browser by protobufjs from the schema that the build bundles as JSON.
import protobuf from "protobufjs/light.js";
import schema from "jaxpr-schema";

import { eqnsFromColumns } from "./format.js";

const Module = protobuf.Root.fromJSON(schema).lookupType("jaxpr_proto.v1.Module");

// As tools/js/read_jaxpb.mjs reads it: enums by name, oneofs with their case
// in `kind`, every repeated field present (possibly empty).
export function decodeModule(bytes) {
  const m = Module.toObject(Module.decode(bytes), {
    longs: String, enums: String, arrays: true, oneofs: true, defaults: false,
  });
  if (!m.format_version) throw new Error("not a jaxpr-proto file (no format_version)");
  const major = m.format_version.major ?? 0;
  if (major !== 1) throw new Error(`format ${major}.x; this viewer reads 1.x`);
  return eqnsFromColumns(m);
}

export function base64ToBytes(text) {
  const bin = atob(text.replace(/\s+/g, ""));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
