// A small zip reader for the tests: the entries of a whole archive (its central directory, then
// each entry's data, stored or deflated), ZIP64 sizes and offsets included, so an archive the
// server streamed (sizes after the data) is read as any other.
import zlib from "node:zlib";

const EOCD = 0x06054b50;
const ZIP64_EOCD = 0x06064b50;
const ZIP64_LOCATOR = 0x07064b50;
const CENTRAL = 0x02014b50;
const LOCAL = 0x04034b50;

/** `{ name → Buffer }` of the files in `zip` and the names of its directories (`dir/`). */
export function unzip(zip) {
  const buffer = Buffer.from(zip);
  let eocd = -1;
  for (let at = buffer.length - 22; at >= Math.max(0, buffer.length - 22 - 65_535); at -= 1) {
    if (buffer.readUInt32LE(at) === EOCD) {
      eocd = at;
      break;
    }
  }
  if (eocd < 0) throw new Error("not a zip: no end of central directory");
  let count = buffer.readUInt16LE(eocd + 10);
  let offset = buffer.readUInt32LE(eocd + 16);
  if (count === 0xffff || offset === 0xffffffff) {
    const locator = eocd - 20;
    if (buffer.readUInt32LE(locator) !== ZIP64_LOCATOR) throw new Error("zip64 sizes without a zip64 locator");
    const record = Number(buffer.readBigUInt64LE(locator + 8));
    if (buffer.readUInt32LE(record) !== ZIP64_EOCD) throw new Error("bad zip64 end of central directory");
    count = Number(buffer.readBigUInt64LE(record + 32));
    offset = Number(buffer.readBigUInt64LE(record + 48));
  }
  const files = {};
  const dirs = [];
  for (let i = 0; i < count; i += 1) {
    if (buffer.readUInt32LE(offset) !== CENTRAL) throw new Error(`bad central directory entry ${i}`);
    const method = buffer.readUInt16LE(offset + 10);
    let compressed = buffer.readUInt32LE(offset + 20);
    let size = buffer.readUInt32LE(offset + 24);
    const nameLength = buffer.readUInt16LE(offset + 28);
    const extraLength = buffer.readUInt16LE(offset + 30);
    const commentLength = buffer.readUInt16LE(offset + 32);
    let local = buffer.readUInt32LE(offset + 42);
    const name = buffer.toString("utf8", offset + 46, offset + 46 + nameLength);
    // ZIP64 extra field: the 64-bit values of the fields set to 0xffffffff, in this order.
    for (let at = offset + 46 + nameLength; at < offset + 46 + nameLength + extraLength; ) {
      const id = buffer.readUInt16LE(at);
      const length = buffer.readUInt16LE(at + 2);
      if (id === 0x0001) {
        let field = at + 4;
        if (size === 0xffffffff) (size = Number(buffer.readBigUInt64LE(field)), (field += 8));
        if (compressed === 0xffffffff) (compressed = Number(buffer.readBigUInt64LE(field)), (field += 8));
        if (local === 0xffffffff) local = Number(buffer.readBigUInt64LE(field));
      }
      at += 4 + length;
    }
    offset += 46 + nameLength + extraLength + commentLength;
    if (name.endsWith("/")) {
      dirs.push(name);
      continue;
    }
    if (buffer.readUInt32LE(local) !== LOCAL) throw new Error(`bad local header of ${name}`);
    const start = local + 30 + buffer.readUInt16LE(local + 26) + buffer.readUInt16LE(local + 28);
    const data = buffer.subarray(start, start + compressed);
    if (method === 0) files[name] = Buffer.from(data);
    else if (method === 8) files[name] = zlib.inflateRawSync(data);
    else throw new Error(`${name}: compression method ${method} is not read here`);
    if (files[name].length !== size) throw new Error(`${name}: ${files[name].length} bytes, the directory says ${size}`);
  }
  return { files, dirs: dirs.sort() };
}
