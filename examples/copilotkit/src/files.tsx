// The files panel: the thread's workspace on the agui-antigravity server, as a tree (folders
// open on demand), a preview of text files (their first 64 KiB) and raster images, a download
// of each file and a zip of a folder or of the whole workspace, and uploads into the folder
// chosen. The page asks the app's server (`/api/files/<thread>/<path>`), which holds the
// server's token and forwards to `AntigravityThreads`; the list is read again whenever a run
// ends, so what the agent wrote shows up.
import { createContext, useCallback, useContext, useEffect, useState } from "react";
import type { DirectoryListing, FileEntry } from "@agui-antigravity/client";

/** How much of a text file the preview shows. */
const PREVIEW_BYTES = 64 * 1024;
const IMAGE = /\.(png|jpe?g|gif|webp|bmp|ico)$/i;

/** The app server's URL of a workspace path (`?list`, `?archive=zip`, or the file itself). */
export function filesUrl(threadId: string, path: string, query = ""): string {
  const encoded = path
    .split("/")
    .filter(Boolean)
    .map(encodeURIComponent)
    .join("/");
  return `/api/files/${encodeURIComponent(threadId)}${encoded ? `/${encoded}` : ""}${query}`;
}

const join = (dir: string, name: string) => (dir ? `${dir}/${name}` : name);

function size(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

/** What every node of the tree shares: the thread, a version that re-reads open folders, the selection. */
interface TreeContext {
  threadId: string;
  version: number;
  selected: string | undefined;
  folder: string;
  select: (path: string, entry: FileEntry) => void;
}
const Tree = createContext<TreeContext | null>(null);

/** A folder's listing from the app server; `undefined` while it loads, `null` when the workspace has none yet. */
function useListing(threadId: string, path: string, version: number): { listing: DirectoryListing | null | undefined; error: string | null } {
  const [state, setState] = useState<{ listing: DirectoryListing | null | undefined; error: string | null }>({ listing: undefined, error: null });
  useEffect(() => {
    const controller = new AbortController();
    fetch(filesUrl(threadId, path, "?list"), { signal: controller.signal })
      .then(async (response) => {
        if (response.status === 404 && path === "") return setState({ listing: null, error: null });
        const body = await response.json();
        if (!response.ok) throw new Error(body.error ?? `HTTP ${response.status}`);
        setState({ listing: body as DirectoryListing, error: null });
      })
      .catch((error: unknown) => {
        if (!controller.signal.aborted) setState((old) => ({ listing: old.listing, error: error instanceof Error ? error.message : String(error) }));
      });
    return () => controller.abort();
  }, [threadId, path, version]);
  return state;
}

/** The entries of the folder `path`, folders first. */
function Entries({ path, entries }: { path: string; entries: FileEntry[] }) {
  const sorted = [...entries].sort((a, b) => Number(b.kind === "dir") - Number(a.kind === "dir") || a.name.localeCompare(b.name));
  return (
    <ul className="file-tree">
      {sorted.map((entry) => (
        <Node key={entry.name} path={join(path, entry.name)} entry={entry} />
      ))}
    </ul>
  );
}

function Folder({ path }: { path: string }) {
  const tree = useContext(Tree)!;
  const { listing, error } = useListing(tree.threadId, path, tree.version);
  if (error) return <p className="files-error">{error}</p>;
  if (listing === undefined) return <p className="files-note">…</p>;
  if (listing === null || listing.entries.length === 0) return <p className="files-note">empty</p>;
  return <Entries path={path} entries={listing.entries} />;
}

function Node({ path, entry }: { path: string; entry: FileEntry }) {
  const tree = useContext(Tree)!;
  const [open, setOpen] = useState(false);
  const chosen = entry.kind === "dir" ? tree.folder === path : tree.selected === path;
  return (
    <li className={`file-node ${entry.kind}${chosen ? " chosen" : ""}`} data-testid="file-entry" data-path={path} data-kind={entry.kind}>
      <button
        type="button"
        className="file-name"
        onClick={() => {
          if (entry.kind === "dir") setOpen(!open);
          tree.select(path, entry);
        }}
      >
        {entry.kind === "dir" ? (open ? "▾ " : "▸ ") : entry.kind === "symlink" ? "↪ " : ""}
        {entry.name}
      </button>
      {entry.kind === "file" ? <span className="file-size">{size(entry.size)}</span> : null}
      {entry.kind === "dir" && open ? <Folder path={path} /> : null}
    </li>
  );
}

/** The chosen file: a raster image, the start of a text file, or a note; a download link either way. */
function Preview({ threadId, path, entry, version }: { threadId: string; path: string; entry: FileEntry; version: number }) {
  const [text, setText] = useState<{ body: string; cut: boolean } | null | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const image = IMAGE.test(path);
  useEffect(() => {
    setText(undefined);
    setError(null);
    if (image || entry.kind !== "file") return;
    const controller = new AbortController();
    fetch(filesUrl(threadId, path), { headers: { Range: `bytes=0-${PREVIEW_BYTES - 1}` }, signal: controller.signal })
      .then(async (response) => {
        if (!response.ok) throw new Error((await response.json().catch(() => ({}))).error ?? `HTTP ${response.status}`);
        const type = response.headers.get("content-type") ?? "";
        if (!/^text\/|^application\/(json|xml|javascript)/.test(type)) {
          await response.body?.cancel();
          return setText(null);
        }
        setText({ body: await response.text(), cut: entry.size > PREVIEW_BYTES });
      })
      .catch((e: unknown) => !controller.signal.aborted && setError(e instanceof Error ? e.message : String(e)));
    return () => controller.abort();
  }, [threadId, path, entry, image, version]);
  return (
    <section className="file-preview" data-testid="file-preview" data-path={path}>
      <div className="preview-head">
        <span className="preview-name">{path}</span>
        <a data-testid="file-download" href={filesUrl(threadId, path)} download={entry.name}>
          Download
        </a>
      </div>
      {entry.kind !== "file" ? <p className="files-note">A {entry.kind === "symlink" ? "link" : "special file"}: not read.</p> : null}
      {image ? <img data-testid="preview-image" alt={path} src={`${filesUrl(threadId, path)}?v=${entry.modified}`} /> : null}
      {error ? <p className="files-error">{error}</p> : null}
      {text === null ? <p className="files-note">No preview for this kind of file.</p> : null}
      {text ? (
        <pre data-testid="preview-text" className="preview-text">
          {text.body}
          {text.cut ? "\n…" : ""}
        </pre>
      ) : null}
    </section>
  );
}

/** The panel: the workspace's tree, the chosen file's preview, a zip download and uploads. */
export function FilesPanel({ threadId, runs }: { threadId: string; runs: number }) {
  const [manual, setManual] = useState(0);
  const version = runs + manual;
  const [selected, setSelected] = useState<{ path: string; entry: FileEntry } | undefined>(undefined);
  const [folder, setFolder] = useState("");
  const [uploading, setUploading] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const { listing, error: rootError } = useListing(threadId, "", version);
  useEffect(() => {
    setSelected(undefined);
    setFolder("");
  }, [threadId]);

  const select = useCallback((path: string, entry: FileEntry) => {
    if (entry.kind === "dir") setFolder(path);
    else setSelected({ path, entry });
  }, []);

  async function upload(files: FileList | null) {
    if (!files?.length) return;
    setError(null);
    try {
      for (const file of Array.from(files)) {
        setUploading(file.name);
        // The File is the body: the browser streams it from disk.
        const response = await fetch(filesUrl(threadId, join(folder, file.name)), { method: "PUT", body: file, headers: { "content-type": file.type || "application/octet-stream" } });
        if (!response.ok) throw new Error(`${file.name}: ${(await response.json().catch(() => ({}))).error ?? `HTTP ${response.status}`}`);
      }
    } catch (e) {
      setError(e instanceof Error ? e.message : String(e));
    } finally {
      setUploading(null);
      setManual((n) => n + 1);
    }
  }

  return (
    <aside className="files-panel" data-testid="files-panel">
      <div className="files-head">
        <strong>Files</strong>
        <button type="button" data-testid="files-refresh" title="Read the workspace again" onClick={() => setManual((n) => n + 1)}>
          ↻
        </button>
        <a data-testid="files-zip" href={filesUrl(threadId, folder, "?archive=zip")} download>
          {folder ? `${folder.split("/").pop()}.zip` : "Workspace .zip"}
        </a>
      </div>
      <label className="files-upload">
        Upload to <code>{folder || "/"}</code>
        <input type="file" multiple data-testid="files-upload" onChange={(event) => void upload(event.target.files).then(() => (event.target.value = ""))} />
      </label>
      {uploading ? <p className="files-note">Uploading {uploading}…</p> : null}
      {error || rootError ? <p className="files-error">{error ?? rootError}</p> : null}
      <Tree.Provider value={{ threadId, version, selected: selected?.path, folder, select }}>
        <div className="file-root">
          <button type="button" className={`file-name${folder === "" ? " chosen" : ""}`} onClick={() => setFolder("")}>
            /
          </button>
          {listing === undefined ? <p className="files-note">…</p> : null}
          {listing === null || listing?.entries.length === 0 ? <p className="files-note">No files yet.</p> : null}
          {listing?.entries.length ? <Entries path="" entries={listing.entries} /> : null}
        </div>
      </Tree.Provider>
      {selected ? <Preview threadId={threadId} path={selected.path} entry={selected.entry} version={version} /> : null}
    </aside>
  );
}
