// The Files panel: the open thread's workspace through `<path>/threads/<id>/files/…` — a tree
// whose folders are listed when expanded, a preview (text as text, raster images inline from a
// blob: URL), downloads (a file, or a folder as a zip) fetched with the token and saved from a
// blob, and uploads by picking or dropping files (folders too), each streamed from its File by
// a PUT. Nothing is asked of the server for a thread it does not have yet (a new chat): an
// upload creates it.
import { Routes, apiFetch, ensureOk, formatBytes } from "./api";
import { byId, h } from "./dom";

/** A directory entry, as the server lists it. */
export interface FileEntry {
  name: string;
  kind: "file" | "dir" | "symlink" | "other";
  size: number;
  modified: string;
}

interface Listing {
  path: string;
  entries: FileEntry[];
}

/** A file to upload and where, relative to the workspace. */
interface Upload {
  file: File;
  rel: string;
}

/** The text preview shows at most this much of a file (a Range request). */
const TEXT_PREVIEW_BYTES = 256 * 1024;
/** Images larger than this are not previewed (they are fetched whole). */
const IMAGE_PREVIEW_BYTES = 20 * 1024 * 1024;
/** Extensions the server serves as raster images (inline). */
const RASTER = /\.(png|jpe?g|gif|webp|bmp|ico)$/i;

/** What the panel asks of the page. */
export interface FilesHost {
  /** Files were uploaded to `threadId` (which now exists on the server). */
  uploaded(threadId: string): void;
  /** Brings the panel into view (it may be behind the State tab). */
  show(): void;
}

function parentOf(rel: string): string {
  const slash = rel.lastIndexOf("/");
  return slash < 0 ? "" : rel.slice(0, slash);
}

function join(dir: string, name: string): string {
  return dir ? `${dir}/${name}` : name;
}

/** Saves `blob` as a download named `name`. */
function save(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  // The download has its own copy once it started.
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** The file name in a `Content-Disposition` header, if it gives one. */
function dispositionName(header: string | null): string | undefined {
  const match = header ? /filename="([^"]*)"/i.exec(header) : null;
  return match?.[1] || undefined;
}

/** `bytes` as text when they look like text (UTF-8, no NUL), else undefined. */
function asText(bytes: Uint8Array, declaredText: boolean): string | undefined {
  if (declaredText) return new TextDecoder().decode(bytes);
  if (bytes.includes(0)) return undefined;
  try {
    // `stream`: a multi-byte character cut by the preview's end is not an error.
    return new TextDecoder("utf-8", { fatal: true }).decode(bytes, { stream: true });
  } catch {
    return undefined;
  }
}

/** The open thread's files. */
export class FilesPanel {
  private threadId = "";
  /** Whether the server has the thread (else there is nothing to list). */
  private isKnown = false;
  private readonly listings = new Map<string, FileEntry[]>();
  private readonly expanded = new Set<string>();
  private selected: string | undefined;
  /** The folder uploads go to: the one last opened or clicked, else the workspace. */
  private target = "";
  private previewUrl: string | undefined;
  /** Bumped when the thread changes: answers for the previous one are dropped. */
  private generation = 0;
  private readonly els = {
    panel: byId("files-panel"),
    tree: byId("files-tree"),
    status: byId("files-status"),
    target: byId("files-target"),
    input: byId<HTMLInputElement>("files-input"),
    preview: byId("file-preview"),
    previewName: byId("preview-name"),
    previewSize: byId("preview-size"),
    previewBody: byId("preview-body"),
    previewDownload: byId<HTMLButtonElement>("preview-download"),
  };

  constructor(
    private readonly routes: Routes,
    private readonly host: FilesHost,
  ) {
    byId("files-upload").addEventListener("click", () => this.els.input.click());
    this.els.input.addEventListener("change", () => {
      const files = [...(this.els.input.files ?? [])];
      this.els.input.value = "";
      void this.upload(files.map((file) => ({ file, rel: join(this.target, file.name) })));
    });
    byId("files-zip").addEventListener("click", () => void this.downloadZip(""));
    byId("files-refresh").addEventListener("click", () => void this.refresh());
    this.els.previewDownload.addEventListener("click", () => {
      if (this.selected) void this.download(this.selected);
    });
    this.wireDrop();
  }

  /** Shows `threadId`'s files; `known`: the server has the thread. */
  setThread(threadId: string, known: boolean): void {
    this.generation += 1;
    this.threadId = threadId;
    this.isKnown = known;
    this.listings.clear();
    this.expanded.clear();
    this.target = "";
    this.closePreview();
    this.say("");
    this.render();
    if (known) void this.refresh();
  }

  /**
   * The server has the thread (it ran, or another client made it): lists its files the first
   * time, and again when `changed` (a turn ended).
   */
  async known(changed: boolean): Promise<void> {
    if (this.isKnown && !changed) return;
    this.isKnown = true;
    await this.refresh();
  }

  /** Lists the workspace and every expanded folder again; the preview follows its file. */
  async refresh(): Promise<void> {
    if (!this.isKnown) return;
    const generation = this.generation;
    const dirs = ["", ...[...this.expanded].sort()];
    for (const dir of dirs) {
      const entries = await this.list(dir, generation);
      if (generation !== this.generation) return;
      if (entries === undefined && dir) this.expanded.delete(dir);
    }
    this.render();
    if (this.selected) {
      const before = this.shownEntry;
      const now = this.entry(this.selected);
      if (!now) this.closePreview();
      else if (!before || before.modified !== now.modified || before.size !== now.size) void this.preview(this.selected);
    }
  }

  /** Opens `rel` in the panel: its folders expanded, the file previewed (a folder expanded). */
  async reveal(rel: string): Promise<void> {
    this.host.show();
    this.isKnown = true;
    const generation = this.generation;
    const parts = rel.split("/").filter(Boolean);
    for (let i = 0; i < parts.length; i++) {
      const dir = parts.slice(0, i).join("/");
      if (dir) this.expanded.add(dir);
      if (!this.listings.has(dir)) await this.list(dir, generation);
      if (generation !== this.generation) return;
    }
    const entry = this.entry(rel);
    if (!entry) {
      this.render();
      this.say(`${rel} is not in the workspace (any more).`, true);
      return;
    }
    if (entry.kind === "dir") {
      this.expanded.add(rel);
      this.target = rel;
      await this.list(rel, generation);
      this.render();
    } else {
      this.select(rel);
    }
    this.els.tree.querySelector(`[data-path="${CSS.escape(rel)}"]`)?.scrollIntoView({ block: "nearest" });
  }

  // ------------------------------------------------------------------------- listing

  /** Lists `dir` into `listings`; undefined when it is not there. */
  private async list(dir: string, generation: number): Promise<FileEntry[] | undefined> {
    try {
      const res = await apiFetch(this.routes.file(this.threadId, dir));
      if (generation !== this.generation) {
        await res.body?.cancel();
        return undefined;
      }
      if (res.status === 404) {
        await res.body?.cancel();
        this.listings.delete(dir);
        if (!dir) this.listings.set("", []);
        return undefined;
      }
      const listing = (await (await ensureOk(res, `Could not list ${dir || "the workspace"}`)).json()) as Listing;
      if (generation !== this.generation) return undefined;
      this.listings.set(dir, listing.entries);
      return listing.entries;
    } catch (error) {
      if (generation === this.generation) this.say((error as Error).message, true);
      return undefined;
    }
  }

  private entry(rel: string): FileEntry | undefined {
    const name = rel.slice(rel.lastIndexOf("/") + 1);
    return this.listings.get(parentOf(rel))?.find((e) => e.name === name);
  }

  private render(): void {
    this.els.target.textContent = `Uploads go to ${this.target ? `${this.target}/` : "the workspace"}`;
    const root = this.listings.get("");
    if (!this.isKnown || !root?.length) {
      this.els.tree.replaceChildren(
        h(
          "li",
          { class: "files-empty muted small" },
          this.isKnown && !root
            ? "Loading…"
            : this.isKnown
              ? "The workspace is empty. Drop files here or use Upload."
              : "No files yet. Drop files here or use Upload: a new chat can have files before its first message.",
        ),
      );
      return;
    }
    this.els.tree.replaceChildren(...this.rows(""));
  }

  private rows(dir: string): HTMLElement[] {
    return (this.listings.get(dir) ?? []).map((entry) => {
      const rel = join(dir, entry.name);
      const open = entry.kind === "dir" && this.expanded.has(rel);
      const li = h("li", {
        role: "treeitem",
        class: `file-item ${entry.kind}${rel === this.selected ? " selected" : ""}`,
        "data-path": rel,
        "data-kind": entry.kind,
        "aria-expanded": entry.kind === "dir" ? String(open) : undefined,
      });
      const icon = entry.kind === "dir" ? (open ? "▾" : "▸") : entry.kind === "symlink" ? "↪" : "·";
      const usable = entry.kind === "file" || entry.kind === "dir";
      const row = h(
        "div",
        { class: "file-row" },
        h(
          "button",
          {
            type: "button",
            class: "file-name",
            disabled: !usable,
            title: usable ? `${rel}\nmodified ${new Date(entry.modified).toLocaleString()}` : `${rel}: a ${entry.kind === "symlink" ? "link" : "special file"}, never followed nor read`,
            onclick: () => void this.activate(rel, entry),
          },
          h("span", { class: "file-icon", "aria-hidden": "true" }, icon),
          h("span", { class: "file-label" }, entry.name),
        ),
        entry.kind === "file" ? h("span", { class: "file-size muted small" }, formatBytes(entry.size)) : null,
        entry.kind === "file"
          ? h("button", { type: "button", class: "file-action", title: `Download ${entry.name}`, "aria-label": `Download ${rel}`, onclick: () => void this.download(rel) }, "⤓")
          : null,
        entry.kind === "dir"
          ? h("button", { type: "button", class: "file-action", title: `Download ${entry.name} as a zip`, "aria-label": `Download ${rel} as zip`, onclick: () => void this.downloadZip(rel) }, "zip")
          : null,
      );
      li.append(row);
      if (open) li.append(h("ul", { role: "group" }, ...this.rows(rel)));
      return li;
    });
  }

  private async activate(rel: string, entry: FileEntry): Promise<void> {
    if (entry.kind === "dir") {
      this.target = rel;
      if (this.expanded.has(rel)) {
        this.expanded.delete(rel);
      } else {
        this.expanded.add(rel);
        const generation = this.generation;
        await this.list(rel, generation);
        if (generation !== this.generation) return;
      }
      this.render();
    } else if (entry.kind === "file") {
      this.target = parentOf(rel);
      this.select(rel);
    }
  }

  // ------------------------------------------------------------------------- preview

  /** The entry the preview shows (as it was listed when it was fetched). */
  private shownEntry: FileEntry | undefined;

  private select(rel: string): void {
    this.selected = rel;
    this.render();
    void this.preview(rel);
  }

  private closePreview(): void {
    this.selected = undefined;
    this.shownEntry = undefined;
    this.els.preview.hidden = true;
    this.els.previewBody.replaceChildren();
    if (this.previewUrl) URL.revokeObjectURL(this.previewUrl);
    this.previewUrl = undefined;
  }

  private async preview(rel: string): Promise<void> {
    const entry = this.entry(rel);
    const generation = this.generation;
    this.shownEntry = entry;
    this.els.preview.hidden = false;
    this.els.preview.dataset.path = rel;
    this.els.previewName.textContent = rel;
    this.els.previewSize.textContent = entry ? formatBytes(entry.size) : "";
    const body = this.els.previewBody;
    body.replaceChildren(h("div", { class: "muted small" }, "Loading…"));
    const current = () => generation === this.generation && this.selected === rel;
    try {
      if (entry && entry.size === 0) {
        body.replaceChildren(h("div", { class: "muted small" }, "(empty file)"));
        return;
      }
      if (RASTER.test(rel)) {
        if (entry && entry.size > IMAGE_PREVIEW_BYTES) {
          body.replaceChildren(h("div", { class: "muted small" }, `An image of ${formatBytes(entry.size)}: too large to preview, download it.`));
          return;
        }
        const res = await ensureOk(await apiFetch(this.routes.file(this.threadId, rel)), `Could not open ${rel}`);
        const blob = await res.blob();
        if (!current()) return;
        if (this.previewUrl) URL.revokeObjectURL(this.previewUrl);
        this.previewUrl = URL.createObjectURL(blob);
        const img = h("img", { class: "preview-image", src: this.previewUrl, alt: rel });
        img.addEventListener("error", () => img.replaceWith(h("div", { class: "error small" }, "This image cannot be shown.")));
        body.replaceChildren(img);
        return;
      }
      const ranged = !entry || entry.size > TEXT_PREVIEW_BYTES;
      const res = await apiFetch(this.routes.file(this.threadId, rel), ranged ? { headers: { Range: `bytes=0-${TEXT_PREVIEW_BYTES - 1}` } } : {});
      if (res.status === 416) {
        await res.body?.cancel();
        if (current()) body.replaceChildren(h("div", { class: "muted small" }, "(empty file)"));
        return;
      }
      await ensureOk(res, `Could not open ${rel}`);
      const type = res.headers.get("Content-Type") ?? "";
      const bytes = new Uint8Array(await res.arrayBuffer());
      if (!current()) return;
      const total = Number(/\/(\d+)$/.exec(res.headers.get("Content-Range") ?? "")?.[1] ?? bytes.length);
      const text = asText(bytes, /^text\/|json|xml|javascript/.test(type));
      if (text === undefined) {
        body.replaceChildren(h("div", { class: "muted small" }, `A binary file (${type || "unknown type"}, ${formatBytes(total)}): no preview, download it.`));
        return;
      }
      body.replaceChildren(h("pre", { class: "preview-text" }, text));
      if (total > bytes.length) body.append(h("div", { class: "muted small" }, `The first ${formatBytes(bytes.length)} of ${formatBytes(total)}.`));
    } catch (error) {
      if (current()) body.replaceChildren(h("div", { class: "error small" }, (error as Error).message));
    }
  }

  // ------------------------------------------------------------------------- transfers

  /** Downloads a file: fetched with the token (a plain link cannot send it), saved from a blob. */
  async download(rel: string): Promise<void> {
    try {
      this.say(`Downloading ${rel}…`);
      const res = await ensureOk(await apiFetch(this.routes.file(this.threadId, rel)), `Could not download ${rel}`);
      const blob = await res.blob();
      save(blob, rel.slice(rel.lastIndexOf("/") + 1));
      this.say(`Downloaded ${rel} (${formatBytes(blob.size)}).`);
    } catch (error) {
      this.say((error as Error).message, true);
    }
  }

  /** Downloads a folder (`""`: the workspace) as a zip. */
  async downloadZip(dir: string): Promise<void> {
    if (!this.isKnown) {
      this.say("The workspace is empty: nothing to download yet.");
      return;
    }
    const label = dir || "the workspace";
    try {
      this.say(`Zipping ${label}…`);
      const res = await ensureOk(await apiFetch(this.routes.file(this.threadId, dir, { archive: "zip" })), `Could not download ${label}`);
      const name = dispositionName(res.headers.get("Content-Disposition")) ?? `${dir ? dir.slice(dir.lastIndexOf("/") + 1) : this.threadId}.zip`;
      const blob = await res.blob();
      save(blob, name);
      this.say(`Downloaded ${name} (${formatBytes(blob.size)}).`);
    } catch (error) {
      this.say((error as Error).message, true);
    }
  }

  /** Uploads each file (PUT, its body streamed from the File), one after the other. */
  async upload(uploads: Upload[]): Promise<void> {
    if (!uploads.length) return;
    const threadId = this.threadId;
    const generation = this.generation;
    let done = 0;
    for (const { file, rel } of uploads) {
      this.say(`Uploading ${uploads.length > 1 ? `${done + 1}/${uploads.length}: ` : ""}${rel} (${formatBytes(file.size)})…`);
      try {
        const res = await apiFetch(this.routes.file(threadId, rel), {
          method: "PUT",
          headers: { "Content-Type": "application/octet-stream" },
          body: file,
        });
        if (res.status === 413) {
          await res.body?.cancel();
          throw new Error(`${rel} was not uploaded: it would take the workspace past its disk quota.`);
        }
        await ensureOk(res, `Could not upload ${rel}`);
        await res.body?.cancel();
        done += 1;
      } catch (error) {
        if (generation === this.generation) this.say((error as Error).message, true);
        break;
      }
    }
    if (!done) return;
    this.host.uploaded(threadId);
    if (generation !== this.generation) return;
    for (const { rel } of uploads.slice(0, done)) {
      const parts = rel.split("/");
      for (let i = 1; i < parts.length; i++) this.expanded.add(parts.slice(0, i).join("/"));
    }
    this.isKnown = true;
    await this.refresh();
    if (done === uploads.length) this.say(`Uploaded ${done === 1 ? uploads[0].rel : `${done} files`}.`);
  }

  private wireDrop(): void {
    const panel = this.els.panel;
    let depth = 0;
    panel.addEventListener("dragenter", (event) => {
      if (!event.dataTransfer?.types.includes("Files")) return;
      event.preventDefault();
      depth += 1;
      panel.classList.add("dropping");
    });
    panel.addEventListener("dragover", (event) => {
      if (!event.dataTransfer?.types.includes("Files")) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
    });
    panel.addEventListener("dragleave", () => {
      depth = Math.max(0, depth - 1);
      if (!depth) panel.classList.remove("dropping");
    });
    panel.addEventListener("drop", (event) => {
      event.preventDefault();
      depth = 0;
      panel.classList.remove("dropping");
      const onto = (event.target as Element | null)?.closest<HTMLElement>('li[data-kind="dir"]')?.dataset.path;
      const dir = onto ?? this.target;
      void droppedFiles(event.dataTransfer).then((files) => this.upload(files.map(({ file, rel }) => ({ file, rel: join(dir, rel) }))));
    });
  }

  private say(text: string, error = false): void {
    this.els.status.textContent = text;
    this.els.status.classList.toggle("error", error);
  }
}

/** The files of a drop, folders walked (paths relative to the drop). */
async function droppedFiles(data: DataTransfer | null): Promise<Upload[]> {
  if (!data) return [];
  const entries = [...data.items].map((item) => item.webkitGetAsEntry?.()).filter((e): e is FileSystemEntry => Boolean(e));
  if (!entries.length) return [...data.files].map((file) => ({ file, rel: file.name }));
  const out: Upload[] = [];
  const walk = async (entry: FileSystemEntry, prefix: string): Promise<void> => {
    const rel = join(prefix, entry.name);
    if (entry.isFile) {
      const file = await new Promise<File>((resolve, reject) => (entry as FileSystemFileEntry).file(resolve, reject));
      out.push({ file, rel });
    } else if (entry.isDirectory) {
      const reader = (entry as FileSystemDirectoryEntry).createReader();
      for (;;) {
        const batch = await new Promise<FileSystemEntry[]>((resolve, reject) => reader.readEntries(resolve, reject));
        if (!batch.length) break;
        for (const child of batch) await walk(child, rel);
      }
    }
  };
  for (const entry of entries) await walk(entry, "");
  return out;
}
