// Where a thread works. A thread's workspace is a slot of its owner's tree
// (`<workspace_root>/<tree>/<slot>`), chosen when the thread's conversation first opens and kept
// in its record (`<save_dir>/…/<sha256 of the thread id>.json`, or `.b.json`, whichever is newer):
// tests that put files where the agent will look read it from there.
import { createHash } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/** Every file or folder under `root` (depth first) whose name `wanted` accepts. */
export function* find(root, wanted, { dirs = false } = {}) {
  const pending = [root];
  while (pending.length) {
    const dir = pending.pop();
    let entries = [];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      continue;
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) pending.push(full);
      if (entry.isDirectory() === dirs && wanted(entry.name, full)) yield full;
    }
  }
}

/** The place (`{ tree, slot }`) of `threadId` in the newest of its record files under `root`. */
export function placeOf(root, threadId) {
  const stem = createHash("sha256").update(threadId).digest("hex");
  let newest;
  for (const file of find(root, (name) => name === `${stem}.json` || name === `${stem}.b.json`)) {
    const slot = JSON.parse(fs.readFileSync(file, "utf8"));
    const sequence = slot.sequence ?? 0;
    const place = slot.record?.place ?? slot.place;
    if (place && (!newest || sequence > newest.sequence)) newest = { sequence, place };
  }
  if (!newest) throw new Error(`thread ${threadId} has no record with a place under ${root} (has its conversation opened?)`);
  return newest.place;
}

/**
 * The workspace of `threadId` under `root` (a server's data folder, holding its save dir and
 * workspace root): the tree's folder that holds the slot — the tree's state folder in the save
 * dir has the same name, but its slots are under `app/`.
 */
export function workspaceOf(root, threadId) {
  const { tree, slot } = placeOf(root, threadId);
  for (const dir of find(root, (name, full) => name === tree && fs.existsSync(path.join(full, slot)), { dirs: true })) {
    return path.join(dir, slot);
  }
  throw new Error(`no workspace for thread ${threadId} (tree ${tree}, slot ${slot}) under ${root}`);
}
