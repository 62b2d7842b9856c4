// The second oracle: Hugging Face's @huggingface/gguf reads a GGUF header by HTTP Range from a
// URL (the Hub replica's resolve URL) and prints every key, its GGUF type and the tensor infos as
// JSON (bigints as decimal strings). Usage: node gguf_remote.mjs URL [URL ...]: a JSON list, one
// entry per URL in order (one node process for every file of a test).
import { gguf } from "@huggingface/gguf";

const plain = (v) => (typeof v === "bigint" ? v.toString() : v);
const all = [];
for (const url of process.argv.slice(2)) {
  const { typedMetadata, tensorInfos, tensorDataOffset } = await gguf(url, { typedMetadata: true });
  const out = { keys: {}, tensors: [], tensorDataOffset: tensorDataOffset.toString() };
  for (const [key, entry] of Object.entries(typedMetadata)) {
    out.keys[key] = { type: entry.type, subType: entry.subType ?? null, value: entry.value };
  }
  for (const t of tensorInfos) {
    out.tensors.push({ name: t.name, shape: t.shape.map(plain), dtype: t.dtype, offset: plain(t.offset) });
  }
  all.push(out);
}
process.stdout.write(JSON.stringify(all, (_, v) => plain(v)));
