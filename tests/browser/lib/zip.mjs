// Reads a zip archive (what the Files panel downloads) into its entries, enough to check one:
// the central directory (zip64 too), then each entry's data, stored or deflated.
import assert from "node:assert/strict";
import zlib from "node:zlib";

/** The entries of the zip in `buffer`: name → contents (directories end with `/`, empty). */
export function unzip(buffer) {
  const eocd = buffer.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  assert.ok(eocd >= 0, "a zip has an end of central directory record");
  let count = buffer.readUInt16LE(eocd + 10);
  let offset = buffer.readUInt32LE(eocd + 16);
  if (offset === 0xffffffff || count === 0xffff) {
    // Zip64: the locator just before the record points at the zip64 record.
    const record = Number(buffer.readBigUInt64LE(eocd - 20 + 8));
    assert.equal(buffer.readUInt32LE(record), 0x06064b50, "a zip64 end of central directory record");
    count = Number(buffer.readBigUInt64LE(record + 32));
    offset = Number(buffer.readBigUInt64LE(record + 48));
  }
  const entries = new Map();
  for (let i = 0; i < count; i++) {
    assert.equal(buffer.readUInt32LE(offset), 0x02014b50, "a central directory header");
    const method = buffer.readUInt16LE(offset + 10);
    let compressed = buffer.readUInt32LE(offset + 20);
    let size = buffer.readUInt32LE(offset + 24);
    const nameLength = buffer.readUInt16LE(offset + 28);
    const extraLength = buffer.readUInt16LE(offset + 30);
    const commentLength = buffer.readUInt16LE(offset + 32);
    let local = buffer.readUInt32LE(offset + 42);
    const name = buffer.toString("utf8", offset + 46, offset + 46 + nameLength);
    // Zip64 extra field: the 64-bit values of those that are 0xffffffff, in this order.
    let extra = offset + 46 + nameLength;
    const extraEnd = extra + extraLength;
    while (extra + 4 <= extraEnd) {
      const id = buffer.readUInt16LE(extra);
      const length = buffer.readUInt16LE(extra + 2);
      if (id === 0x0001) {
        let at = extra + 4;
        const next = () => {
          const value = Number(buffer.readBigUInt64LE(at));
          at += 8;
          return value;
        };
        if (size === 0xffffffff) size = next();
        if (compressed === 0xffffffff) compressed = next();
        if (local === 0xffffffff) local = next();
      }
      extra += 4 + length;
    }
    assert.equal(buffer.readUInt32LE(local), 0x04034b50, `a local header for ${name}`);
    const start = local + 30 + buffer.readUInt16LE(local + 26) + buffer.readUInt16LE(local + 28);
    const data = buffer.subarray(start, start + compressed);
    const contents = method === 0 ? Buffer.from(data) : method === 8 ? zlib.inflateRawSync(data) : assert.fail(`${name}: compression method ${method}`);
    assert.equal(contents.length, size, `${name} has its size`);
    entries.set(name, contents);
    offset += 46 + nameLength + extraLength + commentLength;
  }
  return entries;
}
